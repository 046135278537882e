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

// TestKernel replays node0's part of the four connections in the kernel
// and compares the views the example prints: `conntrack -L -s
// 10.13.76.17`, the nat chains with their counters and `ipset list
// cali40all-ipam-pools`.
//
// In the story every host hangs off node0's azure0 bridge; the lab has
// two wires, so the addresses are kept and the hosts split between them:
// eth0 is azure0 (10.13.76.4/24) with the kuard pods behind it (the lab's
// client is the gateway 10.13.76.1, the way to the ACI subnet; the VM
// pods 10.13.76.36 and .11 are neighbour entries with the client's MAC),
// and the ingress pod 10.13.76.17 sits behind eth1, reached by a /32
// route (eth1 itself gets 192.0.2.1/24, TEST-NET, which no rule names).
// No rule of the node names an interface other than docker0, so the
// split changes no match; the kernel's in/out interfaces are not printed
// by the compared views.
func TestKernel(t *testing.T) {
	kerneltest.Require(t)
	n, err := newNet(io.Discard)
	require.NoError(t, err)
	node := n.Host("node0")
	rs := storytest.SimRuleset(t, node)
	ingress := netip.MustParseAddr(Ingress)
	r := &storytest.Replay{Node: "node0", ByAddr: func(a netip.Addr) kerneltest.Side {
		if a == ingress {
			return kerneltest.Server
		}
		return kerneltest.Client
	}}
	n.OnHop = r.Hop
	for i, ip := range []string{ACIPod0, VMPod0, ACIPod, VMPod} {
		_, err := curl(io.Discard, n, ip, 59850+i)
		require.NoError(t, err)
	}

	lab := kerneltest.NewLab(t, kerneltest.LabConfig{
		Client:   netip.MustParsePrefix("10.13.76.1/24"),
		NodeEth0: netip.MustParsePrefix(NodeIP + "/24"),
		NodeEth1: netip.MustParsePrefix("192.0.2.1/24"),
		Server:   []netip.Prefix{netip.MustParsePrefix("192.0.2.17/24"), netip.MustParsePrefix(Ingress + "/32")},
	})
	mac := kerneltest.ClientMAC.String()
	storytest.NodeIP(t, lab,
		"neigh replace "+VMPod+" lladdr "+mac+" dev eth0 nud permanent",
		"neigh replace "+VMPod0+" lladdr "+mac+" dev eth0 nud permanent",
		"route add default via 10.13.76.1 dev eth0",
		"route add "+Ingress+"/32 dev eth1")
	r.Run(t, lab, rs, 1)

	storytest.InGolden(t, storytest.CompareNAT(t, lab, node, "POSTROUTING", "cali-nat-outgoing", "IP-MASQ-AGENT")...)
	storytest.CompareIpset(t, lab, node, "cali40all-ipam-pools")
	storytest.CompareConntrack(t, lab, node, conntrack.Filter{OrigSrc: ingress}, "-s", Ingress)
}
