package netfiltertest

import (
	"encoding/binary"
	"net/netip"

	"pgregory.net/rapid"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// PacketOptions configures [Packets]. The zero value draws IPv4 packets
// between addresses of 10.0.0.0/8 and 192.168.0.0/16.
type PacketOptions struct {
	// Src and Dst are the prefixes addresses are drawn from; all must be
	// of one family. Empty means 10.0.0.0/8 and 192.168.0.0/16 (or
	// fd00::/64 and 2001:db8::/64 when Family is IPv6).
	Src, Dst []netip.Prefix
	// Family is used when Src and Dst are empty; otherwise the prefixes
	// decide.
	Family netfilter.Family
	// Protos are the protocols drawn from; empty means TCP, UDP, SCTP and
	// ICMP (ICMPv6 for IPv6).
	Protos []inet.Proto
	// Ports are the destination ports drawn from; empty means any port
	// from 1 to 65535. Source ports are always 1024 to 65535.
	Ports []uint16
}

// tcpFlagChoices are the flag combinations real connections carry.
var tcpFlagChoices = []inet.TCPFlags{
	inet.SYN, inet.SYN | inet.ACK, inet.ACK, inet.PSH | inet.ACK,
	inet.FIN | inet.ACK, inet.RST, inet.RST | inet.ACK,
}

// Packets returns a generator of well-formed packets as a host receives
// them: addresses in the configured prefixes, a protocol with ports, TCP
// flags or ICMP type, a TTL and a length consistent with the headers.
func Packets(opts PacketOptions) *rapid.Generator[netfilter.Packet] {
	src, dst := opts.Src, opts.Dst
	v6 := opts.Family == netfilter.IPv6
	if len(src) > 0 {
		v6 = src[0].Addr().Is6()
	} else if len(dst) > 0 {
		v6 = dst[0].Addr().Is6()
	}
	if len(src) == 0 {
		src = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
		if v6 {
			src = []netip.Prefix{netip.MustParsePrefix("fd00::/64")}
		}
	}
	if len(dst) == 0 {
		dst = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}
		if v6 {
			dst = []netip.Prefix{netip.MustParsePrefix("2001:db8::/64")}
		}
	}
	protos := opts.Protos
	if len(protos) == 0 {
		icmp := inet.ICMP
		if v6 {
			icmp = inet.ICMPv6
		}
		protos = []inet.Proto{inet.TCP, inet.UDP, inet.SCTP, icmp}
	}
	return rapid.Custom(func(t *rapid.T) netfilter.Packet {
		p := netfilter.Packet{Family: netfilter.IPv4, TTL: 64}
		ipHdr := 20
		if v6 {
			p.Family, ipHdr = netfilter.IPv6, 40
		}
		p.Src = AddrIn(rapid.SampledFrom(src).Draw(t, "srcPrefix"), rapid.Uint64().Draw(t, "srcHost"))
		p.Dst = AddrIn(rapid.SampledFrom(dst).Draw(t, "dstPrefix"), rapid.Uint64().Draw(t, "dstHost"))
		p.Proto = rapid.SampledFrom(protos).Draw(t, "proto")
		p.TTL = uint8(rapid.IntRange(2, 255).Draw(t, "ttl"))
		payload := rapid.IntRange(0, 1400).Draw(t, "payload")
		switch p.Proto {
		case inet.TCP, inet.UDP, inet.SCTP:
			p.SrcPort = uint16(rapid.IntRange(1024, 65535).Draw(t, "srcPort"))
			if len(opts.Ports) > 0 {
				p.DstPort = rapid.SampledFrom(opts.Ports).Draw(t, "dstPort")
			} else {
				p.DstPort = uint16(rapid.IntRange(1, 65535).Draw(t, "dstPort"))
			}
		}
		switch p.Proto {
		case inet.TCP:
			p.TCPFlags = rapid.SampledFrom(tcpFlagChoices).Draw(t, "tcpFlags")
			p.Length = ipHdr + 20 + payload
		case inet.UDP:
			p.Length = ipHdr + 8 + payload
		case inet.SCTP:
			// One chunk: INIT (type 1) opens an association, DATA (0)
			// belongs to one.
			p.SCTPChunks[0] = netfilter.SCTPChunk{Type: rapid.SampledFrom([]uint8{1, 0}).Draw(t, "sctpChunk")}
			p.NumSCTPChunks = 1
			p.Length = ipHdr + 12 + 20 + payload
		case inet.ICMP, inet.ICMPv6:
			// Echo request or reply.
			types := []uint8{8, 0}
			if p.Proto == inet.ICMPv6 {
				types = []uint8{128, 129}
			}
			p.ICMPType = rapid.SampledFrom(types).Draw(t, "icmpType")
			p.ICMPID = uint16(rapid.Uint16().Draw(t, "icmpID"))
			p.Length = ipHdr + 8 + payload
		default:
			p.Length = ipHdr + payload
		}
		return p
	})
}

// AddrIn returns the address of prefix whose host part is n modulo the
// size of the prefix (at most 2^64 hosts are reachable), skipping the
// all-zeros host of IPv4 prefixes shorter than /31.
func AddrIn(prefix netip.Prefix, n uint64) netip.Addr {
	base := prefix.Masked().Addr()
	hostBits := base.BitLen() - prefix.Bits()
	if hostBits == 0 {
		return base
	}
	if hostBits < 64 {
		n %= 1 << hostBits
	}
	if base.Is4() && hostBits >= 2 && n == 0 {
		n = 1
	}
	b := base.As16()
	low := binary.BigEndian.Uint64(b[8:]) + n // no carry: host bits are zero in base
	binary.BigEndian.PutUint64(b[8:], low)
	a := netip.AddrFrom16(b)
	if base.Is4() {
		return a.Unmap()
	}
	return a
}
