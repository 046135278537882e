package ipset

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/packetwalk/packetwalk/inet"
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
//
// Storage is compact: no heap object per element. An element is a record
// (records below): its hashed bytes in one flat array, a flag byte, and
// the extensions the set was created with in side arrays; a bucket's slots
// are record numbers in a block of a slab of blocks of its size. Lookups
// hash and walk the buckets as the kernel does, so no separate index is
// kept.

// Record flags.
const (
	recNomatch  uint8 = 1 << iota
	recWildcard       // hash:net,iface: the name ends in '+'
)

// A slot is a record number and the key's full hash (the bucket number
// is its low bits), so that a probe compares hashes before it reads a
// record and a resize does not hash again. slotDead is the kernel's
// cleared used bit: the kernel leaves the element's bytes in the slot, and
// an element later placed there inherits its counters (observed), so the
// record stays until the slot goes.
type slot = uint64

const slotDead = 1 << 31

func mkSlot(id, h uint32) slot { return uint64(h)<<32 | uint64(id) }
func slotID(x slot) uint32     { return uint32(x) &^ slotDead }
func slotHash(x slot) uint32   { return uint32(x >> 32) }
func isDead(x slot) bool       { return uint32(x)&slotDead != 0 }
func deadSlot(x slot) slot     { return x | slotDead }

// skbRec is an element's skbinfo extension.
type skbRec struct {
	mark, mask, prio uint32
	queue            uint16
}

// records holds the elements of a hash set. Record i is
// key[i*(stride+1):(i+1)*(stride+1)]: the bytes the kernel hashes
// (hashedBytes), then a flag byte, so that a lookup reads both from one
// place; the side arrays exist only for the extensions the set has.
type records struct {
	stride    int
	slotBytes int // the kernel's dsize: what a slot books in Size in memory
	key       []byte
	exp       []int64     // timeout: expiry as ns after the set's epoch, 0 permanent
	cnt       [][2]uint64 // counters: packets, bytes
	cmt       []uint32    // comment: index into the set's interned comments, 0 none
	skb       []skbRec    // skbinfo
	ifc       []uint32    // hash:net,iface: index into the interned names
	free      []uint32    // record numbers to reuse
	live      int         // records whose slot is used (expired ones included)
}

// intern maps strings (comments, interface names) to small numbers; 0 is
// the empty string. Entries are never dropped before a flush: the texts are
// few and short next to the elements that name them.
type intern struct {
	strs []string
	idx  map[string]uint32
}

func (t *intern) get(s string) uint32 {
	if s == "" {
		return 0
	}
	if i, ok := t.idx[s]; ok {
		return i
	}
	if t.idx == nil {
		t.strs, t.idx = []string{""}, map[string]uint32{}
	}
	s = strings.Clone(s) // not the restore line it was cut from
	t.strs = append(t.strs, s)
	i := uint32(len(t.strs) - 1)
	t.idx[s] = i
	return i
}

func (t *intern) str(i uint32) string {
	if i == 0 {
		return ""
	}
	return t.strs[i]
}

// bucket is the kernel's struct hbucket: pos slots in use (live or
// dead), size allocated, the slots at off in the slab of blocks of size.
type bucket struct {
	off  uint32
	pos  uint8
	size uint8 // 0: no bucket
}

// slab holds the slot blocks of one size.
type slab struct {
	mem  []slot
	free []uint32
}

// htable is the set's bucket array and the bytes the kernel books for its
// buckets (hregion ext_size). The array is dense when the table is small
// or well filled, a map otherwise (hashsize may be 2^31). In a dense
// array a bucket of two slots (the kernel's first allocation, and most
// buckets) keeps them beside its header, so that a lookup reads one place
// for both; larger buckets, and all of a map's, are blocks of the slabs.
type htable struct {
	bits    uint8
	dense   []dbucket
	sparse  map[uint32]bucket
	slabs   []slab // by size/2 - 1
	extSize int
	used    int // buckets allocated
}

// dbucket is a bucket of a dense table with room for two slots.
type dbucket struct {
	b   bucket
	inl [ahashInitSize]slot
}

const (
	ahashMaxSize  = 12 // largest bucketsize create accepts
	ahashMaxTuned = 64 // hash:net,iface's bucketsize stops growing here
	denseBits     = 16 // tables up to 2^denseBits buckets are always dense
)

// newHtable makes an empty table of 2^tbits buckets for about n elements.
func newHtable(tbits uint8, n int) htable {
	t := htable{bits: tbits}
	if tbits <= denseBits || n >= 1<<tbits/8 {
		t.dense = make([]dbucket, 1<<tbits)
	} else {
		t.sparse = map[uint32]bucket{}
	}
	return t
}

func hashBits(hashsize int) uint8 { return uint8(bits.Len(uint(hashsize - 1))) }

func (t *htable) get(key uint32) bucket {
	if t.dense != nil {
		return t.dense[key].b
	}
	return t.sparse[key]
}

func (t *htable) put(key uint32, b bucket) {
	if t.dense != nil {
		t.dense[key].b = b
		return
	}
	if b.size == 0 {
		delete(t.sparse, key)
		return
	}
	t.sparse[key] = b
}

// densify turns a sparse table dense once it holds n >= 2^bits/8 elements.
func (t *htable) densify(n int) {
	if t.dense != nil || n < 1<<t.bits/8 {
		return
	}
	sparse := t.sparse
	t.dense, t.sparse = make([]dbucket, 1<<t.bits), nil
	for k, b := range sparse {
		if b.size == ahashInitSize {
			sl := &t.slabs[0]
			copy(t.dense[k].inl[:], sl.mem[b.off:b.off+ahashInitSize])
			sl.free = append(sl.free, b.off)
			b.off = 0
		}
		t.dense[k].b = b
	}
}

// inline reports whether a bucket of size slots keeps them in its header.
func (t *htable) inline(size uint8) bool { return size == ahashInitSize && t.dense != nil }

// slots returns the size slots of bucket b, number key (valid until the
// next alloc).
func (t *htable) slots(key uint32, b bucket) []slot {
	if t.inline(b.size) {
		return t.dense[key].inl[:]
	}
	return t.slabs[b.size/2-1].mem[b.off : b.off+uint32(b.size) : b.off+uint32(b.size)]
}

// alloc returns a block of size slots (size even, > 0).
func (t *htable) alloc(size uint8) uint32 {
	if t.inline(size) {
		return 0
	}
	c := int(size/2 - 1)
	for len(t.slabs) <= c {
		t.slabs = append(t.slabs, slab{})
	}
	sl := &t.slabs[c]
	if n := len(sl.free); n > 0 {
		off := sl.free[n-1]
		sl.free = sl.free[:n-1]
		return off
	}
	off := uint32(len(sl.mem))
	sl.mem = append(sl.mem, make([]slot, size)...)
	return off
}

func (t *htable) release(b bucket) {
	if b.size > 0 && !t.inline(b.size) {
		sl := &t.slabs[b.size/2-1]
		sl.free = append(sl.free, b.off)
	}
}

// resized moves the pos slots of bucket b, number key, into a new block
// of size slots.
func (t *htable) resized(key uint32, b bucket, size uint8) bucket {
	off := t.alloc(size)
	nb := bucket{off: off, pos: b.pos, size: size}
	copy(t.slots(key, nb), t.slots(key, b)[:b.pos])
	t.release(b)
	return nb
}

// forEach calls fn for every bucket in key order.
func (t *htable) forEach(fn func(key uint32, b bucket)) {
	if t.dense != nil {
		for k := range t.dense {
			if b := t.dense[k].b; b.size != 0 {
				fn(uint32(k), b)
			}
		}
		return
	}
	keys := make([]uint32, 0, len(t.sparse))
	for k := range t.sparse {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fn(k, t.sparse[k])
	}
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
		b[n], b[n+1], b[n+2], b[n+3] = 0, 0, 0, k.c1
		n += 4
	case "hash:ip,port": // ip, port, proto, padding
		addr(k.a1)
		port()
		b[n], b[n+1] = byte(k.proto), 0
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
		b[n], b[n+1] = byte(k.proto), 0
		n += 2
	case "hash:ip,port,net": // ip, ip2, port, cidr-1:7 nomatch:1, proto
		addr(k.a1)
		addr(k.a2)
		port()
		b[n], b[n+1] = (k.c2-1)&0x7f, byte(k.proto)
		n += 2
	case "hash:net,iface": // ip, physdev, cidr, nomatch, elem (always 1)
		addr(k.a1)
		b[n], b[n+1], b[n+2], b[n+3] = 0, k.c1, 0, 1
		if k.physdev {
			b[n] = 1
		}
		n += 4
	}
	return n
}

// alen is the length of an address in the set's records.
func (s *Set) alen() int {
	if s.family == 6 {
		return 16
	}
	return 4
}

// cidrAt returns where a net dimension's prefix length sits in a record
// and how it is stored (minus one when off1).
func (s *Set) cidrAt(dim int) (at int, off1 bool) {
	a := s.alen()
	switch s.typ.name {
	case "hash:net":
		return a + 3, false
	case "hash:net,port":
		return a + 3, true
	case "hash:ip,port,net":
		if dim == 2 {
			return 2*a + 2, true
		}
	case "hash:net,iface":
		return a + 1, false
	}
	return -1, false
}

// recCIDR returns the prefix length of net dimension dim of record id.
func (s *Set) recCIDR(id uint32, dim int) uint8 {
	at, off1 := s.cidrAt(dim)
	c := s.rec.key[int(id)*(s.rec.stride+1)+at]
	if off1 {
		c = c&0x7f + 1
	}
	return c
}

// recKey decodes record id back into an element.
func (s *Set) recKey(id uint32) ekey {
	b := s.keyOf(id)
	a := s.alen()
	addr := func(off int) netip.Addr {
		if a == 4 {
			return netip.AddrFrom4([4]byte(b[off : off+4]))
		}
		return netip.AddrFrom16([16]byte(b[off : off+16]))
	}
	port := func(off int) uint16 { return uint16(b[off])<<8 | uint16(b[off+1]) }
	var k ekey
	k.a1 = addr(0)
	switch s.typ.name {
	case "hash:net":
		k.c1 = b[a+3]
	case "hash:ip,port":
		k.port, k.proto = port(a), inet.Proto(b[a+2])
	case "hash:net,port":
		k.port, k.proto, k.c1 = port(a), inet.Proto(b[a+2]), b[a+3]&0x7f+1
	case "hash:ip,port,ip":
		k.a2, k.port, k.proto = addr(a), port(2*a), inet.Proto(b[2*a+2])
	case "hash:ip,port,net":
		k.a2, k.port, k.c2, k.proto = addr(a), port(2*a), b[2*a+2]&0x7f+1, inet.Proto(b[2*a+3])
	case "hash:net,iface":
		k.physdev, k.c1 = b[a] == 1, b[a+1]
		k.iface = s.ifaces.str(s.rec.ifc[id])
		k.wildcard = *s.flag(id)&recWildcard != 0
	}
	return k
}

// keyOf returns record id's key bytes.
func (s *Set) keyOf(id uint32) []byte {
	st := s.rec.stride
	i := int(id) * (st + 1)
	return s.rec.key[i : i+st : i+st]
}

// flag returns record id's flag byte.
func (s *Set) flag(id uint32) *uint8 {
	return &s.rec.key[int(id)*(s.rec.stride+1)+s.rec.stride]
}

// nrec is the number of records, free ones included.
func (s *Set) nrec() int { return len(s.rec.key) / (s.rec.stride + 1) }

// hashKey is the kernel's jhash2 of key bytes b; the bucket in a table of
// 2^bits buckets is its low bits.
func (s *Set) hashKey(b []byte) uint32 {
	var w [10]uint32
	n := len(b) / 4
	for i := range n {
		w[i] = binary.LittleEndian.Uint32(b[i*4:])
	}
	return jhash.Words(w[:n], s.initval)
}

func (t *htable) mask(h uint32) uint32 { return h & (1<<t.bits - 1) }

// hkey is the bucket of k in a table of 2^bits buckets.
func (s *Set) hkey(k *ekey, tbits uint8) uint32 {
	var buf [40]byte
	n := s.hashedBytes(k, &buf)
	return s.hashKey(buf[:n]) & (1<<tbits - 1)
}

// initHash prepares the records and the table of a new or flushed set.
func (s *Set) initHash() {
	a := s.alen()
	stride := map[string]int{"hash:ip": a, "hash:net": a + 4, "hash:ip,port": a + 4, "hash:net,port": a + 4,
		"hash:ip,port,ip": 2*a + 4, "hash:ip,port,net": 2*a + 4, "hash:net,iface": a + 4}[s.typ.name]
	s.rec = records{stride: stride, slotBytes: s.computeSlotBytes()}
	s.tbl = newHtable(hashBits(s.hashsize), 0)
	s.comments, s.ifaces = intern{}, intern{}
	s.filter, s.kidx = nil, nil
	if s.indexed() {
		s.kidx = s.newKindex(0)
	}
}

func (s *Set) recExpired(id uint32, nowOff int64) bool {
	if !s.hasTimeout {
		return false
	}
	e := s.rec.exp[id]
	return e != 0 && nowOff >= e
}

// nowOff is now as the records keep expiries: ns after the set's epoch.
func (s *Set) nowOff(now time.Time) int64 { return int64(now.Sub(s.epoch)) }

// newRec allocates a record holding key bytes kb with no extensions set.
func (s *Set) newRec(kb []byte) uint32 {
	r := &s.rec
	var id uint32
	if n := len(r.free); n > 0 {
		id = r.free[n-1]
		r.free = r.free[:n-1]
		copy(s.keyOf(id), kb)
		*s.flag(id) = 0
		if s.hasTimeout {
			r.exp[id] = 0
		}
		if s.counters {
			r.cnt[id] = [2]uint64{}
		}
		if s.comment {
			r.cmt[id] = 0
		}
		if s.skbinfo {
			r.skb[id] = skbRec{}
		}
		if s.isIface() {
			r.ifc[id] = 0
		}
		return id
	}
	id = uint32(s.nrec())
	r.key = append(r.key, kb...)
	r.key = append(r.key, 0)
	if s.hasTimeout {
		r.exp = append(r.exp, 0)
	}
	if s.counters {
		r.cnt = append(r.cnt, [2]uint64{})
	}
	if s.comment {
		r.cmt = append(r.cmt, 0)
	}
	if s.skbinfo {
		r.skb = append(r.skb, skbRec{})
	}
	if s.isIface() {
		r.ifc = append(r.ifc, 0)
	}
	return id
}

// freeRec returns a record no slot refers to any more.
func (s *Set) freeRec(id uint32) { s.rec.free = append(s.rec.free, id) }

// setRec writes element k with the options of an add into record id, as
// a new element placed in the slot: the counters left there stay unless
// the add carries its own.
func (s *Set) setRec(id uint32, kb []byte, k *ekey, o *addOpts, now time.Time) {
	copy(s.keyOf(id), kb)
	*s.flag(id) = 0
	if k.wildcard {
		*s.flag(id) = recWildcard
	}
	if s.isIface() {
		s.rec.ifc[id] = s.ifaces.get(k.iface)
	}
	if s.comment {
		s.rec.cmt[id] = 0
	}
	s.applyRecOpts(id, o, now)
	s.rec.live++
	s.countCIDRRec(id, 1)
	s.filterAdd(id)
}

// applyRecOpts is applyOpts for a record.
func (s *Set) applyRecOpts(id uint32, o *addOpts, now time.Time) {
	r := &s.rec
	*s.flag(id) &^= recNomatch
	if o.nomatch {
		*s.flag(id) |= recNomatch
	}
	if s.hasTimeout {
		r.exp[id] = 0
		t := s.timeout
		if o.hasTimeout {
			t = o.timeout
		}
		if t > 0 {
			r.exp[id] = max(s.nowOff(now)+int64(t)*int64(time.Second), 1)
		}
	}
	if s.counters && o.hasCounter {
		r.cnt[id] = [2]uint64{o.packets, o.bytes}
	}
	if s.comment && o.hasComment {
		r.cmt[id] = s.comments.get(o.comment)
	}
	if s.skbinfo {
		r.skb[id] = skbRec{o.skbmark, o.skbmask, o.skbprio, o.skbqueue}
	}
	s.kidxSet(id)
}

// dropRec counts record id out; its slot is marked dead by the caller.
func (s *Set) dropRec(id uint32) {
	s.rec.live--
	s.countCIDRRec(id, -1)
	s.filterDrop()
	s.kidxDrop(id)
}

func (s *Set) countCIDRRec(id uint32, delta int) {
	if s.isNet(0) {
		s.countLen(&s.cidr1, &s.lens1, &s.pres1, s.recCIDR(id, 0), delta)
	}
	if s.isNet(2) {
		s.countLen(&s.cidr2, &s.lens2, &s.pres2, s.recCIDR(id, 2), delta)
	}
}

// sameKey reports whether record id holds the element with key bytes kb
// (and, in hash:net,iface, the interface of k).
func (s *Set) sameKey(id uint32, kb []byte, k *ekey) bool {
	if string(s.keyOf(id)) != string(kb) {
		return false
	}
	if s.isIface() {
		return s.ifaces.str(s.rec.ifc[id]) == k.iface && (*s.flag(id)&recWildcard != 0) == k.wildcard
	}
	return true
}

// hslot finds the used slot of element k (it may have expired): its
// bucket number, bucket and index, i -1 when there is none.
func (s *Set) hslot(k *ekey) (key uint32, b bucket, i int) {
	var buf [40]byte
	kb := buf[:s.hashedBytes(k, &buf)]
	h := s.hashKey(kb)
	key = s.tbl.mask(h)
	b = s.tbl.get(key)
	if b.size == 0 {
		return key, b, -1
	}
	for i, x := range s.tbl.slots(key, b)[:b.pos] {
		if slotHash(x) == h && !isDead(x) && s.sameKey(slotID(x), kb, k) {
			return key, b, i
		}
	}
	return key, b, -1
}

// errBucketFull is the kernel's -EAGAIN of a packet-path add into a full
// bucket: nothing is added, the table is not resized.
var errBucketFull = &textError{msg: "Hash bucket is full, the kernel does not resize from the packet path", base: ErrFull}

// stepBytes is what the kernel books for a new bucket and for every
// growth or shrink step: ext_size(AHASH_INIT_SIZE), header included. A
// freed bucket takes back only its header and slots, so a bucket that
// grew leaves the difference in the figure until a flush (observed: five
// elements in one bucket, deleted from the last, 216 -> 336 -> 280).
func (s *Set) stepBytes() int { return hbucketHeader + ahashInitSize*s.slotBytes() }

// slotBytes is one element slot: the element with its extensions.
func (s *Set) slotBytes() int { return s.rec.slotBytes }

func (s *Set) computeSlotBytes() int {
	l := hashLayouts[s.typ.name]
	fam := 0
	if s.family == 6 {
		fam = 1
	}
	return s.dsize(l.elem[fam], 4)
}

// hashInsert places a new element k as mtype_add does.
func (s *Set) hashInsert(k *ekey, o *addOpts, now time.Time) error {
	var buf [40]byte
	kb := buf[:s.hashedBytes(k, &buf)]
	h := s.hashKey(kb)
	for {
		err := s.place(kb, h, k, o, now)
		if err != errResize {
			return err
		}
		if !s.resize(now) {
			return ErrFull // "Cannot increase the hashsize of set further"
		}
	}
}

// reuseExpired overwrites the expired element in slot i of bucket b
// (number key) with the same key, as the kernel does: the new element
// takes its slot and the counters left there unless the add gives some.
func (s *Set) reuseExpired(key uint32, b bucket, i int, k *ekey, o *addOpts, now time.Time) {
	id := slotID(s.tbl.slots(key, b)[i])
	var buf [40]byte
	kb := buf[:s.hashedBytes(k, &buf)]
	s.dropRec(id)
	s.setRec(id, kb, k, o, now)
}

var errResize = &textError{msg: "resize", base: ErrFull}

func (s *Set) place(kb []byte, h uint32, k *ekey, o *addOpts, now time.Time) error {
	elements := s.rec.live
	if elements >= s.maxelem && s.hasTimeout {
		s.gc(now)
		elements = s.rec.live
	}
	full := elements >= s.maxelem
	forceadd := full && s.forceadd
	t := &s.tbl
	key := t.mask(h)
	b := t.get(key)
	if b.size == 0 {
		if full {
			return ErrFull
		}
		id := s.newRec(kb)
		b = bucket{off: t.alloc(ahashInitSize), pos: 1, size: ahashInitSize}
		t.slots(key, b)[0] = mkSlot(id, h)
		t.put(key, b)
		t.used++
		t.extSize += s.stepBytes()
		s.setRec(id, kb, k, o, now)
		if t.sparse != nil {
			t.densify(s.rec.live)
		}
		return nil
	}
	var nowOff int64
	if s.hasTimeout {
		nowOff = s.nowOff(now)
	}
	j, multi := -1, 0
	a := s.alen()
	for i, x := range t.slots(key, b)[:b.pos] {
		if isDead(x) {
			if j == -1 {
				j = i
			}
			continue
		}
		if s.isIface() {
			xb := s.keyOf(slotID(x))
			if string(xb[:a]) == string(kb[:a]) && xb[a+1] == kb[a+1] {
				multi++
			}
		}
		if j == -1 && s.recExpired(slotID(x), nowOff) {
			j = i
		}
	}
	if j != -1 || forceadd {
		// Reuse a deleted or expired slot; forceadd overwrites the first.
		// The record is the slot's: the new element inherits its counters
		// unless the add gives some.
		if j == -1 {
			j = 0
		}
		sl := t.slots(key, b)
		x := sl[j]
		id := slotID(x)
		if !isDead(x) {
			s.dropRec(id)
		}
		sl[j] = mkSlot(id, h)
		s.setRec(id, kb, k, o, now)
		return nil
	}
	if full {
		return ErrFull
	}
	if b.pos >= b.size {
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
		if int(b.size) >= s.bucketsize {
			if o.kernel {
				return errBucketFull
			}
			return errResize
		}
		b = t.resized(key, b, b.size+ahashInitSize)
		t.extSize += s.stepBytes()
	}
	id := s.newRec(kb)
	t.slots(key, b)[b.pos] = mkSlot(id, h)
	b.pos++
	t.put(key, b)
	s.setRec(id, kb, k, o, now)
	return nil
}

// resize doubles the table until every live element fits (mtype_resize);
// expired elements are left behind. It fails past 2^31 buckets.
func (s *Set) resize(now time.Time) bool {
	old := &s.tbl
	var nowOff int64
	if s.hasTimeout {
		nowOff = s.nowOff(now)
	}
	for tb := old.bits + 1; tb < 32; tb++ {
		nt := newHtable(tb, s.rec.live)
		ok := true
		old.forEach(func(okey uint32, ob bucket) {
			if !ok {
				return
			}
			for _, x := range old.slots(okey, ob)[:ob.pos] {
				if isDead(x) || s.recExpired(slotID(x), nowOff) {
					continue
				}
				nk := nt.mask(slotHash(x))
				m := nt.get(nk)
				switch {
				case m.size == 0:
					m = bucket{off: nt.alloc(ahashInitSize), size: ahashInitSize}
					nt.used++
					nt.extSize += s.stepBytes()
				case m.pos >= m.size:
					if int(m.size) >= s.bucketsize {
						ok = false
						return
					}
					m = nt.resized(nk, m, m.size+ahashInitSize)
					nt.extSize += s.stepBytes()
				}
				nt.slots(nk, m)[m.pos] = x
				m.pos++
				nt.put(nk, m)
			}
		})
		if !ok {
			continue
		}
		// Records left behind: dead slots and expired elements.
		old.forEach(func(okey uint32, ob bucket) {
			for _, x := range old.slots(okey, ob)[:ob.pos] {
				if isDead(x) {
					s.freeRec(slotID(x))
				} else if s.recExpired(slotID(x), nowOff) {
					s.dropRec(slotID(x))
					s.freeRec(slotID(x))
				}
			}
		})
		s.tbl = nt
		s.hashsize = 1 << tb
		return true
	}
	return false
}

// hashDelete clears slot i of bucket b (number key) as mtype_del does:
// the bucket's pos drops only when the last slot is cleared, the bucket is
// freed when every slot below pos is free, and shrinks by AHASH_INIT_SIZE
// (compacting) once two or more are.
func (s *Set) hashDelete(key uint32, b bucket, i int) {
	t := &s.tbl
	sl := t.slots(key, b)
	id := slotID(sl[i])
	s.dropRec(id)
	sl[i] = deadSlot(sl[i])
	if i+1 == int(b.pos) {
		b.pos--
		s.freeRec(id)
	}
	n := 0
	for _, x := range sl[:b.pos] {
		if isDead(x) {
			n++
		}
	}
	switch {
	case n == int(b.pos):
		s.freeBucket(key, b)
	case n >= ahashInitSize:
		s.shrink(key, b)
	default:
		t.put(key, b)
	}
}

// freeBucket frees a bucket whose slots are all free.
func (s *Set) freeBucket(key uint32, b bucket) {
	t := &s.tbl
	for _, x := range t.slots(key, b)[:b.pos] {
		s.freeRec(slotID(x))
	}
	t.extSize -= hbucketHeader + int(b.size)*s.slotBytes()
	t.release(b)
	t.put(key, bucket{})
	t.used--
}

// shrink compacts b's used slots into a block AHASH_INIT_SIZE smaller.
func (s *Set) shrink(key uint32, b bucket) {
	t := &s.tbl
	sl := t.slots(key, b)
	n := 0
	for _, x := range sl[:b.pos] {
		if isDead(x) {
			s.freeRec(slotID(x))
			continue
		}
		sl[n] = x
		n++
	}
	b.pos = uint8(n)
	b = t.resized(key, b, b.size-ahashInitSize)
	t.put(key, b)
	t.extSize -= s.stepBytes()
}

// gc removes expired elements as mtype_gc_do does: a bucket with two or
// more free or expired slots shrinks by AHASH_INIT_SIZE, or is freed when
// nothing in it is left.
func (s *Set) gc(now time.Time) {
	t := &s.tbl
	nowOff := s.nowOff(now)
	type kb struct {
		key uint32
		b   bucket
		d   int
	}
	var todo []kb
	t.forEach(func(key uint32, b bucket) {
		d := 0
		sl := t.slots(key, b)
		for i, x := range sl[:b.pos] {
			if isDead(x) {
				d++
				continue
			}
			if s.recExpired(slotID(x), nowOff) {
				s.dropRec(slotID(x))
				sl[i] = deadSlot(x)
				d++
			}
		}
		if d >= ahashInitSize {
			todo = append(todo, kb{key, b, d})
		}
	})
	for _, x := range todo {
		if x.d >= int(x.b.size) {
			s.freeBucket(x.key, x.b)
			continue
		}
		s.shrink(x.key, x.b)
	}
}

// eachHashMember calls fn with the live records in the kernel's dump
// order: bucket by bucket, slot by slot; with all, expired ones too.
func (s *Set) eachHashMember(now time.Time, all bool, fn func(id uint32)) {
	nowOff := s.nowOff(now)
	s.tbl.forEach(func(key uint32, b bucket) {
		for _, x := range s.tbl.slots(key, b)[:b.pos] {
			if !isDead(x) && (all || !s.recExpired(slotID(x), nowOff)) {
				fn(slotID(x))
			}
		}
	})
}

// recEntry is record id as an entry, for printing.
func (s *Set) recEntry(id uint32, e *entry) {
	*e = entry{k: s.recKey(id), nomatch: *s.flag(id)&recNomatch != 0}
	if s.hasTimeout && s.rec.exp[id] != 0 {
		e.expires = s.epoch.Add(time.Duration(s.rec.exp[id]))
	}
	if s.counters {
		e.packets, e.bytes = s.rec.cnt[id][0], s.rec.cnt[id][1]
	}
	if s.comment {
		e.comment = s.comments.str(s.rec.cmt[id])
	}
	if s.skbinfo {
		x := s.rec.skb[id]
		e.skbmark, e.skbmask, e.skbprio, e.skbqueue = x.mark, x.mask, x.prio, x.queue
	}
}
