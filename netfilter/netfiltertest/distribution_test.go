package netfiltertest_test

import (
	"math/big"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

func TestAssertExactKubeProxyFiveEndpoints(t *testing.T) {
	h := webNode(t, 1, 5)
	outs, err := h.Explain("eth0", client(0))
	require.NoError(t, err)

	require.True(t, netfiltertest.AssertExact(t, outs, netfiltertest.ByDestination, webWant(5)))
	d := netfiltertest.Distribute(outs, netfiltertest.ByDestination)
	assert.Equal(t, "1/1", d.Total().String())
	// The quantised cascade: 0.2, 0.25, 0.3333333333, 0.5 stored as
	// lround(p·2^31).
	assert.Equal(t, "10.244.1.2:8080: 214748365/1073741824 (0.2000000002)\n"+
		"10.244.1.3:8080: 858993459/4294967296 (0.2000000000)\n"+
		"10.244.1.4:8080: 1844674407800451891/9223372036854775808 (0.2000000000)\n"+
		"10.244.1.5:8080: 3689348813023923405/18446744073709551616 (0.1999999999)\n"+
		"10.244.1.6:8080: 3689348813023923405/18446744073709551616 (0.1999999999)\n", d.String())

	fifth := map[netip.AddrPort]float64{}
	for _, ep := range webEndpoints(5) {
		fifth[ep] = 0.2
	}
	assert.True(t, netfiltertest.AssertWithin(t, outs, netfiltertest.ByDestination, fifth, 1e-9))
}

func TestAssertFailureMessages(t *testing.T) {
	h := webNode(t, 1, 2)
	outs, err := h.Explain("eth0", client(0))
	require.NoError(t, err)
	eps := webEndpoints(2)

	tests := []struct {
		name string
		run  func(r *recorder) bool
		want []string
	}{
		{"exact ideal halves", func(r *recorder) bool {
			return netfiltertest.AssertExact(r, outs, netfiltertest.ByDestination, map[netip.AddrPort]*big.Rat{eps[0]: big.NewRat(1, 2), eps[1]: big.NewRat(1, 2)})
		}, nil},
		{"exact wrong", func(r *recorder) bool {
			return netfiltertest.AssertExact(r, outs, netfiltertest.ByDestination, map[netip.AddrPort]*big.Rat{eps[0]: big.NewRat(1, 3), eps[1]: big.NewRat(2, 3)})
		}, []string{
			"distributions differ exactly",
			"*10.244.1.2:8080         0.500000000000   0.333333333333   +0.167",
			"exact: got 1/2, want 1/3",
			"*10.244.1.3:8080         0.500000000000   0.666666666667   -0.167",
		}},
		{"exact missing key", func(r *recorder) bool {
			return netfiltertest.AssertExact(r, outs, netfiltertest.ByDestination, map[netip.AddrPort]*big.Rat{eps[0]: big.NewRat(1, 1)})
		}, []string{"*10.244.1.3:8080         0.500000000000   0.000000000000   +0.5", "exact: got 1/2, want 0"}},
		{"within", func(r *recorder) bool {
			return netfiltertest.AssertWithin(r, outs, netfiltertest.ByDestination, map[netip.AddrPort]float64{eps[0]: 0.49, eps[1]: 0.51}, 0.02)
		}, nil},
		{"not within", func(r *recorder) bool {
			return netfiltertest.AssertWithin(r, outs, netfiltertest.ByDestination, map[netip.AddrPort]float64{eps[0]: 0.4, eps[1]: 0.6}, 0.05)
		}, []string{"distributions differ by more than 0.05", "*10.244.1.2:8080         0.500000000000   0.400000000000   +0.1"}},
		{"by fate", func(r *recorder) bool {
			return netfiltertest.AssertExact(r, outs, netfiltertest.ByFate, map[string]*big.Rat{"forwarded": big.NewRat(1, 1)})
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r recorder
			ok := tt.run(&r)
			assert.Equal(t, tt.want == nil, ok)
			msg := strings.Join(r.msgs, "\n")
			for _, w := range tt.want {
				assert.Contains(t, msg, w)
			}
			if tt.want == nil {
				assert.Empty(t, msg)
			}
		})
	}
}

func TestDistributeMergesKeys(t *testing.T) {
	h := webNode(t, 1, 3)
	outs, err := h.Explain("eth0", client(0))
	require.NoError(t, err)
	require.Len(t, outs, 3)
	d := netfiltertest.Distribute(outs, func(r netfilter.Result) netip.Addr { return r.Packet.Src })
	require.Len(t, d, 1)
	for _, p := range d {
		assert.Equal(t, "1/1", p.String())
	}
}
