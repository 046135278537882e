package main

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/examples/internal/storytest"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// TestKernelKubenet replays the three connections from the client pod in
// the kernel, compares the chains the example prints (counters included),
// then applies kube-proxy's rules for two pods in both worlds and
// compares the rewritten KUBE-SVC chain.
//
// The lab's node plays vmss000000 with the example's addresses: eth0
// 10.240.0.4/16 with the lab's client as the VNet gateway 10.240.0.1
// (the way to the other nodes' pods 10.100.1.2 and 10.100.2.2), eth1
// plays cbr0 (10.100.0.1/24) with the client pod 10.100.0.10 and the
// local nginx pod 10.100.0.9 as the lab's server.
func TestKernelKubenet(t *testing.T) {
	kerneltest.Require(t)
	node, err := kubenetNode()
	require.NoError(t, err)
	rs := storytest.SimRuleset(t, node)
	r := &storytest.Replay{Node: "node", Sides: map[string]kerneltest.Side{"eth0": kerneltest.Client, "cbr0": kerneltest.Server}}
	for sport := 33000; sport < 33003; sport++ {
		p := fromPod(ClientPod, KubenetIP+":80", sport)
		r.Receive("cbr0", p, node.Receive("cbr0", p))
	}

	lab := kerneltest.NewLab(t, kerneltest.LabConfig{
		Client:   netip.MustParsePrefix("10.240.0.1/16"),
		NodeEth0: netip.MustParsePrefix("10.240.0.4/16"),
		NodeEth1: netip.MustParsePrefix("10.100.0.1/24"),
		Server:   []netip.Prefix{netip.MustParsePrefix(ClientPod + "/24"), netip.MustParsePrefix("10.100.0.9/24")},
	})
	storytest.NodeIP(t, lab, "route add default via 10.240.0.1 dev eth0")
	// Three statistic draws per replay: retry until the kernel drew the
	// simulator's endpoints (about 1 in 27).
	r.Run(t, lab, rs, 1000)
	storytest.InGolden(t, storytest.CompareNAT(t, lab, node, "KUBE-SERVICES", SvcChain, SEP1)...)

	doc, err := proxy("aks-nodepool1-27511634-vmss000000", "10.100.0.0/16", nginx(KubenetIP, twoPods...))
	require.NoError(t, err)
	require.NoError(t, loadProxy(node, "aks-nodepool1-27511634-vmss000000", "10.100.0.0/16", nginx(KubenetIP, twoPods...)))
	require.NoError(t, lab.Node().Restore(string(doc)))
	storytest.InGolden(t, storytest.CompareNAT(t, lab, node, SvcChain)...)
}

// TestKernelCNI replays the Azure CNI node's three packets (to a VNet
// address, to 10.1.0.4 before and after the ConfigMap edit) and compares
// POSTROUTING and IP-MASQ-AGENT with their counters.
//
// The lab's node plays the CNI node with its addresses: eth0 is azure0
// (10.220.2.4/24) with the lab's client as the gateway 10.220.2.1. The
// pod 10.220.2.28 shares azure0 in the story; in the lab it sits behind
// eth1, reached by a /32 route (eth1 gets 192.0.2.1/24, TEST-NET, named
// by no rule; the only interface a rule names is docker0).
func TestKernelCNI(t *testing.T) {
	kerneltest.Require(t)
	cni, err := cniNode()
	require.NoError(t, err)
	rs := storytest.SimRuleset(t, cni)
	pod := netip.MustParseAddr(CNIPod)
	byAddr := func(a netip.Addr) kerneltest.Side {
		if a == pod {
			return kerneltest.Server
		}
		return kerneltest.Client
	}
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{
		Client:   netip.MustParsePrefix("10.220.2.1/24"),
		NodeEth0: netip.MustParsePrefix(CNINodeIP + "/24"),
		NodeEth1: netip.MustParsePrefix("192.0.2.1/24"),
		Server:   []netip.Prefix{netip.MustParsePrefix("192.0.2.28/24"), netip.MustParsePrefix(CNIPod + "/32")},
	})
	storytest.NodeIP(t, lab, "route add default via 10.220.2.1 dev eth0", "route add "+CNIPod+"/32 dev eth1")

	// The views before any packet.
	require.NoError(t, lab.ResetRuleset(rs))
	storytest.InGolden(t, storytest.CompareNAT(t, lab, cni, "POSTROUTING")...)

	r := &storytest.Replay{Node: "node", ByAddr: byAddr}
	for i, dst := range []string{"10.220.0.10:443", OtherVNet + ":443"} {
		p := fromPod(CNIPod, dst, 41000+i)
		r.Receive("azure0", p, cni.Receive("azure0", p))
	}
	r.Run(t, lab, rs, 1)
	storytest.InGolden(t, storytest.CompareNAT(t, lab, cni, MasqChain)...)

	edited, err := masqAgentRules(editedConfigMap)
	require.NoError(t, err)
	require.NoError(t, syncMasqAgent(cni, editedConfigMap))
	r2 := &storytest.Replay{Node: "node", ByAddr: byAddr}
	r2.Do("ip-masq-agent resync", func(l *kerneltest.Lab) error { return l.Node().Restore(string(edited), "--noflush") })
	p := fromPod(CNIPod, OtherVNet+":443", 41002)
	r2.Receive("azure0", p, cni.Receive("azure0", p))
	r2.Play(t, lab)
	storytest.InGolden(t, storytest.CompareNAT(t, lab, cni, MasqChain, "POSTROUTING")[0])
}
