package netfilter

import (
	"fmt"
	"strings"
)

// RealmMatch is "-m realm [!] --realm VALUE[/MASK]" (IPv4): the realm of
// the packet's route, masked, must equal Value. The model's routes carry
// no realm, so the caller gives it in Packet.Realm. A name is looked up
// in iproute2's realm table as installed (only "cosmos", 0).
type RealmMatch struct {
	Value, Mask uint32
	Invert      bool
}

// realmNames is /etc/iproute2/rt_realms as iproute2 installs it.
var realmNames = map[uint32]string{0: "cosmos"}

// deviceGroupNames is /etc/iproute2/group as iproute2 installs it.
var deviceGroupNames = map[uint32]string{0: "default"}

// parseValMask parses "NAME", "VALUE" or "VALUE/MASK" as
// xtables_parse_val_mask does with a name table: a name has mask
// 0xffffffff, as has a value without one.
func parseValMask(mod, opt, s string, names map[uint32]string) (v, mask uint32, err error) {
	for k, n := range names {
		if n == s {
			return k, 0xffffffff, nil
		}
	}
	vs, ms, hasMask := strings.Cut(s, "/")
	n, ok := parseCUint(vs, 0xffffffff)
	if !ok {
		return 0, 0, badValue(mod, opt, s, "a name, a number or VALUE/MASK")
	}
	mask = 0xffffffff
	if hasMask {
		k, ok := parseCUint(ms, 0xffffffff)
		if !ok {
			return 0, 0, badValue(mod, opt, s, "VALUE/MASK with numbers 0-4294967295")
		}
		mask = uint32(k)
	}
	return uint32(n), mask, nil
}

// appendValMask prints as xtables_print_val_mask: "0xV/0xM", or with a
// full mask the name when there is one and not numeric, else "0xV".
func appendValMask(b []byte, v, mask uint32, names map[uint32]string, numeric bool) []byte {
	if mask != 0xffffffff {
		return fmt.Appendf(b, "0x%x/0x%x", v, mask)
	}
	if n, ok := names[v]; ok && !numeric {
		return append(b, n...)
	}
	return fmt.Appendf(b, "0x%x", v)
}

type realmBuilder struct {
	m     RealmMatch
	given bool
}

func init() {
	registerMatch(&module{name: "realm",
		opts:       []option{{name: "realm", args: 1, invert: true}},
		families:   []Family{IPv4},
		hooks:      []Hook{Postrouting, Forward, Output, Input},
		newBuilder: func(*ruleCtx) builder { return &realmBuilder{} }})
}

func (b *realmBuilder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	v, mask, err := parseValMask("realm", "--realm", args[0], realmNames)
	if err != nil {
		return err
	}
	b.m, b.given = RealmMatch{Value: v, Mask: mask, Invert: inv}, true
	return nil
}

func (b *realmBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("realm", "--realm")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *RealmMatch) Module() string { return "realm" }

func (m *RealmMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --realm "...)
	return appendValMask(b, m.Value, m.Mask, realmNames, false)
}

func (m *RealmMatch) appendList(b []byte, numeric bool) []byte {
	if m.Invert {
		b = append(b, " !"...)
	}
	b = append(b, " realm "...)
	return appendValMask(b, m.Value, m.Mask, realmNames, numeric)
}

func (m *RealmMatch) match(c *evalCtx) bool {
	return (c.pkt.Realm&m.Mask == m.Value) != m.Invert
}
