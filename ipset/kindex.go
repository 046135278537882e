package ipset

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"time"
)

// kindex answers packet lookups in IPv4 hash:ip, hash:net, hash:ip,port
// and hash:net,port sets without walking the kernel's buckets. A probe of
// the buckets reads the bucket, often a block of slots beside it, then the
// record: at a million elements each is a cache miss, and a net set pays
// them at every prefix length it tries. The hashed bytes of these types
// are at most 8, so the index keeps them whole, with the nomatch flag, in
// an open-addressing table of words (linear probing, at most 70% full):
// one probe is one cache line, and the answer needs nothing else. The
// buckets stay the model of the kernel (order, Size in memory, resize);
// the index holds the same live records' keys, kept in step where a
// record gets or loses its key (setRec, applyRecOpts, dropRec).
type kindex struct {
	ent  []uint64 // kidxEmpty or key word | kidxNomatch
	n    int
	bits uint8
	kind uint8 // kidxIP...
}

// The set types a kindex serves.
const (
	kidxIP uint8 = iota
	kidxNet
	kidxIPPort
	kidxNetPort
)

const (
	// kidxEmpty is no key word: in each type a padding or prefix-length
	// byte can never be 0xff.
	kidxEmpty = ^uint64(0)
	// kidxNomatch is a flag bit no key word uses: the top bit of byte 7,
	// which is padding, a prefix length of at most 32, or (hash:net,port)
	// the kernel's own nomatch bit, which records keep 0.
	kidxNomatch = uint64(1) << 63
	kidxMinBits = 4
)

// kidxCap is how many keys an index of 2^b entries takes: 70% full, so
// that most probes end in the line they start in (the index costs 11 to
// 23 bytes per element).
func kidxCap(b uint8) int { return 7 << b / 10 }

// newKindex sizes an index for n keys: the smallest power of two they
// fill to at most kidxLoad.
func newKindex(n int) *kindex {
	b := uint8(kidxMinBits)
	for n > kidxCap(b) {
		b++
	}
	x := &kindex{ent: make([]uint64, 1<<b), bits: b}
	for i := range x.ent {
		x.ent[i] = kidxEmpty
	}
	return x
}

func (x *kindex) home(k uint64) uint64 { return (k * 0x9e3779b97f4a7c15) >> (64 - x.bits) }

// find returns the entry of key word k (without the flag), or kidxEmpty.
func (x *kindex) find(k uint64) uint64 {
	m := uint64(len(x.ent) - 1)
	for i := x.home(k); ; i = (i + 1) & m {
		e := x.ent[i]
		if e&^kidxNomatch == k || e == kidxEmpty {
			return e
		}
	}
}

// set enters key word k with its nomatch flag, or updates its flag.
func (x *kindex) set(k uint64, nomatch bool) {
	e := k
	if nomatch {
		e |= kidxNomatch
	}
	m := uint64(len(x.ent) - 1)
	for i := x.home(k); ; i = (i + 1) & m {
		switch c := x.ent[i]; {
		case c == kidxEmpty:
			x.ent[i] = e
			x.n++
			if x.n > kidxCap(x.bits) {
				x.grow()
			}
			return
		case c&^kidxNomatch == k:
			x.ent[i] = e
			return
		}
	}
}

func (x *kindex) grow() {
	old := x.ent
	kind := x.kind
	*x = *newKindex(x.n)
	x.kind = kind
	for _, e := range old {
		if e != kidxEmpty {
			x.set(e&^kidxNomatch, e&kidxNomatch != 0)
		}
	}
}

// del removes key word k, shifting later entries of its run back so that
// no probe needs a tombstone.
func (x *kindex) del(k uint64) {
	m := uint64(len(x.ent) - 1)
	i := x.home(k)
	for {
		e := x.ent[i]
		if e == kidxEmpty {
			return
		}
		if e&^kidxNomatch == k {
			break
		}
		i = (i + 1) & m
	}
	x.n--
	for j := (i + 1) & m; ; j = (j + 1) & m {
		e := x.ent[j]
		if e == kidxEmpty {
			break
		}
		// e may move to the hole at i when its home is not in (i, j].
		if h := x.home(e &^ kidxNomatch); (j-h)&m >= (j-i)&m {
			x.ent[i] = e
			i = j
		}
	}
	x.ent[i] = kidxEmpty
}

// indexed reports whether the set's type keeps a kindex.
func (s *Set) indexed() bool {
	if s.family != 4 {
		return false
	}
	switch s.typ.name {
	case "hash:ip", "hash:net", "hash:ip,port", "hash:net,port":
		return true
	}
	return false
}

// newKindex is an empty index of the set's type for n keys.
func (s *Set) newKindex(n int) *kindex {
	x := newKindex(n)
	x.kind = map[string]uint8{"hash:ip": kidxIP, "hash:net": kidxNet,
		"hash:ip,port": kidxIPPort, "hash:net,port": kidxNetPort}[s.typ.name]
	return x
}

// recWord is record id's key bytes as a key word.
func (s *Set) recWord(id uint32) uint64 {
	var b [8]byte
	copy(b[:], s.keyOf(id))
	return binary.LittleEndian.Uint64(b[:])
}

// kidxSet enters record id (its key and nomatch flag) in the index.
func (s *Set) kidxSet(id uint32) {
	if s.kidxDefer() {
		return
	}
	s.kidx.set(s.recWord(id), *s.flag(id)&recNomatch != 0)
}

// kidxDrop removes record id's key from the index.
func (s *Set) kidxDrop(id uint32) {
	if s.kidxDefer() {
		return
	}
	s.kidx.del(s.recWord(id))
}

// kidxDefer reports that the index is not to be updated: the set keeps
// none, or a Restore is running, which drops it to build it once at the
// end (Registry.endBulk).
func (s *Set) kidxDefer() bool {
	if s.kidx == nil {
		return true
	}
	if s.reg.bulk {
		s.kidx, s.filterDirty = nil, true
		return true
	}
	return false
}

// buildKidx enters every live record (expired ones too: a lookup that
// may meet one does not use the index). The records in use, marked from
// the slots, are read in order rather than bucket by bucket, and their
// keys entered in the order of their home entries (a counting sort on its
// top bits), so that the index is written front to back rather than at
// random: at a million elements, the difference is most of its cost.
func (s *Set) buildKidx() {
	x := s.newKindex(s.rec.live)
	live := make([]uint64, (s.nrec()+63)/64)
	s.eachHashMember(time.Time{}, true, func(id uint32) { live[id/64] |= 1 << (id % 64) })
	keys := make([]uint64, 0, s.rec.live)
	for i, m := range live {
		for m != 0 {
			id := uint32(i*64 + bits.TrailingZeros64(m))
			m &= m - 1
			k := s.recWord(id)
			if *s.flag(id)&recNomatch != 0 {
				k |= kidxNomatch
			}
			keys = append(keys, k)
		}
	}
	pb := min(x.bits, 12)
	part := func(k uint64) uint64 { return x.home(k&^kidxNomatch) >> (x.bits - pb) }
	start := make([]int, 1<<pb+1)
	for _, k := range keys {
		start[part(k)+1]++
	}
	for i := 1; i < len(start); i++ {
		start[i] += start[i-1]
	}
	sorted := make([]uint64, len(keys))
	for _, k := range keys {
		p := part(k)
		sorted[start[p]] = k
		start[p]++
	}
	for _, k := range sorted {
		x.set(k&^kidxNomatch, k&kidxNomatch != 0)
	}
	s.kidx = x
}

// kidxLookup answers a packet lookup from the index: found and the
// deciding element's nomatch flag. usable is false when the index cannot
// answer: none is kept (or it is deferred to the end of a Restore), or an
// element may have expired, or counters must be read or compared.
func (s *Set) kidxLookup(pk *Key, counters bool) (found, nomatch, usable bool) {
	x := s.kidx
	if x == nil || s.hasTimeout || (counters && s.counters) {
		return false, false, false
	}
	w, ok := s.kidxWord(x, pk)
	if !ok {
		return false, false, true
	}
	if x.kind == kidxIP || x.kind == kidxIPPort {
		e := x.find(w)
		return e != kidxEmpty, e != kidxEmpty && e&kidxNomatch != 0, true
	}
	// The prefix lengths present, longest first, as hfindBytes walks them
	// (the filter, when there is one, skips lengths that cannot match).
	a := bits.ReverseBytes32(uint32(w))
	rest := w & 0x00ffffff_00000000
	f, fa, line, lm := s.filterAt(a)
	extra := extraHash(uint32(rest>>32) & 0xffffff) // filterExtra: hash:net's is 0
	if f == nil {
		for _, l := range s.lens1 {
			if e := x.find(x.netWord(rest, a, l)); e != kidxEmpty {
				return true, e&kidxNomatch != 0, true
			}
		}
		return false, false, true
	}
	for cand := lm & s.pres1; cand != 0; {
		i := bits.Len32(cand) - 1
		cand &^= 1 << i
		l := uint8(i + 16)
		if !f.has(line, lm, fa, l, extra) {
			continue
		}
		if e := x.find(x.netWord(rest, a, l)); e != kidxEmpty {
			return true, e&kidxNomatch != 0, true
		}
	}
	for _, l := range s.lens1 {
		if l >= 16 || !f.has(line, lm, fa, l, extra) {
			continue
		}
		if e := x.find(x.netWord(rest, a, l)); e != kidxEmpty {
			return true, e&kidxNomatch != 0, true
		}
	}
	return false, false, true
}

// kidxWord is the key word of a packet key, a net dimension at /32, as
// packetBytes writes it; ok is false when the key does not fit the set.
func (s *Set) kidxWord(x *kindex, pk *Key) (w uint64, ok bool) {
	a := pk.Addr
	if !a.Is4() {
		if a = a.Unmap(); !a.Is4() {
			return 0, false
		}
	}
	if s.netmask != 0 {
		a = netip.PrefixFrom(a, s.netmask).Masked().Addr()
	}
	b := a.As4()
	w = uint64(binary.LittleEndian.Uint32(b[:]))
	port := pk.Port
	if !keyHasPort(pk.Proto) {
		port = 0
	}
	switch x.kind {
	case kidxNet:
		w |= 32 << 56
	case kidxIPPort:
		w |= uint64(port>>8)<<32 | uint64(port&0xff)<<40 | uint64(pk.Proto)<<48
	case kidxNetPort:
		w |= uint64(port>>8)<<32 | uint64(port&0xff)<<40 | uint64(pk.Proto)<<48 | 31<<56
	}
	return w, true
}

// netWord is the key word of address a (host order) masked to l, with
// the bytes after the address from rest.
func (x *kindex) netWord(rest uint64, a uint32, l uint8) uint64 {
	c := l
	if x.kind == kidxNetPort {
		c = (l - 1) & 0x7f
	}
	return rest | uint64(c)<<56 | uint64(bits.ReverseBytes32(a&lenMask(l)))
}
