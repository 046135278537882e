package netfilter

import (
	"fmt"
	"strconv"
)

// TTLMatch is "-m ttl" (IPv4, the TTL) or "-m hl" (IPv6, the hop
// limit), both read from Packet.TTL: "[!] --ttl-eq N", "--ttl-lt N" or
// "--ttl-gt N" (--hl-eq, --hl-lt, --hl-gt for hl). Only the equality
// test may be inverted, and exactly one test is given.
//
// Every field is exported: TTLMatch{Op: TTLGt, Value: 5} is "-m ttl
// --ttl-gt 5", and with HL set "-m hl --hl-gt 5".
type TTLMatch struct {
	Op    TTLOp
	Value uint8
	// HL makes it ip6tables' hl match (the hop limit); false is the ttl
	// match of iptables.
	HL bool
}

// TTLOp is the comparison of a ttl or hl match, with the kernel's values.
type TTLOp uint8

// TTL comparisons.
const (
	TTLEq TTLOp = iota
	TTLNe
	TTLLt
	TTLGt
)

type ttlBuilder struct {
	m     TTLMatch
	given string
}

func init() {
	for _, p := range []string{"ttl", "hl"} {
		fam := IPv4
		if p == "hl" {
			fam = IPv6
		}
		hl := p == "hl"
		registerMatch(&module{name: p,
			opts: []option{
				// "--ttl"/"--hl" is iptables' old spelling of -eq.
				{name: p + "-eq", args: 1, invert: true, aliases: []string{p}},
				{name: p + "-lt", args: 1},
				{name: p + "-gt", args: 1},
			},
			families:   []Family{fam},
			newBuilder: func(*ruleCtx) builder { return &ttlBuilder{m: TTLMatch{HL: hl}} }})
	}
}

func (b *ttlBuilder) name() string {
	if b.m.HL {
		return "hl"
	}
	return "ttl"
}

func (b *ttlBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	mod := b.name()
	if b.given != "" {
		return fmt.Errorf("%w: %s: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, mod, opt, b.given)
	}
	n, ok := parseCUint(args[0], 255)
	if !ok {
		return badValue(mod, "--"+opt, args[0], "a number 0-255")
	}
	b.given = opt
	b.m.Value = uint8(n)
	switch opt[len(opt)-2:] {
	case "eq":
		b.m.Op = TTLEq
		if inv {
			b.m.Op = TTLNe
		}
	case "lt":
		b.m.Op = TTLLt
	default:
		b.m.Op = TTLGt
	}
	return nil
}

func (b *ttlBuilder) done(*ruleCtx) (any, error) {
	if b.given == "" {
		p := b.name()
		return nil, fmt.Errorf("%w: %s match: specify one of --%s-eq, --%s-lt, --%s-gt", ErrMissingArgument, p, p, p, p)
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *TTLMatch) Module() string {
	if m.HL {
		return "hl"
	}
	return "ttl"
}

func (m *TTLMatch) appendSave(b []byte) []byte {
	p := m.Module()
	if m.Op == TTLNe {
		b = append(b, " !"...)
	}
	b = append(b, " --"...)
	b = append(b, p...)
	switch m.Op {
	case TTLEq, TTLNe:
		b = append(b, "-eq "...)
	case TTLLt:
		b = append(b, "-lt "...)
	default:
		b = append(b, "-gt "...)
	}
	return strconv.AppendUint(b, uint64(m.Value), 10)
}

func (m *TTLMatch) appendList(b []byte, _ bool) []byte {
	if m.HL {
		b = append(b, " HL match HL "...)
	} else {
		b = append(b, " TTL match TTL "...)
	}
	b = append(b, [...]string{"==", "!=", "<", ">"}[m.Op&3]...)
	b = append(b, ' ')
	return strconv.AppendUint(b, uint64(m.Value), 10)
}

func (m *TTLMatch) match(c *evalCtx) bool {
	t := c.pkt.TTL
	switch m.Op {
	case TTLEq:
		return t == m.Value
	case TTLNe:
		return t != m.Value
	case TTLLt:
		return t < m.Value
	}
	return t > m.Value
}
