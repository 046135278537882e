package render_test

import (
	"context"
	"errors"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/golden"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/render"
)

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden.Check(t, filepath.Join("testdata", name), got)
}

// service is a two-endpoint ClusterIP service in kube-proxy's shape, plus
// an unrelated chain and a goto.
func service() *netfilter.Ruleset {
	return netfilter.NewRuleset(netfilter.IPv4).MustExec(
		"-t nat -N KUBE-SERVICES",
		"-t nat -N KUBE-SVC-X",
		"-t nat -N KUBE-SEP-A",
		"-t nat -N KUBE-SEP-B",
		"-t nat -N KUBE-MARK-MASQ",
		"-t nat -N KUBE-POSTROUTING",
		"-t nat -N UNUSED",
		"-t nat -N GOTO-TARGET",
		"-t nat -A PREROUTING -j KUBE-SERVICES",
		"-t nat -A OUTPUT -j KUBE-SERVICES",
		"-t nat -A POSTROUTING -j KUBE-POSTROUTING",
		"-t nat -A KUBE-SERVICES ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp --dport 80 -j KUBE-MARK-MASQ",
		"-t nat -A KUBE-SERVICES -d 10.96.0.10/32 -p tcp --dport 80 -j KUBE-SVC-X",
		"-t nat -A KUBE-SERVICES -d 10.96.0.11/32 -g GOTO-TARGET",
		"-t nat -A KUBE-SVC-X -m statistic --mode random --probability 0.50000000000 -j KUBE-SEP-A",
		"-t nat -A KUBE-SVC-X -j KUBE-SEP-B",
		"-t nat -A KUBE-SEP-A -p tcp -j DNAT --to-destination 10.244.1.5:8080",
		"-t nat -A KUBE-SEP-B -p tcp -j DNAT --to-destination 10.244.1.6:8080",
		"-t nat -A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000",
		"-t nat -A KUBE-POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE",
		"-t nat -A GOTO-TARGET -j RETURN",
		"-t nat -A UNUSED -j ACCEPT",
	)
}

func walked(t *testing.T) (*netfilter.Host, netfilter.Result) {
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1})
	h.Tracing = true
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.Load(service()))
	r := h.Receive("eth0", netfilter.Packet{Family: netfilter.IPv4, Proto: inet.TCP,
		Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("10.96.0.10"),
		SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN, TTL: 64, Length: 60})
	require.Equal(t, netfilter.Forwarded, r.Disposition)
	return h, r
}

func TestDOT(t *testing.T) {
	h, r := walked(t)
	rs := h.Ruleset(netfilter.IPv4)
	for _, tc := range []struct {
		name string
		opt  render.Options
	}{
		{"all.dot", render.Options{}},
		{"targets.dot", render.Options{Table: netfilter.NAT, Targets: true, Title: "nat table"}},
		{"path.dot", render.Options{Roots: []string{"PREROUTING", "POSTROUTING"}, Path: r.Trace, Title: "192.168.10.2:40000 → 10.96.0.10:80"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dot, err := render.DOT(rs, tc.opt)
			require.NoError(t, err)
			checkGolden(t, tc.name, dot)
		})
	}
}

func TestDOTFacts(t *testing.T) {
	h, r := walked(t)
	dot, err := render.DOT(h.Ruleset(netfilter.IPv4), render.Options{Roots: []string{"PREROUTING"}, Path: r.Trace})
	require.NoError(t, err)
	s := string(dot)
	assert.Contains(t, s, `"KUBE-SVC-X" -> "KUBE-SEP-A" [label="#1 p=0.50000000000`)
	assert.Contains(t, s, `"KUBE-SERVICES" -> "GOTO-TARGET" [label="#3", style=dashed];`)
	assert.NotContains(t, s, `"UNUSED"`, "not reachable from PREROUTING")
	assert.NotContains(t, s, `"KUBE-POSTROUTING"`)
	// The chosen endpoint's DNAT is a highlighted leaf; the other is not drawn.
	sep := "KUBE-SEP-A"
	if strings.Contains(r.Packet.Dst.String(), "10.244.1.6") {
		sep = "KUBE-SEP-B"
	}
	assert.Contains(t, s, `"`+sep+`#1" [label="DNAT --to-destination `)
	assert.Equal(t, 1, strings.Count(s, "DNAT --to-destination"))
	assert.Contains(t, s, `"PREROUTING" [label="PREROUTING\npolicy ACCEPT 0 packets, 0 bytes", style="rounded,filled", fillcolor="#eeeeee", color=`)
}

func TestDOTErrors(t *testing.T) {
	rs := service()
	_, err := render.DOT(rs, render.Options{Table: netfilter.Filter})
	assert.ErrorIs(t, err, render.ErrNoTable)
	_, err = render.DOT(rs, render.Options{Roots: []string{"NOPE"}})
	assert.ErrorIs(t, err, render.ErrNoChain)
	assert.ErrorContains(t, err, `"NOPE"`)
}

func TestSVG(t *testing.T) {
	dot, err := render.DOT(service(), render.Options{})
	require.NoError(t, err)
	svg, err := render.SVG(context.Background(), dot)
	if errors.Is(err, render.ErrNoDot) {
		t.Skip("Graphviz dot is not installed")
	}
	require.NoError(t, err)
	assert.Contains(t, string(svg), "<svg")
	assert.Contains(t, string(svg), "KUBE&#45;SVC&#45;X", "dot escapes the dashes")
	_, err = render.SVG(context.Background(), []byte("digraph {"))
	assert.Error(t, err)
}
