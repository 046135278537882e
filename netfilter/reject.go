package netfilter

import (
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
)

// rejectKind is what REJECT asked for; the evaluator carries it to the
// host, which builds the reply.
type rejectKind = RejectType

// Reply sizes and defaults of the kernel's nf_reject and icmp code.
const (
	// defaultTTL is net.ipv4.ip_default_ttl and the IPv6 default hop
	// limit, used by TCP resets and ICMP errors alike.
	defaultTTL = 64
	// icmpErrorMax bounds an ICMPv4 error (icmp_send quotes as much of the
	// offending packet as fits in 576 bytes).
	icmpErrorMax = 576
	// icmp6ErrorMax bounds an ICMPv6 error (the IPv6 minimum MTU).
	icmp6ErrorMax = 1280
)

// buildReject returns the packet the kernel sends for REJECT of p with
// reply k, and false when it sends none. Addresses and ports are swapped;
// the source of an ICMP error is the address p was sent to, which the
// host corrects for forwarded packets (rejectReply). Out names the
// interface p came in on, where the reply goes back.
//
// As in nf_send_reset and icmp_send, nothing is sent in reply to a TCP
// reset, to a non-first fragment, to an ICMP error, to a multicast or
// broadcast destination, or to an unspecified or multicast source.
func buildReject(p *Packet, k rejectKind) (Packet, bool) {
	if p.FragOffset != 0 || !p.Src.IsValid() || !p.Dst.IsValid() {
		return Packet{}, false
	}
	r := Packet{Family: p.Family, Src: p.Dst, Dst: p.Src, TTL: defaultTTL, Out: p.In}
	if k == RejectTCPReset {
		if p.Proto != inet.TCP || p.TCPFlags&inet.RST != 0 {
			return Packet{}, false
		}
		r.Proto, r.SrcPort, r.DstPort = inet.TCP, p.DstPort, p.SrcPort
		// A segment with ACK gets a bare RST carrying its ack number as
		// sequence; one without (a SYN) gets RST|ACK acknowledging it.
		// The numbers matter to conntrack when the reset is not attached
		// to a connection (sendEmitted) and is tracked like any packet.
		var ack bool
		ack, r.Seq, r.Ack = resetSeq(p)
		r.TCPFlags = inet.RST
		if ack {
			r.TCPFlags |= inet.ACK
		}
		r.Length = 20 + 20
		if p.Family == IPv6 {
			r.Length = 40 + 20
		}
		return r, true
	}
	if p.Src.IsUnspecified() || p.Src.IsMulticast() || p.Dst.IsMulticast() {
		return Packet{}, false
	}
	if p.Family == IPv6 {
		// ICMPv6 error types are below 128; informational ones above.
		if p.Proto == inet.ICMPv6 && p.ICMPType < 128 {
			return Packet{}, false
		}
		r.Proto, r.ICMPType, r.ICMPCode = inet.ICMPv6, 1, rejectTypes[k].code
		r.Length = min(40+8+p.Length, icmp6ErrorMax)
		return r, true
	}
	if p.Dst == netip.AddrFrom4([4]byte{255, 255, 255, 255}) {
		return Packet{}, false
	}
	if p.Proto == inet.ICMP && icmpIsError(p.ICMPType) {
		return Packet{}, false
	}
	r.Proto, r.ICMPType, r.ICMPCode = inet.ICMP, 3, rejectTypes[k].code
	// icmp_send marks errors as internetwork control, keeping the TOS bits.
	r.TOS = p.TOS&0x1e | 0xc0
	r.Length = min(20+8+p.Length, icmpErrorMax)
	return r, true
}

// icmpIsError reports whether an ICMPv4 type is an error (or unknown),
// which the kernel never answers with another error.
func icmpIsError(t uint8) bool {
	switch t {
	case 3, 4, 5, 11, 12: // unreachable, source quench, redirect, time exceeded, parameter problem
		return true
	}
	return t > 18
}

// rejectReply is buildReject with what only the host knows: an ICMP error
// about a packet not addressed to the host (forwarded, or sent out by it)
// comes from the preferred source address of the route back to the
// sender, and a packet to a broadcast address gets no reply. A TCP reset
// always comes from the address the offending segment was sent to.
func (h *Host) rejectReply(p *Packet, k rejectKind) (Packet, bool) {
	r, ok := buildReject(p, k)
	if !ok {
		return r, false
	}
	for _, rt := range h.routes {
		if rt.Type == RouteBroadcast && rt.Dst.Contains(p.Dst) && rt.Dst.Bits() == p.Dst.BitLen() {
			return Packet{}, false
		}
	}
	if k != RejectTCPReset && !h.isLocal(p.Dst) {
		// icmp_route_lookup: no source yet, mark 0, the error's TOS.
		d := h.lookup(&flow{dst: p.Src, iif: "lo", tos: r.TOS, proto: uint8(r.Proto), uid: 0})
		if d.reason != NoReason {
			return Packet{}, false // no way back: icmp_send sends nothing
		}
		back := d.r
		r.Src = h.sourceFor(back, p.Src)
		if !r.Src.IsValid() {
			return Packet{}, false
		}
	}
	if r.Proto != inet.TCP {
		r.Inner = InnerHeader{Proto: p.Proto, Src: p.Src, Dst: p.Dst, SrcPort: p.SrcPort, DstPort: p.DstPort,
			ICMPType: p.ICMPType, ICMPCode: p.ICMPCode, ICMPID: p.ICMPID}
	}
	return r, true
}

// unreachableReply is the ICMP destination unreachable the input routing
// decision answers a packet it cannot route with (ip_error,
// ip6_pkt_discard): net unreachable for no route or an unreachable rule,
// host unreachable for an unreachable route, administratively
// prohibited for a prohibit route or rule (IPv6: no route, or
// administratively prohibited). A blackhole answers nothing, and neither
// does a host that does not forward.
func (h *Host) unreachableReply(p *Packet, reason Reason) (Packet, bool) {
	var code uint8
	switch reason {
	case ReasonNoRoute, ReasonNetUnreachable:
		code = 0
	case ReasonUnreachable:
		code = 1
		if p.Family == IPv6 {
			code = 0
		}
	case ReasonProhibited:
		code = 13
		if p.Family == IPv6 {
			code = 1
		}
	default:
		return Packet{}, false
	}
	r, ok := h.rejectReply(p, RejectICMPPortUnreachable)
	if !ok {
		return r, false
	}
	r.ICMPType, r.ICMPCode = 3, code
	if p.Family == IPv6 {
		r.ICMPType = 1
	}
	return r, true
}

// timeExceededReply is the ICMP error ip_forward and ip6_forward send back
// for a packet whose TTL or hop limit would reach 0 (ICMP time exceeded,
// type 11 code 0; ICMPv6 type 3 code 0). It is built like REJECT's ICMP
// errors (same source choice, quoting, size bounds and exclusions: no
// error about an error, a fragment or a broadcast). The kernel rate-limits
// ICMP errors per destination (net.ipv4.icmp_ratelimit, a token bucket
// with a burst of several packets); packetwalk does not model the limit,
// so a long burst of such packets gets more replies than the kernel sends.
func (h *Host) timeExceededReply(p *Packet) (Packet, bool) {
	r, ok := h.rejectReply(p, RejectICMPPortUnreachable)
	if !ok {
		return r, false
	}
	if r.Family == IPv6 {
		r.ICMPType, r.ICMPCode = 3, 0
	} else {
		r.ICMPType, r.ICMPCode = 11, 0
	}
	return r, true
}
