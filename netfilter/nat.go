package netfilter

import (
	"net/netip"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
)

// natKind says which NAT target fired.
type natKind uint8

const (
	natDNAT natKind = iota + 1
	natSNAT
	natMasquerade
	natRedirect
)

// natRequest is a NAT target's decision for the first packet of a
// connection; the host turns it into a conntrack binding. Targets fill it
// and return vAccept.
type natRequest struct {
	kind               natKind
	minAddr, maxAddr   netip.Addr // invalid: keep the address (REDIRECT, MASQUERADE fill it in)
	minPort, maxPort   uint16     // 0: keep the port
	random, randomFull bool
	persistent         bool
	// offset asks for the shifted port mapping of PORT-PORT/BASE:
	// port = minPort + (original - basePort) mod range.
	offset   bool
	basePort uint16
}

// natApplies reports whether the nat table runs for this packet: only for
// the first packet of a connection, whose binding of the hook's kind has
// not been set up yet, and only while some rule needs conntrack
// (otherwise nat chains are never traversed: docs/kernel-notes.md,
// "Conntrack is off until a rule needs it").
func (w *walk) natApplies(hk Hook) bool {
	e := w.cur.Entry
	if e == nil || e.Confirmed() {
		return false
	}
	return !e.NATDone(natManip(hk))
}

// natManip is the kind of manipulation the nat table performs at a hook:
// destination at PREROUTING and OUTPUT, source at INPUT and POSTROUTING.
func natManip(hk Hook) conntrack.NATKind {
	if hk == Prerouting || hk == Output {
		return conntrack.DNAT
	}
	return conntrack.SNAT
}

// bindNAT records the binding chosen by the nat table at hook hk for the
// connection of walk w (or the identity binding when no NAT target
// fired), as nf_nat_setup_info and nf_nat_alloc_null_binding do.
func (h *Host) bindNAT(w *walk, hk Hook, req *natRequest) bool {
	e, p := w.cur.Entry, w.pkt
	k := natManip(hk)
	if req == nil {
		return h.ct.SetupNullNAT(e, k) == nil
	}
	r := conntrack.NATRange{MinAddr: req.minAddr, MaxAddr: req.maxAddr, MinPort: req.minPort, MaxPort: req.maxPort}
	if req.random {
		r.Flags |= conntrack.NATRandom
	}
	if req.randomFull {
		r.Flags |= conntrack.NATRandomFully
	}
	if req.persistent {
		r.Flags |= conntrack.NATPersistent
	}
	if req.offset && req.minPort != 0 {
		r.Flags |= conntrack.NATOffset
		r.Base = req.basePort
	}
	switch req.kind {
	case natMasquerade:
		// The address of the output interface, as the kernel picks it
		// (the preferred source towards the destination). For IPv6 the
		// kernel's source selection (ipv6_dev_get_saddr) prefers the
		// destination itself when it is local: a locally generated
		// packet to one of the host's addresses, masqueraded on lo,
		// gets that address as its source.
		a := h.sourceFor(&Route{Iface: p.Out}, p.Dst)
		if p.Family == IPv6 && h.isLocal(p.Dst) {
			a = p.Dst
		}
		if !a.IsValid() {
			return false // no device has an address to borrow: the kernel drops
		}
		r.MinAddr, r.MaxAddr = a, a
	case natRedirect:
		a := h.redirectAddr(p)
		if !a.IsValid() {
			return false // the kernel drops when the interface has no address
		}
		r.MinAddr, r.MaxAddr = a, a
	}
	return h.ct.SetupNAT(e, k, r) == nil
}

// translate rewrites the walk's packet from its connection's bindings for
// the manipulation of hook hk (kernel nf_nat_packet).
func (w *walk) translate(hk Hook) {
	e, p := w.cur.Entry, w.pkt
	if e == nil {
		return
	}
	k := natManip(hk)
	addr, port, ok := e.Rewrite(k, w.cur.Dir)
	if !ok {
		return // most packets: nothing to rewrite at this hook
	}
	if w.cur.State == conntrack.StateRelated && conntrack.IsICMPError(p.Proto, p.ICMPType) {
		// An ICMP error about a NATed connection: the outer addresses and
		// the quoted header are rewritten (nf_nat_icmp_reply_translation).
		outer, inner, changed := e.TranslateRelated(k, w.cur.Dir, packetTuple(p), innerTuple(&p.Inner))
		if changed {
			p.Src, p.Dst = outer.Src, outer.Dst
			in := &p.Inner
			in.Src, in.Dst = inner.Src, inner.Dst
			if in.Proto.HasPorts() {
				in.SrcPort, in.DstPort = inner.SrcPort, inner.DstPort
			} else if in.Proto == inet.ICMP || in.Proto == inet.ICMPv6 {
				in.ICMPID = inner.SrcPort
			}
		}
		return
	}
	// Field by field, as Entry.Translate does with a tuple: this runs for
	// every packet of a NATed connection.
	if k == conntrack.SNAT {
		p.Src = addr
		if p.Proto.HasPorts() {
			p.SrcPort = port
		}
	} else {
		p.Dst = addr
		if p.Proto.HasPorts() {
			p.DstPort = port
		}
	}
	if (p.Proto == inet.ICMP || p.Proto == inet.ICMPv6) && !conntrack.IsICMPError(p.Proto, p.ICMPType) {
		p.ICMPID = port // the echo identifier follows the binding
	}
}

// packetTuple is the conntrack tuple of a packet as it is now.
func packetTuple(p *Packet) conntrack.Tuple {
	t := conntrack.Tuple{Src: p.Src, Dst: p.Dst, Proto: p.Proto}
	switch {
	case p.Proto.HasPorts():
		t.SrcPort, t.DstPort = p.SrcPort, p.DstPort
	case p.Proto == inet.ICMP || p.Proto == inet.ICMPv6:
		t.SrcPort, t.ICMPType, t.ICMPCode = p.ICMPID, p.ICMPType, p.ICMPCode
	}
	return t
}

// redirectAddr is where REDIRECT sends a packet (nf_nat_redirect_ipv4/6):
// loopback for a locally generated one, else the first address the kernel
// lists on the input interface, whatever the packet's destination. That
// list keeps IPv4 primaries in the order they were added, host-scope ones
// (127.0.0.0/8, which ip address add gives host scope) first and
// secondaries last, so the first is the first address added; IPv6 lists
// higher scopes first and, within a scope, the newest address first, and
// REDIRECT skips IPv4-mapped addresses (and tentative ones, which
// packetwalk does not model) and, for a link-local or site-local
// destination, addresses of another scope. An interface without a usable
// address gives none: the kernel drops the packet (docs/kernel-notes.md).
func (h *Host) redirectAddr(p *Packet) netip.Addr {
	v4 := p.Family == IPv4
	i := h.Interface(p.In)
	if p.In == "" || i == nil && p.In == "lo" {
		// Locally generated, or received on a loopback device the host
		// does not list (it has 127.0.0.1 and ::1).
		if v4 {
			return netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
		return netip.IPv6Loopback()
	}
	if i == nil {
		return netip.Addr{}
	}
	var best netip.Addr
	bestScope, want := -1, 0
	if !v4 {
		want = v6DstScope(p.Dst)
	}
	for _, pr := range i.Addrs {
		a := pr.Addr()
		if a.Is4() != v4 {
			continue
		}
		if v4 {
			if a.IsLoopback() {
				return a // host scope: listed before the others
			}
			if !best.IsValid() {
				best = a
			}
			continue
		}
		s := v6Scope(a)
		if a.Is4In6() || want != 0 && s != want {
			continue
		}
		if s >= bestScope {
			best, bestScope = a, s
		}
	}
	return best
}

// v6Scope ranks an IPv6 address's scope as the kernel orders a device's
// addresses (ipv6_addr_src_scope): loopback, link-local, site-local,
// global.
func v6Scope(a netip.Addr) int {
	switch {
	case a.IsLoopback():
		return 1
	case a.IsLinkLocalUnicast():
		return 2
	case a.As16()[0] == 0xfe && a.As16()[1]&0xc0 == 0xc0: // fec0::/10
		return 5
	}
	return 14
}

// v6DstScope is the scope a REDIRECTed packet's destination asks of the
// address (ipv6_addr_scope): that of a loopback, link-local or site-local
// unicast or multicast destination, in v6Scope's ranks, and 0 (any) for a
// global one.
func v6DstScope(a netip.Addr) int {
	if a.IsMulticast() {
		switch a.As16()[1] & 0x0f {
		case 1:
			return 1
		case 2:
			return 2
		case 5:
			return 5
		}
		return 0
	}
	if s := v6Scope(a); s != 14 {
		return s
	}
	return 0
}
