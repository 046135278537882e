package netfilter

import "net/netip"

// addrType classifies a for -m addrtype as the kernel does, as a bit set of
// AddrType values; iface, when not empty, limits the lookup to that
// interface (--limit-iface-in/--limit-iface-out).
//
// IPv4 follows inet_dev_addr_type as observed on Linux 6.18: 0.0.0.0 and
// 255.255.255.255 are BROADCAST and 224.0.0.0/4 MULTICAST without a lookup
// (0.0.0.1 is not special); every other
// address is looked up in the local routing table only (the host's
// addresses, 127.0.0.0/8 on "lo", the broadcast address of each subnet
// shorter than /31, and RouteLocal/RouteBroadcast routes), and an address
// found there on another interface than iface, or not found, is UNICAST.
// Blackhole, unreachable and prohibit routes live in the main table, so the
// kernel reports their addresses as UNICAST, and so does this model
// (observed by injecting packets into a namespace, see TestKernelAddrType).
//
// IPv6 follows the kernel's match_type6: the result is the set of every
// property that holds: UNSPEC for ::, MULTICAST for ff00::/8, UNICAST
// otherwise, and from the route lookup (multicast always routes when an
// interface has IPv6) LOCAL (an address of the host, or of
// iface when given), UNREACHABLE (no route, or a blackhole, unreachable or
// prohibit route, or, when the lookup is bound to iface, an address
// routed elsewhere) and ANYCAST (the subnet-router address of a connected
// prefix shorter than /127).
func (h *Host) addrType(a netip.Addr, iface string) uint16 {
	a = a.Unmap()
	if a.Is4() {
		return uint16(h.addrType4(a, iface))
	}
	return uint16(h.addrType6(a, iface))
}

// loopbackNet4 is the local route the kernel adds on lo.
var loopbackNet4 = netip.PrefixFrom(netip.AddrFrom4([4]byte{127, 0, 0, 0}), 8)

func (h *Host) addrType4(a netip.Addr, iface string) AddrType {
	if a == netip.AddrFrom4([4]byte{255, 255, 255, 255}) || a == netip.IPv4Unspecified() {
		return AddrBroadcast
	}
	if a.As4()[0]&0xf0 == 224 {
		return AddrMulticast
	}
	best, bestBits, dev := AddrUnicast, -1, ""
	consider := func(p netip.Prefix, t AddrType, on string) {
		if p.Contains(a) && p.Bits() > bestBits {
			best, bestBits, dev = t, p.Bits(), on
		}
	}
	consider(loopbackNet4, AddrLocal, "lo")
	for _, i := range h.ifaces {
		for _, p := range i.Addrs {
			if !p.Addr().Is4() {
				continue
			}
			consider(netip.PrefixFrom(p.Addr(), 32), AddrLocal, i.Name)
			if p.Bits() < 31 {
				consider(netip.PrefixFrom(lastAddr(p), 32), AddrBroadcast, i.Name)
			}
		}
	}
	for _, r := range h.routes {
		switch r.Type {
		case RouteLocal:
			consider(r.Dst, AddrLocal, r.Iface)
		case RouteBroadcast:
			consider(r.Dst, AddrBroadcast, r.Iface)
		}
	}
	if iface != "" && dev != iface {
		return AddrUnicast
	}
	return best
}

// lastAddr returns the highest address of p (its broadcast address).
func lastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().As4()
	host := uint32(1)<<(32-p.Bits()) - 1
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) | host
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func (h *Host) addrType6(a netip.Addr, iface string) AddrType {
	var t AddrType
	switch {
	case a.IsUnspecified():
		t = AddrUnspec
	case a.IsMulticast():
		t = AddrMulticast
	default:
		t = AddrUnicast
	}
	if iface != "" && h.hasAddrOn(a, iface) {
		t |= AddrLocal
	}
	if t == AddrMulticast && h.hasIPv6Iface() {
		return t // every IPv6 interface has ff00::/8 in the local table
	}
	r := h.route(a)
	if r == nil {
		return t&^AddrLocal | AddrUnreachable
	}
	switch r.Type {
	case RouteBlackhole, RouteUnreachable, RouteProhibit:
		t = t&^AddrLocal | AddrUnreachable
	case RouteLocal:
		if iface == "" {
			t |= AddrLocal
		} else if !h.hasAddrOn(a, iface) {
			// The lookup is bound to iface, where the address is not.
			return t | AddrUnreachable
		}
	case RouteUnicast:
		if iface != "" && r.Iface != iface {
			return t | AddrUnreachable
		}
		if !r.Gateway.IsValid() && r.Dst.Bits() < 127 && r.Dst.Addr() == a {
			t |= AddrAnycast
		}
	}
	return t
}

// hasAddrOn reports whether a is assigned to interface iface (::1 and
// 127.0.0.0/8 belong to "lo").
func (h *Host) hasAddrOn(a netip.Addr, iface string) bool {
	if iface == "lo" && (a == netip.IPv6Loopback() || a.Is4() && a.As4()[0] == 127) {
		return true
	}
	if i := h.Interface(iface); i != nil {
		for _, p := range i.Addrs {
			if p.Addr() == a {
				return true
			}
		}
	}
	return false
}

func (h *Host) hasIPv6Iface() bool {
	for _, i := range h.ifaces {
		for _, p := range i.Addrs {
			if p.Addr().Is6() {
				return true
			}
		}
	}
	return false
}
