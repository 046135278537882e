package ipset

import (
	"encoding/binary"
	"math/bits"
)

// pfilter lets a lookup in a large IPv4 set with a walked net dimension
// skip the prefix lengths at which the set holds nothing for the address:
// the kernel probes a bucket for every present length (mtype_test_cidrs),
// which at a million elements is a cache miss each. It is a blocked Bloom
// filter over (masked address, prefix length) in 512-bit lines. The
// lengths 16 and up of one address fall in one line chosen by its /16:
// the line's first word has a bit for each such length present in the
// /16s of the line, and (masked address, length) sets two bits in one of
// the other seven words. So a lookup reads one line for them; shorter
// lengths each pick their own line. Deletions leave their bits (a stale
// bit costs only a probe), and the filter is rebuilt when it fills or goes
// stale. It never answers "absent" for a present element, so answers are
// the kernel's.
type pfilter struct {
	words []uint64 // lines of 8 words
	lines uint32   // a power of two
	added int      // elements set since the build
	stale int      // elements dropped since the build
}

const (
	pfilterMin     = 4096 // sets smaller than this are probed directly
	pfilterBitsPer = 16   // bits per element at the fullest
)

func fmix32(h uint32) uint32 {
	h ^= h >> 16
	h *= 0x85ebca6b
	h ^= h >> 13
	h *= 0xc2b2ae35
	h ^= h >> 16
	return h
}

func lenMask(l uint8) uint32 {
	if l == 0 {
		return 0
	}
	return ^uint32(0) << (32 - l)
}

// line16 is the line of the lengths 16 and up of address a.
func (f *pfilter) line16(a uint32) uint32 { return fmix32(a>>16) & (f.lines - 1) }

// pos returns the word and the two-bit mask of (a masked to l, l,
// extra); line16 is f.line16(a), xh is extraHash(extra). extra is what
// the element holds beside the walked net (filterExtra), so that a lookup
// whose port or other address no element of the prefix has is told so.
func (f *pfilter) pos(line16, a uint32, l uint8, xh uint64) (word uint32, mask uint64) {
	m := a & lenMask(l)
	line := line16
	if l < 16 {
		line = fmix32(m^uint32(l)<<1^0x9e3779b9) & (f.lines - 1)
	}
	h := (uint64(m)<<8 | uint64(l) ^ xh) * 0x9e3779b97f4a7c15
	return line*8 + 1 + uint32((h>>61)*7>>3), 1<<(h>>55&63) | 1<<(h>>49&63)
}

func (f *pfilter) add(a uint32, l uint8, extra uint32) {
	line16 := f.line16(a)
	if l >= 16 {
		f.words[line16*8] |= 1 << (l - 16)
	}
	w, m := f.pos(line16, a, l, extraHash(extra))
	f.words[w] |= m
	f.added++
}

// lens16 is the mask of lengths 16 and up (bit l-16) that may be present
// in the line line16.
func (f *pfilter) lens16(line16 uint32) uint64 { return f.words[line16*8] }

// has reports whether (a masked to l, l, extra) may be in the set;
// lens16 is f.lens16(line16), xh is extraHash(extra).
func (f *pfilter) has(line16, lens16, a uint32, l uint8, xh uint64) bool {
	if l >= 16 && lens16&(1<<(l-16)) == 0 {
		return false
	}
	w, m := f.pos(line16, a, l, xh)
	return f.words[w]&m == m
}

// filtered reports whether the set keeps a pfilter: IPv4 with a walked
// net dimension.
func (s *Set) filtered() bool { return s.family == 4 && (s.isNet(0) || s.isNet(2)) }

// walkedAddr is the IPv4 address and prefix length of record id's walked
// net dimension, and its filterExtra.
func (s *Set) walkedAddr(id uint32) (uint32, uint8, uint32) {
	k := s.keyOf(id)
	if s.isNet(0) {
		return binary.BigEndian.Uint32(k), s.recCIDR(id, 0), s.filterExtra(k)
	}
	return binary.BigEndian.Uint32(k[4:]), s.recCIDR(id, 2), s.filterExtra(k)
}

// extraHash spreads a filterExtra over the word pos hashes.
func extraHash(extra uint32) uint64 { return uint64(extra) * 0xff51afd7ed558ccd }

// filterExtra folds the hashed bytes kb of an IPv4 element that a walk
// does not change (all but the walked net and its prefix length) into
// the word the filter keeps with the net: the port and protocol of
// hash:net,port, the first address, port and protocol of
// hash:ip,port,net. hash:net has none, and hash:net,iface keeps its
// interface out of the hashed bytes, so the filter has only the net.
func (s *Set) filterExtra(kb []byte) uint32 {
	switch s.typ.name {
	case "hash:net,port":
		return uint32(kb[4]) | uint32(kb[5])<<8 | uint32(kb[6])<<16
	case "hash:ip,port,net":
		return fmix32(binary.LittleEndian.Uint32(kb)) ^ (uint32(kb[8]) | uint32(kb[9])<<8 | uint32(kb[11])<<16)
	}
	return 0
}

// filterAdd enters a placed record, building or rebuilding the filter
// when the set has grown into or out of it.
func (s *Set) filterAdd(id uint32) {
	if !s.filtered() {
		return
	}
	if s.reg.bulk {
		s.filter, s.filterDirty = nil, true
		return
	}
	f := s.filter
	if f == nil {
		if s.rec.live >= s.reg.filterMin {
			s.buildFilter()
		}
		return
	}
	if f.added+1 > int(f.lines)*512/pfilterBitsPer {
		s.buildFilter()
		return
	}
	f.add(s.walkedAddr(id))
}

// filterDrop notes a dropped record; many leave the filter to a rebuild
// (or to nothing, in a set that shrank below the minimum).
func (s *Set) filterDrop() {
	f := s.filter
	if f == nil {
		return
	}
	if s.reg.bulk {
		s.filter, s.filterDirty = nil, true
		return
	}
	f.stale++
	if f.stale > s.rec.live {
		s.filter = nil
		if s.rec.live >= s.reg.filterMin {
			s.buildFilter()
		}
	}
}

// buildFilter sizes the filter for twice the live elements and enters
// every record in use (a dead slot's record too: a stale bit costs only a
// probe), reading the records in order rather than bucket by bucket.
func (s *Set) buildFilter() {
	n := max(s.rec.live, pfilterMin) * 2 * pfilterBitsPer / 512
	lines := uint32(1) << bits.Len32(uint32(n-1))
	f := &pfilter{words: make([]uint64, lines*8), lines: lines}
	free := make([]uint64, (s.nrec()+63)/64)
	for _, id := range s.rec.free {
		free[id/64] |= 1 << (id % 64)
	}
	for id := range uint32(s.nrec()) {
		if free[id/64]&(1<<(id%64)) == 0 {
			f.add(s.walkedAddr(id))
		}
	}
	s.filter = f
}
