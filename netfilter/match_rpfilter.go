package netfilter

import (
	"net/netip"
)

// RPFilterMatch is "-m rpfilter": reverse-path filtering. It matches
// when the route back to the packet's source leaves through the interface
// the packet came in on (any interface with Loose), as the host's routing
// table says; a route to a local address counts only with AcceptLocal.
// Packets from lo always match, as do packets from 0.0.0.0 to the limited
// broadcast or a local multicast group (DHCP). Invert inverts the
// result. The lookup back goes through the host's routing rules from lo;
// ValidMark gives it the packet's mark (else mark 0).
type RPFilterMatch struct {
	Loose, ValidMark, AcceptLocal, Invert bool
}

func init() {
	registerMatch(&module{name: "rpfilter",
		opts:       []option{{name: "loose"}, {name: "validmark"}, {name: "accept-local"}, {name: "invert"}},
		newBuilder: func(*ruleCtx) builder { return &RPFilterMatch{} },
		tables:     []TableID{Raw, Mangle},
		hooks:      []Hook{Prerouting}})
}

func (m *RPFilterMatch) set(_ *ruleCtx, opt string, _ bool, _ []string) error {
	switch opt {
	case "loose":
		m.Loose = true
	case "validmark":
		m.ValidMark = true
	case "accept-local":
		m.AcceptLocal = true
	case "invert":
		m.Invert = true
	}
	return nil
}

func (m *RPFilterMatch) done(*ruleCtx) (any, error) { return m, nil }

// Module implements Match.
func (m *RPFilterMatch) Module() string { return "rpfilter" }

func (m *RPFilterMatch) appendFlags(b []byte, pre string) []byte {
	for _, f := range []struct {
		on   bool
		name string
	}{{m.Loose, "loose"}, {m.ValidMark, "validmark"}, {m.AcceptLocal, "accept-local"}, {m.Invert, "invert"}} {
		if f.on {
			b = append(b, ' ')
			b = append(b, pre...)
			b = append(b, f.name...)
		}
	}
	return b
}

func (m *RPFilterMatch) appendSave(b []byte) []byte { return m.appendFlags(b, "--") }

func (m *RPFilterMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " rpfilter"...)
	return m.appendFlags(b, "")
}

var limitedBroadcast = netip.AddrFrom4([4]byte{255, 255, 255, 255})

// match follows ipt_rpfilter's and ip6t_rpfilter's rpfilter_mt.
func (m *RPFilterMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.In == "lo" {
		return !m.Invert
	}
	src := p.Src
	if p.Family == IPv4 && src == netip.IPv4Unspecified() {
		d := p.Dst.As4()
		if p.Dst == limitedBroadcast || d[0] == 224 && d[1] == 0 && d[2] == 0 {
			return !m.Invert
		}
	}
	if p.Family == IPv6 && src == netip.IPv6Unspecified() {
		return !m.Invert
	}
	k := flow{dst: src, src: p.Dst, iif: "lo", tos: p.TOS}
	if m.ValidMark {
		k.mark = p.Mark
	}
	r := c.host.lookup(&k).r
	ok := false
	switch {
	case r == nil:
	case r.Type == RouteLocal:
		// The local route's device is the interface holding the address.
		ok = m.AcceptLocal && (m.Loose || c.host.ifaceHolds(p.In, src))
	case r.Type != RouteUnicast:
	default:
		ok = m.Loose || r.Iface == p.In
	}
	return ok != m.Invert
}

// ifaceHolds reports whether interface name has address a.
func (h *Host) ifaceHolds(name string, a netip.Addr) bool {
	if i := h.byName[name]; i != nil {
		for _, p := range i.Addrs {
			if p.Addr() == a {
				return true
			}
		}
	}
	return false
}
