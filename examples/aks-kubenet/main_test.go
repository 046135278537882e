package main

import (
	"bytes"
	"io"
	"math/big"
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

func rat(num string, den int64) *big.Rat {
	r, ok := new(big.Rat).SetString(num)
	if !ok {
		panic(num)
	}
	return r.Quo(r, new(big.Rat).SetInt64(den))
}

// TestProbabilities: the post's chain, with the post's names and
// probability texts, splits connections in exact dyadic shares that are
// close to, but not, thirds; after scaling to two pods, exact halves.
func TestProbabilities(t *testing.T) {
	node, err := kubenetNode()
	require.NoError(t, err)
	svc := node.Ruleset(netfilter.IPv4).Table(netfilter.NAT).Chain(SvcChain)
	require.NotNil(t, svc)
	require.Len(t, svc.Rules, 3)
	assert.Contains(t, svc.Rules[0].String(), "--probability 0.33333333349 -j "+SEP1)
	assert.Contains(t, svc.Rules[1].String(), "--probability 0.50000000000 -j "+SEP2)
	assert.Contains(t, svc.Rules[2].String(), "-j "+SEP3)

	outs, err := node.Explain("cbr0", fromPod(ClientPod, KubenetIP+":80", 1))
	require.NoError(t, err)
	want := map[string]*big.Rat{
		"10.100.0.9": rat("715827883", 1<<31),
		"10.100.1.2": rat("1431655765", 1<<32),
		"10.100.2.2": rat("1431655765", 1<<32),
	}
	require.Len(t, outs, 3)
	for _, o := range outs {
		dst := o.Result.Packet.Dst.String()
		require.Contains(t, want, dst)
		assert.Zero(t, o.Probability.Rat().Cmp(want[dst]), "%s: %s", dst, o.Probability)
		assert.NotZero(t, o.Probability.Rat().Cmp(big.NewRat(1, 3)), "not a third")
		assert.Equal(t, ClientPod, o.Result.Packet.Src.String(), "pod source: no masquerade")
		assert.False(t, netfiltertest.Matched(*o.Result, netfilter.NAT, "KUBE-SERVICES", 1), "no KUBE-MARK-MASQ from inside the pod CIDR")
	}

	require.NoError(t, loadProxy(node, "aks-nodepool1-27511634-vmss000000", "10.100.0.0/16", nginx(KubenetIP, twoPods...)))
	svc = node.Ruleset(netfilter.IPv4).Table(netfilter.NAT).Chain(SvcChain)
	require.Len(t, svc.Rules, 2)
	assert.Contains(t, svc.Rules[0].String(), "--probability 0.50000000000 -j "+SEP1)
	assert.Contains(t, svc.Rules[1].String(), "-j "+SEP3)
	outs, err = node.Explain("cbr0", fromPod(ClientPod, KubenetIP+":80", 1))
	require.NoError(t, err)
	require.Len(t, outs, 2)
	for _, o := range outs {
		assert.Zero(t, o.Probability.Rat().Cmp(big.NewRat(1, 2)))
	}
}

// TestCounters: three walked connections are counted on the KUBE-SERVICES
// rule and spread over the KUBE-SVC rules.
func TestCounters(t *testing.T) {
	node, err := kubenetNode()
	require.NoError(t, err)
	for sport := 33000; sport < 33003; sport++ {
		r := node.Receive("cbr0", fromPod(ClientPod, KubenetIP+":80", sport))
		require.Equal(t, netfilter.Forwarded, r.Disposition)
		assert.True(t, netfiltertest.Matched(r, netfilter.NAT, "KUBE-SERVICES", 2))
	}
	nat := node.Ruleset(netfilter.IPv4).Table(netfilter.NAT)
	assert.Equal(t, netfilter.Counters{Packets: 3, Bytes: 180}, nat.Chain("KUBE-SERVICES").Rules[1].Counters)
	var sum uint64
	for _, r := range nat.Chain(SvcChain).Rules {
		sum += r.Counters.Packets
	}
	assert.Equal(t, uint64(3), sum)
}

// TestMasqAgent: the ConfigMap decides which destinations see the pod IP;
// adding 10.1.0.0/16 turns the MASQUERADE into a RETURN for it.
func TestMasqAgent(t *testing.T) {
	cni, err := cniNode()
	require.NoError(t, err)
	tests := []struct {
		dst      string
		src      string
		rule     int
		afterSrc string
		after    int
	}{
		{"10.220.0.10:443", CNIPod, 1, CNIPod, 1},      // the VNet
		{"10.200.0.99:443", CNIPod, 3, CNIPod, 3},      // the service CIDR
		{OtherVNet + ":443", CNINodeIP, 4, CNIPod, 4},  // 10.1.0.0/16: masqueraded, then not
		{"52.1.2.3:443", CNINodeIP, 4, CNINodeIP, 5},   // the Internet: always masqueraded
		{"169.254.1.1:80", CNINodeIP, 4, CNINodeIP, 5}, // masqLinkLocal: true
	}
	sport := 42000
	for _, tc := range tests {
		sport++
		r := cni.Receive("azure0", fromPod(CNIPod, tc.dst, sport))
		require.Equal(t, netfilter.Forwarded, r.Disposition, tc.dst)
		assert.Equal(t, tc.src, r.Packet.Src.String(), tc.dst)
		assert.True(t, netfiltertest.Matched(r, netfilter.NAT, MasqChain, tc.rule), tc.dst)
	}
	require.NoError(t, syncMasqAgent(cni, editedConfigMap))
	for _, tc := range tests {
		sport++
		r := cni.Receive("azure0", fromPod(CNIPod, tc.dst, sport))
		assert.Equal(t, tc.afterSrc, r.Packet.Src.String(), tc.dst)
		assert.True(t, netfiltertest.Matched(r, netfilter.NAT, MasqChain, tc.after), tc.dst)
	}
	chain := cni.Ruleset(netfilter.IPv4).Table(netfilter.NAT).Chain(MasqChain)
	require.Len(t, chain.Rules, 5)
	assert.Equal(t, ` -d 10.1.0.0/16 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN`, chain.Rules[3].String())
}

func TestMasqAgentBadConfig(t *testing.T) {
	cni, err := cniNode()
	require.NoError(t, err)
	assert.ErrorContains(t, syncMasqAgent(cni, "nonMasqueradeCIDRs: [10.1.0.0/33]\n"), "nonMasqueradeCIDRs")
	assert.Error(t, syncMasqAgent(cni, "nonMasqueradeCIDR: [10.1.0.0/16]\n"), "unknown field")
}

// TestAcrossMachines: in the kubenet cluster, the ClusterIP connection
// reaches the pods on the other nodes through the VNet's route table with
// the client pod's own address (kube-proxy does not masquerade pod
// traffic, ip-masq-agent spares 10.100.0.0/16), with kube-proxy's exact
// probabilities; traffic to the Internet is masqueraded twice: to the
// node's address by ip-masq-agent, to the public address by the outbound
// SNAT.
func TestAcrossMachines(t *testing.T) {
	n, err := kubenetCluster(io.Discard)
	require.NoError(t, err)
	outs, err := explainCluster(io.Discard, n, "client pod", fromPod(ClientPod, KubenetIP+":80", 34000))
	require.NoError(t, err)
	require.Len(t, outs, 3)
	got := map[string]string{}
	for _, o := range outs {
		got[o.Walk.Last().Device] = o.Probability.RatString()
		assert.Equal(t, ClientPod, o.Walk.Last().Packet.Src.String(), "the pod sees the client pod")
	}
	assert.Equal(t, map[string]string{
		"nginx 10.100.0.9": "715827883/2147483648",
		"nginx 10.100.1.2": "1431655765/4294967296",
		"nginx 10.100.2.2": "1431655765/4294967296",
	}, got)
	for _, o := range outs {
		if o.Walk.Last().Device == "nginx 10.100.1.2" {
			assert.Equal(t, []string{
				"client pod 10.100.0.10:34000 → 10.200.184.192:80",
				"vmss000000 10.100.0.10:34000 → 10.200.184.192:80",
				"vnet 10.100.0.10:34000 → 10.100.1.2:80",
				"vmss000002 10.100.0.10:34000 → 10.100.1.2:80",
				"nginx 10.100.1.2 10.100.0.10:34000 → 10.100.1.2:80",
			}, storytest.Addrs(o.Walk))
			// The route table's entry for 10.100.1.0/24 chose vmss000002.
			assert.Equal(t, "vmss000002", o.Walk.Hops[2].Out)
		}
	}
	_, wk, err := n.Send("client pod", fromPod(ClientPod, "93.184.216.34:443", 34002))
	require.NoError(t, err)
	assert.Equal(t, cluster.Left, wk.Fate)
	assert.Equal(t, []string{
		"client pod 10.100.0.10:34002 → 93.184.216.34:443",
		"vmss000000 10.100.0.10:34002 → 93.184.216.34:443",
		"vnet 10.240.0.4:34002 → 93.184.216.34:443",
		"outbound 10.240.0.4:34002 → 93.184.216.34:443",
		"internet 20.50.60.70:34002 → 93.184.216.34:443",
	}, storytest.Addrs(wk))
	assert.True(t, netfiltertest.Matched(wk.Hops[1].Result, netfilter.NAT, MasqChain, 4), "ip-masq-agent's MASQUERADE, after the 169.254.0.0/16 and two nonMasqueradeCIDRs RETURNs")
	storytest.WalkPicture(t, "walk-internet", wk, "kubenet pod → Internet: MASQUERADE on the node, SNAT at the outbound gateway")
	_, wk, err = n.Send("client pod", fromPod(ClientPod, "10.100.1.2:80", 34001))
	require.NoError(t, err)
	require.Equal(t, cluster.Delivered, wk.Fate)
	_, back, err := n.Reply(wk, inet.SYN|inet.ACK)
	require.NoError(t, err)
	require.Equal(t, cluster.Delivered, back.Fate)
	assert.Equal(t, "client pod", back.Last().Device)
	storytest.WalkPicture(t, "walk-pod", wk, "kubenet pod → pod on another node through the VNet route table")
}
