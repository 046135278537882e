package netfilter

import "encoding/binary"

// extFields fills the Packet fields of the extension matches from the
// decoded frame: the IPv6 extension header chain (ipv6header, frag, hbh,
// dst, rt, ah) and the headers of protocols the layer decoders leave as
// payload (AH and ESP SPIs, the IPComp CPI, DCCP ports, type and
// options, the Mobility Header type). Headers too short for a field
// leave it zero. It runs after a successful decode and allocates
// nothing.
func (d *Decoder) extFields() {
	p := &d.pkt
	if d.l3 < 0 {
		return
	}
	b := d.frame[:d.l3end]
	if p.Family == IPv6 {
		d.ipv6Chain(b)
	}
	if d.l4 < 0 || p.FragOffset != 0 || d.l4 > len(b) {
		return
	}
	h := b[d.l4:]
	switch p.Proto {
	case 51: // IPv4 AH; IPv6 AH is an extension header
		if p.Family == IPv4 && len(h) >= 8 {
			p.SPI = binary.BigEndian.Uint32(h[4:8])
		}
	case 50:
		if len(h) >= 4 {
			p.SPI = binary.BigEndian.Uint32(h[0:4])
		}
	case 108:
		if len(h) >= 4 {
			p.SPI = uint32(binary.BigEndian.Uint16(h[2:4]))
		}
	case 33:
		d.dccpFields(h)
	case 135:
		if len(h) >= 3 {
			p.MHType = h[2]
		}
	}
}

// dccpFields reads a DCCP header: ports, type, and the option types
// found walking the options as xt_dccp does.
func (d *Decoder) dccpFields(h []byte) {
	p := &d.pkt
	if len(h) < 12 {
		return
	}
	p.SrcPort, p.DstPort = binary.BigEndian.Uint16(h[0:2]), binary.BigEndian.Uint16(h[2:4])
	p.DCCPType = (h[8] >> 1) & 0x0f
	start := 12
	if h[8]&1 != 0 { // X: extended sequence numbers
		start = 16
	}
	switch p.DCCPType {
	case 2: // DATA
	case 0: // REQUEST: service code
		start += 4
	case 1, 7: // RESPONSE, RESET
		start += 12
	default: // acknowledgement subheader
		start += 8
	}
	end := int(h[4]) * 4
	if end > len(h) {
		end = len(h)
	}
	for i := start; i < end; {
		t := h[i]
		p.DCCPOptions[t/64] |= 1 << (t % 64)
		if t < 2 || i+1 >= end || h[i+1] == 0 {
			i++
			continue
		}
		i += int(h[i+1])
	}
}

// ipv6Chain walks the IPv6 extension headers after the fixed header as
// the kernel's ipv6header match does, recording the fields of the first
// header of each type. The walk ends at an upper-layer protocol, at "no
// next header", at ESP and after the fragment header of a non-first
// fragment (what follows is not a header).
func (d *Decoder) ipv6Chain(b []byte) {
	p := &d.pkt
	off := d.l3 + 40
	next := b[d.l3+6]
	var seen uint8
	for {
		var bit uint8
		switch next {
		case 0:
			bit = ExtHopByHop
		case 60:
			bit = ExtDstOpts
		case 43:
			bit = ExtRouting
		case 44:
			bit = ExtFragment
		case 51:
			bit = ExtAuth
		case 59:
			p.IPv6Exts = seen | ExtNone
			return
		case 50:
			p.IPv6Exts = seen | ExtESP
			return
		default:
			p.IPv6Exts = seen | ExtProto
			return
		}
		if off+8 > len(b) {
			p.IPv6Exts = seen
			return
		}
		h := b[off:]
		n := (int(h[1]) + 1) * 8
		switch bit {
		case ExtFragment:
			n = 8
			if seen&bit == 0 {
				fo := binary.BigEndian.Uint16(h[2:4])
				p.FragID = binary.BigEndian.Uint32(h[4:8])
				p.FragMore = fo&1 != 0
				p.FragReserved = h[1] != 0 || fo&6 != 0
			}
		case ExtAuth:
			n = (int(h[1]) + 2) * 4
			if seen&bit == 0 {
				p.AHLen = h[1]
				p.AHReserved = h[2] != 0 || h[3] != 0
				p.AHSPI = binary.BigEndian.Uint32(h[4:8])
			}
		case ExtRouting:
			if seen&bit == 0 {
				p.RTType, p.RTSegsLeft, p.RTLen = h[2], h[3], h[1]
				p.RTReserved = binary.BigEndian.Uint32(h[4:8]) != 0
				if h[2] == 4 && n <= len(h) {
					p.SRH, p.SRHNext, p.SRHLastEntry = true, h[0], h[4]
					p.SRHTag = binary.BigEndian.Uint16(h[6:8])
					sid := func(i int) (a [16]byte) {
						if o := 8 + 16*i; o+16 <= n {
							copy(a[:], h[o:o+16])
						}
						return a
					}
					p.SRHPrevSID = sid(int(h[3]) + 1)
					if h[3] > 0 {
						p.SRHNextSID = sid(int(h[3]) - 1)
					}
					p.SRHLastSID = sid(0)
				}
			}
		case ExtHopByHop:
			if seen&bit == 0 {
				p.HBHLen = h[1]
				p.NumHBHOpts = ipv6Options(&p.HBHOpts, h[2:min(n, len(h))])
			}
		case ExtDstOpts:
			if seen&bit == 0 {
				p.DstLen = h[1]
				p.NumDstOpts = ipv6Options(&p.DstOpts, h[2:min(n, len(h))])
			}
		}
		seen |= bit
		next = h[0]
		off += n
		if bit == ExtFragment && p.FragOffset != 0 {
			// A non-first fragment: the walk cannot go on.
			p.IPv6Exts = seen
			switch next {
			case 59:
			case 50:
				p.IPv6Exts |= ExtESP
			default:
				p.IPv6Exts |= ExtProto
			}
			return
		}
	}
}

// ipv6Options records up to len(dst) options of an options header in
// order (Pad1 has no length byte) and returns how many.
func ipv6Options(dst *[8]IPv6Option, opts []byte) uint8 {
	n := 0
	for i := 0; i < len(opts) && n < len(dst); {
		t := opts[i]
		if t == 0 {
			dst[n] = IPv6Option{Type: 0}
			n++
			i++
			continue
		}
		if i+1 >= len(opts) {
			break
		}
		dst[n] = IPv6Option{Type: t, Len: opts[i+1]}
		n++
		i += 2 + int(opts[i+1])
	}
	return uint8(n)
}
