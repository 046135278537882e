package kubeproxy

import (
	"math/rand/v2"
	"sort"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelAcceptsGeneratedRulesets loads generated documents into a fresh
// namespace with the real iptables-restore and checks that iptables-save
// shows exactly the predicted rules, chain for chain.
func TestKernelAcceptsGeneratedRulesets(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNS(t, "pw-kp")
	for _, c := range []struct {
		v6     bool
		layout Layout
	}{{false, LayoutCurrent}, {true, LayoutCurrent}, {false, LayoutLegacy}, {true, LayoutLegacy}} {
		v6 := c.v6
		for seed := range uint64(20) {
			r := rand.New(rand.NewPCG(seed, 0x6b70))
			cfg, svcs, slices := randomCluster(r, v6)
			cfg.Layout = c.layout
			cfg.LegacyPortNames = c.layout == LayoutLegacy && seed%2 == 0
			cfg.LegacyProbability = c.layout == LayoutLegacy && seed%3 == 0
			doc, err := Generate(cfg, svcs, slices, nil)
			require.NoError(t, err)
			var save string
			if v6 {
				require.NoError(t, ns.Restore6(string(doc)), "seed %d v6:\n%s", seed, doc)
				save, err = ns.Save6()
			} else {
				require.NoError(t, ns.Restore(string(doc)), "seed %d:\n%s", seed, doc)
				save, err = ns.Save()
			}
			require.NoError(t, err)
			compareSave(t, predictSaveDoc(string(doc), v6), parseSaveText(save), seed, v6)
		}
	}
}

// TestKernelNoFlushPayload applies the payload as kube-proxy does
// (iptables-restore --noflush) on top of the complete document of the same
// cluster, and checks nothing changes.
func TestKernelNoFlushPayload(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNS(t, "pw-kpnf")
	svcs, slices := overallObjects()
	cfg := upstreamTestConfig()
	cfg.NFAcct = false
	cfg.PayloadOnly = false
	full, err := Generate(cfg, svcs, slices, nil)
	require.NoError(t, err)
	require.NoError(t, ns.Restore(string(full)))
	before, err := ns.Save()
	require.NoError(t, err)
	cfg.PayloadOnly = true
	payload, err := Generate(cfg, svcs, slices, nil)
	require.NoError(t, err)
	require.NoError(t, ns.Restore(string(payload), "--noflush", "--counters"))
	after, err := ns.Save()
	require.NoError(t, err)
	assert.Equal(t, before, after)
}

func compareSave(t *testing.T, want, got parsedSave, seed uint64, v6 bool) {
	t.Helper()
	for table, wt := range want {
		gt := got[table]
		if !assert.NotNil(t, gt, "seed %d v6=%v: table %s missing", seed, v6, table) {
			continue
		}
		assert.Equal(t, keysOf(wt.chains), keysOf(gt.chains), "seed %d v6=%v %s chains", seed, v6, table)
		for ch, rules := range wt.rules {
			assert.Equal(t, rules, gt.rules[ch], "seed %d v6=%v %s %s", seed, v6, table, ch)
		}
		for ch := range gt.rules {
			assert.Contains(t, wt.rules, ch, "seed %d v6=%v %s: unexpected rules in %s", seed, v6, table, ch)
		}
	}
	assert.Equal(t, keysOf(mapKeys(want)), keysOf(mapKeys(got)), "tables")
}

func mapKeys(p parsedSave) map[string]bool {
	m := map[string]bool{}
	for k := range p {
		m[k] = true
	}
	return m
}

func keysOf(m map[string]bool) string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return strings.Join(out, " ")
}
