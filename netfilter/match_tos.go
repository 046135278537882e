package netfilter

import (
	"fmt"
	"strings"
)

// TOSMatch is "-m tos [!] --tos VALUE[/MASK]" or "[!] --tos NAME": the
// TOS byte (IPv4) or traffic class (IPv6), Packet.TOS, masked with Mask
// must equal Value. A number without a mask has mask 0xff; a name
// (Minimize-Delay, ...) has mask 0x3f, as iptables 1.8.9 stores it.
type TOSMatch struct {
	Value, Mask uint8
	Invert      bool
}

// tosNames are the symbolic values of --tos, matched without regard to
// case, each with mask 0x3f.
var tosNames = []struct {
	name  string
	value uint8
}{
	{"Minimize-Cost", 0x02}, {"Maximize-Reliability", 0x04}, {"Maximize-Throughput", 0x08},
	{"Minimize-Delay", 0x10}, {"Normal-Service", 0x00},
}

type tosBuilder struct {
	m     TOSMatch
	given bool
}

func init() {
	registerMatch(&module{name: "tos",
		opts:       []option{{name: "tos", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &tosBuilder{} }})
}

func (b *tosBuilder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	s := args[0]
	b.given = true
	v, mask, hasMask := strings.Cut(s, "/")
	if n, ok := parseCUint(v, 0xff); ok {
		b.m = TOSMatch{Value: uint8(n), Mask: 0xff, Invert: inv}
		if hasMask {
			k, ok := parseCUint(mask, 0xff)
			if !ok {
				return badValue("tos", "--tos", s, "VALUE[/MASK] with numbers 0-255 or a name such as Minimize-Delay")
			}
			b.m.Mask = uint8(k)
		}
		return nil
	}
	for _, t := range tosNames {
		if strings.EqualFold(t.name, s) {
			b.m = TOSMatch{Value: t.value, Mask: 0x3f, Invert: inv}
			return nil
		}
	}
	return badValue("tos", "--tos", s, "VALUE[/MASK] with numbers 0-255 or a name such as Minimize-Delay")
}

func (b *tosBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("tos", "--tos")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *TOSMatch) Module() string { return "tos" }

func (m *TOSMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	return fmt.Appendf(b, " --tos 0x%02x/0x%02x", m.Value, m.Mask)
}

func (m *TOSMatch) appendList(b []byte, numeric bool) []byte {
	b = append(b, " tos match"...)
	if m.Invert {
		b = append(b, '!')
	}
	if !numeric && m.Mask == 0x3f {
		for _, t := range tosNames {
			if t.value == m.Value {
				b = append(b, ' ')
				return append(b, t.name...)
			}
		}
	}
	return fmt.Appendf(b, "0x%02x/0x%02x", m.Value, m.Mask)
}

func (m *TOSMatch) match(c *evalCtx) bool {
	return (c.pkt.TOS&m.Mask == m.Value) != m.Invert
}
