package netfilter

import (
	"fmt"
	"slices"
	"strings"
)

// IPv6HeaderMatch is ip6tables "-m ipv6header [!] --header NAMES
// [--soft]": the set of extension headers of the packet
// (Packet.IPv6Exts) equals Headers, or with --soft includes them;
// inverted, it differs from Headers, or with --soft lacks each of them.
type IPv6HeaderMatch struct {
	Headers uint8
	Soft    bool
	Invert  bool
}

// ipv6HeaderNames are the header names of --header, from the highest
// mask bit down, with the names and numbers iptables also accepts.
var ipv6HeaderNames = []struct {
	bit   uint8
	name  string
	alias []string
}{
	{ExtHopByHop, "hop-by-hop", []string{"hop", "0"}},
	{ExtDstOpts, "ipv6-opts", []string{"dst", "60"}},
	{ExtRouting, "ipv6-route", []string{"route", "43"}},
	{ExtFragment, "ipv6-frag", []string{"frag", "44"}},
	{ExtAuth, "ah", []string{"auth", "51"}},
	{ExtESP, "esp", []string{"50"}},
	{ExtNone, "ipv6-nonxt", []string{"none", "59"}},
	{ExtProto, "protocol", []string{"prot", "255"}},
}

func init() {
	registerMatch(&module{name: "ipv6header",
		opts: []option{
			{name: "header", args: 1, invert: true},
			{name: "soft"},
		},
		families:   []Family{IPv6},
		newBuilder: func(*ruleCtx) builder { return &ipv6headerBuilder{} }})
}

type ipv6headerBuilder struct {
	m     IPv6HeaderMatch
	given bool
}

func (b *ipv6headerBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	if opt == "soft" {
		b.m.Soft = true
		return nil
	}
	var mask uint8
	for _, n := range strings.Split(args[0], ",") {
		found := false
		for _, h := range ipv6HeaderNames {
			// Names are case-sensitive here ("HOP" is unknown).
			if n == h.name || slices.Contains(h.alias, n) {
				mask |= h.bit
				found = true
			}
		}
		if !found {
			return badValue("ipv6header", "--header", n, "header names such as hop-by-hop, ipv6-opts, ipv6-route, ipv6-frag, ah, esp, ipv6-nonxt, protocol")
		}
	}
	b.m.Headers, b.m.Invert, b.given = mask, inv, true
	return nil
}

func (b *ipv6headerBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("ipv6header", "--header")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *IPv6HeaderMatch) Module() string { return "ipv6header" }

func (m *IPv6HeaderMatch) appendNames(b []byte) []byte {
	sep := false
	for _, h := range ipv6HeaderNames {
		if m.Headers&h.bit != 0 {
			if sep {
				b = append(b, ',')
			}
			sep = true
			b = append(b, h.name...)
		}
	}
	return b
}

func (m *IPv6HeaderMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --header "...)
	b = m.appendNames(b)
	if m.Soft {
		b = append(b, " --soft"...)
	}
	return b
}

func (m *IPv6HeaderMatch) appendList(b []byte, numeric bool) []byte {
	b = append(b, " ipv6header flags:"...)
	if m.Invert {
		b = append(b, '!')
	}
	if numeric {
		b = fmt.Appendf(b, "0x%02X", m.Headers)
	} else {
		b = m.appendNames(b)
	}
	if m.Soft {
		b = append(b, " soft"...)
	}
	return b
}

func (m *IPv6HeaderMatch) match(c *evalCtx) bool {
	have := c.pkt.IPv6Exts
	if m.Soft {
		inv := uint8(0)
		if m.Invert {
			inv = m.Headers
		}
		return (have^m.Headers^inv)&m.Headers == 0
	}
	return (have == m.Headers) != m.Invert
}
