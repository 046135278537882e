package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"strconv"
	"strings"
)

// ICMPMatch is "-p icmp -m icmp [!] --icmp-type TYPE[/CODE]": it matches
// ICMP messages of Type with a code in CodeMin..CodeMax. Type 255 ("any")
// matches every ICMP message.
type ICMPMatch struct {
	Type             uint8
	CodeMin, CodeMax uint8
	Invert           bool
}

// ICMPv6Match is "-p ipv6-icmp -m icmp6 [!] --icmpv6-type TYPE[/CODE]"
// for ip6tables. Unlike ICMPMatch, type 255 has no special meaning.
type ICMPv6Match struct {
	Type             uint8
	CodeMin, CodeMax uint8
	Invert           bool
}

// icmpName is an entry of iptables' ICMP type table: a name for a type
// and a code range.
type icmpName struct {
	name       string
	typ        uint8
	cmin, cmax uint8
}

// icmpNames is iptables 1.8.9's table for --icmp-type ("iptables -p icmp
// -h" lists it). Aliases follow the name they stand for, so a lookup by
// value finds the primary name.
var icmpNames = []icmpName{
	{"any", 0xff, 0, 0xff},
	{"echo-reply", 0, 0, 0xff},
	{"pong", 0, 0, 0xff},
	{"destination-unreachable", 3, 0, 0xff},
	{"network-unreachable", 3, 0, 0},
	{"host-unreachable", 3, 1, 1},
	{"protocol-unreachable", 3, 2, 2},
	{"port-unreachable", 3, 3, 3},
	{"fragmentation-needed", 3, 4, 4},
	{"source-route-failed", 3, 5, 5},
	{"network-unknown", 3, 6, 6},
	{"host-unknown", 3, 7, 7},
	{"network-prohibited", 3, 9, 9},
	{"host-prohibited", 3, 10, 10},
	{"TOS-network-unreachable", 3, 11, 11},
	{"TOS-host-unreachable", 3, 12, 12},
	{"communication-prohibited", 3, 13, 13},
	{"host-precedence-violation", 3, 14, 14},
	{"precedence-cutoff", 3, 15, 15},
	{"source-quench", 4, 0, 0xff},
	{"redirect", 5, 0, 0xff},
	{"network-redirect", 5, 0, 0},
	{"host-redirect", 5, 1, 1},
	{"TOS-network-redirect", 5, 2, 2},
	{"TOS-host-redirect", 5, 3, 3},
	{"echo-request", 8, 0, 0xff},
	{"ping", 8, 0, 0xff},
	{"router-advertisement", 9, 0, 0xff},
	{"router-solicitation", 10, 0, 0xff},
	{"time-exceeded", 11, 0, 0xff},
	{"ttl-exceeded", 11, 0, 0xff},
	{"ttl-zero-during-transit", 11, 0, 0},
	{"ttl-zero-during-reassembly", 11, 1, 1},
	{"parameter-problem", 12, 0, 0xff},
	{"ip-header-bad", 12, 0, 0},
	{"required-option-missing", 12, 1, 1},
	{"timestamp-request", 13, 0, 0xff},
	{"timestamp-reply", 14, 0, 0xff},
	{"address-mask-request", 17, 0, 0xff},
	{"address-mask-reply", 18, 0, 0xff},
}

// icmpv6Names is ip6tables 1.8.9's table for --icmpv6-type.
var icmpv6Names = []icmpName{
	{"destination-unreachable", 1, 0, 0xff},
	{"no-route", 1, 0, 0},
	{"communication-prohibited", 1, 1, 1},
	{"beyond-scope", 1, 2, 2},
	{"address-unreachable", 1, 3, 3},
	{"port-unreachable", 1, 4, 4},
	{"failed-policy", 1, 5, 5},
	{"reject-route", 1, 6, 6},
	{"packet-too-big", 2, 0, 0xff},
	{"time-exceeded", 3, 0, 0xff},
	{"ttl-exceeded", 3, 0, 0xff},
	{"ttl-zero-during-transit", 3, 0, 0},
	{"ttl-zero-during-reassembly", 3, 1, 1},
	{"parameter-problem", 4, 0, 0xff},
	{"bad-header", 4, 0, 0},
	{"unknown-header-type", 4, 1, 1},
	{"unknown-option", 4, 2, 2},
	{"echo-request", 128, 0, 0xff},
	{"ping", 128, 0, 0xff},
	{"echo-reply", 129, 0, 0xff},
	{"pong", 129, 0, 0xff},
	{"router-solicitation", 133, 0, 0xff},
	{"router-advertisement", 134, 0, 0xff},
	{"neighbour-solicitation", 135, 0, 0xff},
	{"neighbor-solicitation", 135, 0, 0xff},
	{"neighbour-advertisement", 136, 0, 0xff},
	{"neighbor-advertisement", 136, 0, 0xff},
	{"redirect", 137, 0, 0xff},
}

func init() {
	registerMatch(&module{name: "icmp", families: []Family{IPv4},
		opts:       []option{{name: "icmp-type", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &icmpBuilder{} }})
	registerMatch(&module{name: "icmp6", families: []Family{IPv6},
		opts:       []option{{name: "icmpv6-type", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &icmpBuilder{v6: true} }})
}

type icmpBuilder struct {
	v6              bool
	given           bool
	typ, cmin, cmax uint8
	inv             bool
}

// parseICMPType parses a type name (a case-insensitive prefix of one
// entry, as iptables accepts), "TYPE" or "TYPE/CODE".
func parseICMPType(s string, table []icmpName, mod, opt string) (typ, cmin, cmax uint8, err error) {
	found := -1
	for i, n := range table {
		if len(s) > 0 && len(s) <= len(n.name) && strings.EqualFold(n.name[:len(s)], s) {
			if found >= 0 {
				return 0, 0, 0, badValue(mod, opt, s, fmt.Sprintf("an unambiguous type name (%s or %s?)", table[found].name, n.name))
			}
			found = i
		}
	}
	if found >= 0 {
		n := table[found]
		return n.typ, n.cmin, n.cmax, nil
	}
	ts, cs, hasCode := strings.Cut(s, "/")
	t, ok := parseCUint(ts, 255)
	if !ok {
		return 0, 0, 0, badValue(mod, opt, s, "a type name, a type number 0-255 or TYPE/CODE")
	}
	if !hasCode {
		return uint8(t), 0, 0xff, nil
	}
	c, ok := parseCUint(cs, 255)
	if !ok {
		return 0, 0, 0, badValue(mod, opt, s, "a code number 0-255 after the slash")
	}
	return uint8(t), uint8(c), uint8(c), nil
}

func (b *icmpBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	table, mod := icmpNames, "icmp"
	if b.v6 {
		table, mod = icmpv6Names, "icmp6"
	}
	t, lo, hi, err := parseICMPType(args[0], table, mod, "--"+opt)
	if err != nil {
		return err
	}
	b.typ, b.cmin, b.cmax, b.inv, b.given = t, lo, hi, inv, true
	return nil
}

func (b *icmpBuilder) done(c *ruleCtx) (any, error) {
	if b.v6 {
		if !b.given {
			return nil, mustSpecify("icmp6", "--icmpv6-type")
		}
		if err := needProto(c, "icmp6", inet.ICMPv6); err != nil {
			return nil, err
		}
		return &ICMPv6Match{Type: b.typ, CodeMin: b.cmin, CodeMax: b.cmax, Invert: b.inv}, nil
	}
	if !b.given {
		return nil, mustSpecify("icmp", "--icmp-type")
	}
	if err := needProto(c, "icmp", inet.ICMP); err != nil {
		return nil, err
	}
	return &ICMPMatch{Type: b.typ, CodeMin: b.cmin, CodeMax: b.cmax, Invert: b.inv}, nil
}

// Module implements Match.
func (m *ICMPMatch) Module() string { return "icmp" }

// Module implements Match.
func (m *ICMPv6Match) Module() string { return "icmp6" }

func appendICMPSave(b []byte, opt string, typ, cmin, cmax uint8, inv, anyName bool) []byte {
	b = appendNot(b, inv)
	b = append(b, " --"...)
	b = append(b, opt...)
	b = append(b, ' ')
	if anyName && typ == 0xff {
		return append(b, "any"...)
	}
	b = strconv.AppendUint(b, uint64(typ), 10)
	if cmin != 0 || cmax != 0xff {
		b = append(b, '/')
		b = strconv.AppendUint(b, uint64(cmin), 10)
	}
	return b
}

// appendICMPList renders "icmptype 3 code 3" (numeric), "icmp !type 8"
// and, with names, "icmp echo-request" or "icmp !port-unreachable".
func appendICMPList(b []byte, prefix string, table []icmpName, typ, cmin, cmax uint8, inv, numeric bool) []byte {
	b = append(b, ' ')
	b = append(b, prefix...)
	if !numeric {
		for _, n := range table {
			if n.typ == typ && n.cmin == cmin && n.cmax == cmax {
				b = append(b, ' ')
				if inv {
					b = append(b, '!')
				}
				return append(b, n.name...)
			}
		}
	}
	if inv {
		b = append(b, " !"...)
	}
	b = append(b, "type "...)
	b = strconv.AppendUint(b, uint64(typ), 10)
	switch {
	case cmin == cmax:
		b = append(b, " code "...)
		b = strconv.AppendUint(b, uint64(cmin), 10)
	case cmin != 0 || cmax != 0xff:
		b = append(b, " codes "...)
		b = strconv.AppendUint(b, uint64(cmin), 10)
		b = append(b, '-')
		b = strconv.AppendUint(b, uint64(cmax), 10)
	}
	return b
}

func (m *ICMPMatch) appendSave(b []byte) []byte {
	return appendICMPSave(b, "icmp-type", m.Type, m.CodeMin, m.CodeMax, m.Invert, true)
}

func (m *ICMPv6Match) appendSave(b []byte) []byte {
	return appendICMPSave(b, "icmpv6-type", m.Type, m.CodeMin, m.CodeMax, m.Invert, false)
}

func (m *ICMPMatch) appendList(b []byte, numeric bool) []byte {
	return appendICMPList(b, "icmp", icmpNames, m.Type, m.CodeMin, m.CodeMax, m.Invert, numeric)
}

func (m *ICMPv6Match) appendList(b []byte, numeric bool) []byte {
	return appendICMPList(b, "ipv6-icmp", icmpv6Names, m.Type, m.CodeMin, m.CodeMax, m.Invert, numeric)
}

func (m *ICMPMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.FragOffset != 0 {
		return false
	}
	ok := m.Type == 0xff || p.ICMPType == m.Type && p.ICMPCode >= m.CodeMin && p.ICMPCode <= m.CodeMax
	return ok != m.Invert
}

func (m *ICMPv6Match) match(c *evalCtx) bool {
	p := c.pkt
	ok := p.ICMPType == m.Type && p.ICMPCode >= m.CodeMin && p.ICMPCode <= m.CodeMax
	return ok != m.Invert
}
