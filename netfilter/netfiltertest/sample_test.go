package netfiltertest_test

import (
	"math"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// TestSampleChiSquareFiveEndpoints sends 10,000 new connections to a
// 5-endpoint service on a seeded host: the counts fit Explain's exact
// distribution, and the same seed gives the same counts.
func TestSampleChiSquareFiveEndpoints(t *testing.T) {
	const n = 10_000
	h := webNode(t, 42, 5)
	outs, err := h.Explain("eth0", client(0))
	require.NoError(t, err)

	counts, err := netfiltertest.Sample(h, "eth0", n, client, netfiltertest.ByDestination)
	require.NoError(t, err)
	total := 0
	for ep, c := range counts {
		assert.Contains(t, webEndpoints(5), ep)
		total += c
	}
	require.Equal(t, n, total)
	stat, p, df := netfiltertest.ChiSquare(counts, outs, netfiltertest.ByDestination)
	t.Logf("counts %v: chi2 = %.3f, df = %d, p = %.4f", counts, stat, df, p)
	assert.Equal(t, 4, df)
	assert.Greater(t, p, 1e-3)

	again, err := netfiltertest.Sample(webNode(t, 42, 5), "eth0", n, client, netfiltertest.ByDestination)
	require.NoError(t, err)
	assert.Equal(t, counts, again)
	other, err := netfiltertest.Sample(webNode(t, 43, 5), "eth0", n, client, netfiltertest.ByDestination)
	require.NoError(t, err)
	assert.NotEqual(t, counts, other)
}

// TestSampleConnectionsStick: repeating one connection's packet follows
// its conntrack entry, so every packet reaches the first one's endpoint,
// which the exact distribution of a new connection rejects.
func TestSampleConnectionsStick(t *testing.T) {
	h := webNode(t, 7, 5)
	outs, err := h.Explain("eth0", client(0))
	require.NoError(t, err)
	counts, err := netfiltertest.Sample(h, "eth0", 200, func(int) netfilter.Packet { return client(0) }, netfiltertest.ByDestination)
	require.NoError(t, err)
	require.Len(t, counts, 1)
	stat, p, df := netfiltertest.ChiSquare(counts, outs, netfiltertest.ByDestination)
	assert.Equal(t, 4, df)
	assert.Greater(t, stat, 700.0) // 200 on one of five: (160²+4·40²)/40
	assert.Less(t, p, 1e-100)
}

func TestChiSquareEdges(t *testing.T) {
	h := webNode(t, 1, 2)
	outs, err := h.Explain("eth0", client(0))
	require.NoError(t, err)
	eps := webEndpoints(2)
	stranger := netip.MustParseAddrPort("10.0.0.1:1")

	tests := []struct {
		name     string
		observed map[netip.AddrPort]int
		stat, p  float64
		df       int
	}{
		{"no counts", nil, 0, 1, 1},
		{"perfect", map[netip.AddrPort]int{eps[0]: 50, eps[1]: 50}, 0, 1, 1},
		{"impossible key", map[netip.AddrPort]int{eps[0]: 50, stranger: 1}, math.Inf(1), 0, 1},
		{"zero count for unknown key is fine", map[netip.AddrPort]int{eps[0]: 50, eps[1]: 50, stranger: 0}, 0, 1, 1},
		// (60−50)²/50 + (40−50)²/50 = 4 with one degree of freedom:
		// P(χ²₁ ≥ 4) = erfc(√2).
		{"skewed", map[netip.AddrPort]int{eps[0]: 60, eps[1]: 40}, 4, math.Erfc(math.Sqrt2), 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stat, p, df := netfiltertest.ChiSquare(tt.observed, outs, netfiltertest.ByDestination)
			assert.InDelta(t, tt.stat, stat, 1e-6)
			assert.InDelta(t, tt.p, p, 1e-9)
			assert.Equal(t, tt.df, df)
		})
	}

	// A single possible fate: nothing to test.
	stat, p, df := netfiltertest.ChiSquare(map[string]int{"forwarded": 9}, outs, netfiltertest.ByFate)
	assert.Equal(t, []float64{0, 1}, []float64{stat, p})
	assert.Equal(t, 0, df)
}

// A refused packet stops Sample with its error rather than being counted
// under some key.
func TestSampleStopsAtARefusedPacket(t *testing.T) {
	h := webNode(t, 7, 5)
	counts, err := netfiltertest.Sample(h, "eht0", 10, client, netfiltertest.ByDestination)
	require.ErrorIs(t, err, netfilter.ErrUnknownInterface)
	assert.Empty(t, counts)
	assert.Contains(t, err.Error(), "netfiltertest: packet 0: ")
}
