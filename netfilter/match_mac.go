package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// MACMatch is "-m mac [!] --mac-source XX:XX:XX:XX:XX:XX". It never
// matches a packet without an Ethernet header (Packet.HasMAC unset),
// inverted or not, and is allowed only in PREROUTING, INPUT and FORWARD.
type MACMatch struct {
	Source [6]byte
	Invert bool
}

func init() {
	registerMatch(&module{name: "mac",
		opts:       []option{{name: "mac-source", args: 1, invert: true}},
		hooks:      []Hook{Prerouting, Input, Forward},
		newBuilder: func(*ruleCtx) builder { return &macBuilder{} }})
}

type macBuilder struct {
	m     MACMatch
	given bool
}

// parseMAC parses six colon-separated groups of one or two hex digits.
func parseMAC(s string) ([6]byte, bool) {
	var mac [6]byte
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return mac, false
	}
	for i, p := range parts {
		if len(p) < 1 || len(p) > 2 {
			return mac, false
		}
		n, err := strconv.ParseUint(p, 16, 8)
		if err != nil {
			return mac, false
		}
		mac[i] = byte(n)
	}
	return mac, true
}

func (b *macBuilder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	mac, ok := parseMAC(args[0])
	if !ok {
		return badValue("mac", "--mac-source", args[0], "a MAC address XX:XX:XX:XX:XX:XX")
	}
	b.m, b.given = MACMatch{Source: mac, Invert: inv}, true
	return nil
}

func (b *macBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("mac", "--mac-source")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *MACMatch) Module() string { return "mac" }

func appendMAC(b []byte, mac [6]byte) []byte {
	return fmt.Appendf(b, "%02x:%02x:%02x:%02x:%02x:%02x", mac[0], mac[1], mac[2], mac[3], mac[4], mac[5])
}

func (m *MACMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --mac-source "...)
	return appendMAC(b, m.Source)
}

func (m *MACMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " MAC"...)
	b = appendNot(b, m.Invert)
	b = append(b, ' ')
	return appendMAC(b, m.Source)
}

func (m *MACMatch) match(c *evalCtx) bool {
	if !c.pkt.HasMAC {
		return false
	}
	return (c.pkt.SrcMAC == m.Source) != m.Invert
}
