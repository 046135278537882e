package ipset

import (
	"bytes"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// listSize returns the "Size in memory" and the member lines of a set.
func listSize(t *testing.T, r *Registry, name string) string {
	t.Helper()
	var b bytes.Buffer
	require.NoError(t, r.List(&b, name))
	var out []byte
	for _, l := range bytes.Split(b.Bytes(), []byte("\n")) {
		if bytes.HasPrefix(l, []byte("Size in memory: ")) || bytes.HasPrefix(l, []byte("Header: ")) {
			out = append(append(out, l...), '\n')
		}
	}
	return string(out)
}

// The figures of a kernel 6.18 session (hash:ip hashsize 64 initval 0x1,
// where these five addresses share one bucket).
func TestBucketAccounting(t *testing.T) {
	r, _ := newTestRegistry()
	require.NoError(t, r.Create("A", "hash:ip", false, "hashsize", "64", "initval", "0x1"))
	steps := []struct {
		op, elem string
		size     string
	}{
		{"add", "1.1.1.12", "256"}, // new bucket: 32 + 2 slots of 4
		{"add", "1.1.1.19", "256"},
		{"add", "1.1.1.49", "296"}, // growth books another 32 + 2*4
		{"add", "1.1.1.54", "296"},
		{"add", "1.1.1.91", "336"},
		{"del", "1.1.1.12", "336"}, // one free slot below pos
		{"del", "1.1.1.19", "296"}, // two: shrink and compact
		{"del", "1.1.1.91", "296"}, // last slot: pos drops
		{"del", "1.1.1.54", "296"},
		{"add", "1.1.1.109", "296"},
		{"del", "1.1.1.49", "296"},
		{"del", "1.1.1.109", "248"}, // every slot free: freed (32 + 4*4)
	}
	for _, s := range steps {
		if s.op == "add" {
			require.NoError(t, r.Add("A", s.elem, false))
		} else {
			require.NoError(t, r.Del("A", s.elem, false))
		}
		assert.Contains(t, listSize(t, r, "A"), "Size in memory: "+s.size+"\n", "%s %s", s.op, s.elem)
	}
	// A grown bucket freed from the end leaves its growth booked.
	r2, _ := newTestRegistry()
	require.NoError(t, r2.Create("A", "hash:ip", false, "hashsize", "64", "initval", "0x1"))
	for _, e := range []string{"1.1.1.12", "1.1.1.19", "1.1.1.49", "1.1.1.54", "1.1.1.91"} {
		require.NoError(t, r2.Add("A", e, false))
	}
	for _, e := range []string{"1.1.1.91", "1.1.1.54", "1.1.1.49", "1.1.1.19", "1.1.1.12"} {
		require.NoError(t, r2.Del("A", e, false))
	}
	assert.Contains(t, listSize(t, r2, "A"), "Size in memory: 280\n")
	require.NoError(t, r2.Flush("A"))
	assert.Contains(t, listSize(t, r2, "A"), "Size in memory: 216\n")
}

// A userspace add into a bucket at bucketsize doubles the table; the SET
// target's add fails instead.
func TestResize(t *testing.T) {
	r, _ := newTestRegistry()
	require.NoError(t, r.Create("A", "hash:ip", false, "hashsize", "64", "bucketsize", "2", "initval", "0x1"))
	s := r.Get("A")
	for _, e := range []string{"1.1.1.12", "1.1.1.19"} {
		require.NoError(t, r.Add("A", e, false))
	}
	k := Key{Addr: netip.MustParseAddr("1.1.1.49")}
	assert.ErrorIs(t, s.AddKey(k, -1, false), ErrFull, "kernel-side add into a full bucket")
	assert.Equal(t, 64, s.hashsize)
	require.NoError(t, r.Add("A", "1.1.1.49", false))
	assert.Equal(t, 128, s.hashsize)
	assert.Contains(t, listSize(t, r, "A"), "hashsize 128 ")
	assert.Equal(t, 3, s.Len())
}

func TestHashedBytes(t *testing.T) {
	r, _ := newTestRegistry()
	cases := []struct {
		typ, fam, elem string
		want           []byte
	}{
		{"hash:ip", "inet", "10.0.0.1", []byte{10, 0, 0, 1}},
		{"hash:net", "inet", "10.1.0.0/16", []byte{10, 1, 0, 0, 0, 0, 0, 16}},
		{"hash:ip,port", "inet", "10.0.0.1,udp:53", []byte{10, 0, 0, 1, 0, 53, 17, 0}},
		{"hash:ip,port", "inet", "10.0.0.1,icmp:echo-request", []byte{10, 0, 0, 1, 8, 0, 1, 0}},
		{"hash:net,port", "inet", "10.1.0.0/16,tcp:80", []byte{10, 1, 0, 0, 0, 80, 6, 15}},
		{"hash:ip,port,ip", "inet", "10.0.0.1,tcp:80,10.0.0.2", []byte{10, 0, 0, 1, 10, 0, 0, 2, 0, 80, 6, 0}},
		{"hash:ip,port,net", "inet", "10.0.0.1,tcp:80,10.2.0.0/16", []byte{10, 0, 0, 1, 10, 2, 0, 0, 0, 80, 15, 6}},
		{"hash:net,iface", "inet", "10.1.0.0/16,physdev:eth0", []byte{10, 1, 0, 0, 1, 16, 0, 1}},
		{"hash:ip", "inet6", "fd00::1", []byte{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}},
	}
	for i, c := range cases {
		name := string(rune('A' + i))
		require.NoError(t, r.Create(name, c.typ, false, "family", c.fam))
		s := r.Get(name)
		var got []byte
		require.NoError(t, s.eachElem(c.elem, func(k ekey) error {
			var b [40]byte
			got = b[:s.hashedBytes(&k, &b)]
			return nil
		}))
		assert.Equal(t, c.want, got, "%s %s", c.typ, c.elem)
	}
}

// Observed: a physdev entry lives in another bucket than the plain one, so
// it does not stop the walk to shorter prefixes.
func TestNetIfacePhysdevBucket(t *testing.T) {
	r, _ := restoreText(t, "create N hash:net,iface family inet6\nadd N fd00:244::/32,eth0\nadd N fd00:244::/64,physdev:eth0\n"+
		"create N4 hash:net,iface\nadd N4 10.0.0.0/8,eth0\nadd N4 10.1.0.0/16,eth1\nadd N4 10.2.0.0/16,physdev:eth1\n")
	for _, c := range []struct {
		set, elem string
		in        bool
	}{
		{"N", "fd00:244::1,eth0", true},
		{"N4", "10.1.2.3,eth0", false},
		{"N4", "10.2.2.3,eth0", true},
	} {
		in, err := r.Test(c.set, c.elem)
		require.NoError(t, err)
		assert.Equal(t, c.in, in, "ipset test %s %s", c.set, c.elem)
	}
}

func TestBitmapNetmaskCreate(t *testing.T) {
	for _, c := range []struct {
		opts string
		err  error
		size string
	}{
		{"range 10.244.1.0-10.244.1.15 netmask 28", ErrOutOfRange, ""},
		{"range 10.244.1.16-10.244.1.47 netmask 28", ErrOutOfRange, ""},
		{"range 10.0.0.0/8 netmask 8", ErrOutOfRange, ""},
		{"range 10.244.1.0-10.244.1.15 netmask 29 counters", nil, "Size in memory: 128\n"},
		// 0-47 allocates the 4 /28s of 10.244.1.0/26.
		{"range 10.244.1.0-10.244.1.47 netmask 28 counters", nil, "Size in memory: 160\n"},
	} {
		r, _ := newTestRegistry()
		err := r.Create("B", "bitmap:ip", false, bytesFields(c.opts)...)
		if c.err != nil {
			assert.ErrorIs(t, err, c.err, c.opts)
			continue
		}
		require.NoError(t, err, c.opts)
		assert.Contains(t, listSize(t, r, "B"), c.size, c.opts)
	}
}

func bytesFields(s string) []string {
	var out []string
	for _, f := range bytes.Fields([]byte(s)) {
		out = append(out, string(f))
	}
	return out
}

func TestBucketsizeRounding(t *testing.T) {
	for in, want := range map[string]string{"1": "2", "3": "4", "12": "12", "200": "12"} {
		r, _ := newTestRegistry()
		require.NoError(t, r.Create("X", "hash:ip", false, "bucketsize", in, "initval", "1"))
		assert.Contains(t, listSize(t, r, "X"), " bucketsize "+want+" ", in)
	}
}

// Observed with kernel 6.18: bitmap:ip steps a range by the netmask block
// from its unmasked start, hash:ip from the masked start.
func TestNetmaskRangeSteps(t *testing.T) {
	r, _ := restoreText(t, "create B bitmap:ip range 192.168.10.0/24 netmask 31\n"+
		"add B 192.168.10.1-192.168.10.2\nadd B 192.168.10.5-192.168.10.8\n"+
		"create B2 bitmap:ip range 192.168.10.0/24 netmask 30\nadd B2 192.168.10.3/31\nadd B2 192.168.10.6-192.168.10.13\n"+
		"create H hash:ip netmask 31 initval 0xc2faed01\nadd H 192.168.10.1-192.168.10.2\nadd H 192.168.10.5-192.168.10.8\n")
	b, err := r.AppendSave(nil)
	require.NoError(t, err)
	assert.Equal(t, "create B bitmap:ip range 192.168.10.0-192.168.10.255 netmask 31\n"+
		"add B 192.168.10.0\nadd B 192.168.10.4\nadd B 192.168.10.6\n"+
		"create B2 bitmap:ip range 192.168.10.0-192.168.10.255 netmask 30\n"+
		"add B2 192.168.10.0\nadd B2 192.168.10.4\nadd B2 192.168.10.8\n"+
		"create H hash:ip family inet hashsize 1024 maxelem 65536 netmask 31 bucketsize 12 initval 0xc2faed01\n"+
		"add H 192.168.10.0\nadd H 192.168.10.4\nadd H 192.168.10.8\nadd H 192.168.10.2\nadd H 192.168.10.6\n", string(b))
}

// A list:set passes the rule's flag count to its members: one flag adds
// to a hash:ip member but not to a hash:ip,port one before it.
func TestListAddDims(t *testing.T) {
	r, _ := restoreText(t, "create P hash:ip,port family inet6\ncreate I hash:ip family inet6\ncreate L list:set\nadd L P\nadd L I\n")
	k := Key{Addr: netip.MustParseAddr("fd00::2"), Proto: 58, Dims: 1}
	require.NoError(t, r.Get("L").AddKey(k, -1, false))
	assert.Equal(t, 0, r.Get("P").Len())
	assert.Equal(t, 1, r.Get("I").Len())
	assert.ErrorIs(t, r.Get("P").AddKey(k, -1, false), ErrTypeMismatch)
}

// Observed: the kernel copies only the element into a reused slot, so a
// new element in a deleted one's slot, and an expired element added again,
// keep the counters left there.
func TestSlotReuseKeepsCounters(t *testing.T) {
	r, c := restoreText(t, "create CC hash:ip hashsize 64 initval 0x1 counters timeout 100\n"+
		"add CC 1.1.1.12 packets 5 bytes 50\nadd CC 1.1.1.19\ndel CC 1.1.1.12\nadd CC 1.1.1.49\n"+
		"create CD hash:ip counters timeout 1\nadd CD 1.1.1.1 packets 7 bytes 70\n")
	c.t = c.t.Add(2200 * time.Millisecond)
	require.NoError(t, r.Add("CD", "1.1.1.1", false))
	b, err := r.AppendSave(nil)
	require.NoError(t, err)
	assert.Equal(t, "create CC hash:ip family inet hashsize 64 maxelem 65536 timeout 100 counters bucketsize 12 initval 0x00000001\n"+
		"add CC 1.1.1.49 timeout 97 packets 5 bytes 50\nadd CC 1.1.1.19 timeout 97 packets 0 bytes 0\n"+
		"create CD hash:ip family inet hashsize 1024 maxelem 65536 timeout 1 counters bucketsize 12 initval 0xc4f5a586\n"+
		"add CD 1.1.1.1 timeout 1 packets 7 bytes 70\n", string(b))
}

// Random adds, deletes, flushes and resizes keep the table consistent with
// the lookup map: every live entry sits in the bucket its key hashes to,
// no bucket exceeds its size, and the booked bytes never go negative.
func TestHtableInvariants(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		r, _ := newTestRegistry()
		typ := rapid.SampledFrom(hashTypes).Draw(t, "type")
		require.NoError(t, r.Create("S", typ, false, "hashsize", "64", "bucketsize", "4", "forceadd", "maxelem", "40"))
		s := r.Get("S")
		rng := rand.New(rand.NewPCG(rapid.Uint64().Draw(t, "seed"), 0))
		var added []string
		for range rapid.IntRange(1, 200).Draw(t, "ops") {
			switch op := rapid.IntRange(0, 9).Draw(t, "op"); {
			case op < 6 || len(added) == 0:
				e := randElem(rng, typ, 4, false)
				if err := r.Add("S", e, true); err == nil {
					added = append(added, e)
				}
			case op < 9:
				_ = r.Del("S", added[rng.IntN(len(added))], true)
			default:
				require.NoError(t, r.Flush("S"))
			}
			checkHtable(t, s)
			require.Equal(t, 1<<s.tbl.bits, s.hashsize)
		}
	})
}

// checkHtable asserts the table's invariants: every used slot's record
// sits in the bucket its key hashes to, no bucket exceeds its size, each
// record is in one slot or free, and the counts agree.
func checkHtable(t require.TestingT, s *Set) {
	live, used := 0, 0
	where := map[uint32]bool{}
	s.tbl.forEach(func(key uint32, b bucket) {
		used++
		require.LessOrEqual(t, b.pos, b.size)
		require.Positive(t, b.pos)
		for _, sx := range s.tbl.slots(key, b)[:b.pos] {
			x := slotID(sx)
			require.False(t, where[x], "record %d in two slots", x)
			where[x] = true
			if isDead(sx) {
				continue
			}
			live++
			require.Equal(t, slotHash(sx), s.hashKey(s.keyOf(x)))
			require.Equal(t, key, s.tbl.mask(slotHash(sx)))
		}
	})
	for _, x := range s.rec.free {
		require.False(t, where[x], "free record %d in a slot", x)
		where[x] = true
	}
	require.Len(t, where, s.nrec(), "records neither in a slot nor free")
	require.Equal(t, s.rec.live, live)
	require.Equal(t, s.tbl.used, used)
	require.GreaterOrEqual(t, s.tbl.extSize, 0)
}
