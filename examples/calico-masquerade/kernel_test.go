package main

import (
	"io"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/examples/internal/storytest"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/ipset"
)

// TestKernel replays the node's part of the four curls in the kernel,
// with the IPPool's set update in between, and compares the views the
// example prints: the nat chains (before and after, counters included),
// both ipsets, and `conntrack -L`.
//
// The lab's node plays the node with the example's addresses: eth0
// 10.240.0.35/16, with server A 10.240.0.97/16 as the lab's client and the
// VNet gateway 10.240.0.1 (the way to server B 172.17.0.4) a neighbour
// entry with the client's MAC, so both servers are captured and answer
// from the client side. eth1 plays the pod's veth azv46, which has no
// address in the story; the lab needs one, so eth1 gets 192.0.2.1/24
// (TEST-NET, named by no rule and never a packet's address) and the pod
// 10.240.0.46 is reached by a /32 route as Azure CNI does.
func TestKernel(t *testing.T) {
	kerneltest.Require(t)
	n, err := newNet(io.Discard)
	require.NoError(t, err)
	node := n.Host("node")
	rs := storytest.SimRuleset(t, node)
	r := &storytest.Replay{Node: "node", Sides: map[string]kerneltest.Side{"eth0": kerneltest.Client, "azv46": kerneltest.Server}}
	n.OnHop = r.Hop
	for _, c := range []struct {
		server string
		sport  int
	}{{ServerA, 50001}, {ServerB, 50002}} {
		_, err := curl(io.Discard, n, c.server, c.sport)
		require.NoError(t, err)
	}
	require.NoError(t, node.Sets().Restore(othervnet, ipset.RestoreOptions{}))
	r.Do("ipset restore othervnet", func(l *kerneltest.Lab) error { return l.Node().IPSetRestore(string(othervnet)) })
	for _, c := range []struct {
		server string
		sport  int
	}{{ServerA, 50003}, {ServerB, 50004}} {
		_, err := curl(io.Discard, n, c.server, c.sport)
		require.NoError(t, err)
	}

	lab := kerneltest.NewLab(t, kerneltest.LabConfig{
		Client:   netip.MustParsePrefix(ServerA + "/16"),
		NodeEth0: netip.MustParsePrefix(NodeIP + "/16"),
		NodeEth1: netip.MustParsePrefix("192.0.2.1/24"),
		Server:   []netip.Prefix{netip.MustParsePrefix("192.0.2.46/24"), netip.MustParsePrefix(PodIP + "/32")},
	})
	storytest.NodeIP(t, lab,
		"neigh replace 10.240.0.1 lladdr "+kerneltest.ClientMAC.String()+" dev eth0 nud permanent",
		"route add default via 10.240.0.1 dev eth0",
		"route add "+PodIP+"/32 dev eth1")

	t.Run("before", func(t *testing.T) {
		fresh, err := newNet(io.Discard)
		require.NoError(t, err)
		require.NoError(t, lab.ResetRuleset(rs))
		h := fresh.Host("node")
		storytest.InGolden(t, storytest.CompareNAT(t, lab, h, "POSTROUTING", "cali-POSTROUTING", "cali-nat-outgoing")...)
		storytest.CompareIpset(t, lab, h, "cali40masq-ipam-pools", "cali40all-ipam-pools")
	})
	t.Run("after", func(t *testing.T) {
		r.Run(t, lab, rs, 1)
		views := storytest.CompareNAT(t, lab, node, "POSTROUTING", "cali-POSTROUTING", "cali-nat-outgoing")
		storytest.InGolden(t, views[2])
		storytest.CompareIpset(t, lab, node, "cali40masq-ipam-pools", "cali40all-ipam-pools")
		storytest.CompareConntrack(t, lab, node, conntrack.Filter{})
	})
}
