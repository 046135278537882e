package netfilter

import (
	"strconv"
)

// QuotaMatch is "-m quota [!] --quota BYTES": the rule's budget of bytes.
// Each packet that fits in what is left is taken from it and matches;
// the first that does not fit empties the budget, and from then on no
// packet matches (every packet does with "!"), as xt_quota does. The
// budget belongs to the loaded rule: reloading the ruleset refills it.
type QuotaMatch struct {
	Quota  uint64
	Invert bool
}

func init() {
	registerMatch(&module{name: "quota",
		opts:       []option{{name: "quota", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &quotaBuilder{} }})
}

type quotaBuilder struct {
	m     QuotaMatch
	given bool
}

func (b *quotaBuilder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	n, ok := parseCUint(args[0], 1<<64-1)
	if !ok {
		return badValue("quota", "--quota", args[0], "a number of bytes")
	}
	b.m, b.given = QuotaMatch{Quota: n, Invert: inv}, true
	return nil
}

func (b *quotaBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("quota", "--quota")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *QuotaMatch) Module() string { return "quota" }

func (m *QuotaMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --quota "...)
	return strconv.AppendUint(b, m.Quota, 10)
}

// appendList prints no "!": iptables -L does not show the inversion.
func (m *QuotaMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " quota: "...)
	b = strconv.AppendUint(b, m.Quota, 10)
	return append(b, " bytes"...)
}

// quotaState is the bytes a rule has left.
type quotaState struct{ left uint64 }

func (m *QuotaMatch) newState() any { return &quotaState{left: m.Quota} }

func (m *QuotaMatch) match(c *evalCtx) bool {
	st, _ := c.rule.extra.ext[c.matchIdx].(*quotaState)
	if st == nil {
		return false
	}
	n := uint64(c.pkt.Length)
	if st.left >= n {
		if !c.host.explaining {
			st.left -= n
		}
		return !m.Invert
	}
	if !c.host.explaining {
		st.left = 0
	}
	return m.Invert
}
