package netfilter

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
)

// fib is the host's IPv4 routing table compiled for lookups: addresses
// and prefixes as integers, routes longest prefix first. It is rebuilt on
// the first lookup after interfaces or routes change.
type fib struct {
	valid bool
	own   []uint32  // the interfaces' IPv4 addresses
	local []prefix4 // IPv4 routes of type local
	other []prefix4 // the other IPv4 routes, longest prefix first, then in the order added
}

type prefix4 struct {
	net, mask uint32
	route     int // index in Host.routes
}

func addr4(a netip.Addr) uint32 {
	b := a.As4()
	return binary.BigEndian.Uint32(b[:])
}

func (f *fib) build(h *Host) {
	f.own, f.local, f.other = f.own[:0], f.local[:0], f.other[:0]
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
		p := prefix4{net: addr4(r.Dst.Addr()) & mask, mask: mask, route: i}
		if r.Type == RouteLocal {
			f.local = append(f.local, p)
		} else {
			f.other = append(f.other, p)
		}
	}
	slices.SortStableFunc(f.other, func(a, b prefix4) int { return cmp.Compare(b.mask, a.mask) })
	f.valid = true
}

// lookup4 is route for an IPv4 destination: local when the address is
// the host's or any local route holds it, else the longest prefix.
func (f *fib) lookup4(h *Host, dst netip.Addr) *Route {
	d := addr4(dst)
	if d>>24 == 127 || slices.Contains(f.own, d) {
		return &h.loRoute
	}
	for _, p := range f.local {
		if d&p.mask == p.net {
			return &h.loRoute
		}
	}
	for _, p := range f.other {
		if d&p.mask == p.net {
			return &h.routes[p.route]
		}
	}
	return nil
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

// route returns the longest-prefix route to dst, or nil: for the host's
// own addresses the local route (through lo; its Dst is left unset). The
// result is the host's and is read only. IPv4 destinations are looked up
// in the compiled table (fib), since this runs for every packet.
func (h *Host) route(dst netip.Addr) *Route {
	if dst.Is4() {
		if !h.fib.valid {
			h.fib.build(h)
		}
		return h.fib.lookup4(h, dst)
	}
	return h.routeScan(dst)
}

// routeScan is route by a walk over the routes, for IPv6 (and the
// reference the compiled IPv4 table is tested against).
func (h *Host) routeScan(dst netip.Addr) *Route {
	if h.isOwnAddr(dst) {
		return &h.loRoute
	}
	var best *Route
	for i := range h.routes {
		r := &h.routes[i]
		switch {
		case !r.Dst.Contains(dst):
		case r.Type == RouteLocal:
			return &h.loRoute
		case best == nil || r.Dst.Bits() > best.Dst.Bits():
			best = r
		}
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
