package netfilter

import (
	"fmt"
	"strings"
)

// DSCPMatch is "-m dscp [!] --dscp VALUE" or "[!] --dscp-class CLASS":
// the DSCP field (the upper six bits of the IPv4 TOS byte or the IPv6
// traffic class, Packet.TOS) must equal Value. A class name is stored as
// its value and printed as --dscp.
type DSCPMatch struct {
	Value  uint8
	Invert bool
}

// dscpClasses are the class names --dscp-class accepts, with their
// values (the DiffServ codepoints of RFC 2474, 2597 and 3246).
var dscpClasses = []struct {
	name  string
	value uint8
}{
	{"CS0", 0}, {"CS1", 8}, {"CS2", 16}, {"CS3", 24}, {"CS4", 32}, {"CS5", 40}, {"CS6", 48}, {"CS7", 56},
	{"BE", 0}, {"AF11", 10}, {"AF12", 12}, {"AF13", 14}, {"AF21", 18}, {"AF22", 20}, {"AF23", 22},
	{"AF31", 26}, {"AF32", 28}, {"AF33", 30}, {"AF41", 34}, {"AF42", 36}, {"AF43", 38}, {"EF", 46},
}

// dscpClass returns the codepoint of a class name, in any letter case
// (--dscp-class, DSCP --set-dscp-class).
func dscpClass(name string) (uint8, bool) {
	// iptables compares only the class name's length of the input, so
	// what follows a class is ignored ("EFxyz", "CS10", a CR: see
	// docs/kernel-notes.md).
	for _, c := range dscpClasses {
		if len(name) >= len(c.name) && strings.EqualFold(c.name, name[:len(c.name)]) {
			return c.value, true
		}
	}
	return 0, false
}

type dscpBuilder struct {
	m     DSCPMatch
	given string // the option given, for the exclusion message
}

func init() {
	registerMatch(&module{name: "dscp",
		opts: []option{
			{name: "dscp", args: 1, invert: true},
			{name: "dscp-class", args: 1, invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &dscpBuilder{} }})
}

func (b *dscpBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	if b.given != "" {
		return fmt.Errorf("%w: dscp: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, b.given, opt)
	}
	b.given = opt
	if opt == "dscp" {
		n, ok := parseCUint(args[0], 63)
		if !ok {
			return badValue("dscp", "--dscp", args[0], "a DSCP value 0-63")
		}
		b.m = DSCPMatch{Value: uint8(n), Invert: inv}
		return nil
	}
	if v, ok := dscpClass(args[0]); ok {
		b.m = DSCPMatch{Value: v, Invert: inv}
		return nil
	}
	return badValue("dscp", "--dscp-class", args[0], "a class such as BE, CS0-CS7, AF11-AF43 or EF")
}

func (b *dscpBuilder) done(*ruleCtx) (any, error) {
	if b.given == "" {
		return nil, mustSpecify("dscp", "--dscp")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *DSCPMatch) Module() string { return "dscp" }

func (m *DSCPMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	return fmt.Appendf(b, " --dscp 0x%02x", m.Value)
}

func (m *DSCPMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " DSCP match "...)
	if m.Invert {
		b = append(b, '!')
	}
	return fmt.Appendf(b, "0x%02x", m.Value)
}

func (m *DSCPMatch) match(c *evalCtx) bool {
	return (c.pkt.TOS>>2 == m.Value) != m.Invert
}
