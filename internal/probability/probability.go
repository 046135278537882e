// Package probability computes, exactly, the endpoint probabilities of the
// load-balancing cascades kube-proxy writes with "statistic --mode random"
// rules, as the kernel evaluates them.
//
// iptables parses --probability P with strtod and stores lround(P·2^31);
// the kernel matches when (random_u32 & 0x7fffffff) < stored, so a rule
// matches with probability stored/2^31 exactly. kube-proxy gives endpoint i
// (0-based) of n the rule probability 1/(n−i), printed with %0.10f (before
// v1.17: %0.5f), and sends the last endpoint everything that is left. The
// exact probability of endpoint i is q_i·Π_{j<i}(1−q_j) with q_j the
// stored fractions, a dyadic rational computed here with math/big.
//
// # The error bound of the current format
//
// Each factor q_j = stored_j/2^31 differs from 1/(n−j) by at most
// ε = 5·10^-11 (the %0.10f rounding) + 2^-32 (lround to the 2^-31 grid).
// For factors in [0, 1], |Π a_k − Π b_k| ≤ Σ |a_k − b_k|, and endpoint i's
// probability is a product of min(i+1, n−1) such factors whose ideal
// values multiply to exactly 1/n, so |p_i − 1/n| ≤ (n−1)·ε for n ≥ 2
// ([CurrentBound]). For %0.5f the rounding term is 5·10^-6 and dominates:
// beyond about 316 endpoints adjacent factors 1/k and 1/(k+1) print the
// same, and the cascade is measurably unfair.
package probability

import (
	"fmt"
	"math"
	"math/big"
	"strconv"
)

// Formats kube-proxy has printed probabilities with.
const (
	// FormatCurrent is kube-proxy's format since v1.17.
	FormatCurrent = "%0.10f"
	// FormatLegacy is the format before v1.17.
	FormatLegacy = "%0.5f"
)

// Stored returns the kernel's stored value for an iptables --probability
// argument: lround(P·2^31), as libxt_statistic computes it.
func Stored(arg string) (uint32, error) {
	p, err := strconv.ParseFloat(arg, 64)
	if err != nil || p < 0 || p > 1 {
		return 0, fmt.Errorf("probability %q: expected a number between 0 and 1", arg)
	}
	return uint32(math.Round(p * (1 << 31))), nil
}

// Factor returns the exact probability with which a rule written with
// --probability arg matches: Stored(arg)/2^31.
func Factor(arg string) (*big.Rat, error) {
	s, err := Stored(arg)
	if err != nil {
		return nil, err
	}
	return big.NewRat(int64(s), 1<<31), nil
}

// KubeProxyArgs returns the --probability arguments kube-proxy writes for
// n endpoints in format (FormatCurrent or FormatLegacy): n−1 of them, for
// every endpoint but the last.
func KubeProxyArgs(n int, format string) []string {
	if n < 1 {
		return nil
	}
	out := make([]string, n-1)
	for i := range out {
		out[i] = fmt.Sprintf(format, 1.0/float64(n-i))
	}
	return out
}

// Cascade returns the exact probability of each of len(args)+1 targets of
// a cascade of random rules with these --probability arguments followed
// by an unconditional rule. The results sum to exactly 1.
func Cascade(args []string) ([]*big.Rat, error) {
	ds, err := cascade(args)
	if err != nil {
		return nil, err
	}
	out := make([]*big.Rat, len(ds))
	for i, d := range ds {
		out[i] = d.rat()
	}
	return out, nil
}

// dyadic is num/2^exp; the cascade's probabilities are kept in this form so
// that long cascades cost no gcd reductions.
type dyadic struct {
	num *big.Int
	exp uint
}

func (d dyadic) rat() *big.Rat {
	return new(big.Rat).SetFrac(d.num, new(big.Int).Lsh(big.NewInt(1), d.exp))
}

func cascade(args []string) ([]dyadic, error) {
	out := make([]dyadic, 0, len(args)+1)
	rest := big.NewInt(1) // reaching rule i has probability rest/2^(31·i)
	for i, a := range args {
		s, err := Stored(a)
		if err != nil {
			return nil, err
		}
		e := uint(31 * (i + 1))
		out = append(out, dyadic{new(big.Int).Mul(rest, big.NewInt(int64(s))), e})
		rest = new(big.Int).Mul(rest, big.NewInt(1<<31-int64(s)))
	}
	return append(out, dyadic{rest, uint(31 * len(args))}), nil
}

// EndpointProbabilities returns the exact probability of each of the n
// endpoints of a kube-proxy service whose probabilities are written in
// format, in kube-proxy's endpoint order.
func EndpointProbabilities(n int, format string) []*big.Rat {
	ps, err := Cascade(KubeProxyArgs(n, format))
	if err != nil {
		panic(err) // kube-proxy's arguments always parse
	}
	return ps
}

// MaxDeviation returns max_i |p_i − 1/n| over the endpoints of an n
// endpoint service written in format, and the endpoint index reaching it
// (the first one on ties).
func MaxDeviation(n int, format string) (*big.Rat, int) {
	ds, err := cascade(KubeProxyArgs(n, format))
	if err != nil {
		panic(err)
	}
	// |num/2^e − 1/n| = |n·num − 2^e| / (n·2^e); compare a/2^ea with b/2^eb
	// as a·2^eb against b·2^ea.
	nn := big.NewInt(int64(n))
	dev := func(d dyadic) *big.Int {
		x := new(big.Int).Mul(d.num, nn)
		x.Sub(x, new(big.Int).Lsh(big.NewInt(1), d.exp))
		return x.Abs(x)
	}
	best, at := dev(ds[0]), 0
	for i := 1; i < len(ds); i++ {
		x := dev(ds[i])
		l := new(big.Int).Lsh(x, ds[at].exp)
		r := new(big.Int).Lsh(best, ds[i].exp)
		if l.Cmp(r) > 0 {
			best, at = x, i
		}
	}
	den := new(big.Int).Lsh(nn, ds[at].exp)
	return new(big.Rat).SetFrac(best, den), at
}

// CurrentBound is the proven bound on MaxDeviation(n, FormatCurrent):
// (n−1)·ε with ε = 5·10^-11 (the %0.10f rounding) + 2^-32 (lround to the
// 2^-31 grid) + 2^-52 (float64 rounding of 1/k and of the parsed string),
// and 0 for n = 1.
func CurrentBound(n int) *big.Rat {
	if n <= 1 {
		return new(big.Rat)
	}
	eps := new(big.Rat).Add(big.NewRat(5, 100_000_000_000), big.NewRat(1, 1<<32))
	eps.Add(eps, big.NewRat(1, 1<<52))
	return eps.Mul(eps, big.NewRat(int64(n-1), 1))
}
