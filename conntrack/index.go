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
	groups   []group
	n        int // slots: 4 per group
	used     int
	bySource bool
}

// group holds four slots. A slot holds one tuple of an entry, the
// direction in bit 0 of its hash word (hashes are even); hash is the low
// half of the tuple's hash, enough to place it and to skip most unequal
// tuples without reading the entry. Four pointers and four hashes in a
// group take 12 bytes a slot, where a slot struct would be padded to 16,
// and keep a slot's pointer and hash in the same cache line or the next.
type group struct {
	e [4]*Entry
	h [4]uint32
}

// at returns the entry and hash word of slot i.
func (x *index) at(i int) (*Entry, uint32) {
	g := &x.groups[i>>2]
	return g.e[i&3], g.h[i&3]
}

func (x *index) set(i int, e *Entry, hw uint32) {
	g := &x.groups[i>>2]
	g.e[i&3], g.h[i&3] = e, hw
}

// home returns the slot where a tuple of hash h starts its probe.
func (x *index) home(h uint32) int { return int(uint64(h) * uint64(x.n) >> 32) }

// next returns the slot after i, wrapping around.
func (x *index) next(i int) int {
	if i++; i == x.n {
		return 0
	}
	return i
}

// hashTuple mixes every field of t. IPv4 and IPv4-mapped addresses, and
// addresses differing only in zone, hash alike; Entry.matches tells
// them apart.
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
	return uint32(h) &^ 1 // bit 0 of a slot's hash word is the direction
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
	return uint32(h) &^ 1 // bit 0 of a slot's hash word is the direction
}

func (x *index) hash(t *Tuple) uint32 {
	if x.bySource {
		return hashSource(t)
	}
	return hashTuple(t)
}

// find returns the slot holding tuple t, or the empty slot where it would
// go, and whether it was found.
func (x *index) find(t *Tuple, h uint32) (int, bool) {
	for i := x.home(h); ; i = x.next(i) {
		g := &x.groups[i>>2]
		e, hw := g.e[i&3], g.h[i&3]
		if e == nil {
			return i, false
		}
		if hw&^1 != h {
			continue
		}
		// One call, not two through same: this runs for every packet.
		if x.bySource {
			if e.matchesSource(t) {
				return i, true
			}
		} else if e.matches(Dir(hw&1), t) {
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
	e, hw := x.at(i)
	return e, Dir(hw & 1), true
}

// put makes tuple dir of e find e, replacing whatever held that tuple.
func (x *index) put(e *Entry, dir Dir) {
	// At most three quarters full: a new connection's lookups are
	// misses, which probe to the end of their run (8.5 slots on average
	// at 3/4, each a hash compared in a contiguous array).
	if (x.used+1)*4 > x.n*3 {
		x.grow()
	}
	t := e.Tuple(dir)
	h := x.hash(&t)
	i, ok := x.find(&t, h)
	if !ok {
		x.used++
	}
	x.set(i, e, h|uint32(dir&1))
}

func (x *index) grow() {
	old, oldN := x.groups, x.n
	x.n = (max(2*(x.used+1), 16) + 3) &^ 3
	x.groups = make([]group, x.n/4)
	for j := range oldN {
		g := &old[j>>2]
		e, hw := g.e[j&3], g.h[j&3]
		if e == nil {
			continue
		}
		i := x.home(hw &^ 1)
		for x.groups[i>>2].e[i&3] != nil {
			i = x.next(i)
		}
		x.set(i, e, hw)
	}
}

// del removes tuple t if e holds it, and reports whether it did.
func (x *index) del(t *Tuple, e *Entry) bool {
	if x.used == 0 {
		return false
	}
	i, ok := x.find(t, x.hash(t))
	if !ok {
		return false
	}
	if got, _ := x.at(i); got != e {
		return false
	}
	// Backward-shift deletion: move later slots of the run back into the
	// hole unless that would put them before their home slot.
	n := x.n
	dist := func(from, to int) int { // slots from from forward to to
		if d := to - from; d >= 0 {
			return d
		}
		return to - from + n
	}
	for j := x.next(i); ; j = x.next(j) {
		ej, hj := x.at(j)
		if ej == nil {
			break
		}
		if dist(x.home(hj&^1), j) >= dist(i, j) {
			x.set(i, ej, hj)
			i = j
		}
	}
	x.set(i, nil, 0)
	x.used--
	return true
}

// entries calls f for every entry once, by its original tuple.
func (x *index) entries(f func(e *Entry)) {
	for i := range x.groups {
		g := &x.groups[i]
		for k, e := range g.e {
			if e != nil && Dir(g.h[k]&1) == Original {
				f(e)
			}
		}
	}
}

// rangeSlots calls f for the entry of every slot whose hash h has
// lo <= h < hi (hi at most 1<<32). It scans the slots those hashes call
// home and the probe run that continues past them: f must not change the
// index.
func (x *index) rangeSlots(lo, hi uint64, f func(e *Entry)) {
	if x.used == 0 || lo >= hi {
		return
	}
	start := x.home(uint32(lo))
	span := x.home(uint32(hi-1)) - start
	i := start
	for n := range x.n {
		e, hw := x.at(i)
		i = x.next(i)
		if e == nil {
			if n > span {
				return
			}
			continue
		}
		if h := uint64(hw &^ 1); h >= lo && h < hi {
			f(e)
		}
	}
}

func (x *index) clear() {
	clear(x.groups)
	x.used = 0
}
