package netfilter

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/packetwalk/packetwalk/inet"
)

// Frame errors wrapped by *FrameError; test them with errors.Is.
var (
	// ErrTruncated: the frame ends before a header (or the IP total
	// length) says it should.
	ErrTruncated = errors.New("truncated")
	// ErrBadHeader: a header field holds a value the kernel refuses
	// (IPv4 IHL below 5, total length shorter than the header, ...).
	ErrBadHeader = errors.New("bad header")
)

// FrameError reports a frame that cannot be decoded: the byte offset in
// the frame where the offending header (or field) starts, the layer, and
// what was expected.
type FrameError struct {
	Offset int
	Layer  string
	Err    error
}

func (e *FrameError) Error() string {
	return fmt.Sprintf("frame byte %d: %s: %v", e.Offset, e.Layer, e.Err)
}

func (e *FrameError) Unwrap() error { return e.Err }

func truncated(off int, layer string, need, have int) error {
	return &FrameError{Offset: off, Layer: layer, Err: fmt.Errorf("%w: need %d bytes, have %d", ErrTruncated, need, have)}
}

func badHeader(off int, layer, format string, a ...any) error {
	return &FrameError{Offset: off, Layer: layer, Err: fmt.Errorf("%w: "+format, append([]any{ErrBadHeader}, a...)...)}
}

// Decoder turns Ethernet frames or raw IP packets into Packets and writes
// them back after the host changed them. It reuses its gopacket layers,
// so decoding allocates nothing; a Decoder is not safe for concurrent
// use.
//
// Decoding follows what the kernel's netfilter hooks see of a packet:
// IPv4 options are skipped by the header length (IHL) and not parsed, a
// non-first fragment (IPv4, or IPv6 with a Fragment header) has no
// transport header (FragOffset is set and ports stay 0), and IPv6
// extension headers (hop-by-hop, routing, destination options, fragment,
// AH) are walked to the upper-layer protocol. The Decoder does not
// reassemble fragments: FrameHost does, when conntrack is in use, as the
// kernel does before the hooks. The IPv4 header checksum is not
// verified.
type Decoder struct {
	eth   ethLayer
	ip4   ip4Layer
	ip6   ip6Layer
	ext   extLayer
	tcp   tcpLayer
	udp   udpLayer
	icmp4 icmp4Layer
	icmp6 icmp6Layer
	sctp  sctpLayer

	ethParser, ip4Parser, ip6Parser *gopacket.DecodingLayerParser
	decoded                         []gopacket.LayerType

	// State of the last decode: the packet being filled, the offset of
	// the next header, and where each header starts in the frame.
	pkt      Packet
	off      int
	l3, l4   int // -1 when absent
	l3end    int // end of the IP packet (IP total length)
	l4proto  inet.Proto
	inner    int // start of the IP header quoted by an ICMP error, or -1
	innerHL  int // its header length
	innerEnd int
	frame    []byte // the frame being decoded
	frag6    int    // frame offset of an IPv6 fragment header, or -1

	// The numbers of the last TCP reset built.
	resetSeq, resetAck uint32

	// Scratch space for building frames.
	buf         gopacket.SerializeBuffer
	replyLayers []gopacket.SerializableLayer
	quote       []byte
}

// NewDecoder returns a Decoder.
func NewDecoder() *Decoder {
	d := &Decoder{decoded: make([]gopacket.LayerType, 0, 16), buf: gopacket.NewSerializeBuffer()}
	for _, l := range []interface{ setDecoder(*Decoder) }{&d.eth, &d.ip4, &d.ip6, &d.ext, &d.tcp, &d.udp, &d.icmp4, &d.icmp6, &d.sctp} {
		l.setDecoder(d)
	}
	all := []gopacket.DecodingLayer{&d.eth, &d.ip4, &d.ip6, &d.ext, &d.tcp, &d.udp, &d.icmp4, &d.icmp6, &d.sctp}
	mk := func(first gopacket.LayerType) *gopacket.DecodingLayerParser {
		p := gopacket.NewDecodingLayerParser(first, all...)
		// Protocols without a decoder (GRE, ESP, ...) and non-first
		// fragments end the walk; the packet is still complete.
		p.IgnoreUnsupported = true
		return p
	}
	d.ethParser = mk(layers.LayerTypeEthernet)
	d.ip4Parser = mk(layers.LayerTypeIPv4)
	d.ip6Parser = mk(layers.LayerTypeIPv6)
	return d
}

// Decode decodes an Ethernet frame. The Packet's SrcMAC, HasMAC and
// PktType come from the Ethernet header; In, Out and Mark are left for the
// caller. A frame that is truncated or malformed, or that is not IPv4 or
// IPv6, returns a *FrameError.
func (d *Decoder) Decode(frame []byte) (Packet, error) {
	return d.run(d.ethParser, frame)
}

// DecodeIP decodes a raw IPv4 or IPv6 packet (no link-layer header), the
// family chosen by the version nibble.
func (d *Decoder) DecodeIP(pkt []byte) (Packet, error) {
	if len(pkt) == 0 {
		return Packet{}, truncated(0, "IP", 1, 0)
	}
	switch pkt[0] >> 4 {
	case 4:
		return d.run(d.ip4Parser, pkt)
	case 6:
		return d.run(d.ip6Parser, pkt)
	}
	return Packet{}, badHeader(0, "IP", "version %d, want 4 or 6", pkt[0]>>4)
}

// ipBytes returns the IP packet of the last decoded frame (from the IP
// header to the IP total length).
func (d *Decoder) ipBytes() []byte {
	if d.l3 < 0 || d.l3end > len(d.frame) || d.l3 > d.l3end {
		return nil
	}
	return d.frame[d.l3:d.l3end]
}

func (d *Decoder) run(p *gopacket.DecodingLayerParser, data []byte) (Packet, error) {
	d.pkt = Packet{}
	d.off, d.l3, d.l4, d.l3end, d.inner, d.l4proto = 0, -1, -1, len(data), -1, 0
	d.frame, d.frag6 = data, -1
	d.decoded = d.decoded[:0]
	err := p.DecodeLayers(data, &d.decoded)
	if err == nil && (d.off == d.l3end || d.l3 < 0) {
		err = d.missing()
	}
	if err != nil {
		var fe *FrameError
		if errors.As(err, &fe) {
			return Packet{}, err
		}
		// Every layer reports its own errors; anything else (a recovered
		// panic) is still refused, never passed silently.
		return Packet{}, &FrameError{Offset: d.off, Layer: "frame", Err: err}
	}
	d.extFields()
	return d.pkt, nil
}

// missing reports a header the last one announced but gopacket did not
// decode because the frame ended right before it.
func (d *Decoder) missing() error {
	switch {
	case d.l3 < 0 && len(d.decoded) > 0:
		return truncated(d.off, "IP", 20, 0)
	case d.l4 < 0 || d.off != d.l4:
		return nil
	}
	var need int
	var name string
	switch nextType(d.pkt.Family, d.l4proto) {
	case layers.LayerTypeTCP:
		name, need = "TCP", 20
	case layers.LayerTypeUDP:
		name, need = "UDP", 8
	case layers.LayerTypeSCTP:
		name, need = "SCTP", 12
	case layers.LayerTypeICMPv4:
		name, need = "ICMP", 8
	case layers.LayerTypeICMPv6:
		name, need = "ICMPv6", 4
	case gopacket.LayerTypePayload:
		return nil
	default:
		name, need = "IPv6 extension header", 8
	}
	return truncated(d.off, name, need, 0)
}

// ethLayer decodes Ethernet II, refusing other link types by name.
type ethLayer struct {
	layers.Ethernet
	d *Decoder
}

func (l *ethLayer) setDecoder(d *Decoder) { l.d = d }

func (l *ethLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 14 {
		return truncated(0, "Ethernet", 14, len(data))
	}
	if err := l.Ethernet.DecodeFromBytes(data, df); err != nil {
		return &FrameError{Offset: 0, Layer: "Ethernet", Err: err}
	}
	switch l.EthernetType {
	case layers.EthernetTypeIPv4, layers.EthernetTypeIPv6:
	default:
		return &FrameError{Offset: 12, Layer: "Ethernet", Err: fmt.Errorf("%w: EtherType 0x%04x (%v), want IPv4 or IPv6", ErrNotModelled, uint16(l.EthernetType), l.EthernetType)}
	}
	p := &l.d.pkt
	copy(p.SrcMAC[:], data[6:12])
	p.HasMAC = true
	switch {
	case [6]byte(data[0:6]) == [6]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}:
		p.PktType = PktBroadcast
	case data[0]&1 != 0:
		p.PktType = PktMulticast
	default:
		p.PktType = PktUnicast
	}
	l.d.off = 14
	return nil
}

// ip4Layer decodes the IPv4 header with the checks of the kernel's
// ip_rcv_core and skips the options by IHL, as netfilter sees them.
type ip4Layer struct {
	layers.IPv4
	d *Decoder
}

func (l *ip4Layer) setDecoder(d *Decoder)          { l.d = d }
func (l *ip4Layer) CanDecode() gopacket.LayerClass { return layers.LayerTypeIPv4 }

func (l *ip4Layer) NextLayerType() gopacket.LayerType {
	if l.FragOffset != 0 {
		return gopacket.LayerTypeFragment
	}
	return nextType(IPv4, inet.Proto(l.Protocol))
}

func (l *ip6Layer) NextLayerType() gopacket.LayerType {
	if l.HopByHop != nil {
		return nextType(IPv6, inet.Proto(l.HopByHop.NextHeader))
	}
	return nextType(IPv6, inet.Proto(l.NextHeader))
}

// nextType is the layer that decodes protocol proto after an IP header of
// family f; any other protocol ends the walk (gopacket.LayerTypePayload
// has no decoder here).
func nextType(f Family, proto inet.Proto) gopacket.LayerType {
	switch proto {
	case inet.TCP, inet.UDP, inet.SCTP:
	case inet.ICMP:
		if f != IPv4 {
			return gopacket.LayerTypePayload
		}
	case inet.ICMPv6, 43, 44, 51, 60: // ICMPv6 and the IPv6 extension headers
		if f != IPv6 {
			return gopacket.LayerTypePayload
		}
	default:
		return gopacket.LayerTypePayload
	}
	return layers.IPProtocol(proto).LayerType()
}

func (l *ip4Layer) DecodeFromBytes(data []byte, _ gopacket.DecodeFeedback) error {
	d, off := l.d, l.d.off
	if len(data) < 20 {
		return truncated(off, "IPv4", 20, len(data))
	}
	if v := data[0] >> 4; v != 4 {
		return badHeader(off, "IPv4", "version %d, want 4", v)
	}
	hl := int(data[0]&0xf) * 4
	if hl < 20 {
		return badHeader(off, "IPv4", "header length %d, want at least 20", hl)
	}
	total := int(binary.BigEndian.Uint16(data[2:4]))
	if total < hl {
		return badHeader(off+2, "IPv4", "total length %d shorter than the header (%d)", total, hl)
	}
	if len(data) < total {
		return truncated(off, "IPv4", total, len(data))
	}
	l.Version, l.IHL, l.TOS = 4, data[0]&0xf, data[1]
	l.Length, l.Id = uint16(total), binary.BigEndian.Uint16(data[4:6])
	ff := binary.BigEndian.Uint16(data[6:8])
	l.Flags, l.FragOffset = layers.IPv4Flag(ff>>13), ff&0x1fff
	l.TTL, l.Protocol = data[8], layers.IPProtocol(data[9])
	l.Checksum = binary.BigEndian.Uint16(data[10:12])
	l.SrcIP, l.DstIP = data[12:16], data[16:20]
	l.Options, l.Padding = l.Options[:0], nil
	l.Contents, l.Payload = data[:hl], data[hl:total]

	p := &d.pkt
	p.Family, p.Proto = IPv4, inet.Proto(data[9])
	p.Src = netip.AddrFrom4([4]byte(data[12:16]))
	p.Dst = netip.AddrFrom4([4]byte(data[16:20]))
	p.Length, p.TTL, p.TOS, p.ID, p.FragOffset = total, l.TTL, l.TOS, l.Id, l.FragOffset
	p.IPHeaderLen = uint16(hl)
	d.l3, d.l3end, d.l4proto = off, off+total, p.Proto
	d.off = off + hl
	if l.FragOffset == 0 {
		d.l4 = d.off
	}
	return nil
}

// ip6Layer decodes the IPv6 header; gopacket walks a hop-by-hop header.
type ip6Layer struct {
	layers.IPv6
	d *Decoder
}

func (l *ip6Layer) setDecoder(d *Decoder)          { l.d = d }
func (l *ip6Layer) CanDecode() gopacket.LayerClass { return layers.LayerTypeIPv6 }

func (l *ip6Layer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	d, off := l.d, l.d.off
	if len(data) < 40 {
		return truncated(off, "IPv6", 40, len(data))
	}
	if v := data[0] >> 4; v != 6 {
		return badHeader(off, "IPv6", "version %d, want 6", v)
	}
	plen := int(binary.BigEndian.Uint16(data[4:6]))
	if plen == 0 && data[6] == 0 {
		// Only a hop-by-hop header can carry the jumbo payload option;
		// otherwise a zero payload length is an empty payload (next
		// header 59, say).
		return &FrameError{Offset: off + 4, Layer: "IPv6", Err: fmt.Errorf("%w: payload length 0 (jumbogram)", ErrNotModelled)}
	}
	if len(data) < 40+plen {
		return truncated(off, "IPv6", 40+plen, len(data))
	}
	if plen == 0 {
		// gopacket takes any zero length for a jumbogram; here there is
		// no hop-by-hop header, so the payload is just empty.
		l.IPv6 = layers.IPv6{Version: 6, TrafficClass: data[0]<<4 | data[1]>>4, NextHeader: layers.IPProtocol(data[6]), HopLimit: data[7],
			SrcIP: data[8:24], DstIP: data[24:40], BaseLayer: layers.BaseLayer{Contents: data[:40]}}
	} else if err := l.IPv6.DecodeFromBytes(data[:40+plen], df); err != nil {
		return &FrameError{Offset: off + 40, Layer: "IPv6 hop-by-hop", Err: fmt.Errorf("%w: %v", ErrBadHeader, err)}
	}
	p := &d.pkt
	p.Family = IPv6
	p.Src = netip.AddrFrom16([16]byte(data[8:24]))
	p.Dst = netip.AddrFrom16([16]byte(data[24:40]))
	p.Length, p.TTL, p.TOS = 40+plen, data[7], l.TrafficClass
	next := data[6]
	d.off = off + 40
	if l.HopByHop != nil {
		next = uint8(l.HopByHop.NextHeader)
		d.off += l.hbhLen(data)
	}
	p.Proto = inet.Proto(next)
	p.IPHeaderLen = uint16(d.off - off)
	d.l3, d.l3end, d.l4proto, d.l4 = off, off+40+plen, p.Proto, d.off
	return nil
}

// hbhLen is the length of the hop-by-hop header that follows the fixed
// header in data.
func (l *ip6Layer) hbhLen(data []byte) int { return (int(data[41]) + 1) * 8 }

// extLayer walks the IPv6 extension headers gopacket leaves to the next
// layer: routing, destination options, fragment and AH.
type extLayer struct {
	layers.BaseLayer
	d        *Decoder
	next     uint8
	fragment bool // a non-first fragment: nothing to decode after it
}

func (l *extLayer) setDecoder(d *Decoder) { l.d = d }

func (l *extLayer) CanDecode() gopacket.LayerClass {
	return gopacket.NewLayerClass([]gopacket.LayerType{layers.LayerTypeIPv6Routing,
		layers.LayerTypeIPv6Destination, layers.LayerTypeIPv6Fragment, layers.LayerTypeIPSecAH})
}

func (l *extLayer) NextLayerType() gopacket.LayerType {
	if l.fragment {
		return gopacket.LayerTypeFragment
	}
	return nextType(IPv6, inet.Proto(l.next))
}

func (l *extLayer) LayerType() gopacket.LayerType { return layers.LayerTypeIPv6Destination }

func (l *extLayer) DecodeFromBytes(data []byte, _ gopacket.DecodeFeedback) error {
	d, off, kind := l.d, l.d.off, l.d.l4proto
	name := func() string { return "IPv6 extension header " + extName(uint8(kind)) }
	if len(data) < 8 {
		return truncated(off, name(), 8, len(data))
	}
	n := 8
	switch kind {
	case 44: // fragment: fixed 8 bytes
	case 51: // AH: length in 4-byte units, minus 2
		n = (int(data[1]) + 2) * 4
	default:
		n = (int(data[1]) + 1) * 8
	}
	if len(data) < n {
		return truncated(off, name(), n, len(data))
	}
	l.Contents, l.Payload = data[:n], data[n:]
	l.next, l.fragment = data[0], false
	d.pkt.Proto = inet.Proto(l.next)
	d.l4proto = d.pkt.Proto
	d.off = off + n
	d.l4 = d.off
	d.pkt.IPHeaderLen = uint16(d.off - d.l3)
	if kind == 44 {
		d.frag6 = off
		if fo := binary.BigEndian.Uint16(data[2:4]) >> 3; fo != 0 {
			// ip6_tables sets the fragment offset for a non-first
			// fragment; the port matches then fail, as for IPv4.
			d.pkt.FragOffset, l.fragment, d.l4 = fo, true, -1
		}
	}
	return nil
}

func extName(p uint8) string {
	if n := layers.IPProtocol(p).String(); n != "" {
		return n
	}
	return fmt.Sprint(p)
}

// tcpLayer decodes the TCP header. The option kinds are collected the way
// the kernel's tcp_find_option walks them, and malformed options are not
// an error (netfilter does not drop such segments).
type tcpLayer struct {
	layers.TCP
	d *Decoder
}

func (l *tcpLayer) setDecoder(d *Decoder)             { l.d = d }
func (l *tcpLayer) CanDecode() gopacket.LayerClass    { return layers.LayerTypeTCP }
func (l *tcpLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

func (l *tcpLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	off := l.d.off
	if len(data) < 20 {
		return truncated(off, "TCP", 20, len(data))
	}
	doff := int(data[12]>>4) * 4
	if doff < 20 {
		return badHeader(off+12, "TCP", "data offset %d bytes, want at least 20", doff)
	}
	if len(data) < doff {
		return truncated(off, "TCP", doff, len(data))
	}
	_ = l.TCP.DecodeFromBytes(data, df) // fixed fields are set; option errors do not matter here
	p := &l.d.pkt
	p.SrcPort, p.DstPort = uint16(l.SrcPort), uint16(l.DstPort)
	p.TCPFlags = inet.TCPFlags(data[13])
	p.Seq, p.Ack = binary.BigEndian.Uint32(data[4:8]), binary.BigEndian.Uint32(data[8:12])
	p.Window, p.TCPHeaderLen = binary.BigEndian.Uint16(data[14:16]), uint8(doff)
	opts := data[20:doff]
	for i := 0; i < len(opts); {
		p.SetTCPOption(opts[i])
		if opts[i] < 2 || i+1 >= len(opts) || opts[i+1] == 0 {
			i++
			continue
		}
		if n := int(opts[i+1]); i+n <= len(opts) {
			tcpOptionValue(p, opts[i], opts[i:i+n])
		}
		i += int(opts[i+1])
	}
	l.d.off = off + doff
	return nil
}

// tcpOptionValue reads the option values conntrack's window tracking
// uses, with the size checks of the kernel's tcp_options and tcp_sack:
// the window scale shift as sent (conntrack caps it at 14), and the
// highest right edge of the SACK blocks in sequence-number order, the
// search starting at the ack number as in tcp_sack (so a SACK option of a
// malformed length leaves SACKEnd at the ack number).
func tcpOptionValue(p *Packet, kind uint8, opt []byte) {
	switch {
	case kind == 2 && len(opt) == 4:
		// The MSS option as xt_tcpmss reads it: kind 2, length 4.
		p.MSS = binary.BigEndian.Uint16(opt[2:4])
	case kind == 3 && len(opt) == 3:
		p.WScale = opt[2]
	case kind == 5:
		p.SACKEnd = p.Ack
		if len(opt) < 10 || (len(opt)-2)%8 != 0 {
			return
		}
		for i := 2; i+8 <= len(opt); i += 8 {
			if r := binary.BigEndian.Uint32(opt[i+4:]); int32(r-p.SACKEnd) > 0 {
				p.SACKEnd = r
			}
		}
	}
}

type udpLayer struct {
	layers.UDP
	d *Decoder
}

func (l *udpLayer) setDecoder(d *Decoder)             { l.d = d }
func (l *udpLayer) CanDecode() gopacket.LayerClass    { return layers.LayerTypeUDP }
func (l *udpLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

func (l *udpLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	if len(data) < 8 {
		return truncated(l.d.off, "UDP", 8, len(data))
	}
	if err := l.UDP.DecodeFromBytes(data, df); err != nil {
		return &FrameError{Offset: l.d.off, Layer: "UDP", Err: fmt.Errorf("%w: %v", ErrBadHeader, err)}
	}
	l.d.pkt.SrcPort, l.d.pkt.DstPort = uint16(l.SrcPort), uint16(l.DstPort)
	l.d.off += 8
	return nil
}

type sctpLayer struct {
	layers.SCTP
	d *Decoder
}

func (l *sctpLayer) setDecoder(d *Decoder)             { l.d = d }
func (l *sctpLayer) CanDecode() gopacket.LayerClass    { return layers.LayerTypeSCTP }
func (l *sctpLayer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

func (l *sctpLayer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	off := l.d.off
	if len(data) < 12 {
		return truncated(off, "SCTP", 12, len(data))
	}
	if err := l.SCTP.DecodeFromBytes(data, df); err != nil {
		return &FrameError{Offset: off, Layer: "SCTP", Err: fmt.Errorf("%w: %v", ErrBadHeader, err)}
	}
	p := &l.d.pkt
	p.SrcPort, p.DstPort = uint16(l.SrcPort), uint16(l.DstPort)
	// The chunks, for -m sctp --chunk-types: a chunk header the packet
	// cuts short ends the list, leaving it to the match to judge.
	for c := data[12:]; len(c) >= 4 && int(p.NumSCTPChunks) < len(p.SCTPChunks); {
		p.SCTPChunks[p.NumSCTPChunks] = SCTPChunk{Type: c[0], Flags: c[1]}
		p.NumSCTPChunks++
		n := (int(binary.BigEndian.Uint16(c[2:4])) + 3) &^ 3
		if n < 4 || n > len(c) {
			break
		}
		c = c[n:]
	}
	l.d.off = off + 12
	return nil
}

type icmp4Layer struct {
	layers.ICMPv4
	d *Decoder
}

func (l *icmp4Layer) setDecoder(d *Decoder)             { l.d = d }
func (l *icmp4Layer) CanDecode() gopacket.LayerClass    { return layers.LayerTypeICMPv4 }
func (l *icmp4Layer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

func (l *icmp4Layer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	off := l.d.off
	if len(data) < 8 {
		return truncated(off, "ICMP", 8, len(data))
	}
	if err := l.ICMPv4.DecodeFromBytes(data, df); err != nil {
		return &FrameError{Offset: off, Layer: "ICMP", Err: fmt.Errorf("%w: %v", ErrBadHeader, err)}
	}
	p := &l.d.pkt
	p.ICMPType, p.ICMPCode = data[0], data[1]
	switch p.ICMPType {
	case 0, 8, 13, 14, 15, 16, 17, 18: // queries carry an identifier
		p.ICMPID = l.Id
	}
	if icmpIsError(p.ICMPType) && p.ICMPType <= 12 {
		l.d.decodeInner(off+8, data[8:])
	}
	l.d.off = off + 8
	return nil
}

type icmp6Layer struct {
	layers.ICMPv6
	d *Decoder
}

func (l *icmp6Layer) setDecoder(d *Decoder)             { l.d = d }
func (l *icmp6Layer) CanDecode() gopacket.LayerClass    { return layers.LayerTypeICMPv6 }
func (l *icmp6Layer) NextLayerType() gopacket.LayerType { return gopacket.LayerTypePayload }

func (l *icmp6Layer) DecodeFromBytes(data []byte, df gopacket.DecodeFeedback) error {
	off := l.d.off
	if len(data) < 4 {
		return truncated(off, "ICMPv6", 4, len(data))
	}
	_ = l.ICMPv6.DecodeFromBytes(data, df) // cannot fail with 4 bytes
	p := &l.d.pkt
	p.ICMPType, p.ICMPCode = data[0], data[1]
	switch {
	case p.ICMPType == 128 || p.ICMPType == 129: // echo request, reply
		if len(data) < 8 {
			return truncated(off, "ICMPv6 echo", 8, len(data))
		}
		p.ICMPID = binary.BigEndian.Uint16(data[4:6])
	case p.ICMPType < 128 && len(data) >= 8:
		l.d.decodeInner(off+8, data[8:])
	}
	l.d.off = off + 4
	return nil
}

// decodeInner reads the packet quoted by an ICMP error, which starts at
// frame offset off. A quote too short to read is left out (conntrack then
// finds the error INVALID), not an error of the frame.
func (d *Decoder) decodeInner(off int, b []byte) {
	in := &d.pkt.Inner
	hl := 0
	switch {
	case d.pkt.Family == IPv4 && len(b) >= 20 && b[0]>>4 == 4 && int(b[0]&0xf)*4 >= 20:
		hl = int(b[0]&0xf) * 4
		if len(b) < hl {
			return
		}
		in.Proto = inet.Proto(b[9])
		in.Src, in.Dst = netip.AddrFrom4([4]byte(b[12:16])), netip.AddrFrom4([4]byte(b[16:20]))
	case d.pkt.Family == IPv6 && len(b) >= 40 && b[0]>>4 == 6:
		hl = 40
		in.Proto = inet.Proto(b[6])
		in.Src, in.Dst = netip.AddrFrom16([16]byte(b[8:24])), netip.AddrFrom16([16]byte(b[24:40]))
	default:
		return
	}
	d.inner, d.innerHL, d.innerEnd = off, hl, off+len(b)
	l4 := b[hl:]
	switch {
	case in.Proto.HasPorts() && len(l4) >= 4:
		in.SrcPort, in.DstPort = binary.BigEndian.Uint16(l4[0:2]), binary.BigEndian.Uint16(l4[2:4])
	case (in.Proto == inet.ICMP || in.Proto == inet.ICMPv6) && len(l4) >= 8:
		in.ICMPType, in.ICMPCode = l4[0], l4[1]
		in.ICMPID = binary.BigEndian.Uint16(l4[4:6])
	}
}

// tcpSegmentLen is the TCP payload length of p: what Length holds beyond
// the IP and TCP headers (their default sizes when unset).
func tcpSegmentLen(p *Packet) int {
	iph, th := int(p.IPHeaderLen), int(p.TCPHeaderLen)
	if iph == 0 {
		iph = 20
		if p.Family == IPv6 {
			iph = 40
		}
	}
	if th == 0 {
		th = 20
	}
	return max(p.Length-iph-th, 0)
}
