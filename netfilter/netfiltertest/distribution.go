package netfiltertest

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"

	"github.com/stretchr/testify/assert"

	"github.com/packetwalk/packetwalk/netfilter"
)

// Distribution is a probability distribution over the keys a test chose
// for packet fates, with exact probabilities.
type Distribution[K comparable] map[K]*big.Rat

// Distribute sums the exact probabilities of outcomes by key(Result).
// Outcomes with probability 0 are left out, so that a key is present
// exactly when it can happen.
func Distribute[K comparable](outcomes []netfilter.Outcome, key func(netfilter.Result) K) Distribution[K] {
	d := Distribution[K]{}
	for _, o := range outcomes {
		p := o.Probability.Rat()
		if p.Sign() == 0 {
			continue
		}
		k := key(*o.Result)
		if acc, ok := d[k]; ok {
			acc.Add(acc, p)
		} else {
			d[k] = p
		}
	}
	return d
}

// Total returns the sum of the probabilities, exactly 1 for Explain's
// outcomes.
func (d Distribution[K]) Total() *big.Rat {
	t := new(big.Rat)
	for _, p := range d {
		t.Add(t, p)
	}
	return t
}

// String prints one "key: N/D (decimal)" line per key, keys in the order
// of their printed form.
func (d Distribution[K]) String() string {
	var b strings.Builder
	for _, k := range sortedKeys(d) {
		fmt.Fprintf(&b, "%v: %s (%.10f)\n", k, d[k].String(), ratFloat(d[k]))
	}
	return b.String()
}

// ByDestination is a key function for load balancing: the destination
// address and port of the packet as it leaves (after DNAT).
func ByDestination(r netfilter.Result) netip.AddrPort {
	return netip.AddrPortFrom(r.Packet.Dst, r.Packet.DstPort)
}

// ByFate is a key function for filtering: the disposition, such as
// "forwarded" or "dropped".
func ByFate(r netfilter.Result) string { return r.Disposition.String() }

// AssertExact asserts that the outcomes, summed by key, have exactly the
// probabilities of want. Keys missing from want must have probability 0.
// On failure it reports both distributions and their differences.
func AssertExact[K comparable](t assert.TestingT, outcomes []netfilter.Outcome, key func(netfilter.Result) K, want map[K]*big.Rat, msgAndArgs ...any) bool {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	got := Distribute(outcomes, key)
	bad := false
	for _, k := range unionKeys(got, want) {
		if ratOrZero(got[k]).Cmp(ratOrZero(want[k])) != 0 {
			bad = true
			break
		}
	}
	if !bad {
		return true
	}
	return assert.Fail(t, "distributions differ exactly\n"+table(got, want, true), msgAndArgs...)
}

// AssertWithin asserts that the outcomes, summed by key, have the
// probabilities of want within tol (absolute). Keys missing from want are
// taken as probability 0. On failure it reports both distributions.
func AssertWithin[K comparable](t assert.TestingT, outcomes []netfilter.Outcome, key func(netfilter.Result) K, want map[K]float64, tol float64, msgAndArgs ...any) bool {
	if h, ok := t.(interface{ Helper() }); ok {
		h.Helper()
	}
	got := Distribute(outcomes, key)
	wantRat := make(map[K]*big.Rat, len(want))
	bad := false
	for k, w := range want {
		r := new(big.Rat)
		if r.SetFloat64(w) == nil {
			return assert.Fail(t, fmt.Sprintf("want[%v] = %v is not a finite probability", k, w), msgAndArgs...)
		}
		wantRat[k] = r
	}
	for _, k := range unionKeys(got, wantRat) {
		d := ratFloat(ratOrZero(got[k])) - want[k]
		if !(d <= tol && -d <= tol) {
			bad = true
			break
		}
	}
	if !bad {
		return true
	}
	return assert.Fail(t, fmt.Sprintf("distributions differ by more than %g\n", tol)+table(got, wantRat, false), msgAndArgs...)
}

// table prints got and want side by side, marking the rows that differ;
// exact rows show the fractions as well as decimals.
func table[K comparable](got, want map[K]*big.Rat, exact bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%-24s %-16s %-16s %s\n", "key", "got", "want", "got-want")
	for _, k := range unionKeys(got, want) {
		g, w := ratOrZero(got[k]), ratOrZero(want[k])
		mark := " "
		if g.Cmp(w) != 0 {
			mark = "*"
		}
		diff := new(big.Rat).Sub(g, w)
		fmt.Fprintf(&b, "%s%-23v %-16.12f %-16.12f %+.3g\n", mark, k, ratFloat(g), ratFloat(w), ratFloat(diff))
		if exact && mark == "*" {
			fmt.Fprintf(&b, "   exact: got %s, want %s\n", g.String(), w.String())
		}
	}
	return b.String()
}

func ratOrZero(r *big.Rat) *big.Rat {
	if r == nil {
		return new(big.Rat)
	}
	return r
}

func ratFloat(r *big.Rat) float64 {
	f, _ := r.Float64()
	return f
}

// sortedKeys orders keys by their printed form, so that messages are
// stable.
func sortedKeys[K comparable, V any](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b K) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return keys
}

// unionKeys returns the keys of both maps whose value is non-zero in
// either, in printed order.
func unionKeys[K comparable](a, b map[K]*big.Rat) []K {
	all := map[K]bool{}
	for _, m := range []map[K]*big.Rat{a, b} {
		for k, v := range m {
			if v != nil && v.Sign() != 0 {
				all[k] = true
			}
		}
	}
	return sortedKeys(all)
}
