package netfilter

import (
	"strconv"
	"strings"
)

// MHMatch is ip6tables "-p mh -m mh [!] --mh-type TYPE[:TYPE]": the
// Mobility Header's type (Packet.MHType) lies in Min..Max (0:255 when
// --mh-type is absent). A non-first fragment never matches.
type MHMatch struct {
	Min, Max uint8
	Invert   bool
}

// mhTypeNames are the Mobility Header types iptables names, with the
// short names it also accepts.
var mhTypeNames = []struct{ name, short string }{
	{"binding-refresh-request", "brr"}, {"home-test-init", "hoti"}, {"careof-test-init", "coti"},
	{"home-test", "hot"}, {"careof-test", "cot"}, {"binding-update", "bu"},
	{"binding-acknowledgement", "ba"}, {"binding-error", "be"},
}

func init() {
	registerMatch(&module{name: "mh",
		opts:       []option{{name: "mh-type", args: 1, invert: true}},
		families:   []Family{IPv6},
		newBuilder: func(*ruleCtx) builder { return &MHMatch{Max: 255} }})
}

func parseMHType(s string) (uint8, bool) {
	for i, n := range mhTypeNames {
		if strings.EqualFold(s, n.name) || strings.EqualFold(s, n.short) {
			return uint8(i), true
		}
	}
	n, ok := parseCUint(s, 255)
	return uint8(n), ok
}

func (m *MHMatch) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	s := args[0]
	lo, hi, isRange := strings.Cut(s, ":")
	bad := func(v string) error {
		return badValue("mh", "--mh-type", v, "a type 0-255 or a name such as binding-update, or a range TYPE:TYPE")
	}
	a, ok := parseMHType(lo)
	if !ok {
		return bad(lo)
	}
	b := a
	if isRange {
		b = 255
		if hi != "" {
			if b, ok = parseMHType(hi); !ok {
				return bad(hi)
			}
		}
	}
	if a > b {
		return badValue("mh", "--mh-type", s, "a range with min <= max")
	}
	m.Min, m.Max, m.Invert = a, b, inv
	return nil
}

func (m *MHMatch) done(c *ruleCtx) (any, error) {
	if err := needProto(c, "mh", 135); err != nil {
		return nil, err
	}
	return m, nil
}

// Module implements Match.
func (m *MHMatch) Module() string { return "mh" }

func (m *MHMatch) appendSave(b []byte) []byte {
	if m.Min == 0 && m.Max == 255 && !m.Invert {
		return b
	}
	b = appendNot(b, m.Invert)
	b = append(b, " --mh-type "...)
	b = strconv.AppendUint(b, uint64(m.Min), 10)
	if m.Min != m.Max {
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(m.Max), 10)
	}
	return b
}

func appendMHType(b []byte, t uint8, numeric bool) []byte {
	if !numeric && int(t) < len(mhTypeNames) {
		return append(b, mhTypeNames[t].name...)
	}
	return strconv.AppendUint(b, uint64(t), 10)
}

func (m *MHMatch) appendList(b []byte, numeric bool) []byte {
	b = append(b, " mh"...)
	if m.Min == 0 && m.Max == 255 && !m.Invert {
		return b
	}
	b = append(b, ' ')
	if m.Invert {
		b = append(b, '!')
	}
	b = appendMHType(b, m.Min, numeric)
	if m.Min != m.Max {
		b = append(b, ':')
		b = appendMHType(b, m.Max, numeric)
	}
	return b
}

func (m *MHMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.FragOffset != 0 || p.Proto != 135 {
		return false
	}
	return (p.MHType >= m.Min && p.MHType <= m.Max) != m.Invert
}
