package netfilter

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"time"
)

// Reassembly as conntrack's nf_defrag_ipv4 and nf_defrag_ipv6 do it: once
// a loaded rule needs conntrack, fragments are queued at PREROUTING and
// OUTPUT (priority -400, before raw) and only the reassembled packet
// crosses the hooks. A forwarded or sent reassembled packet leaves cut
// along the fragments it was made of (the kernel's ip_do_fragment and
// ip6_fragment fast path reuse the fragment list), without DF.

// fragTimeout is net.ipv4.ipfrag_time and net.netfilter.nf_conntrack_frag6_timeout.
const fragTimeout = 30 * time.Second

// maxFragQueues bounds the queues held at once, standing in for the
// kernel's memory threshold (ipfrag_high_thresh): beyond it new
// fragments are dropped.
const maxFragQueues = 4096

// Reasons a fragment did not cross the hooks (Result.Reason).
const (
	reasonHeld     = ReasonFragmentHeld
	reasonDup      = ReasonFragmentDuplicate
	reasonOverlap  = ReasonFragmentOverlap
	reasonBadFrag  = ReasonFragmentInconsistent
	reasonOversize = ReasonReassembledTooLong
	reasonFragMem  = ReasonTooManyFragments
)

// defragging reports whether fragments of family f are reassembled
// before the hooks: some loaded rule needs conntrack.
func (h *Host) defragging(f Family) bool {
	p := h.progs[famIdx(f)]
	return p != nil && p.conntrack
}

// fragKey identifies a reassembly queue: addresses, protocol and the
// IPv4 identification or IPv6 fragment header identification.
type fragKey struct {
	src, dst netip.Addr
	id       uint32
	proto    uint8
	out      bool // OUTPUT queues are the kernel's separate defrag user
}

// fragPiece is one fragment kept in a queue: where its data goes and the
// data (copied).
type fragPiece struct {
	off  int
	data []byte
}

// fragQueue collects the fragments of one packet.
type fragQueue struct {
	created time.Time
	pieces  []fragPiece // sorted by off, never overlapping
	// first is the offset-0 fragment's frame up to its data: link and IP
	// header (IPv6: up to and including the fragment header).
	first    []byte
	fragHdr  int // IPv6: offset in first of the fragment header, else -1
	lastIn   bool
	length   int // the end of the data as known so far
	meat     int // bytes of data held
	maxSize  int // largest fragment's IP packet length
	maxDF    int // largest fragment with DF
	linkLen  int // bytes of link header in first
	haveHead bool
}

// fragInfo is what defragmentation needs of a decoded fragment.
type fragInfo struct {
	key     fragKey
	off     int  // data offset in bytes
	mf      bool // more fragments
	df      bool
	hdrEnd  int // frame offset where the fragment's data starts
	end     int // frame offset where the IP packet ends
	fragHdr int // IPv6: frame offset of the fragment header
	ipStart int
}

// fragment returns the fragment facts of the frame the decoder just
// decoded, and false when it is not a fragment.
func (d *Decoder) fragment(out bool) (fragInfo, bool) {
	p := &d.pkt
	fi := fragInfo{key: fragKey{src: p.Src, dst: p.Dst, out: out}, ipStart: d.l3, end: d.l3end, fragHdr: -1}
	if p.Family == IPv4 {
		if !d.fragmented() {
			return fi, false
		}
		fi.key.id, fi.key.proto = uint32(d.ip4.Id), uint8(d.ip4.Protocol)
		fi.off = int(d.ip4.FragOffset) * 8
		fi.mf = d.ip4.Flags&0x1 != 0
		fi.df = d.ip4.Flags&0x2 != 0
		fi.hdrEnd = d.l3 + int(d.ip4.IHL)*4
		return fi, true
	}
	if d.frag6 < 0 {
		return fi, false
	}
	b := d.frame[d.frag6:]
	fo := binary.BigEndian.Uint16(b[2:4])
	fi.key.id, fi.key.proto = binary.BigEndian.Uint32(b[4:8]), b[0]
	fi.off, fi.mf = int(fo>>3)*8, fo&1 != 0
	if fi.off == 0 && !fi.mf {
		return fi, false // an atomic fragment (RFC 6946) is a whole packet
	}
	fi.fragHdr, fi.hdrEnd = d.frag6, d.frag6+8
	return fi, true
}

// defrag adds a fragment to its queue. It returns the reassembled frame
// (in f.whole) and true once the queue is complete, or a reason the
// fragment stops here.
func (f *FrameHost) defrag(frame []byte, fi fragInfo) (bool, Reason) {
	now := f.Host.clock.Now()
	for k, q := range f.queues {
		if now.Sub(q.created) >= fragTimeout {
			// The kernel expires conntrack's queues silently: no ICMP
			// time exceeded from a router's defragmentation.
			delete(f.queues, k)
		}
	}
	q := f.queues[fi.key]
	if q == nil {
		if len(f.queues) >= maxFragQueues {
			return false, reasonFragMem
		}
		q = &fragQueue{created: now, fragHdr: -1}
		if f.queues == nil {
			f.queues = map[fragKey]*fragQueue{}
		}
		f.queues[fi.key] = q
	}
	data := frame[fi.hdrEnd:fi.end]
	off, end := fi.off, fi.off+len(data)
	kill := func(reason Reason) (bool, Reason) {
		delete(f.queues, fi.key)
		return false, reason
	}
	if !fi.mf {
		if end < q.length || q.lastIn && end != q.length {
			return kill(reasonBadFrag)
		}
		q.lastIn, q.length = true, end
	} else {
		if end&7 != 0 {
			if f.dec.pkt.Family == IPv6 {
				return kill(reasonBadFrag) // nf_ct_frag6_queue refuses it
			}
			end &^= 7
			data = data[:end-off]
		}
		if end > q.length {
			if q.lastIn {
				return kill(reasonBadFrag)
			}
			q.length = end
		}
	}
	if end == off {
		return kill(reasonBadFrag)
	}
	// inet_frag_queue_insert: a fragment inside what contiguous fragments
	// already cover is a duplicate and ignored; any other overlap
	// discards the whole queue (RFC 5722, applied to IPv4 too).
	i, _ := slices.BinarySearchFunc(q.pieces, off, func(p fragPiece, o int) int { return p.off - o })
	if i > 0 && q.pieces[i-1].off+len(q.pieces[i-1].data) > off || i < len(q.pieces) && q.pieces[i].off < end {
		if q.covered(off, end) {
			return false, reasonDup
		}
		return kill(reasonOverlap)
	}
	q.pieces = slices.Insert(q.pieces, i, fragPiece{off: off, data: append([]byte(nil), data...)})
	q.meat += len(data)
	size := fi.end - fi.ipStart
	q.maxSize = max(q.maxSize, size)
	if fi.df {
		q.maxDF = max(q.maxDF, size)
	}
	if off == 0 {
		q.haveHead, q.linkLen = true, fi.ipStart
		q.first = append(q.first[:0], frame[:fi.hdrEnd]...)
		if fi.fragHdr >= 0 {
			q.fragHdr = fi.fragHdr
		}
	}
	if !q.haveHead || !q.lastIn || q.meat != q.length {
		return false, reasonHeld
	}
	delete(f.queues, fi.key)
	unfrag := len(q.first) - q.linkLen
	if q.fragHdr >= 0 {
		unfrag -= 8
	}
	if unfrag+q.length > 65535+40*b2i(q.fragHdr >= 0) {
		return false, reasonOversize
	}
	f.whole = f.reassemble(f.whole[:0], q)
	f.pieces = f.pieces[:0]
	for _, p := range q.pieces {
		f.pieces = append(f.pieces, [2]int{p.off, len(p.data)})
	}
	f.unfragLen, f.fragLink, f.fragID, f.fragV6 = unfrag, q.linkLen, fi.key.id, q.fragHdr >= 0
	return true, NoReason
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// covered reports whether [off, end) lies inside one run of contiguous
// fragments.
func (q *fragQueue) covered(off, end int) bool {
	runStart, runEnd := -1, -1
	for _, p := range q.pieces {
		if p.off != runEnd {
			runStart = p.off
		}
		runEnd = p.off + len(p.data)
		if runStart <= off && end <= runEnd {
			return true
		}
	}
	return false
}

// reassemble appends the whole packet: the first fragment's link and IP
// headers (IPv6: without the fragment header) and the data.
func (f *FrameHost) reassemble(dst []byte, q *fragQueue) []byte {
	start := len(dst)
	if q.fragHdr < 0 {
		dst = append(dst, q.first...)
		ip := dst[start+q.linkLen:]
		hl := len(ip)
		binary.BigEndian.PutUint16(ip[2:4], uint16(hl+q.length))
		// ip_frag_reasm: DF when the largest fragment had it.
		var ff uint16
		if q.maxDF == q.maxSize {
			ff = 0x4000
		}
		binary.BigEndian.PutUint16(ip[6:8], ff)
		ipChecksum(ip[:hl])
	} else {
		dst = append(dst, q.first[:q.fragHdr]...)
		next := q.first[q.fragHdr]
		ip := dst[start+q.linkLen:]
		ip[prevNextHeader(ip, q.fragHdr-q.linkLen)] = next
		binary.BigEndian.PutUint16(ip[4:6], uint16(len(ip)-40+q.length))
	}
	for _, p := range q.pieces {
		dst = append(dst, p.data...)
	}
	return dst
}

// prevNextHeader returns the offset in the IPv6 packet ip of the
// next-header byte that announces the header at offset target.
func prevNextHeader(ip []byte, target int) int {
	at, hdr := 6, 40
	for hdr < target && hdr+2 <= len(ip) {
		n := (int(ip[hdr+1]) + 1) * 8
		if ip[at] == 51 { // AH counts 4-byte units, minus 2
			n = (int(ip[hdr+1]) + 2) * 4
		}
		at, hdr = hdr, hdr+n
	}
	return at
}

// ipChecksum computes the IPv4 header checksum of hdr in place.
func ipChecksum(hdr []byte) {
	hdr[10], hdr[11] = 0, 0
	var sum uint32
	for i := 0; i+1 < len(hdr); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(hdr[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	binary.BigEndian.PutUint16(hdr[10:], ^uint16(sum))
}

// refragment appends to dst the frames of the whole packet pkt (as it
// leaves, link header included, linkLen bytes of it) cut along the
// received fragments, as the kernel's fragment-list fast path does: each
// fragment gets the whole packet's headers, its offset and MF, and no
// DF; IPv4 options without the copied flag become NOPs after the first
// fragment (ip_options_fragment); IPv6 fragments get a fragment header
// with the original identification (the kernel picks a new one, a keyed
// hash packetwalk cannot reproduce).
func (f *FrameHost) refragment(dst [][]byte, pkt []byte) [][]byte {
	unfrag, linkLen, v6, id := f.unfragLen, f.fragLink, f.fragV6, f.fragID
	hdr := pkt[:linkLen+unfrag]
	data := pkt[linkLen+unfrag:]
	for i, pc := range f.pieces {
		if i == len(f.fragBufs) {
			f.fragBufs = append(f.fragBufs, nil)
		}
		b := append(f.fragBufs[i][:0], hdr...)
		ip := b[linkLen:]
		chunk := data[pc[0] : pc[0]+pc[1]]
		mf := i < len(f.pieces)-1
		if !v6 && i > 0 {
			nopUncopiedOptions(ip[20:unfrag])
		}
		if !v6 {
			binary.BigEndian.PutUint16(ip[2:4], uint16(unfrag+len(chunk)))
			ff := uint16(pc[0] / 8)
			if mf {
				ff |= 0x2000
			}
			binary.BigEndian.PutUint16(ip[6:8], ff)
			ipChecksum(ip[:unfrag])
		} else {
			at := prevNextHeader(ip, unfrag)
			next := ip[at]
			ip[at] = 44
			fo := uint16(pc[0]/8) << 3
			if mf {
				fo |= 1
			}
			b = append(b, next, 0, byte(fo>>8), byte(fo), byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
			ip = b[linkLen:]
			binary.BigEndian.PutUint16(ip[4:6], uint16(unfrag-40+8+len(chunk)))
		}
		b = append(b, chunk...)
		f.fragBufs[i] = b
		dst = append(dst, b)
	}
	return dst
}

// nopUncopiedOptions overwrites with NOPs, in place, the IPv4 options
// whose type lacks the copied flag (0x80), as ip_options_fragment does for
// every fragment after the first; the header keeps its length. It stops
// at End of Options or at a malformed length, like the kernel.
func nopUncopiedOptions(opts []byte) {
	for i := 0; i < len(opts); {
		switch opts[i] {
		case 0: // End of Options
			return
		case 1: // NOP
			i++
			continue
		}
		if i+1 >= len(opts) {
			return
		}
		n := int(opts[i+1])
		if n < 2 || n > len(opts)-i {
			return
		}
		if opts[i]&0x80 == 0 {
			for j := i; j < i+n; j++ {
				opts[j] = 1
			}
		}
		i += n
	}
}
