package netfilter

import (
	"strconv"
	"strings"
)

// LengthMatch is "-m length [!] --length MIN[:MAX]": the packet's length
// (the IP total length; for IPv6 the payload length plus the 40-byte
// header) must lie in Min..Max. A reversed range is kept, as iptables
// does, and matches nothing.
type LengthMatch struct {
	Min, Max uint16
	Invert   bool
}

func init() {
	registerMatch(&module{name: "length",
		opts:       []option{{name: "length", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &lengthBuilder{} }})
}

type lengthBuilder struct {
	m     LengthMatch
	given bool
}

func (b *lengthBuilder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	s := args[0]
	lo, hi, isRange := strings.Cut(s, ":")
	b.m = LengthMatch{Min: 0, Max: 0xffff, Invert: inv}
	for i, part := range []string{lo, hi} {
		if i == 1 && !isRange {
			b.m.Max = b.m.Min
			break
		}
		if part == "" && isRange {
			continue
		}
		n, ok := parseCUint(part, 0xffff)
		if !ok {
			return badValue("length", "--length", s, "a length 0-65535 or a range MIN:MAX")
		}
		if i == 0 {
			b.m.Min = uint16(n)
		} else {
			b.m.Max = uint16(n)
		}
	}
	b.given = true
	return nil
}

func (b *lengthBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("length", "--length")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *LengthMatch) Module() string { return "length" }

func (m *LengthMatch) appendRange(b []byte) []byte {
	b = strconv.AppendUint(b, uint64(m.Min), 10)
	if m.Min != m.Max {
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(m.Max), 10)
	}
	return b
}

func (m *LengthMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --length "...)
	return m.appendRange(b)
}

func (m *LengthMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " length "...)
	if m.Invert {
		b = append(b, '!')
	}
	return m.appendRange(b)
}

func (m *LengthMatch) match(c *evalCtx) bool {
	n := c.pkt.Length
	return (n >= int(m.Min) && n <= int(m.Max)) != m.Invert
}
