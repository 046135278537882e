package netfiltertest_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// TestKernelRulesetsRestore checks that the documents Rulesets generates
// are valid for the real iptables-restore and ip6tables-restore, by
// loading 100 of each (Example(i), deterministic) into a fresh namespace.
func TestKernelRulesetsRestore(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNS(t, "pw-nftest-")
	for _, tc := range []struct {
		fam  netfilter.Family
		tool string
	}{{netfilter.IPv4, "iptables-restore"}, {netfilter.IPv6, "ip6tables-restore"}} {
		g := netfiltertest.Rulesets(netfiltertest.RulesetOptions{Family: tc.fam})
		for i := range 100 {
			doc := g.Example(i)
			_, stderr, err := ns.Exec(doc, tc.tool)
			require.NoError(t, err, "%s example %d: %s\n%s", tc.tool, i, stderr, doc)
		}
	}
}
