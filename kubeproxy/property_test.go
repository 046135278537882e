package kubeproxy

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestGeneratedDocumentInvariants(t *testing.T) {
	var reused Generator
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		v6 := rapid.Bool().Draw(rt, "v6")
		legacy := rapid.Bool().Draw(rt, "legacy")
		cfg, svcs, slices := randomCluster(rand.New(rand.NewPCG(seed, 1)), v6)
		if legacy {
			cfg.Layout = LayoutLegacy
		}
		doc, err := Generate(cfg, svcs, slices, nil)
		require.NoError(rt, err)

		// Reusing a Generator and permuting the input change nothing.
		rand.New(rand.NewPCG(seed, 2)).Shuffle(len(svcs), func(i, j int) { svcs[i], svcs[j] = svcs[j], svcs[i] })
		rand.New(rand.NewPCG(seed, 3)).Shuffle(len(slices), func(i, j int) { slices[i], slices[j] = slices[j], slices[i] })
		again, err := reused.Generate(cfg, svcs, slices, nil)
		require.NoError(rt, err)
		require.Equal(rt, string(doc), string(again))

		for table, lines := range tableLines(string(doc)) {
			declared := map[string]bool{}
			for _, l := range lines {
				if strings.HasPrefix(l, ":") {
					name := strings.Fields(l[1:])[0]
					if !legacy {
						require.False(rt, declared[name], "%s: %s declared twice", table, name)
					}
					declared[name] = true
				}
			}
			for ch, rules := range chainRules(lines) {
				require.True(rt, declared[ch], "%s: rules for undeclared %s", table, ch)
				var lb []string
				for _, r := range rules {
					f := strings.Fields(r)
					if tgt := f[len(f)-1]; strings.HasPrefix(tgt, "KUBE-") && f[len(f)-2] == "-j" {
						require.True(rt, declared[tgt], "%s: jump to undeclared %s", table, tgt)
					}
					if strings.HasPrefix(ch, "KUBE-SVC-") && strings.Contains(r, "-j KUBE-SEP-") && !strings.Contains(r, "--rcheck") {
						lb = append(lb, r)
					}
				}
				checkProbabilities(rt, lb, cfg.LegacyProbability)
			}
		}
	})
}

// checkProbabilities: rule i of n carries probability 1/(n-i), the last none.
func checkProbabilities(t require.TestingT, rules []string, legacyFmt bool) {
	n := len(rules)
	for i, r := range rules {
		if i == n-1 {
			require.NotContains(t, r, "--probability")
			continue
		}
		want := fmt.Sprintf("--probability %0.10f ", 1.0/float64(n-i))
		if legacyFmt {
			want = fmt.Sprintf("--probability %0.5f ", 1.0/float64(n-i))
		}
		require.Contains(t, r, want)
	}
}
