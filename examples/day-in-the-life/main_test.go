package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/big"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/examples/internal/story"
	"github.com/packetwalk/packetwalk/examples/internal/storytest"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
	"github.com/packetwalk/packetwalk/render"
)

func TestOutput(t *testing.T) { storytest.Output(t, run) }

// seedRules returns the -A lines of a dump from the post.
func seedRules(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "-A ") {
			out = append(out, l)
		}
	}
	return out
}

// TestRulesAreThePosts: the node's iptables-save holds every whereami rule
// the post printed, byte for byte (legacy layout, v1.11 names).
func TestRulesAreThePosts(t *testing.T) {
	for _, tc := range []struct {
		yaml []byte
		seed string
	}{{clusterYAML, "testdata/seed-cluster.save"}, {localYAML, "testdata/seed-local.save"}} {
		n, err := newNet(io.Discard, tc.yaml, OneNode, "10.13.76.26")
		require.NoError(t, err)
		save := string(n.Host("node").Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{}))
		for _, l := range seedRules(t, tc.seed) {
			assert.Contains(t, save, l+"\n", tc.seed)
		}
		for _, r := range aksPostrouting {
			assert.Contains(t, save, strings.TrimPrefix(r, "-t nat ")+"\n")
		}
	}
}

// TestClusterPolicy: the VIP arrives unchanged (floating IP), goes
// KUBE-SERVICES #3 → KUBE-FW #1 (mark 0x4000) → KUBE-SVC → KUBE-SEP, and
// is masqueraded by KUBE-POSTROUTING: exactly half to each pod, each seen
// from the node's address.
func TestClusterPolicy(t *testing.T) {
	n, err := newNet(io.Discard, clusterYAML, OneNode, "10.13.76.26", "10.13.76.7")
	require.NoError(t, err)
	node := n.Host("node")
	outs, err := node.Explain("azure0", story.TCP(Laptop+":51535", VIP+":80", inet.SYN))
	require.NoError(t, err)
	require.Len(t, outs, 2)
	pods := map[string]int{"10.13.76.26:80": 1, "10.13.76.7:80": 2}
	for _, o := range outs {
		r := *o.Result
		assert.Zero(t, o.Probability.Rat().Cmp(big.NewRat(1, 2)))
		dst := netip.AddrPortFrom(r.Packet.Dst, r.Packet.DstPort).String()
		require.Contains(t, pods, dst)
		assert.Equal(t, NodeIP, r.Packet.Src.String(), "masqueraded to the node")
		assert.Equal(t, uint32(0x4000), r.Packet.Mark)
		assert.True(t, netfiltertest.Matched(r, netfilter.NAT, "KUBE-SERVICES", 3))
		assert.True(t, netfiltertest.Matched(r, netfilter.NAT, FWChain, 1))
		assert.True(t, netfiltertest.Matched(r, netfilter.NAT, FWChain, 2))
		assert.False(t, netfiltertest.Matched(r, netfilter.NAT, FWChain, 3), "KUBE-MARK-DROP not reached")
		assert.True(t, netfiltertest.Matched(r, netfilter.NAT, SvcChain, pods[dst]))
		assert.True(t, netfiltertest.Matched(r, netfilter.NAT, "KUBE-POSTROUTING", 1))
	}

	// The walked connections: conntrack's reply tuples are addressed to
	// the node, as in the post's `conntrack -L -d 51.144.176.251`.
	for sport := 51535; sport <= 51536; sport++ {
		hops, err := connect(n, io.Discard, Laptop, VIP, sport)
		require.NoError(t, err)
		assert.Equal(t, VIP, hopOf(t, hops, "node").In.Dst.String(), "floating IP: the node receives the VIP")
		assert.Equal(t, NodeIP, story.Last(hops).In.Src.String(), "the pod sees the node")
	}
	var b bytes.Buffer
	story.Conntrack(&b, node, "", zeroFilter())
	assert.Contains(t, b.String(), "ESTABLISHED src=109.125.120.58 dst=51.144.176.251 sport=51535 dport=80 src=10.13.76.26 dst=10.13.76.4 sport=80 dport=51535 [ASSURED] mark=0 use=1\n")
	assert.Contains(t, b.String(), "ESTABLISHED src=109.125.120.58 dst=51.144.176.251 sport=51536 dport=80 src=10.13.76.7 dst=10.13.76.4 sport=80 dport=51536 [ASSURED] mark=0 use=1\n")
	nat := node.Ruleset(netfilter.IPv4).Table(netfilter.NAT)
	assert.Equal(t, netfilter.Counters{Packets: 2, Bytes: 120}, nat.Chain("KUBE-POSTROUTING").Rules[0].Counters)
	assert.Equal(t, netfilter.Counters{Packets: 2, Bytes: 120}, nat.Chain("KUBE-MARK-MASQ").Rules[0].Counters)
	assert.Equal(t, netfilter.Counters{}, nat.Chain(FWChain).Rules[2].Counters)
}

// TestLocalPolicy: with externalTrafficPolicy Local, KUBE-FW goes to
// KUBE-XLB, nothing marks the packet, the pod sees the client and the
// reply tuple is addressed to the client; the health check reports 2.
func TestLocalPolicy(t *testing.T) {
	n, err := newNet(io.Discard, localYAML, Probed, "10.13.76.15", "10.13.76.30")
	require.NoError(t, err)
	outs, err := n.Host("node").Explain("azure0", story.TCP(Laptop2+":57675", VIPLocal+":80", inet.SYN))
	require.NoError(t, err)
	require.Len(t, outs, 2)
	for _, o := range outs {
		assert.Zero(t, o.Probability.Rat().Cmp(big.NewRat(1, 2)))
		assert.Equal(t, Laptop2, o.Result.Packet.Src.String(), "client IP preserved")
		assert.Zero(t, o.Result.Packet.Mark)
		assert.True(t, netfiltertest.Matched(*o.Result, netfilter.NAT, FWChain, 1))
		assert.False(t, netfiltertest.Matched(*o.Result, netfilter.NAT, "KUBE-MARK-MASQ", 1))
	}
	hops, err := connect(n, io.Discard, Laptop2, VIPLocal, 57675)
	require.NoError(t, err)
	assert.Equal(t, Laptop2, story.Last(hops).In.Src.String())
	entries := n.Host("node").Conntrack().Entries()
	require.Len(t, entries, 1)
	assert.Equal(t, Laptop2, entries[0].Reply().Dst.String())

	hc, err := healthCheck(proxyConfig())
	require.NoError(t, err)
	assert.Equal(t, HealthzNP, hc.NodePort)
	status, _, body := hc.Response(true)
	assert.Equal(t, 200, status)
	assert.Equal(t, "{\n\t\"service\": {\n\t\t\"namespace\": \"default\",\n\t\t\"name\": \"whereami\"\n\t},\n\t\"localEndpoints\": 2\n}", string(body))
}

func zeroFilter() conntrack.Filter { return conntrack.Filter{} }

func hopOf(t *testing.T, hops []story.Hop, host string) story.Hop {
	t.Helper()
	for _, h := range hops {
		if h.Host == host {
			return h
		}
	}
	t.Fatalf("no hop on %s", host)
	return story.Hop{}
}

// addrs lists each hop's device and the packet's addresses as it arrived.
func addrs(w cluster.Walk) []string {
	var out []string
	for _, h := range w.Hops {
		out = append(out, h.Device+" "+netfiltertest.Addrs(h.Packet))
	}
	return out
}

// TestAcrossMachines asserts the story's lessons across the machines,
// from the whole path's Explain: the addresses at every hop, where the
// source is translated, the health probes' answers and which node loses
// the SYN when the LB does not probe.
func TestAcrossMachines(t *testing.T) {
	n, err := newNet(io.Discard, clusterYAML, OneNode, "10.13.76.26", "10.13.76.7")
	require.NoError(t, err)
	outs, err := explain(io.Discard, n, Laptop, VIP)
	require.NoError(t, err)
	require.Len(t, outs, 2)
	for i, pod := range []string{"10.13.76.26", "10.13.76.7"} {
		o := outs[i]
		assert.Equal(t, "1/2", o.Probability.RatString())
		assert.Equal(t, []string{
			"laptop 109.125.120.58:51535 → 51.144.176.251:80",
			"internet 109.125.120.58:51535 → 51.144.176.251:80",
			"azure-lb 109.125.120.58:51535 → 51.144.176.251:80", // floating IP: the VIP stays
			"vnet 109.125.120.58:51535 → 51.144.176.251:80",
			"node 109.125.120.58:51535 → 51.144.176.251:80",
			"pod " + pod + " 10.13.76.4:51535 → " + pod + ":80", // SNAT on the node
		}, addrs(o.Walk))
		node := o.Walk.Hops[4].Result
		assert.True(t, netfiltertest.Matched(node, netfilter.NAT, "KUBE-POSTROUTING", 1), "the node's KUBE-POSTROUTING masquerades")
		assert.Equal(t, "eth0", o.Walk.Hops[4].In, "in through the NIC, the azure0 bridge's port")
	}

	n, err = newNet(io.Discard, localYAML, Probed, "10.13.76.15", "10.13.76.30")
	require.NoError(t, err)
	answers, err := n.LoadBalancer("azure-lb").Probe(inet.TCP, netip.MustParseAddrPort(VIPLocal+":80"))
	require.NoError(t, err)
	require.Len(t, answers, 2)
	assert.Equal(t, [3]any{"node", 200, true}, [3]any{answers[0].Backend, answers[0].Status, answers[0].Healthy})
	assert.Contains(t, answers[0].Body, `"localEndpoints": 2`)
	assert.Equal(t, [3]any{"node2", 503, false}, [3]any{answers[1].Backend, answers[1].Status, answers[1].Healthy})
	assert.Contains(t, answers[1].Body, `"localEndpoints": 0`)
	outs, err = explain(io.Discard, n, Laptop2, VIPLocal)
	require.NoError(t, err)
	require.Len(t, outs, 2)
	for _, o := range outs {
		assert.Equal(t, "1/2", o.Probability.RatString())
		assert.Equal(t, "node", o.Walk.Hops[4].Device, "only the healthy node")
		assert.Equal(t, Laptop2, o.Walk.Last().Packet.Src.String(), "the pod sees the client")
	}

	n, err = newNet(io.Discard, localYAML, Unprobed, "10.13.76.15", "10.13.76.30")
	require.NoError(t, err)
	outs, err = explain(io.Discard, n, Laptop2, VIPLocal)
	require.NoError(t, err)
	require.Len(t, outs, 3)
	lost := outs[0]
	assert.Equal(t, "1/2", lost.Probability.RatString())
	assert.Equal(t, cluster.Dropped, lost.Walk.Fate)
	assert.Equal(t, "node2", lost.Walk.Hops[4].Device)
	// node2 has no endpoint: KUBE-XLB only marks the packet for dropping
	// (0x8000), which kubelet's KUBE-FIREWALL drops in INPUT and OUTPUT,
	// not in FORWARD; the VIP is not node2's, so it forwards the SYN back
	// out, masqueraded by AKS's rule, and the VNet has nowhere to send it.
	r := lost.Walk.Hops[4].Result
	assert.Equal(t, netfilter.Forwarded, r.Disposition)
	assert.Equal(t, Node2IP+":51535 → "+VIPLocal+":80", netfiltertest.Addrs(r.Packet))
	assert.Equal(t, "router vnet has no route to 13.93.66.174", lost.Walk.Reason)
	assert.Equal(t, "1/4", outs[1].Probability.RatString())
	assert.Equal(t, "1/4", outs[2].Probability.RatString())
}

// TestWalkPicture keeps the DOT of the whole path of part 1's first SYN
// and its SYN-ACK; with -update and Graphviz installed it also draws
// walk.svg.
func TestWalkPicture(t *testing.T) {
	syn, synack, err := walkPicture()
	require.NoError(t, err)
	assert.Contains(t, string(syn), `azure-lb (load balancer)`)
	assert.Contains(t, string(syn), `now tcp 10.13.76.4:51535 → 10.13.76.26:80`)
	storytest.Golden(t, "walk-syn.dot", syn)
	storytest.Golden(t, "walk-synack.dot", synack)
	if !storytest.Updating() {
		return
	}
	svg, err := render.SVG(context.Background(), syn)
	if errors.Is(err, render.ErrNoDot) {
		t.Log("Graphviz dot not installed: walk.svg not redrawn")
		return
	}
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("walk.svg", svg, 0o644))
}

// TestPicture keeps the DOT of the README's picture; with -update and
// Graphviz installed it also redraws path.svg.
func TestPicture(t *testing.T) {
	dot, err := picture()
	require.NoError(t, err)
	s := string(dot)
	assert.Contains(t, s, `"KUBE-SERVICES" -> "KUBE-FW-7G2JV7LNOR6DDNIY" [label="#3\n1 pkts 60 B", color=`)
	assert.Contains(t, s, `"KUBE-MARK-MASQ#1" [label="MARK --set-xmark 0x4000/0x4000", shape=plaintext, color=`)
	assert.Contains(t, s, `"KUBE-POSTROUTING#1" [label="MASQUERADE", shape=plaintext, color=`)
	storytest.Golden(t, "path.dot", dot)
	if !storytest.Updating() {
		return
	}
	svg, err := render.SVG(context.Background(), dot)
	if errors.Is(err, render.ErrNoDot) {
		t.Log("Graphviz dot not installed: path.svg not redrawn")
		return
	}
	require.NoError(t, err)
	require.NoError(t, os.WriteFile("path.svg", svg, 0o644))
}
