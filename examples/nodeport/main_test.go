package main

import (
	"bytes"
	"io"
	"math/big"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/examples/internal/storytest"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

func TestOutput(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, run(&b))
	storytest.Golden(t, "output.golden", b.Bytes())
}

// TestFiftyFifty: the two pods get exactly half of the connections each,
// through the rule of the post's KUBE-SVC chain that names them.
func TestFiftyFifty(t *testing.T) {
	s, err := newScenario(io.Discard)
	require.NoError(t, err)
	outs, err := s.host1.Explain("eth0", curl(40000))
	require.NoError(t, err)
	require.Len(t, outs, 2)
	got := map[netip.AddrPort]netfilter.Outcome{}
	for _, o := range outs {
		assert.Zero(t, o.Probability.Rat().Cmp(big.NewRat(1, 2)), "p=%s", o.Probability)
		assert.Equal(t, netfilter.Forwarded, o.Result.Disposition)
		got[netip.AddrPortFrom(o.Result.Packet.Dst, o.Result.Packet.DstPort)] = o
	}
	// Remote pod: masqueraded to host1's eth0 address, rule 3 (the
	// fall-through) of KUBE-SVC.
	o2 := got[netip.MustParseAddrPort(Pod2+":8080")]
	assert.Equal(t, Host1IP, o2.Result.Packet.Src.String())
	assert.Equal(t, "eth0", o2.Result.Packet.Out)
	assert.True(t, netfiltertest.Matched(*o2.Result, netfilter.NAT, SvcChain, 3))
	assert.True(t, netfiltertest.Matched(*o2.Result, netfilter.NAT, SEP2, 2))
	// Local pod: rule 2, the 0.50000000000 statistic rule; masqueraded to
	// the bridge's address.
	o1 := got[netip.MustParseAddrPort(Pod1+":8080")]
	assert.Equal(t, "172.16.166.129", o1.Result.Packet.Src.String())
	assert.Equal(t, "cni0", o1.Result.Packet.Out)
	assert.True(t, netfiltertest.Matched(*o1.Result, netfilter.NAT, SvcChain, 2))
	assert.True(t, netfiltertest.Matched(*o1.Result, netfilter.NAT, SEP1, 2))
	for _, o := range outs {
		assert.True(t, netfiltertest.Matched(*o.Result, netfilter.NAT, "KUBE-SERVICES", 2), "KUBE-NODEPORTS jump")
		assert.True(t, netfiltertest.Matched(*o.Result, netfilter.NAT, "KUBE-POSTROUTING", 3), "MASQUERADE")
	}
	svc := s.host1.Ruleset(netfilter.IPv4).Table(netfilter.NAT).Chain(SvcChain)
	require.NotNil(t, svc)
	assert.Contains(t, svc.Rules[1].String(), "--probability 0.50000000000")
	assert.Contains(t, svc.Rules[1].String(), "-j "+SEP1)
	assert.Contains(t, svc.Rules[2].String(), "-j "+SEP2)
}

// TestWalkCounters: after the run the counters show one connection per
// pod (only the first packet of a connection crosses the nat table) and
// the client saw answers from the NodePort it called.
func TestWalkCounters(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, run(&b))
	s, err := newScenario(io.Discard)
	require.NoError(t, err)
	for sport := 40000; sport < 40002; sport++ {
		_, wk, err := s.net.Send("client", curl(sport))
		require.NoError(t, err)
		require.Equal(t, cluster.Delivered, wk.Fate)
		_, back, err := s.net.Reply(wk, inet.SYN|inet.ACK)
		require.NoError(t, err)
		l := back.Last()
		assert.Equal(t, "client", l.Device)
		assert.Equal(t, netip.MustParseAddr(Host1IP), l.Packet.Src, "the reply comes from the node address")
		assert.Equal(t, uint16(NodePort), l.Packet.SrcPort)
	}
	nat := s.host1.Ruleset(netfilter.IPv4).Table(netfilter.NAT)
	assert.Equal(t, netfilter.Counters{Packets: 2, Bytes: 120}, nat.Chain("KUBE-NODEPORTS").Rules[0].Counters)
	assert.Equal(t, netfilter.Counters{Packets: 1, Bytes: 60}, nat.Chain(SvcChain).Rules[1].Counters)
	assert.Equal(t, netfilter.Counters{Packets: 1, Bytes: 60}, nat.Chain(SvcChain).Rules[2].Counters)
}

// TestAcrossMachines: the whole path of both outcomes, with the exact
// probability of each: host1 DNATs the NodePort to a pod and masquerades
// it (to its eth0 address towards host2's pod, to its cni0 address
// towards its own), so neither pod sees the client.
func TestAcrossMachines(t *testing.T) {
	s, err := newScenario(io.Discard)
	require.NoError(t, err)
	outs, err := s.net.Explain("client", curl(40000))
	require.NoError(t, err)
	require.Len(t, outs, 2)
	byPod := map[string]cluster.Walk{}
	for _, o := range outs {
		assert.Equal(t, "1/2", o.Probability.RatString())
		byPod[o.Walk.Last().Device] = o.Walk
	}
	assert.Equal(t, []string{
		"client 192.168.56.1:40000 → 192.168.56.11:30811",
		"switch 192.168.56.1:40000 → 192.168.56.11:30811",
		"host1 192.168.56.1:40000 → 192.168.56.11:30811",
		"pod1 172.16.166.129:40000 → 172.16.166.130:8080",
	}, storytest.Addrs(byPod["pod1"]))
	assert.Equal(t, []string{
		"client 192.168.56.1:40000 → 192.168.56.11:30811",
		"switch 192.168.56.1:40000 → 192.168.56.11:30811",
		"host1 192.168.56.1:40000 → 192.168.56.11:30811",
		"switch 192.168.56.11:40000 → 172.16.192.89:8080",
		"host2 192.168.56.11:40000 → 172.16.192.89:8080",
		"pod2 192.168.56.11:40000 → 172.16.192.89:8080",
	}, storytest.Addrs(byPod["pod2"]))
	// host2 only forwards: its nat table sees the connection but does
	// not change it.
	h2 := byPod["pod2"].Hops[4]
	assert.Equal(t, h2.Packet.Dst, h2.Result.Packet.Dst)
	assert.Equal(t, "veth2", h2.Out)
	_, wk, err := s.net.Send("client", curl(40000))
	require.NoError(t, err)
	storytest.WalkPicture(t, "walk", wk, "curl http://192.168.56.11:30811: the SYN")
}
