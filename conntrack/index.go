package conntrack

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

// index finds an entry by either of its tuples, like the kernel's
// conntrack hash, or with bySource set by its original source alone (the
// kernel's nat bysource hash: address, port, protocol, zone). It is an
// open-addressing table with linear probing: every packet looks a tuple
// up, and a Go map keyed by the 64-byte tuple spent most of a lookup
// hashing and comparing the key.
//
// A tuple's home slot scales its hash to the number of slots (h*len/2^32),
// so slots are in hash order apart from probe runs: the tuples whose
// hashes fall in a range are found by scanning the slots of that range
// (see rangeSlots), which is how the table finds the kernel's hash
// buckets near a new tuple for early drop. Any length works, so the index
// grows by half and stays between half and three quarters full: with
// three slots per connection (two tuples, and the NAT source), the slots
// are a fifth of a table's memory.
type index struct {
	slots    []slot
	used     int
	bySource bool
}

// home returns the slot where a tuple of hash h starts its probe.
func (x *index) home(h uint32) int { return int(uint64(h) * uint64(len(x.slots)) >> 32) }

// next returns the slot after i, wrapping around.
func (x *index) next(i int) int {
	if i++; i == len(x.slots) {
		return 0
	}
	return i
}

// slot holds one tuple of an entry: e.Original or e.Reply, as dir says.
// hash is the low half of the tuple's hash, enough to place it and to
// skip most unequal tuples without reading the entry.
type slot struct {
	e    *Entry
	hash uint32
	dir  Dir
}

func (s *slot) tuple() *Tuple {
	if s.dir == Reply {
		return &s.e.Reply
	}
	return &s.e.Original
}

// hashTuple mixes every field of t. IPv4 and IPv4-mapped addresses, and
// addresses differing only in zone, hash alike; sameTuple tells them
// apart.
func hashTuple(t *Tuple) uint32 {
	const k1, k2, k3 = 0x9e3779b97f4a7c15, 0xc2b2ae3d27d4eb4f, 0x165667b19e3779f9
	s0, s1 := addrWords(t.Src)
	d0, d1 := addrWords(t.Dst)
	h := s0*k1 ^ s1*k2 ^ bits.RotateLeft64(d0*k3, 17) ^ bits.RotateLeft64(d1*k1, 31) ^
		(uint64(t.SrcPort)<<48|uint64(t.DstPort)<<32|uint64(t.ICMPType)<<24|uint64(t.ICMPCode)<<16|uint64(t.Proto)<<8)*k2 ^
		uint64(t.Zone)
	h ^= h >> 29
	h *= k3
	h ^= h >> 32
	return uint32(h)
}

// addrWords returns a's bytes as two words. An IPv4 address is read
// through As4: the 16-byte array of As16 is copied whole by the compiler,
// and reading it back stalls on the two stores that wrote it.
func addrWords(a netip.Addr) (uint64, uint64) {
	if a.Is4() {
		b := a.As4()
		return uint64(binary.BigEndian.Uint32(b[:])), 0
	}
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// hashSource mixes the fields of t's source part.
func hashSource(t *Tuple) uint32 {
	const k1, k2, k3 = 0x9e3779b97f4a7c15, 0xc2b2ae3d27d4eb4f, 0x165667b19e3779f9
	s0, s1 := addrWords(t.Src)
	h := s0*k1 ^ s1*k2 ^ (uint64(t.SrcPort)<<32|uint64(t.Proto)<<16|uint64(t.Zone))*k3
	h ^= h >> 29
	h *= k1
	h ^= h >> 32
	return uint32(h)
}

func (x *index) hash(t *Tuple) uint32 {
	if x.bySource {
		return hashSource(t)
	}
	return hashTuple(t)
}

// same reports whether t and u are the same key.
func (x *index) same(t, u *Tuple) bool {
	if x.bySource {
		return t.SrcPort == u.SrcPort && t.Src == u.Src && t.Proto == u.Proto && t.Zone == u.Zone
	}
	return sameTuple(t, u)
}

// sameTuple is t == u, comparing the fields that differ most often first.
func sameTuple(t, u *Tuple) bool {
	return t.SrcPort == u.SrcPort && t.DstPort == u.DstPort && t.Src == u.Src && t.Dst == u.Dst &&
		t.Proto == u.Proto && t.ICMPType == u.ICMPType && t.ICMPCode == u.ICMPCode && t.Zone == u.Zone
}

// find returns the slot holding tuple t, or the empty slot where it would
// go, and whether it was found.
func (x *index) find(t *Tuple, h uint32) (int, bool) {
	for i := x.home(h); ; i = x.next(i) {
		s := &x.slots[i]
		if s.e == nil {
			return i, false
		}
		if s.hash == h && x.same(s.tuple(), t) {
			return i, true
		}
	}
}

// get returns the entry holding tuple t and the tuple's direction.
func (x *index) get(t *Tuple) (*Entry, Dir, bool) {
	if x.used == 0 {
		return nil, Original, false
	}
	i, ok := x.find(t, x.hash(t))
	if !ok {
		return nil, Original, false
	}
	s := &x.slots[i]
	return s.e, s.dir, true
}

// put makes tuple dir of e find e, replacing whatever held that tuple.
func (x *index) put(e *Entry, dir Dir) {
	// At most three quarters full: a new connection's lookups are
	// misses, which probe to the end of their run (8.5 slots on average
	// at 3/4, each a hash compared in a contiguous array).
	if (x.used+1)*4 > len(x.slots)*3 {
		x.grow()
	}
	s := slot{e: e, dir: dir}
	s.hash = x.hash(s.tuple())
	i, ok := x.find(s.tuple(), s.hash)
	if !ok {
		x.used++
	}
	x.slots[i] = s
}

func (x *index) grow() {
	old := x.slots
	x.slots = make([]slot, max(2*(x.used+1), 16))
	for _, s := range old {
		if s.e == nil {
			continue
		}
		i := x.home(s.hash)
		for x.slots[i].e != nil {
			i = x.next(i)
		}
		x.slots[i] = s
	}
}

// del removes tuple t if e holds it, and reports whether it did.
func (x *index) del(t *Tuple, e *Entry) bool {
	if x.used == 0 {
		return false
	}
	i, ok := x.find(t, x.hash(t))
	if !ok || x.slots[i].e != e {
		return false
	}
	// Backward-shift deletion: move later slots of the run back into the
	// hole unless that would put them before their home slot.
	n := len(x.slots)
	dist := func(from, to int) int { // slots from from forward to to
		if d := to - from; d >= 0 {
			return d
		}
		return to - from + n
	}
	for j := x.next(i); x.slots[j].e != nil; j = x.next(j) {
		if dist(x.home(x.slots[j].hash), j) >= dist(i, j) {
			x.slots[i] = x.slots[j]
			i = j
		}
	}
	x.slots[i] = slot{}
	x.used--
	return true
}

// entries calls f for every entry once, by its original tuple.
func (x *index) entries(f func(e *Entry)) {
	for i := range x.slots {
		if s := &x.slots[i]; s.e != nil && s.dir == Original {
			f(s.e)
		}
	}
}

// rangeSlots calls f for every slot whose hash h has lo <= h < hi
// (hi at most 1<<32). It scans the slots those hashes call home and the
// probe run that continues past them: f must not change the index.
func (x *index) rangeSlots(lo, hi uint64, f func(s *slot)) {
	if x.used == 0 || lo >= hi {
		return
	}
	start := x.home(uint32(lo))
	span := x.home(uint32(hi-1)) - start
	i := start
	for n := range len(x.slots) {
		s := &x.slots[i]
		i = x.next(i)
		if s.e == nil {
			if n > span {
				return
			}
			continue
		}
		if h := uint64(s.hash); h >= lo && h < hi {
			f(s)
		}
	}
}

func (x *index) clear() {
	clear(x.slots)
	x.used = 0
}
