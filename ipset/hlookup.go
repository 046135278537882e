package ipset

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
	"time"
)

// hfind returns the record deciding a lookup for k in a hash set, or -1:
// with walk1 (walk2) the first (third) dimension's address is tried at
// each prefix length present in the set, longest first, as the kernel's
// mtype_test_cidrs does. An element that o's counter comparisons reject is
// passed over (o may be nil). It does not allocate.
func (s *Set) hfind(k *ekey, walk1, walk2 bool, now time.Time, o *MatchOptions) int64 {
	var buf [40]byte
	return s.hfindBytes(buf[:s.hashedBytes(k, &buf)], k, walk1, walk2, now, o)
}

// hfindBytes is hfind for the key bytes kb of k (k is read only in
// hash:net,iface, for the interface); kb is overwritten.
func (s *Set) hfindBytes(kb []byte, k *ekey, walk1, walk2 bool, now time.Time, o *MatchOptions) int64 {
	var nowOff int64
	if s.hasTimeout {
		nowOff = s.nowOff(now)
	}
	if s.isIface() {
		if !walk1 {
			id, _ := s.probeIface(kb, k, nowOff, o)
			return id
		}
		var orig [16]byte
		a := s.alen()
		copy(orig[:], kb[:a])
		f, fa, line, lm := s.filterFor(orig[:4])
		for _, l := range s.lens1 {
			if f != nil && !f.has(line, lm, fa, l, 0) {
				continue
			}
			maskInto(kb[:a], orig[:a], int(l))
			kb[a+1] = l
			// hash:net,iface stops at the first prefix where any element
			// has the address, whatever its interface (the kernel's
			// "multi" count in mtype_test_cidrs).
			if id, seen := s.probeIface(kb, k, nowOff, o); id >= 0 || seen {
				return id
			}
		}
		return -1
	}
	if !walk1 && !walk2 {
		return s.probe(kb, nowOff, o)
	}
	dim, lens, aoff := 0, s.lens1, 0
	if !walk1 {
		dim, lens, aoff = 2, s.lens2, s.alen()
	}
	at, off1 := s.cidrAt(dim)
	a := s.alen()
	var orig [16]byte
	copy(orig[:], kb[aoff:aoff+a])
	try := func(l uint8) int64 {
		maskInto(kb[aoff:aoff+a], orig[:a], int(l))
		if off1 {
			kb[at] = (l - 1) & 0x7f
		} else {
			kb[at] = l
		}
		return s.probe(kb, nowOff, o)
	}
	f, fa, line, lm := s.filterFor(orig[:4])
	var extra uint64
	if f != nil {
		extra = extraHash(s.filterExtra(kb))
	}
	if f == nil {
		for _, l := range lens {
			if id := try(l); id >= 0 {
				return id
			}
		}
		return -1
	}
	// The lengths 16 and up that the filter line may hold, longest first,
	// then the shorter ones.
	cand := lm & s.pres1
	if dim == 2 {
		cand = lm & s.pres2
	}
	for cand != 0 {
		i := bits.Len32(cand) - 1
		cand &^= 1 << i
		l := uint8(i + 16)
		if !f.has(line, lm, fa, l, extra) {
			continue
		}
		if id := try(l); id >= 0 {
			return id
		}
	}
	for _, l := range lens {
		if l >= 16 || !f.has(line, lm, fa, l, extra) {
			continue
		}
		if id := try(l); id >= 0 {
			return id
		}
	}
	return -1
}

// packetFind is hfind for a packet key, without building an element: the
// record deciding the lookup, or -1; ok is false when the key does not fit
// the set (keyFromPacket).
func (s *Set) packetFind(pk *Key, now time.Time, o *MatchOptions) (id int64, ok bool) {
	if s.isIface() {
		k, ok := s.keyFromPacket(*pk)
		if !ok {
			return -1, false
		}
		return s.hfind(&k, true, false, now, o), true
	}
	var b [40]byte
	n, ok := s.packetBytes(pk, &b)
	if !ok {
		return -1, false
	}
	return s.hfindBytes(b[:n], nil, s.isNet(0), s.isNet(2), now, o), true
}

// packetBytes writes the hashed bytes of a packet key into b, a net
// dimension at full length (not for hash:net,iface); ok is false when the
// key does not fit the set (keyFromPacket).
func (s *Set) packetBytes(pk *Key, b *[40]byte) (n int, ok bool) {
	a1, ok := s.packetAddr(pk.Addr)
	if !ok {
		return 0, false
	}
	n = putAddr(b, 0, a1)
	full := byte(s.maxBits())
	port := pk.Port
	if !keyHasPort(pk.Proto) {
		port = 0
	}
	switch s.typ.name {
	case "hash:net":
		b[n], b[n+1], b[n+2], b[n+3] = 0, 0, 0, full
		n += 4
	case "hash:ip,port":
		b[n], b[n+1], b[n+2], b[n+3] = byte(port>>8), byte(port), byte(pk.Proto), 0
		n += 4
	case "hash:net,port":
		b[n], b[n+1], b[n+2], b[n+3] = byte(port>>8), byte(port), byte(pk.Proto), (full-1)&0x7f
		n += 4
	case "hash:ip,port,ip", "hash:ip,port,net":
		a2, ok := s.packetAddr(pk.Addr2)
		if !ok {
			return 0, false
		}
		n = putAddr(b, n, a2)
		b[n], b[n+1] = byte(port>>8), byte(port)
		if s.isNet(2) {
			b[n+2], b[n+3] = (full-1)&0x7f, byte(pk.Proto)
		} else {
			b[n+2], b[n+3] = byte(pk.Proto), 0
		}
		n += 4
	}
	return n, true
}

// packetAddr is an address of a packet key as keyFromPacket takes it.
func (s *Set) packetAddr(a netip.Addr) (netip.Addr, bool) {
	if s.family == 4 {
		a = a.Unmap()
	}
	if !a.IsValid() || a.Is4() != (s.family == 4) {
		return a, false
	}
	if s.netmask != 0 {
		a = netip.PrefixFrom(a, s.netmask).Masked().Addr()
	}
	return a, true
}

func putAddr(b *[40]byte, n int, a netip.Addr) int {
	if a.Is4() {
		x := a.As4()
		return n + copy(b[n:], x[:])
	}
	x := a.As16()
	return n + copy(b[n:], x[:])
}

// filterFor returns the set's filter (nil when it has none), the walked
// IPv4 address a, its line for the lengths 16 and up and their mask.
func (s *Set) filterFor(a []byte) (f *pfilter, fa, line16 uint32, lens16 uint32) {
	return s.filterAt(binary.BigEndian.Uint32(a))
}

// filterAt is filterFor for the address fa in host order.
func (s *Set) filterAt(a uint32) (f *pfilter, fa, line16 uint32, lens16 uint32) {
	f, fa = s.filter, a
	if f == nil {
		return nil, 0, 0, 0
	}
	line16 = f.line16(fa)
	return f, fa, line16, uint32(f.lens16(line16))
}

// maskInto writes src masked to its first l bits into dst.
func maskInto(dst, src []byte, l int) {
	for i := range dst {
		switch {
		case l >= 8*(i+1):
			dst[i] = src[i]
		case l <= 8*i:
			dst[i] = 0
		default:
			dst[i] = src[i] & byte(0xff<<(8-(l-8*i)))
		}
	}
}

// probe looks up the element with key bytes kb: its record if it is live
// and passes o's comparisons, else -1.
func (s *Set) probe(kb []byte, nowOff int64, o *MatchOptions) int64 {
	t := &s.tbl
	h := s.hashKey(kb)
	key := t.mask(h)
	b := t.get(key)
	if b.size == 0 {
		return -1
	}
	for _, x := range t.slots(key, b)[:b.pos] {
		if slotHash(x) != h || isDead(x) {
			continue
		}
		id := slotID(x)
		if string(s.keyOf(id)) != string(kb) {
			continue
		}
		if !s.recExpired(id, nowOff) && s.acceptRec(o, id) {
			return int64(id)
		}
		return -1
	}
	return -1
}

// probeIface is the kernel's lookup of one prefix in hash:net,iface
// (mtype_test_cidrs, kernel 6.18): the bucket the key hashes to (network,
// prefix length and physdev flag; not the interface) is walked slot by
// slot, the first element with the physdev flag and the interface decides.
// Names compare exactly unless the lookup key itself is a wildcard: a
// stored "eth+" is never found by a packet's interface name, only by an
// `ipset test` of "eth+" (observed). seen reports that the walk ended on
// an element with the network that was not taken for its interface (the
// kernel's multi count): no shorter prefix is tried then. An element taken
// but rejected (expired, counters) resets that count.
func (s *Set) probeIface(kb []byte, k *ekey, nowOff int64, o *MatchOptions) (id int64, seen bool) {
	t := &s.tbl
	key := t.mask(s.hashKey(kb))
	b := t.get(key)
	if b.size == 0 {
		return -1, false
	}
	a := s.alen()
	multi := 0
	for _, sx := range t.slots(key, b)[:b.pos] {
		if isDead(sx) {
			continue
		}
		x := slotID(sx)
		xb := s.keyOf(x)
		if string(xb[:a]) != string(kb[:a]) || xb[a+1] != kb[a+1] {
			continue
		}
		multi++
		if xb[a] != kb[a] { // physdev
			continue
		}
		name := s.ifaces.str(s.rec.ifc[x])
		if k.wildcard {
			if len(k.iface) < len(name) || k.iface[:len(name)] != name {
				continue
			}
		} else if name != k.iface {
			continue
		}
		if !s.recExpired(x, nowOff) && s.acceptRec(o, x) {
			return int64(x), true
		}
		multi = 0
	}
	return -1, multi > 0
}

// acceptRec is accept for a record.
func (s *Set) acceptRec(o *MatchOptions, id uint32) bool {
	if o == nil || !s.counters {
		return true
	}
	c := &s.rec.cnt[id]
	if !o.NoUpdate {
		c[0]++
		c[1] += uint64(o.Len)
	}
	return o.PacketsOp.holds(c[0], o.Packets) && o.BytesOp.holds(c[1], o.Bytes)
}
