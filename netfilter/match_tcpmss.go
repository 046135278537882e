package netfilter

import (
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
)

// TCPMSSMatch is "-p tcp -m tcpmss [!] --mss VALUE[:VALUE]": the value
// of the segment's MSS option (Packet.MSS, present when TCPOptions has
// kind 2) must lie in Min..Max. As in the kernel's xt_tcpmss, a segment
// without the option matches only the inverted test.
type TCPMSSMatch struct {
	Min, Max uint16
	Invert   bool
}

type tcpmssBuilder struct {
	m     TCPMSSMatch
	given bool
}

func init() {
	registerMatch(&module{name: "tcpmss",
		opts:       []option{{name: "mss", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &tcpmssBuilder{} }})
}

func (b *tcpmssBuilder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	s := args[0]
	lo, hi, isRange := strings.Cut(s, ":")
	b.m = TCPMSSMatch{Min: 0, Max: 0xffff, Invert: inv}
	parse := func(v string) (uint16, error) {
		n, ok := parseCUint(v, 0xffff)
		if !ok {
			return 0, badValue("tcpmss", "--mss", v, "a value 0-65535 or a range MIN:MAX")
		}
		return uint16(n), nil
	}
	var err error
	switch {
	case !isRange:
		if b.m.Min, err = parse(s); err != nil {
			return err
		}
		b.m.Max = b.m.Min
	default:
		if lo != "" {
			if b.m.Min, err = parse(lo); err != nil {
				return err
			}
		}
		if hi != "" {
			if b.m.Max, err = parse(hi); err != nil {
				return err
			}
		}
		if b.m.Min > b.m.Max {
			return badValue("tcpmss", "--mss", s, "a range with MIN <= MAX")
		}
	}
	b.given = true
	return nil
}

func (b *tcpmssBuilder) done(c *ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("tcpmss", "--mss")
	}
	if err := needProto(c, "tcpmss", inet.TCP); err != nil {
		return nil, err
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *TCPMSSMatch) Module() string { return "tcpmss" }

func (m *TCPMSSMatch) appendRange(b []byte) []byte {
	b = strconv.AppendUint(b, uint64(m.Min), 10)
	if m.Min != m.Max {
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(m.Max), 10)
	}
	return b
}

func (m *TCPMSSMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --mss "...)
	return m.appendRange(b)
}

func (m *TCPMSSMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " tcpmss match "...)
	if m.Invert {
		b = append(b, '!')
	}
	return m.appendRange(b)
}

func (m *TCPMSSMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.Proto != inet.TCP || !p.hasTCPOption(2) {
		return m.Invert
	}
	return (p.MSS >= m.Min && p.MSS <= m.Max) != m.Invert
}
