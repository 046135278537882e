package main

import (
	"io"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/examples/internal/storytest"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// TestKernel replays host1's part of the walk in the kernel and compares
// the views the example prints.
//
// The lab's node plays host1 with the example's addresses: eth0
// 192.168.56.11/24 (the client 192.168.56.1 is the lab's client), eth1
// plays cni0 (172.16.166.129/26) with pod1 172.16.166.130 as the lab's
// server. host2 is behind eth0 as in the story: a route 172.16.192.0/24
// via 192.168.56.12 whose neighbour entry is the lab client's MAC, so
// what host1 forwards to pod2 is captured at the client, and pod2's
// replies (after host2, which only forwards) are injected from there.
// Only host1's views are compared; host2 and the pods are not modelled
// in the lab.
func TestKernel(t *testing.T) {
	kerneltest.Require(t)
	s, err := newScenario(io.Discard)
	require.NoError(t, err)
	rs := storytest.SimRuleset(t, s.host1)
	r := &storytest.Replay{Node: "host1", Sides: map[string]kerneltest.Side{"eth0": kerneltest.Client, "cni0": kerneltest.Server}}
	s.net.OnHop = r.Hop
	require.NoError(t, connections(io.Discard, s))

	lab := kerneltest.NewLab(t, kerneltest.LabConfig{
		Client:   netip.MustParsePrefix(Client + "/24"),
		NodeEth0: netip.MustParsePrefix(Host1IP + "/24"),
		NodeEth1: netip.MustParsePrefix("172.16.166.129/26"),
		Server:   []netip.Prefix{netip.MustParsePrefix(Pod1 + "/26")},
	})
	storytest.NodeIP(t, lab,
		"neigh replace "+Host2IP+" lladdr "+kerneltest.ClientMAC.String()+" dev eth0 nud permanent",
		"route add 172.16.192.0/24 via "+Host2IP+" dev eth0")
	// The statistic rule picks the pod at random in the kernel: replay
	// until it picked what the simulator's seed picked.
	r.Run(t, lab, rs, 200)

	views := storytest.CompareNAT(t, lab, s.host1, "KUBE-SERVICES", "KUBE-NODEPORTS", SvcChain, SEP1, SEP2)
	storytest.InGolden(t, views...)
	storytest.CompareConntrack(t, lab, s.host1, conntrack.Filter{Proto: inet.TCP, OrigDstPort: NodePort}, "-p", "tcp", "--dport", "30811")
}
