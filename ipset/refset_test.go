package ipset

import (
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// refHash is the straightforward model of the kernel's hash table that the
// compact storage (htable.go) must agree with: one heap object per
// element, buckets as slices of pointers in a map, membership in a Go map,
// lookups by trying every prefix length. It shares only the hash function
// and the byte figures with the real set.
type refHash struct {
	s          *Set // parameters only: hash, sizes, maxelem, forceadd
	bits       uint8
	bucketsize int
	buckets    map[uint32]*refBucket
	extSize    int
	live       map[ekey]*refEntry
}

type refEntry struct {
	k       ekey
	nomatch bool
	packets uint64
	dead    bool
}

type refBucket struct {
	slots []*refEntry
	size  int
}

func newRefHash(s *Set) *refHash {
	return &refHash{s: s, bits: hashBits(s.hashsize), bucketsize: s.bucketsize,
		buckets: map[uint32]*refBucket{}, live: map[ekey]*refEntry{}}
}

func (m *refHash) add(k ekey, nomatch bool, packets uint64, hasCounter, exist bool) error {
	if e := m.live[k]; e != nil {
		if !exist {
			return ErrExists
		}
		e.nomatch = nomatch
		if hasCounter {
			e.packets = packets
		}
		return nil
	}
	ne := &refEntry{k: k, nomatch: nomatch}
	if hasCounter {
		ne.packets = packets
	}
	for {
		err := m.place(ne, hasCounter)
		if err != errResize {
			return err
		}
		if !m.resize() {
			return ErrFull
		}
	}
}

func (m *refHash) place(ne *refEntry, hasCounter bool) error {
	full := len(m.live) >= m.s.maxelem
	key := m.s.hkey(&ne.k, m.bits)
	b := m.buckets[key]
	if b == nil {
		if full {
			return ErrFull
		}
		m.buckets[key] = &refBucket{slots: []*refEntry{ne}, size: ahashInitSize}
		m.extSize += m.s.stepBytes()
		m.live[ne.k] = ne
		return nil
	}
	j, multi := -1, 0
	for i, x := range b.slots {
		if x.dead {
			if j == -1 {
				j = i
			}
			continue
		}
		if x.k.a1 == ne.k.a1 && x.k.c1 == ne.k.c1 {
			multi++
		}
	}
	if j != -1 || (full && m.s.forceadd) {
		j = max(j, 0)
		x := b.slots[j]
		if !x.dead {
			delete(m.live, x.k)
		}
		if !hasCounter {
			ne.packets = x.packets
		}
		b.slots[j] = ne
		m.live[ne.k] = ne
		return nil
	}
	if full {
		return ErrFull
	}
	if len(b.slots) >= b.size {
		if m.s.isIface() {
			if m.bucketsize >= ahashMaxTuned {
				return ErrFull
			}
			if m.bucketsize <= multi {
				m.bucketsize += ahashInitSize
			}
		}
		if b.size >= m.bucketsize {
			return errResize
		}
		b.size += ahashInitSize
		m.extSize += m.s.stepBytes()
	}
	b.slots = append(b.slots, ne)
	m.live[ne.k] = ne
	return nil
}

func (m *refHash) keys() []uint32 {
	var keys []uint32
	for k := range m.buckets {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func (m *refHash) resize() bool {
	for tb := m.bits + 1; tb < 32; tb++ {
		nb, ext, ok := map[uint32]*refBucket{}, 0, true
		for _, key := range m.keys() {
			for _, x := range m.buckets[key].slots {
				if x.dead {
					continue
				}
				nk := m.s.hkey(&x.k, tb)
				b := nb[nk]
				switch {
				case b == nil:
					b = &refBucket{size: ahashInitSize}
					nb[nk] = b
					ext += m.s.stepBytes()
				case len(b.slots) >= b.size:
					if b.size >= m.bucketsize {
						ok = false
					}
					b.size += ahashInitSize
					ext += m.s.stepBytes()
				}
				b.slots = append(b.slots, x)
			}
		}
		if ok {
			m.bits, m.buckets, m.extSize = tb, nb, ext
			return true
		}
	}
	return false
}

func (m *refHash) del(k ekey) error {
	e := m.live[k]
	if e == nil {
		return ErrNotAdded
	}
	e.dead = true
	delete(m.live, k)
	key := m.s.hkey(&k, m.bits)
	b := m.buckets[key]
	i := slices.Index(b.slots, e)
	if i+1 == len(b.slots) {
		b.slots = b.slots[:i]
	}
	n := 0
	for _, x := range b.slots {
		if x.dead {
			n++
		}
	}
	switch {
	case n == len(b.slots):
		m.extSize -= hbucketHeader + b.size*m.s.slotBytes()
		delete(m.buckets, key)
	case n >= ahashInitSize:
		b.slots = slices.DeleteFunc(b.slots, func(x *refEntry) bool { return x.dead })
		b.size -= ahashInitSize
		m.extSize -= m.s.stepBytes()
	}
	return nil
}

func (m *refHash) flush() {
	m.buckets, m.extSize, m.live = map[uint32]*refBucket{}, 0, map[ekey]*refEntry{}
}

// members prints the live elements in bucket order as the real set does.
func (m *refHash) members() string {
	var b []byte
	for _, key := range m.keys() {
		for _, x := range m.buckets[key].slots {
			if !x.dead {
				b = m.s.appendMember(b, &entry{k: x.k, nomatch: x.nomatch, packets: x.packets}, m.s.now())
				b = append(b, '\n')
			}
		}
	}
	return string(b)
}

func (m *refHash) memSize() int {
	l := hashLayouts[m.s.typ.name]
	fam := 0
	if m.s.family == 6 {
		fam = 1
	}
	regions := 1
	if m.bits > regionBits {
		regions = 1 << (m.bits - regionBits)
	}
	return l.base[fam] + (regions-1)*regionSize + m.extSize
}

// lookup tries every prefix length of the net dimensions, longest first,
// and returns the element deciding a lookup of k (net types other than
// hash:net,iface), or nil.
func (m *refHash) lookup(k ekey) *refEntry {
	full := m.s.maxBits()
	lens := func(dim int) []int {
		if !m.s.isNet(dim) {
			return []int{-1}
		}
		var out []int
		for l := full; l >= 0; l-- {
			out = append(out, l)
		}
		return out
	}
	for _, l1 := range lens(0) {
		for _, l2 := range lens(2) {
			q := k
			if l1 >= 0 {
				q.a1, q.c1 = netip.PrefixFrom(k.a1, l1).Masked().Addr(), uint8(l1)
			}
			if l2 >= 0 {
				q.a2, q.c2 = netip.PrefixFrom(k.a2, l2).Masked().Addr(), uint8(l2)
			}
			if e := m.live[q]; e != nil {
				return e
			}
		}
	}
	return nil
}

// The compact storage agrees with the reference model under random adds
// (some with -exist, nomatch or counters), deletes, flushes and the
// resizes and forceadd evictions they cause: the same members in the same
// order with the same counters, the same Size in memory and hashsize, and
// the same answer for packet lookups (most specific prefix, nomatch). The
// prefix filter is on from the first element.
func TestCompactMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r, _ := newTestRegistry()
		r.filterMin = 1
		typ := rapid.SampledFrom(hashTypes).Draw(t, "type")
		fam := rapid.SampledFrom([]int{4, 6}).Draw(t, "family")
		famName := map[int]string{4: "inet", 6: "inet6"}[fam]
		opts := []string{"family", famName, "hashsize", "64", "counters",
			"bucketsize", strconv.Itoa(rapid.SampledFrom([]int{2, 4, 12}).Draw(t, "bucketsize")),
			"maxelem", strconv.Itoa(rapid.IntRange(8, 400).Draw(t, "maxelem"))}
		if rapid.Bool().Draw(t, "forceadd") {
			opts = append(opts, "forceadd")
		}
		require.NoError(t, r.Create("S", typ, false, opts...))
		s := r.Get("S")
		ref := newRefHash(s)
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0))
		var added []string
		nets := typ != "hash:ip" && typ != "hash:ip,port" && typ != "hash:ip,port,ip"
		for op := range rapid.IntRange(1, 300).Draw(t, "ops") {
			elem := randElem(rng, typ, fam, false)
			if len(added) > 0 && rng.IntN(3) == 0 {
				elem = added[rng.IntN(len(added))]
			}
			var keys []ekey
			require.NoError(t, s.eachElem(elem, func(k ekey) error {
				keys = append(keys, k)
				return nil
			}))
			switch x := rng.IntN(20); {
			case x < 12:
				nomatch := nets && typ != "hash:ip,port,ip" && rng.IntN(4) == 0
				exist := rng.IntN(3) == 0
				args := []string{}
				if nomatch {
					args = append(args, "nomatch")
				}
				hasCounter := rng.IntN(4) == 0
				pk := uint64(rng.IntN(100))
				if hasCounter {
					args = append(args, "packets", strconv.FormatUint(pk, 10))
				}
				err := r.Add("S", elem, exist, args...)
				var want error
				for _, k := range keys {
					if e := ref.add(k, nomatch, pk, hasCounter, exist); e != nil && !(exist && e == ErrExists) {
						want = e
						break
					}
				}
				require.Equal(t, want, err, "op %d: add %s %v", op, elem, args)
				if err == nil {
					added = append(added, elem)
				}
			case x < 18:
				err := r.Del("S", elem, false)
				var want error
				for _, k := range keys {
					if e := ref.del(k); e != nil {
						want = e
						break
					}
				}
				require.Equal(t, want, err, "op %d: del %s", op, elem)
			case x < 19:
				require.NoError(t, r.Flush("S"))
				ref.flush()
			default:
				// Packet lookups: an element's (network) address as the
				// packet's, so that its own prefix and shorter ones apply.
				if s.isIface() {
					break
				}
				for range 8 {
					var pk ekey
					q := randElem(rng, typ, fam, false)
					if len(added) > 0 && rng.IntN(2) == 0 {
						q = added[rng.IntN(len(added))]
					}
					require.Equal(t, errStop, s.eachElem(q, func(k ekey) error {
						pk = k
						return errStop
					}))
					full := uint8(s.maxBits())
					if s.isNet(0) {
						pk.c1 = full
					}
					if s.isNet(2) {
						pk.c2 = full
					}
					m, nm := s.Lookup(Key{Addr: pk.a1, Addr2: pk.a2, Proto: pk.proto, Port: pk.port}, s.now())
					e := ref.lookup(pk)
					require.Equal(t, e != nil && !e.nomatch, m, "op %d: lookup %v", op, pk)
					require.Equal(t, e != nil && e.nomatch, nm, "op %d: lookup %v", op, pk)
				}
			}
			got := ""
			s.eachMember(s.now(), func(e *entry) {
				got += string(s.appendMember(nil, e, s.now())) + "\n"
			})
			require.Equal(t, ref.members(), got, "op %d: members", op)
			require.Equal(t, ref.memSize(), s.memSize(s.now()), "op %d: Size in memory", op)
			require.Equal(t, 1<<ref.bits, s.hashsize, "op %d: hashsize", op)
			require.Equal(t, len(ref.live), s.Len(), "op %d: entries", op)
			checkHtable(t, s)
		}
	})
}

// A table too large for its elements is a map, and turns into an array
// once an eighth of its buckets could be used; both agree with the
// reference all the way, deletes included.
func TestSparseTableDensifies(t *testing.T) {
	r, _ := newTestRegistry()
	require.NoError(t, r.Create("S", "hash:net", false, "hashsize", "131072", "maxelem", "100000", "initval", "0x5eed"))
	s := r.Get("S")
	require.Nil(t, s.tbl.dense)
	ref := newRefHash(s)
	rng := rand.New(rand.NewPCG(7, 7))
	var elems []string
	check := func(step string) {
		var got []byte
		s.eachMember(s.now(), func(e *entry) { got = append(s.appendMember(got, e, s.now()), '\n') })
		require.Equal(t, ref.members(), string(got), step)
		require.Equal(t, ref.memSize(), s.memSize(s.now()), step)
		checkHtable(t, s)
	}
	for len(elems) < 20000 {
		e := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256))}),
			16+rng.IntN(17)).Masked().String()
		var k ekey
		require.NoError(t, s.eachElem(e, func(x ekey) error { k = x; return nil }))
		want := ref.add(k, false, 0, false, false)
		require.Equal(t, want, r.Add("S", e, false), e)
		if want == nil {
			elems = append(elems, e)
		}
		if len(elems) == 1000 {
			require.Nil(t, s.tbl.dense, "sparse below 16384 elements")
			check("sparse")
		}
	}
	require.NotNil(t, s.tbl.dense, "dense from 16384 elements")
	check("dense")
	for _, e := range elems[:10000] {
		var k ekey
		require.NoError(t, s.eachElem(e, func(x ekey) error { k = x; return nil }))
		require.NoError(t, ref.del(k))
		require.NoError(t, r.Del("S", e, false))
	}
	check("after deletes")
}
