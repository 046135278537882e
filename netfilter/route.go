package netfilter

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
)

// fib is the host's IPv4 routing with only the default rules, compiled
// for lookups: addresses and prefixes as integers, the local and main
// tables longest prefix first (then lowest metric). It is rebuilt on the
// first lookup after interfaces or routes change.
type fib struct {
	valid bool
	own   []uint32  // the interfaces' IPv4 addresses
	local []prefix4 // the local table's IPv4 routes
	main  []prefix4 // the main table's IPv4 routes
	// deflt says the default table has IPv4 routes (looked up by a scan).
	deflt bool
}

type prefix4 struct {
	net, mask uint32
	metric    uint32
	route     int // index in Host.routes
}

func addr4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func (f *fib) build(h *Host) {
	f.own, f.local, f.main, f.deflt = f.own[:0], f.local[:0], f.main[:0], false
	for _, i := range h.ifaces {
		for _, p := range i.Addrs {
			if a := p.Addr(); a.Is4() {
				f.own = append(f.own, addr4(a))
			}
		}
	}
	for i, r := range h.routes {
		if !r.Dst.Addr().Is4() {
			continue
		}
		mask := ^uint32(0)
		if bits := r.Dst.Bits(); bits < 32 {
			mask = ^(^uint32(0) >> bits)
		}
		p := prefix4{net: addr4(r.Dst.Addr()) & mask, mask: mask, metric: r.Metric, route: i}
		switch r.Table {
		case TableLocal:
			f.local = append(f.local, p)
		case TableMain:
			f.main = append(f.main, p)
		case TableDefault:
			f.deflt = true
		}
	}
	order := func(a, b prefix4) int {
		if c := cmp.Compare(b.mask, a.mask); c != 0 {
			return c
		}
		return cmp.Compare(a.metric, b.metric)
	}
	slices.SortStableFunc(f.local, order)
	slices.SortStableFunc(f.main, order)
	f.valid = true
}

// lookup4 is lookup for an IPv4 destination under the default rules:
// the local table (the host's addresses, 127.0.0.0/8, local routes),
// then main, then default.
func (f *fib) lookup4(h *Host, dst netip.Addr) decision {
	d := addr4(dst)
	if d>>24 == 127 || slices.Contains(f.own, d) {
		return decision{r: &h.loRoute, dst: netip.PrefixFrom(dst, 32), table: TableLocal}
	}
	for _, p := range f.local {
		if d&p.mask == p.net {
			r := &h.routes[p.route]
			out := decision{r: r, dst: r.Dst, table: TableLocal}
			if r.Type == RouteLocal {
				out.r = &h.loRoute
			}
			return finish(out)
		}
	}
	for _, p := range f.main {
		if d&p.mask == p.net {
			r := &h.routes[p.route]
			if r.Type == RouteThrow {
				break
			}
			out := decision{r: r, dst: r.Dst, rule: 32766, table: TableMain}
			if r.Type == RouteLocal {
				out.r = &h.loRoute
			}
			return finish(out)
		}
	}
	if f.deflt {
		if out := h.tableLookup(TableDefault, dst); out.r != nil && out.r.Type != RouteThrow {
			out.rule = 32767
			return finish(out)
		}
	}
	return decision{rule: -1, reason: ReasonNoRoute}
}

// routeFailure names why a route lookup gives no way out, or NoReason.
func routeFailure(r *Route) Reason {
	switch {
	case r == nil:
		return ReasonNoRoute
	case r.Type == RouteBlackhole:
		return ReasonBlackhole
	case r.Type == RouteUnreachable:
		return ReasonUnreachable
	case r.Type == RouteProhibit:
		return ReasonProhibited
	}
	return NoReason
}

// route returns the route a lookup with nothing but the destination
// finds (mark 0, from lo), or nil when it fails or finds no route: for
// the host's own addresses the local route (through lo; its Dst is left
// unset). The result is the host's and is read only.
func (h *Host) route(dst netip.Addr) *Route {
	d := h.lookup(&flow{dst: dst, iif: "lo"})
	if d.r == nil {
		// A rule's blackhole, unreachable or prohibit action: a route of
		// the type that fails the same way.
		switch d.reason {
		case ReasonBlackhole:
			return &h.failRoutes[0]
		case ReasonNetUnreachable:
			return &h.failRoutes[1]
		case ReasonProhibited:
			return &h.failRoutes[2]
		}
	}
	return d.r
}

// routeScan is route by a walk over the main and local tables, the
// reference the compiled IPv4 table is tested against.
func (h *Host) routeScan(dst netip.Addr) *Route {
	if h.isOwnAddr(dst) {
		return &h.loRoute
	}
	var best *Route
	for i := range h.routes {
		r := &h.routes[i]
		switch {
		case !r.Dst.Contains(dst):
		case r.Type == RouteLocal && r.Table == TableLocal:
			return &h.loRoute
		case r.Table != TableMain:
		case best == nil || r.Dst.Bits() > best.Dst.Bits():
			best = r
		}
	}
	switch {
	case best == nil || best.Type == RouteThrow:
		return nil
	case best.Type == RouteLocal:
		return &h.loRoute
	}
	return best
}

// sourceFor picks the source address of a locally generated packet (and
// MASQUERADE's address): an address of the output interface in the
// destination's family, or one borrowed from another device.
func (h *Host) sourceFor(r *Route, dst netip.Addr) netip.Addr {
	if r.Type == RouteLocal {
		return dst
	}
	if r.Src.IsValid() {
		return r.Src // the route's preferred source (ip route ... src)
	}
	// Like inet_select_addr: on the output device, the address whose
	// subnet holds the next hop, else its first address of the family;
	// a device without one borrows the first usable address of another
	// device (Calico's cali* veths have none).
	hop := dst
	if r.Gateway.IsValid() {
		hop = r.Gateway
	}
	if i := h.Interface(r.Iface); i != nil {
		first := netip.Addr{}
		for _, a := range i.Addrs {
			if a.Addr().Is4() != dst.Is4() {
				continue
			}
			if a.Contains(hop) {
				return a.Addr()
			}
			if !first.IsValid() {
				first = a.Addr()
			}
		}
		if first.IsValid() {
			return first
		}
	}
	for _, i := range h.ifaces {
		for _, a := range i.Addrs {
			if x := a.Addr(); x.Is4() == dst.Is4() && !x.IsLoopback() && !x.IsLinkLocalUnicast() {
				return x
			}
		}
	}
	return netip.Addr{}
}

// isLocal reports whether a is one of the host's addresses (the kernel's
// local routing table), including all of 127.0.0.0/8 and ::1.
func (h *Host) isLocal(a netip.Addr) bool {
	if h.isOwnAddr(a) {
		return true
	}
	for i := range h.routes {
		if r := &h.routes[i]; r.Type == RouteLocal && r.Dst.Contains(a) {
			return true
		}
	}
	return false
}

// isOwnAddr reports whether a is loopback or an interface's address.
func (h *Host) isOwnAddr(a netip.Addr) bool {
	if a.Is4() && a.As4()[0] == 127 || a == netip.IPv6Loopback() {
		return true
	}
	for _, i := range h.ifaces {
		for _, p := range i.Addrs {
			if p.Addr() == a {
				return true
			}
		}
	}
	return false
}
