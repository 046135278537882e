package netfilter

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Where a target or match may run depends on the hooks that reach its
// user chain; validation first sums up each chain's modules and checks a
// chain rule by rule only when that sum says it may fail. The errors, and
// which rule they name, must not depend on that shortcut.
func TestPlacementThroughUserChains(t *testing.T) {
	nat := func(body string) string {
		return "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:A - [0:0]\n:B - [0:0]\n" + body + "COMMIT\n"
	}
	cases := []struct {
		name, rules string
		line        int // 0: accepted
		msg         string
	}{
		{"DNAT reached from PREROUTING", nat("-A PREROUTING -j A\n-A A -p tcp -j DNAT --to-destination 10.0.0.1\n"), 0, ""},
		{"DNAT reached from POSTROUTING", nat("-A POSTROUTING -j A\n-A A -p tcp -j DNAT --to-destination 10.0.0.1\n"), 9,
			"DNAT cannot be used in POSTROUTING"},
		{"the first failing chain in listing order", nat("-A POSTROUTING -j B\n-A POSTROUTING -j A\n-A B -j DNAT --to-destination 10.0.0.2\n-A A -j DNAT --to-destination 10.0.0.1\n"), 11,
			"DNAT cannot be used in POSTROUTING"},
		{"the failing rule, not the chain's first", nat("-A OUTPUT -j A\n-A A -p tcp -j DNAT --to-destination 10.0.0.1\n-A A -j MASQUERADE\n"), 10,
			"MASQUERADE cannot be used in OUTPUT"},
		{"DROP in nat", nat("-A A -j DROP\n"), 8, "DROP is not allowed in the nat table"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := NewRuleset(IPv4).Restore([]byte(c.rules), RestoreOptions{})
			if c.line == 0 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrNotAllowed)
			var pe *ParseError
			require.True(t, errors.As(err, &pe), "%v", err)
			assert.Equal(t, c.line, pe.Line, "%v", err)
			assert.Contains(t, err.Error(), c.msg)
		})
	}
}
