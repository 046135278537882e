package netfilter

// maxHelperLen is the longest helper name the match stores (char[30]
// less the NUL); iptables cuts longer names.
const maxHelperLen = 29

// HelperMatch is "-m helper [!] --helper NAME": it matches packets of
// connections that a conntrack helper (ftp, sip, ...) set up as RELATED.
// packetwalk models no conntrack helpers, so no connection has one:
// "--helper X" never matches and "! --helper X" always does, which is
// what the kernel does for packets without a helper-created connection.
type HelperMatch struct {
	Name   string
	Invert bool
}

func init() {
	registerMatch(&module{name: "helper",
		opts:       []option{{name: "helper", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &helperBuilder{} }})
}

type helperBuilder struct {
	m     HelperMatch
	given bool
}

func (b *helperBuilder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	s := args[0]
	if len(s) > maxHelperLen {
		s = s[:maxHelperLen]
	}
	b.m, b.given = HelperMatch{Name: s, Invert: inv}, true
	return nil
}

func (b *helperBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("helper", "--helper")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *HelperMatch) Module() string { return "helper" }

func (m *HelperMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --helper "...)
	return appendQuoted(b, m.Name)
}

func (m *HelperMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " helper match "...)
	if m.Invert {
		b = append(b, "! "...)
	}
	b = append(b, '"')
	b = append(b, m.Name...)
	return append(b, '"')
}

func (m *HelperMatch) match(*evalCtx) bool { return m.Invert }
