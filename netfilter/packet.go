package netfilter

import (
	"net/netip"

	"github.com/packetwalk/packetwalk/inet"
)

// Packet is what netfilter sees of a packet: the header fields rules test,
// the interfaces it crosses and its mark. A Packet is a plain value; the
// host works on a copy and returns the packet as it leaves in Result.
type Packet struct {
	Family           Family
	Proto            inet.Proto
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16 // TCP, UDP, SCTP, UDP-Lite
	TCPFlags         inet.TCPFlags
	ICMPType         uint8 // ICMP and ICMPv6
	ICMPCode         uint8
	ICMPID           uint16 // echo request and reply identifier
	// Length is the IP total length in bytes (header included).
	Length int
	TTL    uint8 // the hop limit for IPv6
	TOS    uint8
	ID     uint16 // IPv4 identification
	// FragOffset is the IPv4 fragment offset in 8-byte units; a non-zero
	// offset is what -f matches.
	FragOffset uint16
	// In and Out are the input and output interfaces, empty when the
	// packet has none at a hook (no In on OUTPUT, no Out on PREROUTING).
	In, Out string
	// Mark is the packet's firewall mark (skb->mark).
	Mark uint32
	// Priority is skb->priority, the traffic-control class that CLASSIFY
	// sets (major<<16 | minor).
	Priority uint32
	// SrcMAC is the Ethernet source of a received frame (the mac match);
	// HasMAC reports whether it is known.
	SrcMAC [6]byte
	HasMAC bool
	// Seq, Ack and Window are the TCP sequence number, acknowledgement
	// number and (unscaled) window field; conntrack checks every segment
	// against the connection's windows, as the kernel does.
	Seq, Ack uint32
	Window   uint16
	// WScale is the shift of the window scale option (kind 3) and SACKEnd
	// the highest right edge of the SACK blocks (kind 5), each meaningful
	// when TCPOptions has its kind (see SetTCPOption).
	WScale  uint8
	SACKEnd uint32
	// MSS is the value of the maximum segment size option (kind 2, 4
	// bytes long), meaningful when TCPOptions has kind 2. TCPMSS lowers
	// it, or adds the option (growing TCPHeaderLen and Length by 4).
	MSS uint16
	// TCPHeaderLen is the TCP header length in bytes, options included;
	// 0 means 20 (no options). IPHeaderLen is the length of the IP header
	// up to the transport header (IPv4 options, IPv6 extension headers);
	// 0 means 20 for IPv4 and 40 for IPv6. The payload is what Length
	// holds beyond both.
	TCPHeaderLen uint8
	IPHeaderLen  uint16
	// TCPOptions records which TCP option kinds the header carries, as a
	// bit set indexed by kind, for --tcp-option.
	TCPOptions [4]uint64
	// PktType is the link-layer class of the frame (skb->pkt_type) for
	// -m pkttype; PktAuto derives it from the destination address.
	PktType PktType
	// UID and GID own the local socket that sent the packet; HasSocket
	// says there is one (-m owner).
	UID, GID  uint32
	HasSocket bool
	// Groups[:NumGroups] are the socket owner's supplementary groups
	// (--suppl-groups). Fixed arrays keep Packet comparable.
	Groups    [16]uint32
	NumGroups uint8
	// PhysIn and PhysOut are the bridge ports of a bridged frame, and
	// Bridged says the frame crossed a bridge (-m physdev).
	PhysIn, PhysOut string
	Bridged         bool
	// SCTPChunks[:NumSCTPChunks] are the chunks of an SCTP packet in
	// order, for -m sctp --chunk-types; a packet with none is malformed
	// there.
	SCTPChunks    [8]SCTPChunk
	NumSCTPChunks uint8
	// Inner is, for an ICMP or ICMPv6 error, the header of the packet the
	// error quotes; conntrack relates the error to that packet's
	// connection. Zero otherwise.
	Inner InnerHeader

	// --- Header fields of the extension matches (ah, esp, ipcomp,
	// tcpmss, dccp, ipv6header, frag, ...) and explicit inputs for the
	// state the model has no source for (cpu, realm, cgroup). ---

	// SPI is the security parameter index of the packet's ESP header
	// (-m esp) or IPv4 AH header (-m ah), or the CPI of its IPComp header
	// (-m ipcomp): the header Proto names.
	SPI uint32
	// AHSPI, AHLen and AHReserved are the IPv6 AH extension header's SPI,
	// length field (in 4-byte units, minus 2, as on the wire) and whether
	// its reserved field is non-zero (ip6tables -m ah).
	AHSPI      uint32
	AHLen      uint8
	AHReserved bool
	// DCCPType is the DCCP packet type (0 REQUEST ... 9 SYNCACK) and
	// DCCPOptions the option types the DCCP header carries, a bit set
	// indexed by type (-m dccp).
	DCCPType    uint8
	DCCPOptions [4]uint64
	// IPv6Exts is the mask ip6tables -m ipv6header computes: a bit (the
	// Ext constants) for each extension header in the chain, and
	// ExtProto when the chain ends in an upper-layer protocol (an ESP
	// header ends it with ExtESP and without ExtProto). The other IPv6
	// matches (frag, hbh, dst, rt, ah) read the first header of their
	// type and need its bit.
	IPv6Exts uint8
	// FragID, FragMore and FragReserved are the identification, the M
	// flag and whether the reserved bits are non-zero, of the IPv6
	// fragment header (-m frag).
	FragID       uint32
	FragMore     bool
	FragReserved bool
	// HBHOpts[:NumHBHOpts] are the options of the hop-by-hop header in
	// order (Pad1 as type 0 with no length), HBHLen its length field (in
	// 8-byte units, minus 1, as on the wire); DstOpts, NumDstOpts and
	// DstLen the same for the first destination options header.
	HBHOpts    [8]IPv6Option
	NumHBHOpts uint8
	HBHLen     uint8
	DstOpts    [8]IPv6Option
	NumDstOpts uint8
	DstLen     uint8
	// RTType, RTSegsLeft and RTLen are the routing header's type,
	// segments left and length field (8-byte units, minus 1), and
	// RTReserved whether the 32-bit field after them is non-zero (-m rt).
	RTType, RTSegsLeft, RTLen uint8
	RTReserved                bool
	// SRH says the routing header is a complete segment routing header
	// (type 4, -m srh); then SRHNext is its next header, SRHLastEntry
	// and SRHTag its last entry and tag fields, and SRHPrevSID,
	// SRHNextSID and SRHLastSID the segments at index segments left + 1,
	// segments left - 1 and 0 (each meaningful when that index exists).
	SRH                                bool
	SRHNext, SRHLastEntry              uint8
	SRHTag                             uint16
	SRHPrevSID, SRHNextSID, SRHLastSID [16]byte
	// MHType is the Mobility Header's type (-m mh).
	MHType uint8
	// CPU is the CPU that processes the packet (-m cpu); the model has
	// no CPUs, so the caller says which.
	CPU uint16
	// Realm is the routing realm of the packet's route (the route's
	// realm, dst->tclassid, -m realm); the model's routes carry none.
	Realm uint32
	// CgroupClassID is the net_cls class id of the packet's socket's
	// cgroup (-m cgroup --cgroup) and CgroupPath that cgroup's path in
	// the cgroup v2 hierarchy ("/system.slice/sshd.service"; empty means
	// the root, -m cgroup --path), both meaningful with HasSocket.
	CgroupClassID uint32
	CgroupPath    string

	// --- Packet bytes, for the string, u32 and bpf matches ---

	// Raw is the packet's bytes from the IP header on, when known.
	// FrameHost fills it from the frame when a loaded rule reads packet
	// bytes; it is a string so that Packet stays a comparable value. It is
	// the packet as it arrived: NAT and mangle targets change the fields
	// above, not Raw. Empty means unknown: those matches then read an IP
	// and transport header built from the fields, followed by Length's
	// worth of zero payload.
	Raw string
}

// InnerHeader is the part of the packet quoted by an ICMP error that
// conntrack and NAT read: its addresses, protocol and ports (or ICMP
// type, code and identifier).
type InnerHeader struct {
	Proto            inet.Proto
	Src, Dst         netip.Addr
	SrcPort, DstPort uint16
	ICMPType         uint8
	ICMPCode         uint8
	ICMPID           uint16
}

// SCTPChunk is the type and flags of one chunk of an SCTP packet.
type SCTPChunk struct {
	Type, Flags uint8
}

// IPv6Option is the type and length byte of one option of a hop-by-hop
// or destination options header.
type IPv6Option struct{ Type, Len uint8 }

// Bits of Packet.IPv6Exts, the kernel's ipv6header mask values.
const (
	ExtProto    uint8 = 0x01 // the chain ends in an upper-layer protocol
	ExtNone     uint8 = 0x02 // no next header (59)
	ExtESP      uint8 = 0x04 // encapsulating security payload (50)
	ExtAuth     uint8 = 0x08 // authentication header (51)
	ExtFragment uint8 = 0x10 // fragment (44)
	ExtRouting  uint8 = 0x20 // routing (43)
	ExtDstOpts  uint8 = 0x40 // destination options (60)
	ExtHopByHop uint8 = 0x80 // hop-by-hop options (0)
)

// clone returns a copy of p on the heap.
func (p *Packet) clone() *Packet {
	c := *p
	return &c
}

// hasTCPOption reports whether the TCP header carries option kind.
func (p *Packet) hasTCPOption(kind uint8) bool {
	return p.TCPOptions[kind/64]&(1<<(kind%64)) != 0
}

// SetTCPOption records that the TCP header carries option kind.
func (p *Packet) SetTCPOption(kind uint8) {
	p.TCPOptions[kind/64] |= 1 << (kind % 64)
}

// TCP returns a TCP segment from src to dst with the given flags and no
// payload: its Family is the addresses', its TTL 64 and its Length the IP
// and TCP headers (40 bytes for IPv4, 60 for IPv6). Add a payload's size
// to Length. For Host.Send, src may have an unset address (the host
// chooses one) but keeps its port.
func TCP(src, dst netip.AddrPort, flags inet.TCPFlags) Packet {
	p := newPacket(inet.TCP, src.Addr(), dst.Addr(), 20)
	p.SrcPort, p.DstPort, p.TCPFlags = src.Port(), dst.Port(), flags
	return p
}

// UDP returns a UDP datagram from src to dst with no payload, as TCP
// does: Length is the IP and UDP headers (28 bytes for IPv4, 48 for
// IPv6).
func UDP(src, dst netip.AddrPort) Packet {
	p := newPacket(inet.UDP, src.Addr(), dst.Addr(), 8)
	p.SrcPort, p.DstPort = src.Port(), dst.Port()
	return p
}

// ICMP returns an ICMP message of the given type and code from src to
// dst, or an ICMPv6 one when dst is IPv6 (whose type numbers differ:
// echo request is 8 for ICMP, 128 for ICMPv6). Length is the IP and
// 8-byte ICMP headers. Set ICMPID for an echo, and Inner for an error.
func ICMP(src, dst netip.Addr, typ, code uint8) Packet {
	proto := inet.ICMP
	if addrFamily(dst) == IPv6 {
		proto = inet.ICMPv6
	}
	p := newPacket(proto, src, dst, 8)
	p.ICMPType, p.ICMPCode = typ, code
	return p
}

func newPacket(proto inet.Proto, src, dst netip.Addr, l4 int) Packet {
	f := addrFamily(dst)
	ip := 20
	if f == IPv6 {
		ip = 40
	}
	return Packet{Family: f, Proto: proto, Src: src, Dst: dst, TTL: defaultTTL, Length: ip + l4}
}

// addrFamily is the family of a packet carrying address a: a 16-byte
// address, IPv4-mapped ones included, travels in IPv6.
func addrFamily(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// check refuses a packet whose fields contradict each other, which the
// walk would otherwise read one way and a rule another; an unset Family
// is taken from the destination. local says a local process sends it, so
// that the host may choose the source address.
func (p *Packet) check(local bool) error {
	if !p.Dst.IsValid() {
		return badPacket("Dst", "no destination address")
	}
	f := addrFamily(p.Dst)
	switch p.Family {
	case 0:
		p.Family = f
	case f:
	case IPv4, IPv6:
		return badPacket("Family", p.Family.String()+" with "+f.String()+" destination "+p.Dst.String())
	default:
		return badPacket("Family", p.Family.String()+" is neither IPv4 nor IPv6")
	}
	switch {
	case p.Src.IsValid():
		if addrFamily(p.Src) != f {
			return badPacket("Src", addrFamily(p.Src).String()+" source "+p.Src.String()+" with "+f.String()+" destination "+p.Dst.String())
		}
	case !local:
		return badPacket("Src", "no source address (only Send chooses one)")
	}
	if (p.SrcPort != 0 || p.DstPort != 0) && !p.Proto.HasPorts() {
		field := "SrcPort"
		if p.SrcPort == 0 {
			field = "DstPort"
		}
		return badPacket(field, "protocol "+protoLabel(p.Proto)+" has no ports")
	}
	if p.TCPFlags != 0 && p.Proto != inet.TCP {
		return badPacket("TCPFlags", "protocol "+protoLabel(p.Proto)+" is not tcp")
	}
	if (p.ICMPType != 0 || p.ICMPCode != 0 || p.ICMPID != 0) && p.Proto != inet.ICMP && p.Proto != inet.ICMPv6 {
		return badPacket("ICMPType", "protocol "+protoLabel(p.Proto)+" is not icmp or ipv6-icmp")
	}
	// ICMP types differ between the families: an echo request is 8 in
	// ICMP, 128 in ICMPv6, and the icmp match reads one family's only.
	switch {
	case p.Proto == inet.ICMP && f == IPv6:
		return badPacket("Proto", "icmp in an IPv6 packet (ICMPv6 is inet.ICMPv6)")
	case p.Proto == inet.ICMPv6 && f == IPv4:
		return badPacket("Proto", "ipv6-icmp in an IPv4 packet (ICMP is inet.ICMP)")
	}
	if p.Length < 0 {
		return badPacket("Length", "negative")
	}
	return nil
}

// protoLabel names a packet's protocol in a refusal.
func protoLabel(proto inet.Proto) string {
	if proto == 0 {
		return "0 (Proto unset)"
	}
	return proto.String()
}
