package ipset

import (
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/packetwalk/packetwalk/inet"
)

// Set is one ipset. Obtain it from a Registry; the pointer stays valid for
// the set's name across Swap (contents move, the handle stays).
type Set struct {
	reg  *Registry
	name string
	refs int
	setContent
}

// setContent is what Swap exchanges between two sets.
type setContent struct {
	typ        *typeInfo
	family     int // 4 or 6
	hashsize   int
	maxelem    int
	bucketsize int
	initval    uint32
	hasTimeout bool
	timeout    int // default seconds
	counters   bool
	comment    bool
	skbinfo    bool
	forceadd   bool
	netmask    int
	rangeLo    netip.Addr // bitmap:ip
	rangeHi    netip.Addr
	portLo     uint16 // bitmap:port
	portHi     uint16
	size       int // list:set

	// bitmap and list types: one entry per element.
	entries map[ekey]*entry
	order   []*entry // insertion order; dead entries compacted lazily
	dead    int
	cidr1   [129]int // how many entries per prefix length, net dims
	cidr2   [129]int
	lens1   []uint8 // present prefix lengths, longest first
	lens2   []uint8
	pres1   uint32 // lengths 16 to 32 in lens1, bit l-16
	pres2   uint32
	// hash types: the kernel's bucket layout over compact records.
	tbl      htable
	rec      records
	comments intern
	ifaces   intern
	epoch    time.Time // what record expiries count from
	filter   *pfilter  // large IPv4 net sets: which lengths to probe
	kidx     *kindex   // IPv4 sets of short keys: the keys (kindex.go)
	// filterDirty: elements were added during a Restore without the
	// filter and the index, which are built when the Restore ends.
	filterDirty bool
}

// Name returns the set's name.
func (s *Set) Name() string { return s.name }

// TypeName returns the set's type, such as "hash:net".
func (s *Set) TypeName() string { return s.typ.name }

// Family returns 4 for inet and 6 for inet6.
func (s *Set) Family() int { return s.family }

// References returns the reference count printed as References:.
func (s *Set) References() int { return s.refs }

func (s *Set) now() time.Time { return s.reg.clock.Now() }

func (e *entry) expired(now time.Time) bool {
	return !e.expires.IsZero() && !now.Before(e.expires)
}

// Len returns the number of live entries at the registry clock's now.
func (s *Set) Len() int {
	now := s.now()
	n := 0
	if s.typ.kind == kindHash {
		if !s.hasTimeout {
			return s.rec.live
		}
		s.eachHashMember(now, false, func(uint32) { n++ })
		return n
	}
	for _, e := range s.order {
		if !e.dead && !e.expired(now) {
			n++
		}
	}
	return n
}

// addOpts carries per-entry options of an add.
type addOpts struct {
	timeout    int
	hasTimeout bool
	nomatch    bool
	packets    uint64
	bytes      uint64
	hasCounter bool
	comment    string
	hasComment bool
	skbmark    uint32
	skbmask    uint32
	skbprio    uint32
	skbqueue   uint16
	before     string
	after      string
	kernel     bool // added by the SET target: a full bucket fails, no resize
}

func (s *Set) insertKey(k ekey, o *addOpts, exist bool) error {
	now := s.now()
	if s.typ.kind == kindHash {
		key, b, i := s.hslot(&k)
		if i < 0 {
			return s.hashInsert(&k, o, now)
		}
		id := slotID(s.tbl.slots(key, b)[i])
		if s.recExpired(id, s.nowOff(now)) {
			s.reuseExpired(key, b, i, &k, o, now)
			return nil
		}
		if !exist {
			return ErrExists
		}
		s.applyRecOpts(id, o, now)
		return nil
	}
	e := s.entries[k]
	if e != nil && !e.expired(now) {
		if !exist {
			return ErrExists
		}
		// -exist re-adds: the kernel updates the entry's flags and extensions.
		s.applyOpts(e, o, now)
		return nil
	}
	if e != nil { // expired: replace
		s.removeEntry(e)
	}
	if s.typ.kind == kindList && len(s.entries) >= s.size {
		return ErrListFull
	}
	e = &entry{k: k}
	s.applyOpts(e, o, now)
	s.addEntry(e)
	return nil
}

// addEntry books a placed entry in the lookup map and insertion order.
func (s *Set) addEntry(e *entry) {
	s.entries[e.k] = e
	s.order = append(s.order, e)
	s.countCIDR(e.k, 1)
}

func (s *Set) applyOpts(e *entry, o *addOpts, now time.Time) {
	e.nomatch = o.nomatch
	e.expires = time.Time{}
	if s.hasTimeout {
		t := s.timeout
		if o.hasTimeout {
			t = o.timeout
		}
		if t > 0 {
			e.expires = now.Add(time.Duration(t) * time.Second)
		}
	}
	if o.hasCounter {
		e.packets, e.bytes = o.packets, o.bytes
	}
	if o.hasComment {
		e.comment = o.comment
	}
	e.skbmark, e.skbmask, e.skbprio, e.skbqueue = o.skbmark, o.skbmask, o.skbprio, o.skbqueue
}

func (s *Set) removeEntry(e *entry) { s.dropEntry(e) }

// dropEntry forgets e.
func (s *Set) dropEntry(e *entry) {
	delete(s.entries, e.k)
	e.dead = true
	s.dead++
	s.countCIDR(e.k, -1)
	if s.dead > 32 && s.dead*2 > len(s.order) {
		s.order = slices.DeleteFunc(s.order, func(e *entry) bool { return e.dead })
		s.dead = 0
	}
}

func (s *Set) isNet(dim int) bool {
	return dim < len(s.typ.dims) && s.typ.dims[dim] == dimNet
}

func (s *Set) countCIDR(k ekey, delta int) {
	if s.isNet(0) {
		s.countLen(&s.cidr1, &s.lens1, &s.pres1, k.c1, delta)
	}
	if s.isNet(2) {
		s.countLen(&s.cidr2, &s.lens2, &s.pres2, k.c2, delta)
	}
}

// countLen counts an element of prefix length l in or out of c, keeping
// lens (the present lengths) and pres (those from 16 to 32, bit l-16)
// current.
func (s *Set) countLen(c *[129]int, lens *[]uint8, pres *uint32, l uint8, delta int) {
	c[l] += delta
	if n := c[l]; n == 0 || (n == 1 && delta > 0) {
		*lens = presentLens(c)
		*pres = 0
		for _, x := range *lens {
			if x >= 16 && x <= 32 {
				*pres |= 1 << (x - 16)
			}
		}
	}
}

func presentLens(c *[129]int) []uint8 {
	var l []uint8
	for i := 128; i >= 0; i-- {
		if c[i] > 0 {
			l = append(l, uint8(i))
		}
	}
	return l
}

func (s *Set) deleteKey(k ekey) error {
	if s.typ.kind == kindHash {
		key, b, i := s.hslot(&k)
		if i < 0 || s.recExpired(slotID(s.tbl.slots(key, b)[i]), s.nowOff(s.now())) {
			return ErrNotAdded
		}
		s.hashDelete(key, b, i)
		return nil
	}
	e := s.entries[k]
	if e == nil || e.expired(s.now()) {
		return ErrNotAdded
	}
	s.removeEntry(e)
	return nil
}

// bfind returns the live entry of a bitmap set for k, passed over when
// o's counter comparisons reject it (o may be nil).
func (s *Set) bfind(k ekey, now time.Time, o *MatchOptions) *entry {
	if e := s.entries[k]; e != nil && !e.expired(now) && s.accept(o, e) {
		return e
	}
	return nil
}

func (s *Set) isIface() bool { return len(s.typ.dims) > 1 && s.typ.dims[1] == dimIface }

// keyFromPacket converts a lookup Key into the stored element layout with
// host-length prefixes; ok is false when the family does not fit.
func (s *Set) keyFromPacket(pk Key) (ekey, bool) {
	var k ekey
	full := uint8(s.maxBits())
	for i, d := range s.typ.dims {
		switch d {
		case dimIP, dimHost, dimNet:
			a := pk.Addr
			if i > 0 {
				a = pk.Addr2
			}
			if s.family == 4 {
				// An inet6 set looks the 16 bytes up, IPv4-mapped
				// ones included; an inet set the IPv4 address.
				a = a.Unmap()
			}
			if !a.IsValid() || (a.Is4() != (s.family == 4)) {
				return k, false
			}
			if s.netmask != 0 {
				a = netip.PrefixFrom(a, s.netmask).Masked().Addr()
			}
			var c uint8
			if d == dimNet {
				c = full
			}
			setAddr(&k, i, a, c)
		case dimPort:
			k.proto, k.port = pk.Proto, pk.Port
			if !keyHasPort(pk.Proto) {
				k.port = 0
			}
		case dimBPort:
			// The kernel reads a bitmap:port dimension from TCP and UDP
			// only (Proto 0 stands for "not given").
			if pk.Proto != 0 && pk.Proto != inet.TCP && pk.Proto != inet.UDP {
				return k, false
			}
			k.port = pk.PortFirst
		case dimIface:
			// The kernel refuses a packet without the interface the flag
			// names (no input device in OUTPUT, no output in PREROUTING).
			if pk.Iface == "" {
				return k, false
			}
			k.iface, k.physdev = pk.Iface, pk.Physdev
		}
	}
	return k, true
}

// lookupFlags returns whether an entry decides the lookup of a packet key
// and whether it is a nomatch one, counting it for bytes when count is set
// and the set has counters.
func (s *Set) lookupFlags(pk Key, now time.Time, count bool, bytes int) (found, nomatch bool) {
	if s.typ.kind == kindHash {
		if found, nm, ok := s.kidxLookup(&pk, count); ok {
			return found, nm
		}
		id, _ := s.packetFind(&pk, now, nil)
		if id < 0 {
			return false, false
		}
		if count && s.counters {
			c := &s.rec.cnt[id]
			c[0]++
			c[1] += uint64(bytes)
		}
		return true, *s.flag(uint32(id))&recNomatch != 0
	}
	k, ok := s.keyFromPacket(pk)
	if !ok {
		return false, false
	}
	e := s.bfind(k, now, nil)
	if e == nil {
		return false, false
	}
	if count && s.counters {
		e.packets++
		e.bytes += uint64(bytes)
	}
	return true, e.nomatch
}

// Lookup reports how the set answers a packet lookup at time now, as the
// kernel's set match sees it: match is true when a plain entry decided;
// nomatch is true when a nomatch entry decided (the match is then false
// unless --return-nomatch is given). It does not allocate.
func (s *Set) Lookup(k Key, now time.Time) (match, nomatch bool) {
	if s.typ.kind == kindList {
		return s.listLookup(k, now)
	}
	found, nm := s.lookupFlags(k, now, false, 0)
	return found && !nm, nm
}

// LookupCount is Lookup plus the --update-counters side effect: the deciding
// entry's packet and byte counters grow when the set has counters, for a
// nomatch entry too (the kernel counts before it looks at the flag).
func (s *Set) LookupCount(k Key, now time.Time, bytes int) (match, nomatch bool) {
	if s.typ.kind == kindList {
		return s.listLookup(k, now)
	}
	found, nm := s.lookupFlags(k, now, true, bytes)
	return found && !nm, nm
}

func (s *Set) listLookup(k Key, now time.Time) (match, nomatch bool) {
	for _, e := range s.order {
		if e.dead || e.expired(now) {
			continue
		}
		m := s.reg.Get(e.k.name)
		if m == nil {
			continue
		}
		mm, mn := m.Lookup(k, now)
		if mm {
			return true, false
		}
		nomatch = nomatch || mn
	}
	return false, nomatch
}

// AddKey adds the element a packet key describes, as the SET target's
// --add-set does; timeout < 0 means the set's default, 0 permanent. It
// leaves the entry's counters alone; AddPacket is the target's full effect.
func (s *Set) AddKey(k Key, timeout int, exist bool) error {
	return s.addKey(k, timeout, exist, nil)
}

// AddPacket is AddKey as the kernel's SET target does it for a packet of
// length bytes: a net dimension takes the longest prefix length present in
// the set (the host length when none is), and in a set with counters the
// new entry, or the entry an --exist add overwrites, starts at 1 packet of
// length bytes.
func (s *Set) AddPacket(k Key, length, timeout int, exist bool) error {
	return s.addKey(k, timeout, exist, &addOpts{packets: 1, bytes: uint64(max(length, 0)), hasCounter: true})
}

func (s *Set) addKey(k Key, timeout int, exist bool, pkt *addOpts) error {
	if k.Dims > 0 && k.Dims < s.Dimension() {
		return ErrTypeMismatch
	}
	if s.typ.kind == kindList {
		return s.reg.forMembers(s, func(m *Set) error { return m.addKey(k, timeout, exist, pkt) })
	}
	ek, ok := s.keyFromPacket(k)
	if !ok {
		return ErrTypeMismatch
	}
	if pkt != nil {
		s.packetPrefix(&ek)
	}
	if s.typ.kind == kindBitmap && !s.inBitmap(ek) {
		return ErrOutOfRange
	}
	o := &addOpts{kernel: true}
	if pkt != nil && s.counters {
		*o = *pkt
		o.kernel = true
	}
	if timeout >= 0 && s.hasTimeout {
		o.timeout, o.hasTimeout = timeout, true
	}
	return s.insertKey(ek, o, exist)
}

// DelKey deletes the element a packet key describes, as --del-set does:
// a net dimension takes the longest prefix length present in the set.
func (s *Set) DelKey(k Key) error {
	if k.Dims > 0 && k.Dims < s.Dimension() {
		return ErrTypeMismatch
	}
	if s.typ.kind == kindList {
		return s.reg.forMembers(s, func(m *Set) error { return m.DelKey(k) })
	}
	ek, ok := s.keyFromPacket(k)
	if !ok {
		return ErrNotAdded
	}
	s.packetPrefix(&ek)
	return s.deleteKey(ek)
}

// packetPrefix gives the net dimensions of a key read from a packet the
// prefix length the kernel's add and del use: the longest present in the
// set, or the host length in an empty set.
func (s *Set) packetPrefix(k *ekey) {
	if s.isNet(0) && len(s.lens1) > 0 {
		k.c1 = s.lens1[0]
		k.a1 = netip.PrefixFrom(k.a1, int(k.c1)).Masked().Addr()
	}
	if s.isNet(2) && len(s.lens2) > 0 {
		k.c2 = s.lens2[0]
		k.a2 = netip.PrefixFrom(k.a2, int(k.c2)).Masked().Addr()
	}
}

func (s *Set) inBitmap(k ekey) bool {
	if s.typ.dims[0] == dimBPort {
		return k.port >= s.portLo && k.port <= s.portHi
	}
	return !k.a1.Less(s.rangeLo) && !s.rangeHi.Less(k.a1)
}

// testKey answers `ipset test` for a parsed element: a host-length prefix
// walks like a packet; a shorter one needs that exact entry.
func (s *Set) testKey(k ekey, now time.Time) bool {
	full := uint8(s.maxBits())
	if s.typ.kind == kindHash {
		id := s.hfind(&k, s.isNet(0) && k.c1 == full, s.isNet(2) && k.c2 == full, now, nil)
		return id >= 0 && *s.flag(uint32(id))&recNomatch == 0
	}
	e := s.bfind(k, now, nil)
	return e != nil && !e.nomatch
}

// remaining is the timeout printed for an entry: whole seconds left,
// at least 1 (0 would read as permanent).
func remaining(e *entry, now time.Time) int64 {
	if e.expires.IsZero() {
		return 0
	}
	r := int64(e.expires.Sub(now) / time.Second)
	if r < 1 {
		r = 1
	}
	return r
}

// appendMember prints a member line's text (element and extensions).
func (s *Set) appendMember(b []byte, e *entry, now time.Time) []byte {
	b = s.appendKey(b, e.k)
	if s.hasTimeout {
		b = append(b, " timeout "...)
		b = strconv.AppendInt(b, remaining(e, now), 10)
	}
	if e.nomatch {
		b = append(b, " nomatch"...)
	}
	if s.counters {
		b = append(b, " packets "...)
		b = strconv.AppendUint(b, e.packets, 10)
		b = append(b, " bytes "...)
		b = strconv.AppendUint(b, e.bytes, 10)
	}
	if s.comment && e.comment != "" {
		b = append(b, " comment \""...)
		b = append(b, e.comment...)
		b = append(b, '"')
	}
	if s.skbinfo {
		if e.skbmark != 0 || e.skbmask != 0 {
			b = append(b, " skbmark 0x"...)
			b = strconv.AppendUint(b, uint64(e.skbmark), 16)
			if e.skbmask != 0xffffffff {
				b = append(b, "/0x"...)
				b = strconv.AppendUint(b, uint64(e.skbmask), 16)
			}
		}
		if e.skbprio != 0 {
			b = append(b, " skbprio "...)
			b = strconv.AppendUint(b, uint64(e.skbprio>>16), 16)
			b = append(b, ':')
			b = strconv.AppendUint(b, uint64(e.skbprio&0xffff), 16)
		}
		if e.skbqueue != 0 {
			b = append(b, " skbqueue "...)
			b = strconv.AppendUint(b, uint64(e.skbqueue), 10)
		}
	}
	return b
}

// members returns the live entries of a bitmap or list set in print
// order: insertion order for lists, ascending for bitmaps.
func (s *Set) members(now time.Time) []*entry {
	var out []*entry
	for _, e := range s.order {
		if !e.dead && !e.expired(now) {
			out = append(out, e)
		}
	}
	if s.typ.kind == kindBitmap {
		slices.SortFunc(out, func(a, b *entry) int {
			if c := a.k.a1.Compare(b.k.a1); c != 0 {
				return c
			}
			return int(a.k.port) - int(b.k.port)
		})
	}
	return out
}

// eachMember calls fn with the live entries in print order; hash members
// come in the kernel's bucket order, each in an entry fn must not keep.
func (s *Set) eachMember(now time.Time, fn func(e *entry)) {
	if s.typ.kind != kindHash {
		for _, e := range s.members(now) {
			fn(e)
		}
		return
	}
	var e entry
	s.eachHashMember(now, false, func(id uint32) {
		s.recEntry(id, &e)
		fn(&e)
	})
}

// appendHeader prints the Header: text (also the tail of a create line).
func (s *Set) appendHeader(b []byte) []byte {
	switch s.typ.kind {
	case kindHash:
		b = append(b, "family "...)
		if s.family == 6 {
			b = append(b, "inet6"...)
		} else {
			b = append(b, "inet"...)
		}
		b = append(b, " hashsize "...)
		b = strconv.AppendInt(b, int64(s.hashsize), 10)
		b = append(b, " maxelem "...)
		b = strconv.AppendInt(b, int64(s.maxelem), 10)
		if s.netmask != 0 {
			b = append(b, " netmask "...)
			b = strconv.AppendInt(b, int64(s.netmask), 10)
		}
	case kindBitmap:
		b = append(b, "range "...)
		if s.typ.dims[0] == dimBPort {
			b = strconv.AppendUint(b, uint64(s.portLo), 10)
			b = append(b, '-')
			b = strconv.AppendUint(b, uint64(s.portHi), 10)
		} else {
			b = s.rangeLo.AppendTo(b)
			b = append(b, '-')
			b = s.rangeHi.AppendTo(b)
			if s.netmask != 0 && s.netmask != 32 {
				b = append(b, " netmask "...)
				b = strconv.AppendInt(b, int64(s.netmask), 10)
			}
		}
	case kindList:
		b = append(b, "size "...)
		b = strconv.AppendInt(b, int64(s.size), 10)
	}
	if s.hasTimeout {
		b = append(b, " timeout "...)
		b = strconv.AppendInt(b, int64(s.timeout), 10)
	}
	if s.counters {
		b = append(b, " counters"...)
	}
	if s.comment {
		b = append(b, " comment"...)
	}
	if s.skbinfo {
		b = append(b, " skbinfo"...)
	}
	// forceadd is not printed: kernel 6.18 does not report it back to
	// ipset 7.17 (list and save both omit it, observed).
	if s.typ.kind == kindHash {
		b = append(b, " bucketsize "...)
		b = strconv.AppendInt(b, int64(s.bucketsize), 10)
		b = append(b, " initval 0x"...)
		h := strconv.FormatUint(uint64(s.initval), 16)
		for i := len(h); i < 8; i++ {
			b = append(b, '0')
		}
		b = append(b, h...)
	}
	return b
}
