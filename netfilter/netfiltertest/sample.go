package netfiltertest

import (
	"fmt"
	"math"

	"github.com/packetwalk/packetwalk/internal/probability"
	"github.com/packetwalk/packetwalk/netfilter"
)

// Sample sends n packets through h, packet(i) for i = 0..n−1, received on
// iface (or sent by a local process when iface is ""), and counts their
// fates by key. Unlike Explain it changes the host as real traffic would:
// counters, connections, nth counters, recent lists and the seeded random
// source all advance, so the same seed and packets give the same counts.
// For new connections, packet should vary the source port (or address).
// A packet the host refuses (Result.Err: an unknown iface, contradictory
// fields) stops the sampling with its error and the counts so far.
func Sample[K comparable](h *netfilter.Host, iface string, n int, packet func(i int) netfilter.Packet, key func(netfilter.Result) K) (map[K]int, error) {
	counts := map[K]int{}
	for i := range n {
		var r netfilter.Result
		if iface == "" {
			r = h.Send(packet(i))
		} else {
			r = h.Receive(iface, packet(i))
		}
		if r.Err != nil {
			return counts, fmt.Errorf("netfiltertest: packet %d: %w", i, r.Err)
		}
		counts[key(r)]++
	}
	return counts, nil
}

// ChiSquare runs Pearson's goodness-of-fit test of observed counts against
// the exact distribution of outcomes summed by key, and returns the
// statistic, its p-value and the degrees of freedom (the number of keys
// with non-zero probability, minus 1). A count for a key of probability 0
// gives an infinite statistic and p-value 0. With no counts, or with a
// single possible key and every count on it, the statistic is 0 and the
// p-value 1. The χ² approximation wants an expected count (total·p) of at
// least about 5 for every key; group rare fates with the key function
// otherwise.
func ChiSquare[K comparable](observed map[K]int, outcomes []netfilter.Outcome, key func(netfilter.Result) K) (stat, pValue float64, df int) {
	dist := Distribute(outcomes, key)
	df = len(dist) - 1
	total := 0
	for k, c := range observed {
		if c == 0 {
			continue
		}
		if _, ok := dist[k]; !ok {
			return math.Inf(1), 0, df
		}
		total += c
	}
	if total == 0 || df < 1 {
		return 0, 1, max(df, 0)
	}
	keys := sortedKeys(dist)
	counts := make([]int, len(keys))
	expected := make([]float64, len(keys))
	for i, k := range keys {
		counts[i], expected[i] = observed[k], ratFloat(dist[k])
	}
	stat, pValue, err := probability.ChiSquare(counts, expected)
	if err != nil { // unreachable: there are at least two categories
		return math.NaN(), math.NaN(), df
	}
	return stat, pValue, df
}
