package render_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/render"
)

func TestWalkDOT(t *testing.T) {
	n := cluster.New(cluster.Config{})
	node := netfilter.NewHost(netfilter.HostConfig{})
	node.Tracing = true
	require.NoError(t, node.AddInterface("cbr0", netip.MustParsePrefix("10.244.0.1/24")))
	require.NoError(t, node.Exec("-t nat -A PREROUTING -d 10.0.0.10/32 -p tcp --dport 80 -j DNAT --to-destination 10.244.0.6:8080"))
	require.NoError(t, node.Exec("-A FORWARD -p tcp --dport 9 -j DROP"))
	require.NoError(t, n.AddHost("node", node))
	require.NoError(t, n.AddBridge("node", "cbr0", "veth1", "veth2"))
	for i, ip := range []string{"10.244.0.5", "10.244.0.6"} {
		name := []string{"pod1", "pod2"}[i]
		_, err := n.AddPod(name, cluster.Pod{Addr: netip.MustParsePrefix(ip + "/24"), Gateway: netip.MustParseAddr("10.244.0.1")})
		require.NoError(t, err)
		require.NoError(t, n.Link(cluster.Port{Device: "node", Iface: []string{"veth1", "veth2"}[i]}, cluster.Port{Device: name, Iface: "eth0"}))
	}
	w, err := n.Send("pod1", netfilter.TCP(netip.MustParseAddrPort("10.244.0.5:40000"), netip.MustParseAddrPort("10.0.0.10:80"), inet.SYN))
	require.NoError(t, err)
	dot := string(render.WalkDOT(w, render.WalkOptions{Title: "pod1 → Service"}))
	assert.Equal(t, `digraph walk {
  rankdir=TB;
  label="pod1 → Service"; labelloc=t; fontname="Helvetica";
  node [shape=box, style=rounded, fontname="Helvetica", fontsize=10];
  edge [fontname="Helvetica", fontsize=9];
  h0 [label="pod1 (host)\nin local process, out eth0\ntcp 10.244.0.5:40000 → 10.0.0.10:80"];
  h1 [label="node (host)\nin veth1, out veth2\ntcp 10.244.0.5:40000 → 10.0.0.10:80\nnow tcp 10.244.0.5:40000 → 10.244.0.6:8080\nnat PREROUTING: DNAT --to-destination 10.244.0.6:8080"];
  h2 [label="pod2 (host)\nin eth0, out -\ntcp 10.244.0.5:40000 → 10.244.0.6:8080"];
  h0 -> h1 [label="veth1"];
  h1 -> h2 [label="eth0"];
  end [shape=plaintext, label="delivered"];
  h2 -> end [style=dashed];
}
`, dot)
	w, err = n.Send("pod1", netfilter.TCP(netip.MustParseAddrPort("10.244.0.5:40001"), netip.MustParseAddrPort("10.244.0.6:9"), inet.SYN))
	require.NoError(t, err)
	dot = string(render.WalkDOT(w, render.WalkOptions{}))
	assert.True(t, strings.Contains(dot, `filter FORWARD: DROP\ndropped", color="#d62728"`), dot)
}
