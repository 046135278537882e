package ipset

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
	"time"

	"github.com/packetwalk/packetwalk/internal/jhash"
)

// The kernel's hash table of a hash:* set (ip_set_hash_gen.h), modelled so
// that "Size in memory", member order, hashsize growth and the buckets a
// forceadd evicts from come out as the kernel's for a known initval.
//
// An element's bucket is jhash2 over the element's hashed bytes (the
// type's struct mtype_elem, or its _hashed prefix for hash:net,iface) read
// as native (little-endian) 32-bit words, masked to the table size. A
// bucket holds up to bucketsize elements, allocated AHASH_INIT_SIZE slots
// at a time; a userspace add into a full bucket doubles the table (resize),
// a packet-path add into one fails.

// hbucket is the kernel's struct hbucket: slots up to its pos, size the
// allocated slot count. A slot whose used bit a delete (or the gc) cleared
// keeps its dead entry: the kernel leaves the bytes there, and an element
// later placed in the slot inherits its counters (observed).
type hbucket struct {
	slots []*entry
	size  int
}

// htable is the set's bucket array (sparse) and the bytes the kernel books
// for its buckets (hregion ext_size).
type htable struct {
	bits    uint8
	buckets map[uint32]*hbucket
	extSize int
}

const (
	ahashMaxSize  = 12 // largest bucketsize create accepts
	ahashMaxTuned = 64 // hash:net,iface's bucketsize stops growing here
)

func newHtable(hashsize int) htable {
	return htable{bits: uint8(bits.Len(uint(hashsize - 1))), buckets: map[uint32]*hbucket{}}
}

// hashedBytes writes the bytes of k the kernel hashes: the element struct
// as the add path fills it (nomatch still 0, it is set after placement).
// It returns the length, a multiple of 4.
func (s *Set) hashedBytes(k *ekey, b *[40]byte) int {
	n := 0
	addr := func(a netip.Addr) {
		if s.family == 4 {
			x := a.As4()
			n += copy(b[n:], x[:])
		} else {
			x := a.As16()
			n += copy(b[n:], x[:])
		}
	}
	port := func() { // __be16 port
		b[n], b[n+1] = byte(k.port>>8), byte(k.port)
		n += 2
	}
	switch s.typ.name {
	case "hash:ip":
		addr(k.a1)
	case "hash:net": // ip, u16 padding0, u8 nomatch, u8 cidr
		addr(k.a1)
		b[n+3] = k.c1
		n += 4
	case "hash:ip,port": // ip, port, proto, padding
		addr(k.a1)
		port()
		b[n] = byte(k.proto)
		n += 2
	case "hash:net,port": // ip, port, proto, cidr-1:7 nomatch:1
		addr(k.a1)
		port()
		b[n], b[n+1] = byte(k.proto), (k.c1-1)&0x7f
		n += 2
	case "hash:ip,port,ip": // ip, ip2, port, proto, padding
		addr(k.a1)
		addr(k.a2)
		port()
		b[n] = byte(k.proto)
		n += 2
	case "hash:ip,port,net": // ip, ip2, port, cidr-1:7 nomatch:1, proto
		addr(k.a1)
		addr(k.a2)
		port()
		b[n], b[n+1] = (k.c2-1)&0x7f, byte(k.proto)
		n += 2
	case "hash:net,iface": // ip, physdev, cidr, nomatch, elem (always 1)
		addr(k.a1)
		if k.physdev {
			b[n] = 1
		}
		b[n+1], b[n+3] = k.c1, 1
		n += 4
	}
	return n
}

// free reports a slot whose used bit is clear.
func free(x *entry) bool { return x == nil || x.dead }

// inheritCounters gives ne the counters left in the slot by old, as the
// kernel's add does when the add carries none (it copies only the element
// over the slot: observed for a re-added expired element and for a new
// element in a deleted one's slot).
func inheritCounters(ne, old *entry, o *addOpts) {
	if !o.hasCounter {
		ne.packets, ne.bytes = old.packets, old.bytes
	}
}

// hkey is the bucket of k in a table of 2^bits buckets.
func (s *Set) hkey(k *ekey, tbits uint8) uint32 {
	var buf [40]byte
	n := s.hashedBytes(k, &buf)
	var w [10]uint32
	for i := range n / 4 {
		w[i] = binary.LittleEndian.Uint32(buf[i*4:])
	}
	return jhash.Words(w[:n/4], s.initval) & (1<<tbits - 1)
}

// stepBytes is what the kernel books for a new bucket and for every
// growth or shrink step: ext_size(AHASH_INIT_SIZE), header included. A
// freed bucket takes back only its header and slots, so a bucket that
// grew leaves the difference in the figure until a flush (observed: five
// elements in one bucket, deleted from the last, 216 -> 336 -> 280).
func (s *Set) stepBytes() int { return hbucketHeader + ahashInitSize*s.slotBytes() }

// slotBytes is one element slot: the element with its extensions.
func (s *Set) slotBytes() int {
	l := hashLayouts[s.typ.name]
	fam := 0
	if s.family == 6 {
		fam = 1
	}
	return s.dsize(l.elem[fam], 4)
}

// errBucketFull is the kernel's -EAGAIN of a packet-path add into a full
// bucket: nothing is added, the table is not resized.
var errBucketFull = &textError{msg: "Hash bucket is full, the kernel does not resize from the packet path", base: ErrFull}

// hashInsert places a new entry for k (old is an expired entry with the
// same key, or nil) as mtype_add does.
func (s *Set) hashInsert(k ekey, o *addOpts, old *entry, now time.Time) error {
	ne := &entry{k: k}
	s.applyOpts(ne, o, now)
	if old != nil {
		// The kernel overwrites the expired element in its own slot.
		if b := s.tbl.buckets[s.hkey(&k, s.tbl.bits)]; b != nil {
			if i := slices.Index(b.slots, old); i >= 0 {
				b.slots[i] = ne
			}
		}
		inheritCounters(ne, old, o)
		s.dropEntry(old)
		s.addEntry(ne)
		return nil
	}
	for {
		err := s.place(ne, now, o)
		if err != errResize {
			return err
		}
		if !s.resize(now) {
			return ErrFull // "Cannot increase the hashsize of set further"
		}
	}
}

var errResize = &textError{msg: "resize", base: ErrFull}

func (s *Set) place(ne *entry, now time.Time, o *addOpts) error {
	elements := len(s.entries)
	if elements >= s.maxelem && s.hasTimeout {
		s.gc(now)
		elements = len(s.entries)
	}
	full := elements >= s.maxelem
	forceadd := full && s.forceadd
	t := &s.tbl
	key := s.hkey(&ne.k, t.bits)
	b := t.buckets[key]
	if b == nil {
		if full {
			return ErrFull
		}
		t.buckets[key] = &hbucket{slots: []*entry{ne}, size: ahashInitSize}
		t.extSize += s.stepBytes()
		s.addEntry(ne)
		return nil
	}
	j, multi := -1, 0
	for i, x := range b.slots {
		if free(x) {
			if j == -1 {
				j = i
			}
			continue
		}
		if x.k.a1 == ne.k.a1 && x.k.c1 == ne.k.c1 {
			multi++
		}
		if j == -1 && x.expired(now) {
			j = i
		}
	}
	if j != -1 || forceadd {
		// Reuse a deleted or expired slot; forceadd overwrites the first.
		if j == -1 {
			j = 0
		}
		x := b.slots[j]
		if !x.dead {
			s.dropEntry(x)
		}
		inheritCounters(ne, x, o)
		b.slots[j] = ne
		s.addEntry(ne)
		return nil
	}
	if full {
		return ErrFull
	}
	if len(b.slots) >= b.size {
		if s.isIface() {
			// IP_SET_HASH_WITH_MULTI: many interfaces of one network
			// share a bucket, so bucketsize grows instead.
			if s.bucketsize >= ahashMaxTuned {
				return ErrFull
			}
			if s.bucketsize <= multi {
				s.bucketsize += ahashInitSize
			}
		}
		if b.size >= s.bucketsize {
			if o.kernel {
				return errBucketFull
			}
			return errResize
		}
		b.size += ahashInitSize
		t.extSize += s.stepBytes()
	}
	b.slots = append(b.slots, ne)
	s.addEntry(ne)
	return nil
}

// resize doubles the table until every live element fits (mtype_resize);
// expired elements are left behind. It fails past 2^31 buckets.
func (s *Set) resize(now time.Time) bool {
	old := s.tbl
	keys := sortedKeys(old.buckets)
	for tb := old.bits + 1; tb < 32; tb++ {
		nt := htable{bits: tb, buckets: map[uint32]*hbucket{}}
		var gone []*entry
		ok := true
	fill:
		for _, key := range keys {
			for _, x := range old.buckets[key].slots {
				if free(x) {
					continue
				}
				if x.expired(now) {
					gone = append(gone, x)
					continue
				}
				nk := s.hkey(&x.k, tb)
				m := nt.buckets[nk]
				switch {
				case m == nil:
					m = &hbucket{size: ahashInitSize}
					nt.buckets[nk] = m
					nt.extSize += s.stepBytes()
				case len(m.slots) >= m.size:
					if m.size >= s.bucketsize {
						ok = false
						break fill
					}
					m.size += ahashInitSize
					nt.extSize += s.stepBytes()
				}
				m.slots = append(m.slots, x)
			}
		}
		if ok {
			s.tbl = nt
			s.hashsize = 1 << tb
			for _, x := range gone {
				s.dropEntry(x)
			}
			return true
		}
	}
	return false
}

func sortedKeys(m map[uint32]*hbucket) []uint32 {
	keys := make([]uint32, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// hashDelete clears e's slot as mtype_del does: the bucket's pos drops
// only when the last slot is cleared, the bucket is freed when every slot
// below pos is free, and shrinks by AHASH_INIT_SIZE (compacting) once two
// or more are.
func (s *Set) hashDelete(e *entry) {
	t := &s.tbl
	key := s.hkey(&e.k, t.bits)
	b := t.buckets[key]
	if b == nil {
		return
	}
	i := slices.Index(b.slots, e)
	if i < 0 {
		return
	}
	if i+1 == len(b.slots) {
		b.slots = b.slots[:i]
	}
	n := 0
	for _, x := range b.slots {
		if free(x) {
			n++
		}
	}
	switch {
	case n == len(b.slots):
		t.extSize -= hbucketHeader + b.size*s.slotBytes()
		delete(t.buckets, key)
	case n >= ahashInitSize:
		s.shrink(b)
	}
}

func (s *Set) shrink(b *hbucket) {
	b.slots = slices.DeleteFunc(b.slots, free)
	b.size -= ahashInitSize
	s.tbl.extSize -= s.stepBytes()
}

// gc removes expired elements as mtype_gc_do does: a bucket with two or
// more free or expired slots shrinks by AHASH_INIT_SIZE, or is freed when
// nothing in it is left.
func (s *Set) gc(now time.Time) {
	t := &s.tbl
	for key, b := range t.buckets {
		d := 0
		for _, x := range b.slots {
			if free(x) {
				d++
				continue
			}
			if x.expired(now) {
				s.dropEntry(x)
				d++
			}
		}
		if d < ahashInitSize {
			continue
		}
		if d >= b.size {
			t.extSize -= hbucketHeader + b.size*s.slotBytes()
			delete(t.buckets, key)
			continue
		}
		s.shrink(b)
	}
}

// hashMembers returns the live entries in the kernel's dump order: bucket
// by bucket, slot by slot.
func (s *Set) hashMembers(now time.Time) []*entry {
	var out []*entry
	for _, key := range sortedKeys(s.tbl.buckets) {
		for _, e := range s.tbl.buckets[key].slots {
			if !free(e) && !e.expired(now) {
				out = append(out, e)
			}
		}
	}
	return out
}
