package main

import (
	"io"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/examples/internal/storytest"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// TestKernel replays the node's part of both parts' connections in the
// kernel and compares the views the example prints: the nat chains with
// their counters and `conntrack -L -d VIP`. The health-check answer is
// kube-proxy's HTTP server, not netfilter, and is not compared.
//
// In the story the laptop's packets (through the Azure LB with floating
// IP) and the pods all reach the node on its azure0 bridge. The lab has
// two wires, so the lab's eth1 plays azure0 with the node's address
// 10.13.76.4/24 and the pods behind it (so MASQUERADE picks 10.13.76.4 as
// in the story), and the laptops are behind eth0, a transit link with the
// lab's default addresses (node 192.168.10.1/24, the LB 192.168.10.2 as
// the node's default gateway). 192.168.10.1 is named by no rule and no
// replayed packet is addressed to it.
func TestKernel(t *testing.T) {
	kerneltest.Require(t)
	pods1 := []string{"10.13.76.26", "10.13.76.7"}
	pods2 := []string{"10.13.76.15", "10.13.76.30"}
	var server []netip.Prefix
	for _, p := range append(pods1, pods2...) {
		server = append(server, netip.MustParsePrefix(p+"/24"))
	}
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{
		NodeEth1: netip.MustParsePrefix(NodeIP + "/24"),
		Server:   server,
	})
	storytest.NodeIP(t, lab, "route add default via 192.168.10.2 dev eth0")
	byAddr := func(a netip.Addr) kerneltest.Side {
		if a.Is4() && netip.MustParsePrefix("10.13.76.0/24").Contains(a) {
			return kerneltest.Server
		}
		return kerneltest.Client
	}

	for _, part := range []struct {
		name      string
		yaml      []byte
		pool      Pool
		pods      []string
		src, vip  string
		sports    []int
		chains    []string
		attempts  int
		ctDstAddr string
	}{
		// The SVC chain's 0.5 statistic rule picks the pod at random in
		// the kernel: replay until it picked the simulator's pods.
		{"cluster", clusterYAML, OneNode, pods1, Laptop, VIP, []int{51535, 51536},
			[]string{"KUBE-SERVICES", FWChain, SvcChain, "KUBE-MARK-MASQ", "POSTROUTING", "KUBE-POSTROUTING"}, 200, VIP},
		{"local", localYAML, Probed, pods2, Laptop2, VIPLocal, []int{57675, 38332},
			[]string{FWChain, XLBChain}, 200, VIPLocal},
	} {
		t.Run(part.name, func(t *testing.T) {
			n, err := newNet(io.Discard, part.yaml, part.pool, part.pods...)
			require.NoError(t, err)
			node := n.Host("node")
			rs := storytest.SimRuleset(t, node)
			r := &storytest.Replay{Node: "node", ByAddr: byAddr}
			n.OnHop = r.Hop
			for _, sport := range part.sports {
				_, err := connect(n, io.Discard, part.src, part.vip, sport)
				require.NoError(t, err)
			}
			r.Run(t, lab, rs, part.attempts)
			views := storytest.CompareNAT(t, lab, node, part.chains...)
			storytest.InGolden(t, views...)
			storytest.CompareConntrack(t, lab, node, conntrack.Filter{OrigDst: netip.MustParseAddr(part.ctDstAddr)}, "-d", part.ctDstAddr)
		})
	}
}
