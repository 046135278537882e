package probability

import (
	"fmt"
	"math/big"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Rows of docs/kernel-notes.md, "statistic: probability quantisation",
// observed with iptables 1.8.9.
func TestStoredMatchesIptables(t *testing.T) {
	for arg, want := range map[string]uint32{
		"0.5": 1073741824, "0.3333333333": 715827883, "0.2": 429496730, "0.1": 214748365,
		"0.1428571429": 306783378, "0.0001": 214748, "0.99999": 2147462173,
		"0.9999999999": 1 << 31, "1": 1 << 31, "0": 0, "0.00000000023": 0, "0.00000000024": 1,
		"0.6666666667": 1431655765, "0.01": 21474836,
	} {
		got, err := Stored(arg)
		require.NoError(t, err, arg)
		assert.Equal(t, want, got, arg)
	}
	for _, bad := range []string{"1.5", "-0.1", "x", ""} {
		_, err := Stored(bad)
		assert.ErrorContains(t, err, "expected a number between 0 and 1", bad)
	}
}

func TestCascadeThreeEndpoints(t *testing.T) {
	ps := EndpointProbabilities(3, FormatCurrent)
	require.Len(t, ps, 3)
	p0 := big.NewRat(715827883, 1<<31)
	p1 := new(big.Rat).Mul(new(big.Rat).Sub(big.NewRat(1, 1), p0), big.NewRat(1, 2))
	p2 := new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).Add(p0, p1))
	assert.Equal(t, []string{p0.String(), p1.String(), p2.String()}, []string{ps[0].String(), ps[1].String(), ps[2].String()})
	assert.Equal(t, []string{"0.3333333333", "0.5000000000"}, KubeProxyArgs(3, FormatCurrent))
	assert.Equal(t, []string{"0.33333", "0.50000"}, KubeProxyArgs(3, FormatLegacy))
	assert.Equal(t, "1/1", EndpointProbabilities(1, FormatCurrent)[0].String())
}

// The current cascade gives every endpoint 1/n up to the quantisation
// error, within the bound derived in the package documentation, for every
// n up to 1000, and the probabilities sum to exactly 1.
func TestCurrentFormatIsFairWithinBound(t *testing.T) {
	worstRel, worstN := 0.0, 0
	for n := 1; n <= 1000; n++ {
		d, _ := MaxDeviation(n, FormatCurrent)
		require.LessOrEqual(t, d.Cmp(CurrentBound(n)), 0, "n=%d: deviation %s above bound %s", n, d.FloatString(15), CurrentBound(n).FloatString(15))
		rel, _ := new(big.Rat).Mul(d, big.NewRat(int64(n), 1)).Float64()
		if rel > worstRel {
			worstRel, worstN = rel, n
		}
		if n == 2 || n == 97 || n == 1000 {
			sum := new(big.Rat)
			for _, p := range EndpointProbabilities(n, FormatCurrent) {
				sum.Add(sum, p)
			}
			require.Equal(t, "1/1", sum.String(), "n=%d", n)
		}
	}
	d1000, at := MaxDeviation(1000, FormatCurrent)
	f, _ := d1000.Float64()
	b, _ := CurrentBound(1000).Float64()
	t.Logf("n=1000: max |p_i-1/n| = %.3g at endpoint %d (bound %.3g); worst relative error n·|p_i-1/n| = %.3g at n=%d", f, at, b, worstRel, worstN)
	// Measured: 2.43e-10 at n=1000 (endpoint 9), 2.43e-7 relative at n=991,
	// a thousand times inside the bound, which sums the errors as if aligned.
	assert.InDelta(t, 2.43e-7, worstRel, 0.01e-7)
	assert.InDelta(t, 2.43e-10, f, 0.01e-10)
	d1, _ := MaxDeviation(1, FormatCurrent)
	assert.Zero(t, d1.Sign())
}

// Before v1.17 kube-proxy printed %0.5f: from 320 endpoints on some
// consecutive rules get the same probability, and the cascade is unfair by
// up to about 31% of 1/n at n ≤ 1000.
func TestLegacyFormatIsUnfair(t *testing.T) {
	firstRepeat := 0
	for n := 2; n <= 1000 && firstRepeat == 0; n++ {
		args := KubeProxyArgs(n, FormatLegacy)
		for i := 1; i < len(args); i++ {
			if args[i] == args[i-1] {
				firstRepeat = n
				break
			}
		}
	}
	assert.Equal(t, 320, firstRepeat, "first n whose %%0.5f probabilities repeat")

	worst, worstN, worstAt := new(big.Rat), 0, 0
	for n := 1; n <= 1000; n++ {
		d, at := MaxDeviation(n, FormatLegacy)
		rel := new(big.Rat).Mul(d, big.NewRat(int64(n), 1))
		if rel.Cmp(worst) > 0 {
			worst, worstN, worstAt = rel, n, at
		}
	}
	f, _ := worst.Float64()
	t.Logf("%%0.5f: worst n·|p_i-1/n| = %.6f at n=%d endpoint %d", f, worstN, worstAt)
	assert.Equal(t, "0.0050 at n=999 endpoint 4", fmt.Sprintf("%.4f at n=%d endpoint %d", f, worstN, worstAt))
}
