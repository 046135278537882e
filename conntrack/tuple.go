package conntrack

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
)

// Tuple identifies one direction of a connection, like the kernel's
// struct nf_conntrack_tuple. It is comparable and is used as a map key.
//
// For TCP and UDP, SrcPort and DstPort are the ports. For ICMP and ICMPv6,
// SrcPort holds the echo identifier (the kernel keeps it in the source part
// of the tuple for both directions), DstPort is zero, and ICMPType/ICMPCode
// hold the message type and code. For other protocols only the addresses,
// Proto and Zone matter. The zero Tuple is not a valid tuple.
type Tuple struct {
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	ICMPType         uint8
	ICMPCode         uint8
	Proto            inet.Proto
	Zone             uint16
}

// TupleFrom returns the TCP/UDP (or portless) tuple src → dst for proto.
func TupleFrom(proto inet.Proto, src, dst netip.AddrPort) Tuple {
	return Tuple{Src: src.Addr(), Dst: dst.Addr(), SrcPort: src.Port(), DstPort: dst.Port(), Proto: proto}
}

// ICMPTuple returns the tuple of an ICMP (or ICMPv6, chosen by the address
// family) message from src to dst with the given type, code and identifier.
func ICMPTuple(src, dst netip.Addr, typ, code uint8, id uint16) Tuple {
	p := inet.ICMP
	if src.Is6() && !src.Is4In6() {
		p = inet.ICMPv6
	}
	return Tuple{Src: src, Dst: dst, SrcPort: id, ICMPType: typ, ICMPCode: code, Proto: p}
}

// IsICMP reports whether the tuple is ICMP or ICMPv6.
func (t Tuple) IsICMP() bool { return t.Proto.IsICMP() }

// SrcAddrPort returns the source address and port.
func (t Tuple) SrcAddrPort() netip.AddrPort { return netip.AddrPortFrom(t.Src, t.SrcPort) }

// DstAddrPort returns the destination address and port.
func (t Tuple) DstAddrPort() netip.AddrPort { return netip.AddrPortFrom(t.Dst, t.DstPort) }

// Reverse returns the tuple of a packet travelling the other way, as the
// kernel's nf_ct_invert_tuple does: addresses and ports swap; for ICMP the
// identifier stays and a request type becomes its reply type (and back).
// Reverse of a tuple whose ICMP type has no inverse keeps the type.
func (t Tuple) Reverse() Tuple {
	var r Tuple
	t.reverseInto(&r)
	return r
}

// reverseInto writes t.Reverse() into r field by field: copying t whole
// and then changing fields stalls on the partial stores (NAT setup and
// clash checks reverse tuples several times per connection).
func (t *Tuple) reverseInto(r *Tuple) {
	r.Src, r.Dst, r.Proto, r.Zone = t.Dst, t.Src, t.Proto, t.Zone
	r.ICMPType, r.ICMPCode = t.ICMPType, t.ICMPCode
	if t.IsICMP() {
		r.SrcPort, r.DstPort = t.SrcPort, t.DstPort
		if inv, ok := icmpInverse(t.Proto, t.ICMPType); ok {
			r.ICMPType = inv
		}
		return
	}
	r.SrcPort, r.DstPort = t.DstPort, t.SrcPort
}

// String returns the tuple in conntrack's key=value form, e.g.
// "tcp src=10.0.0.1 dst=10.0.0.2 sport=1234 dport=80".
func (t Tuple) String() string {
	b := []byte(t.Proto.ConntrackName())
	b = append(b, ' ')
	b = appendTuple(b, t)
	if t.Zone != 0 {
		b = fmt.Appendf(b, "zone=%d ", t.Zone)
	}
	return string(b[:len(b)-1])
}

// icmpInverse maps ICMP query types to their answers and back
// (kernel: invmap in nf_conntrack_proto_icmp.c / icmpv6).
func icmpInverse(proto inet.Proto, typ uint8) (uint8, bool) {
	if proto == inet.ICMP {
		switch typ {
		case 8:
			return 0, true
		case 0:
			return 8, true
		case 13:
			return 14, true
		case 14:
			return 13, true
		case 15:
			return 16, true
		case 16:
			return 15, true
		case 17:
			return 18, true
		case 18:
			return 17, true
		}
		return 0, false
	}
	switch typ {
	case 128:
		return 129, true
	case 129:
		return 128, true
	case 139:
		return 140, true
	case 140:
		return 139, true
	}
	return 0, false
}

// icmpIsQuery reports whether an ICMP message of this type may open a
// connection (echo, timestamp, info and address-mask requests; ICMPv6 echo
// request and node information query).
func icmpIsQuery(proto inet.Proto, typ uint8) bool {
	if proto == inet.ICMP {
		return typ == 8 || typ == 13 || typ == 15 || typ == 17
	}
	return typ == 128 || typ == 139
}

// IsICMPError reports whether an ICMP message of this type carries the
// header of the packet that caused it (destination unreachable, source
// quench, redirect, time exceeded, parameter problem; ICMPv6 1–4).
func IsICMPError(proto inet.Proto, typ uint8) bool {
	switch proto {
	case inet.ICMP:
		return typ == 3 || typ == 4 || typ == 5 || typ == 11 || typ == 12
	case inet.ICMPv6:
		return typ >= 1 && typ <= 4
	}
	return false
}
