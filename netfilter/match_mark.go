package netfilter

import (
	"strconv"
)

// MarkMatch is "-m mark [!] --mark VALUE[/MASK]": it matches when
// (packet mark & mask) == Value, or the opposite with Invert.
//
// Mask is the /MASK: nil compares all 32 bits, as iptables does when no
// mask is given, so MarkMatch{Value: 0x4000} built in Go is "--mark 0x4000".
// The parser leaves it nil for an all-ones mask.
type MarkMatch struct {
	Value  uint32
	Mask   *uint32
	Invert bool
}

// mask is the mask the match applies.
func (m *MarkMatch) mask() uint32 {
	if m.Mask == nil {
		return 0xffffffff
	}
	return *m.Mask
}

func init() {
	registerMatch(&module{name: "mark",
		opts:       []option{{name: "mark", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &markBuilder{} }})
}

type markBuilder struct {
	m     MarkMatch
	given bool
}

func (b *markBuilder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	v, m, ok := parseMarkArg(args[0])
	if !ok {
		return badValue("mark", "--mark", args[0], "a 32-bit value with an optional /MASK (0x4000/0x4000)")
	}
	b.m, b.given = MarkMatch{Value: v, Invert: inv}, true
	if m != 0xffffffff {
		b.m.Mask = &m
	}
	return nil
}

func (b *markBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("mark", "--mark")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *MarkMatch) Module() string { return "mark" }

func (m *MarkMatch) appendValue(b []byte) []byte {
	b = append(b, "0x"...)
	b = strconv.AppendUint(b, uint64(m.Value), 16)
	if mask := m.mask(); mask != 0xffffffff {
		b = append(b, "/0x"...)
		b = strconv.AppendUint(b, uint64(mask), 16)
	}
	return b
}

func (m *MarkMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --mark "...)
	return m.appendValue(b)
}

func (m *MarkMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " mark match"...)
	b = appendNot(b, m.Invert)
	b = append(b, ' ')
	return m.appendValue(b)
}

func (m *MarkMatch) match(c *evalCtx) bool {
	return (c.pkt.Mark&m.mask() == m.Value) != m.Invert
}
