package main

import (
	"bytes"
	"io"
	"math/big"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/examples/internal/story"
	"github.com/packetwalk/packetwalk/examples/internal/storytest"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

func TestOutput(t *testing.T) { storytest.Output(t, run) }

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
		hops := s.net.Send("client", curl(sport))
		last := story.Last(hops)
		require.Equal(t, netfilter.Delivered, last.Result.Disposition)
		back := s.net.Send(last.Host, netfiltertest.Reply(last.Result.Packet, inet.SYN|inet.ACK))
		l := story.Last(back)
		assert.Equal(t, "client", l.Host)
		assert.Equal(t, netip.MustParseAddr(Host1IP), l.In.Src, "the reply comes from the node address")
		assert.Equal(t, uint16(NodePort), l.In.SrcPort)
	}
	nat := s.host1.Ruleset(netfilter.IPv4).Table(netfilter.NAT)
	assert.Equal(t, netfilter.Counters{Packets: 2, Bytes: 120}, nat.Chain("KUBE-NODEPORTS").Rules[0].Counters)
	assert.Equal(t, netfilter.Counters{Packets: 1, Bytes: 60}, nat.Chain(SvcChain).Rules[1].Counters)
	assert.Equal(t, netfilter.Counters{Packets: 1, Bytes: 60}, nat.Chain(SvcChain).Rules[2].Counters)
}
