package netfilter

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"

	"github.com/packetwalk/packetwalk/inet"
)

// castagnoli is the CRC-32C table of the SCTP checksum (read-only).
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendFrame appends to dst the Ethernet frame orig rewritten for p, the
// packet as the host returned it (Result.Packet): addresses, ports, the
// ICMP identifier and the quoted header of an ICMP error after NAT, TTL
// (hop limit) and TOS (traffic class). Everything else is kept byte for
// byte, Ethernet addresses included: the host does not model neighbours,
// so a caller that needs next-hop MACs writes them itself. The mark is
// not on the wire.
//
// Checksums are updated incrementally, as the kernel's NAT does, so a
// first fragment's transport checksum stays right and a bad checksum
// stays bad; an IPv4 UDP checksum of zero (none) stays zero. The SCTP
// CRC-32C is computed afresh (not for a fragment).
func (d *Decoder) AppendFrame(dst, orig []byte, p Packet) ([]byte, error) {
	return d.rewrite(dst, orig, p, d.Decode)
}

// AppendIP is AppendFrame for a raw IP packet.
func (d *Decoder) AppendIP(dst, orig []byte, p Packet) ([]byte, error) {
	return d.rewrite(dst, orig, p, d.DecodeIP)
}

func (d *Decoder) rewrite(dst, orig []byte, p Packet, decode func([]byte) (Packet, error)) ([]byte, error) {
	o, err := decode(orig)
	if err != nil {
		return dst, err
	}
	if p.Family != o.Family || p.Proto != o.Proto {
		return dst, fmt.Errorf("%w: rewriting a %v protocol %d packet as %v protocol %d", ErrNotModelled, o.Family, o.Proto, p.Family, p.Proto)
	}
	if p.Src.Is4() != (p.Family == IPv4) || p.Dst.Is4() != (p.Family == IPv4) || !p.Src.IsValid() || !p.Dst.IsValid() {
		return dst, fmt.Errorf("%w: addresses %v -> %v for %v", ErrBadValue, p.Src, p.Dst, p.Family)
	}
	start := len(dst)
	dst = append(dst, orig...)
	w := rewriter{b: dst[start:]}
	l3, l4 := d.l3, d.l4
	// The checksums covering the addresses: IPv4's header checksum, and
	// the transport checksum through its pseudo-header.
	ipCk, l4Ck, pseudo := -1, -1, false
	if o.Family == IPv4 {
		ipCk = l3 + 10
	}
	if l4 >= 0 {
		switch o.Proto {
		case inet.TCP:
			l4Ck, pseudo = l4+16, true
		case inet.UDP:
			l4Ck, pseudo = l4+6, true
			if o.Family == IPv4 {
				w.udpCk[0] = l4Ck // zero means "no checksum"
			}
		case 33: // DCCP: its checksum covers the pseudo-header too
			if d.l3end-l4 >= 12 {
				l4Ck, pseudo = l4+6, true
			}
		case inet.ICMP:
			l4Ck = l4 + 2
		case inet.ICMPv6:
			l4Ck, pseudo = l4+2, true
		}
	}
	addrCk := -1
	if pseudo {
		addrCk = l4Ck
	}
	if o.Family == IPv4 {
		s, t := p.Src.As4(), p.Dst.As4()
		w.set(l3+12, s[:], ipCk, addrCk)
		w.set(l3+16, t[:], ipCk, addrCk)
		w.set(l3+8, []byte{p.TTL, w.b[l3+9]}, ipCk, -1)
		w.set(l3, []byte{w.b[l3], p.TOS}, ipCk, -1)
	} else {
		s, t := p.Src.As16(), p.Dst.As16()
		w.set(l3+8, s[:], addrCk, -1)
		w.set(l3+24, t[:], addrCk, -1)
		w.b[l3+7] = p.TTL
		w.b[l3] = 0x60 | p.TOS>>4
		w.b[l3+1] = p.TOS<<4 | w.b[l3+1]&0x0f
	}
	if l4 < 0 {
		return dst, nil
	}
	var ports [4]byte
	binary.BigEndian.PutUint16(ports[0:], p.SrcPort)
	binary.BigEndian.PutUint16(ports[2:], p.DstPort)
	switch o.Proto {
	case inet.TCP:
		w.set(l4, ports[:], l4Ck, -1)
		// NAT leaves sequence numbers alone; a caller that changed them
		// (a test, a sequence-adjusting helper) gets them written.
		if o.Seq != p.Seq || o.Ack != p.Ack {
			var sa [8]byte
			binary.BigEndian.PutUint32(sa[0:], p.Seq)
			binary.BigEndian.PutUint32(sa[4:], p.Ack)
			w.set(l4+4, sa[:], l4Ck)
		}
		if o.Window != p.Window {
			w.set(l4+14, binary.BigEndian.AppendUint16(ports[:0], p.Window), l4Ck)
		}
		// ECN rewrites the ECE and CWR flags; the data offset shares
		// their 16-bit word.
		if o.TCPFlags != p.TCPFlags {
			w.set(l4+12, []byte{w.b[l4+12], byte(p.TCPFlags)}, l4Ck)
		}
		// TCPOPTSTRIP: option kinds the packet no longer carries are
		// overwritten with NOPs.
		var gone [4]uint64
		for i := range gone {
			gone[i] = o.TCPOptions[i] &^ p.TCPOptions[i] &^ 3
		}
		if gone != [4]uint64{} {
			nopOptions(&w, l4, gone, l4Ck)
		}
		if p.hasTCPOption(2) {
			switch {
			case int(p.TCPHeaderLen) == int(o.TCPHeaderLen)+4:
				// TCPMSS added the option; an MSS option the
				// original had was stripped (TCPOPTSTRIP) first.
				if o.hasTCPOption(2) {
					nopOptions(&w, l4, [4]uint64{1 << 2}, l4Ck)
				}
				dst = insertMSS(dst, start, l3, l4, ipCk, l4Ck, o.Family, p.MSS)
			case o.hasTCPOption(2) && p.MSS != o.MSS:
				if off := d.mssOffset(w.b[l4:]); off > 0 {
					w.setBytes(l4, l4+off+2, []byte{byte(p.MSS >> 8), byte(p.MSS)}, l4Ck)
				}
			}
		}
	case inet.UDP:
		w.set(l4, ports[:], l4Ck, -1)
	case 33:
		// Ports are decoded from a full DCCP generic header only.
		if d.l3end-l4 >= 12 {
			w.set(l4, ports[:], l4Ck, -1)
		}
	case inet.SCTP:
		copy(w.b[l4:], ports[:])
		if !d.fragmented() {
			b := w.b[l4:d.l3end]
			clear(b[8:12])
			binary.LittleEndian.PutUint32(b[8:12], crc32.Checksum(b, castagnoli))
		}
	case inet.ICMP, inet.ICMPv6:
		if o.ICMPID != p.ICMPID {
			w.set(l4+4, binary.BigEndian.AppendUint16(ports[:0], p.ICMPID), l4Ck, -1)
		}
		if d.inner >= 0 && o.Inner != p.Inner && p.Inner.Proto == o.Inner.Proto {
			d.rewriteInner(&w, p.Inner, l4Ck)
		}
	}
	return dst, nil
}

// fragmented reports whether the last decoded packet is a fragment.
func (d *Decoder) fragmented() bool {
	if d.pkt.Family == IPv4 {
		return d.ip4.Flags&layers.IPv4MoreFragments != 0 || d.ip4.FragOffset != 0
	}
	return d.pkt.FragOffset != 0 || d.ext.fragment
}

// rewriteInner rewrites the header quoted by an ICMP error (kernel
// nf_nat_icmp_reply_translation): its addresses and IP checksum, its
// ports, and its transport checksum when the quote holds it, each change
// carried into the outer ICMP checksum at outerCk.
func (d *Decoder) rewriteInner(w *rewriter, in InnerHeader, outerCk int) {
	at, hl := d.inner, d.innerHL
	ipCk, l4 := -1, at+hl
	if d.pkt.Family == IPv4 {
		ipCk = at + 10
	}
	innerCk := -1
	switch in.Proto {
	case inet.TCP:
		innerCk = l4 + 16
	case inet.UDP:
		innerCk = l4 + 6
		if d.pkt.Family == IPv4 {
			w.udpCk[1] = innerCk
		}
	case inet.ICMP:
		innerCk = l4 + 2
	case inet.ICMPv6:
		innerCk = l4 + 2
	}
	if innerCk+2 > d.innerEnd {
		innerCk = -1
	}
	pseudoCk := innerCk
	if in.Proto == inet.ICMP {
		pseudoCk = -1
	}
	// Each nested checksum's change is carried into the outer one.
	var before [2]uint16
	read := func(off int) uint16 {
		if off < 0 {
			return 0
		}
		return binary.BigEndian.Uint16(w.b[off:])
	}
	before[0], before[1] = read(ipCk), read(innerCk)
	if d.pkt.Family == IPv4 {
		s, t := in.Src.As4(), in.Dst.As4()
		w.set(at+12, s[:], ipCk, outerCk, pseudoCk)
		w.set(at+16, t[:], ipCk, outerCk, pseudoCk)
	} else {
		s, t := in.Src.As16(), in.Dst.As16()
		w.set(at+8, s[:], outerCk, pseudoCk)
		w.set(at+24, t[:], outerCk, pseudoCk)
	}
	var v [4]byte
	switch {
	case in.Proto.HasPorts() && l4+4 <= d.innerEnd:
		binary.BigEndian.PutUint16(v[0:], in.SrcPort)
		binary.BigEndian.PutUint16(v[2:], in.DstPort)
		w.set(l4, v[:], outerCk, innerCk)
	case (in.Proto == inet.ICMP || in.Proto == inet.ICMPv6) && l4+8 <= d.innerEnd:
		binary.BigEndian.PutUint16(v[0:], in.ICMPID)
		w.set(l4+4, v[:2], outerCk, innerCk)
	}
	for i, off := range []int{ipCk, innerCk} {
		if off >= 0 {
			var o, n [2]byte
			binary.BigEndian.PutUint16(o[:], before[i])
			copy(n[:], w.b[off:off+2])
			w.adjust(outerCk, o[:], n[:])
		}
	}
}

// resetSeq is how nf_send_reset numbers a reset answering o: a segment
// with ACK gets a bare RST whose sequence is o's ack number; one without
// gets RST|ACK, sequence 0, acknowledging everything o occupied (payload,
// SYN and FIN).
func resetSeq(o *Packet) (ack bool, seq, ackNum uint32) {
	if o.TCPFlags&inet.ACK != 0 {
		return false, o.Ack, 0
	}
	n := uint32(tcpSegmentLen(o))
	if o.TCPFlags&inet.SYN != 0 {
		n++
	}
	if o.TCPFlags&inet.FIN != 0 {
		n++
	}
	return true, 0, o.Seq + n
}

// mssOffset is the offset in the TCP header tcp of the value-bearing
// MSS option (kind 2, length 4), walked as the kernel's TCPMSS target
// walks the options; 0 when there is none.
func (d *Decoder) mssOffset(tcp []byte) int {
	hl := int(tcp[12]>>4) * 4
	for i := 20; i+4 <= hl; {
		if tcp[i] == 2 && tcp[i+1] == 4 {
			return i
		}
		if tcp[i] < 2 || tcp[i+1] == 0 {
			i++
			continue
		}
		i += int(tcp[i+1])
	}
	return 0
}

// nopOptions overwrites with NOPs every option of the TCP header at l4
// whose kind is in kinds, walking the options as the kernel's TCPOPTSTRIP
// does.
func nopOptions(w *rewriter, l4 int, kinds [4]uint64, ck int) {
	tcp := w.b[l4:]
	hl := int(tcp[12]>>4) * 4
	for i := 20; i < hl-1; {
		n := 1
		if tcp[i] > 1 && tcp[i+1] != 0 {
			n = int(tcp[i+1])
		}
		if i+n > hl {
			break
		}
		if k := tcp[i]; kinds[k/64]&(1<<(k%64)) != 0 {
			for j := i; j < i+n; j++ {
				w.setBytes(l4, l4+j, []byte{1}, ck)
			}
		}
		i += n
	}
}

// insertMSS adds an MSS option of value mss at the start of the options
// of the TCP header at l4 of the packet at dst[start:], as the kernel's
// TCPMSS target does for a segment without one: the options and any
// padding after them move up by 4 bytes, the data offset grows by one
// word, the IP length by 4, and the checksums are updated incrementally
// (the TCP one also for the pseudo-header's length).
func insertMSS(dst []byte, start, l3, l4, ipCk, l4Ck int, f Family, mss uint16) []byte {
	pos := start + l4 + 20
	dst = append(dst, 0, 0, 0, 0)
	copy(dst[pos+4:], dst[pos:len(dst)-4])
	dst[pos], dst[pos+1], dst[pos+2], dst[pos+3] = 2, 4, byte(mss>>8), byte(mss)
	w := rewriter{b: dst[start:]}
	w.adjust(l4Ck, []byte{0, 0, 0, 0}, w.b[l4+20:l4+24])
	var lens [4]byte
	if f == IPv4 {
		tot := binary.BigEndian.Uint16(w.b[l3+2:])
		binary.BigEndian.PutUint16(lens[0:], tot-uint16(l4-l3))
		binary.BigEndian.PutUint16(lens[2:], tot-uint16(l4-l3)+4)
		var v [2]byte
		w.set(l3+2, binary.BigEndian.AppendUint16(v[:0], tot+4), ipCk)
	} else {
		pl := binary.BigEndian.Uint16(w.b[l3+4:])
		binary.BigEndian.PutUint16(lens[0:], pl-uint16(l4-l3-40))
		binary.BigEndian.PutUint16(lens[2:], pl-uint16(l4-l3-40)+4)
		var v [2]byte
		w.set(l3+4, binary.BigEndian.AppendUint16(v[:0], pl+4))
	}
	w.adjust(l4Ck, lens[0:2], lens[2:4])
	w.set(l4+12, []byte{w.b[l4+12] + 0x10, w.b[l4+13]}, l4Ck)
	return dst
}

// setBytes writes v at off and updates the checksums at cks, whose
// 16-bit words start at an even distance from base: the words v touches
// are replaced whole, so an odd offset is handled.
func (w *rewriter) setBytes(base, off int, v []byte, cks ...int) {
	from := off - (off-base)%2
	to := off + len(v)
	if (to-base)%2 != 0 {
		to++
	}
	var old, nw [18]byte
	copy(old[:], w.b[from:to])
	copy(w.b[off:], v)
	copy(nw[:], w.b[from:to])
	for _, ck := range cks {
		w.adjust(ck, old[:to-from], nw[:to-from])
	}
}

// rewriter writes fields of a frame and updates the checksums covering
// them incrementally (RFC 1624), as the kernel's csum_replace does.
type rewriter struct {
	b []byte
	// udpCk are the offsets of IPv4 UDP checksums, where zero means none
	// and a result of zero is sent as 0xffff.
	udpCk [2]int
}

// set writes v (an even number of bytes, at an even offset from each
// checksum's start) at off and updates the checksums at cks (<0: none).
func (w *rewriter) set(off int, v []byte, cks ...int) {
	var old [16]byte
	n := copy(old[:], w.b[off:off+len(v)])
	copy(w.b[off:], v)
	for _, ck := range cks {
		w.adjust(ck, old[:n], v)
	}
}

func (w *rewriter) adjust(ck int, old, v []byte) {
	if ck < 0 || ck+2 > len(w.b) || bytes.Equal(old, v) {
		return // no change: keep the checksum's bytes (0x0000 and 0xffff are both zero)
	}
	c := binary.BigEndian.Uint16(w.b[ck:])
	udp := (ck == w.udpCk[0] || ck == w.udpCk[1]) && ck != 0
	if udp && c == 0 {
		return
	}
	sum := uint32(^c)
	for i := 0; i+1 < len(v); i += 2 {
		sum += uint32(^binary.BigEndian.Uint16(old[i:])) + uint32(binary.BigEndian.Uint16(v[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	r := ^uint16(sum)
	if udp && r == 0 {
		r = 0xffff
	}
	binary.BigEndian.PutUint16(w.b[ck:], r)
}

// AppendReplyFrame appends to dst the Ethernet frame of reply, a packet
// netfilter emitted (Result.Emitted) in answer to the frame orig, which
// arrived as dropped (Result.Packet). The Ethernet addresses are orig's,
// swapped. A TCP reset acknowledges or continues orig's sequence numbers
// as nf_send_reset does (DF set, IP ID 0, window 0); an ICMP or ICMPv6
// error quotes orig's IP packet from its header on, as much as fits in
// Result.Emitted's Length, with the TTL it had when it was dropped: the
// addresses are orig's, as conntrack restores them in an error about a
// NATed packet. The kernel's IP ID and IPv6 flow label of an ICMP error
// are not predictable; they are 0 here.
func (d *Decoder) AppendReplyFrame(dst, orig []byte, dropped, reply Packet) ([]byte, error) {
	return d.reply(dst, orig, dropped, reply, true)
}

// AppendReplyIP is AppendReplyFrame for raw IP packets.
func (d *Decoder) AppendReplyIP(dst, orig []byte, dropped, reply Packet) ([]byte, error) {
	return d.reply(dst, orig, dropped, reply, false)
}

func (d *Decoder) reply(dst, orig []byte, dropped, r Packet, eth bool) ([]byte, error) {
	decode := d.DecodeIP
	if eth {
		decode = d.Decode
	}
	o, err := decode(orig)
	if err != nil {
		return dst, err
	}
	if r.Family != o.Family {
		return dst, fmt.Errorf("%w: a %v reply to a %v packet", ErrBadValue, r.Family, o.Family)
	}
	ls := d.replyLayers[:0]
	var e layers.Ethernet
	if eth {
		e = layers.Ethernet{SrcMAC: orig[0:6:6], DstMAC: orig[6:12:12], EthernetType: d.eth.EthernetType}
		ls = append(ls, &e)
	}
	var ip4 layers.IPv4
	var ip6 layers.IPv6
	var nl gopacket.NetworkLayer
	if !r.Src.IsValid() || !r.Dst.IsValid() || r.Src.Is4() != (r.Family == IPv4) || r.Dst.Is4() != (r.Family == IPv4) {
		return dst, fmt.Errorf("%w: reply addresses %v -> %v for %v", ErrBadValue, r.Src, r.Dst, r.Family)
	}
	s16, t16 := r.Src.As16(), r.Dst.As16()
	if r.Family == IPv4 {
		s4, t4 := s16[12:], t16[12:]
		ip4 = layers.IPv4{Version: 4, IHL: 5, TOS: r.TOS, TTL: r.TTL, Protocol: layers.IPProtocol(r.Proto), SrcIP: s4, DstIP: t4}
		if r.Proto == inet.TCP {
			ip4.Flags = layers.IPv4DontFragment
		}
		ls, nl = append(ls, &ip4), &ip4
	} else {
		ip6 = layers.IPv6{Version: 6, TrafficClass: r.TOS, HopLimit: r.TTL, NextHeader: layers.IPProtocol(r.Proto), SrcIP: s16[:], DstIP: t16[:]}
		ls, nl = append(ls, &ip6), &ip6
	}
	var tcp layers.TCP
	var icmp4 layers.ICMPv4
	var icmp6 layers.ICMPv6
	switch r.Proto {
	case inet.TCP:
		if o.Proto != inet.TCP || d.l4 < 0 {
			return dst, fmt.Errorf("%w: a TCP reset answers a TCP segment", ErrBadValue)
		}
		tcp = layers.TCP{SrcPort: layers.TCPPort(r.SrcPort), DstPort: layers.TCPPort(r.DstPort), DataOffset: 5, RST: true}
		tcp.ACK, tcp.Seq, tcp.Ack = resetSeq(&d.pkt)
		d.resetSeq, d.resetAck = tcp.Seq, tcp.Ack
		if err := tcp.SetNetworkLayerForChecksum(nl); err != nil {
			return dst, err
		}
		ls = append(ls, &tcp)
	case inet.ICMP, inet.ICMPv6:
		hdr := 8 + 20
		if r.Family == IPv6 {
			hdr = 8 + 40
		}
		quote := d.quote[:0]
		if r.Proto == inet.ICMPv6 {
			quote = append(quote, 0, 0, 0, 0) // the unused word gopacket does not write
		}
		n := min(d.l3end-d.l3, max(r.Length-hdr, 0))
		qs := len(quote)
		quote = append(quote, orig[d.l3:d.l3+n]...)
		q := rewriter{b: quote[qs:]}
		if r.Family == IPv4 {
			q.set(8, []byte{dropped.TTL, q.b[9]}, 10)
		} else {
			q.b[7] = dropped.TTL
		}
		d.quote = quote
		if r.Proto == inet.ICMP {
			icmp4 = layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(r.ICMPType, r.ICMPCode)}
			ls = append(ls, &icmp4)
		} else {
			icmp6 = layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(r.ICMPType, r.ICMPCode)}
			if err := icmp6.SetNetworkLayerForChecksum(nl); err != nil {
				return dst, err
			}
			ls = append(ls, &icmp6)
		}
		ls = append(ls, gopacket.Payload(quote))
	default:
		return dst, fmt.Errorf("%w: a reply of protocol %d", ErrNotModelled, r.Proto)
	}
	d.replyLayers = ls[:0]
	if err := gopacket.SerializeLayers(d.buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		return dst, err
	}
	return append(dst, d.buf.Bytes()...), nil
}
