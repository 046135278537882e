package netfilter

import (
	"encoding/binary"
	"github.com/packetwalk/packetwalk/inet"
	"unsafe"
)

// packetBytes returns the bytes of the packet in c from the IP header on,
// for the matches that read them (string, u32, bpf): Packet.Raw when set,
// or else headers built from the packet's fields into the host's scratch
// buffer, followed by zeros up to Length. The result is only valid until
// the next call.
func (c *evalCtx) packetBytes() string {
	p := c.pkt
	if p.Raw != "" {
		return p.Raw
	}
	b := buildHeaders(c.host.scratch[:0], p)
	if n := p.Length; n > len(b) {
		for len(b) < n {
			b = append(b, 0)
		}
	} else if n > 0 {
		b = b[:n]
	}
	c.host.scratch = b
	if len(b) == 0 {
		return ""
	}
	// A read-only view of the scratch buffer, which nothing writes while
	// the match reads it; converting would allocate on every packet.
	return unsafe.String(&b[0], len(b))
}

// buildHeaders appends the IP and transport headers of p as a frame would
// carry them (checksums zero, no options).
func buildHeaders(b []byte, p *Packet) []byte {
	be := binary.BigEndian
	ipStart := len(b)
	if p.Family == IPv6 {
		b = append(b, make([]byte, 40)...)
		h := b[ipStart:]
		be.PutUint32(h[0:], 6<<28|uint32(p.TOS)<<20)
		if p.Length >= 40 {
			be.PutUint16(h[4:], uint16(p.Length-40))
		}
		h[6], h[7] = byte(p.Proto), p.TTL
		s, d := p.Src.As16(), p.Dst.As16()
		copy(h[8:], s[:])
		copy(h[24:], d[:])
	} else {
		b = append(b, make([]byte, 20)...)
		h := b[ipStart:]
		h[0], h[1] = 0x45, p.TOS
		be.PutUint16(h[2:], uint16(p.Length))
		be.PutUint16(h[4:], p.ID)
		be.PutUint16(h[6:], p.FragOffset&0x1fff)
		h[8], h[9] = p.TTL, byte(p.Proto)
		if p.Src.Is4() {
			s := p.Src.As4()
			copy(h[12:], s[:])
		}
		if p.Dst.Is4() {
			d := p.Dst.As4()
			copy(h[16:], d[:])
		}
	}
	if p.Family == IPv4 && p.FragOffset != 0 {
		return b // a later fragment carries no transport header
	}
	l4 := len(b)
	switch p.Proto {
	case inet.TCP:
		b = append(b, make([]byte, 20)...)
		h := b[l4:]
		be.PutUint16(h[0:], p.SrcPort)
		be.PutUint16(h[2:], p.DstPort)
		be.PutUint32(h[4:], p.Seq)
		be.PutUint32(h[8:], p.Ack)
		h[12], h[13] = 5<<4, byte(p.TCPFlags)
		be.PutUint16(h[14:], p.Window)
	case inet.UDP, inet.UDPLite:
		b = append(b, make([]byte, 8)...)
		h := b[l4:]
		be.PutUint16(h[0:], p.SrcPort)
		be.PutUint16(h[2:], p.DstPort)
		if n := p.Length - (l4 - ipStart); n > 0 {
			be.PutUint16(h[4:], uint16(n))
		}
	case inet.SCTP:
		b = append(b, make([]byte, 12)...)
		h := b[l4:]
		be.PutUint16(h[0:], p.SrcPort)
		be.PutUint16(h[2:], p.DstPort)
	case inet.ICMP, inet.ICMPv6:
		b = append(b, make([]byte, 8)...)
		h := b[l4:]
		h[0], h[1] = p.ICMPType, p.ICMPCode
		be.PutUint16(h[4:], p.ICMPID)
	}
	return b
}
