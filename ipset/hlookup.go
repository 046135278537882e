package ipset

import (
	"encoding/binary"
	"time"
)

// hfind returns the record deciding a lookup for k in a hash set, or -1:
// with walk1 (walk2) the first (third) dimension's address is tried at
// each prefix length present in the set, longest first, as the kernel's
// mtype_test_cidrs does. An element that o's counter comparisons reject is
// passed over (o may be nil). It does not allocate.
func (s *Set) hfind(k *ekey, walk1, walk2 bool, now time.Time, o *MatchOptions) int64 {
	var buf [40]byte
	kb := buf[:s.hashedBytes(k, &buf)]
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
		f, fa, line := s.filterFor(orig[:4])
		for _, l := range s.lens1 {
			if f != nil && !f.has(line, fa, l) {
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
	f, fa, line := s.filterFor(orig[:4])
	for _, l := range lens {
		if f != nil && !f.has(line, fa, l) {
			continue
		}
		maskInto(kb[aoff:aoff+a], orig[:a], int(l))
		if off1 {
			kb[at] = (l - 1) & 0x7f
		} else {
			kb[at] = l
		}
		if id := s.probe(kb, nowOff, o); id >= 0 {
			return id
		}
	}
	return -1
}

// filterFor returns the set's filter (nil when it has none), the walked
// IPv4 address a and its line for the lengths 16 and up.
func (s *Set) filterFor(a []byte) (*pfilter, uint32, uint32) {
	f := s.filter
	if f == nil {
		return nil, 0, 0
	}
	fa := binary.BigEndian.Uint32(a)
	return f, fa, f.line16(fa)
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
	b := t.get(t.mask(h))
	if b.size == 0 {
		return -1
	}
	for _, x := range t.slots(b)[:b.pos] {
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
	b := t.get(t.mask(s.hashKey(kb)))
	if b.size == 0 {
		return -1, false
	}
	a := s.alen()
	multi := 0
	for _, sx := range t.slots(b)[:b.pos] {
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
