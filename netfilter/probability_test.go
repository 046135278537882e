package netfilter

import (
	"fmt"
	"math/big"
	"strings"
	"sync"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// cascadeRules is a nat cascade with the given probabilities, each rule
// DNATing to its own endpoint, and a last rule that always matches.
func cascadeRules(probs []string) string {
	var b strings.Builder
	b.WriteString("*nat\n:KUBE-SVC-X - [0:0]\n-A PREROUTING -d 10.96.0.10/32 -p tcp -j KUBE-SVC-X\n")
	for i, p := range probs {
		fmt.Fprintf(&b, "-A KUBE-SVC-X -p tcp -m statistic --mode random --probability %s -j DNAT --to-destination 10.244.1.%d:8080\n", p, 10+i)
	}
	fmt.Fprintf(&b, "-A KUBE-SVC-X -p tcp -j DNAT --to-destination 10.244.1.%d:8080\nCOMMIT\n", 10+len(probs))
	return b.String()
}

// Cmp orders Explain's lazily computed probabilities exactly: it agrees
// with big.Rat on every pair, including ties the float approximations
// cannot decide (two branches of probability 1/2 deep in a cascade).
func TestProbabilityCmpIsExact(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		choices := []string{"0.5", "0.25", "0.33333333349", "0.00000000047", "0.99999999953", "0.1", "0.5"}
		n := rapid.IntRange(1, 12).Draw(t, "n")
		probs := make([]string, n)
		for i := range probs {
			probs[i] = rapid.SampledFrom(choices).Draw(t, "p")
		}
		h := testExplainHost(t, cascadeRules(probs), false)
		out, err := h.Explain("eth0", tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN))
		require.NoError(t, err)
		sum := new(big.Rat)
		for i, a := range out {
			sum.Add(sum, a.Probability.Rat())
			for _, b := range out {
				assert.Equal(t, a.Probability.Rat().Cmp(b.Probability.Rat()), a.Probability.Cmp(b.Probability), "%s vs %s", a.Probability, b.Probability)
			}
			if i > 0 {
				assert.GreaterOrEqual(t, out[i-1].Probability.Cmp(a.Probability), 0, "outcomes are most probable first")
			}
		}
		assert.Equal(t, "1/1", sum.String())
	})
}

// A branch that cannot happen is not an outcome: probability 1 never
// falls through, probability 0 never matches.
func TestExplainSkipsImpossibleBranches(t *testing.T) {
	h := testHost(t, cascadeRules([]string{"0", "1"}), HostConfig{})
	out, err := h.Explain("eth0", tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN))
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, "1/1", out[0].Probability.String())
	assert.Equal(t, "10.244.1.11", out[0].Result.Packet.Dst.String())
}

// Probabilities computed lazily may be read from several goroutines.
func TestProbabilityConcurrentUse(t *testing.T) {
	h := testHost(t, kubeServiceRules(40), HostConfig{})
	out, err := h.Explain("eth0", tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN))
	require.NoError(t, err)
	require.Len(t, out, 40)
	want := make([]string, len(out))
	for i, o := range out {
		want[i] = o.Probability.Rat().String()
	}
	out, err = h.Explain("eth0", tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN))
	require.NoError(t, err)
	var wg sync.WaitGroup
	got := make([][]string, 4)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := len(out) - 1; i >= 0; i-- {
				got[g] = append([]string{new(big.Rat).SetFrac(out[i].Probability.Numerator(), out[i].Probability.Denominator()).String()}, got[g]...)
			}
		}()
	}
	wg.Wait()
	for g := range got {
		assert.Equal(t, want, got[g])
	}
	var zero Probability
	assert.Equal(t, "0/1", zero.String())
	assert.Equal(t, 0.0, zero.Float64())
	assert.Equal(t, -1, zero.Cmp(out[0].Probability))
}
