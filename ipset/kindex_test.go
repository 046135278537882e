package ipset

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The index answers as a map of its keys through sets, flag updates and
// deletions; the keys are drawn from a small range so that they collide
// in the small tables, wrap around the end and are shifted back on
// deletion.
func TestKindexMatchesMap(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		x := newKindex(0)
		ref := map[uint64]bool{}
		for i := range rapid.IntRange(1, 400).Draw(t, "ops") {
			k := uint64(rapid.IntRange(0, 60).Draw(t, "key")) << 3
			switch rapid.IntRange(0, 2).Draw(t, "op") {
			case 0, 1:
				nm := rapid.Bool().Draw(t, "nomatch")
				x.set(k, nm)
				ref[k] = nm
			case 2:
				x.del(k)
				delete(ref, k)
			}
			require.Equal(t, len(ref), x.n, "op %d", i)
			require.LessOrEqual(t, x.n, kidxCap(x.bits), "op %d", i)
			for q := uint64(0); q <= 60<<3; q += 8 {
				e := x.find(q)
				nm, ok := ref[q]
				require.Equal(t, ok, e != kidxEmpty, "op %d key %d", i, q)
				if ok {
					require.Equal(t, nm, e&kidxNomatch != 0, "op %d key %d", i, q)
				}
			}
		}
	})
}

// Sets filled by Restore (index built at the end), then changed one line
// at a time, answer lookups from the index as the bucket walk does,
// nomatch and most specific prefix included.
func TestKindexAgreesWithBuckets(t *testing.T) {
	r, c := newTestRegistry()
	doc := "create N hash:net\ncreate P hash:net,port\ncreate I hash:ip netmask 24\ncreate Q hash:ip,port\n" +
		"add N 10.0.0.0/8\nadd N 10.1.0.0/16 nomatch\nadd N 10.1.2.0/24\nadd N 10.1.2.3\n" +
		"add P 10.0.0.0/8,tcp:80\nadd P 10.1.0.0/16,tcp:80 nomatch\nadd P 10.1.2.0/24,udp:53\n" +
		"add I 192.168.7.9\nadd Q 192.168.1.1,tcp:22\nadd Q 192.168.1.1,udp:22\n"
	require.NoError(t, r.Restore([]byte(doc), RestoreOptions{}))
	for _, n := range []string{"N", "P", "I", "Q"} {
		require.NotNil(t, r.Get(n).kidx, n)
	}
	keys := []Key{
		{Addr: netip.MustParseAddr("10.1.2.3"), Proto: 6, Port: 80}, {Addr: netip.MustParseAddr("10.1.2.4"), Proto: 17, Port: 53},
		{Addr: netip.MustParseAddr("10.1.9.9"), Proto: 6, Port: 80}, {Addr: netip.MustParseAddr("10.9.9.9"), Proto: 6, Port: 80},
		{Addr: netip.MustParseAddr("10.9.9.9"), Proto: 6, Port: 81}, {Addr: netip.MustParseAddr("11.0.0.1"), Proto: 6, Port: 80},
		{Addr: netip.MustParseAddr("192.168.7.200")}, {Addr: netip.MustParseAddr("192.168.8.1")},
		{Addr: netip.MustParseAddr("192.168.1.1"), Proto: 6, Port: 22}, {Addr: netip.MustParseAddr("192.168.1.1"), Proto: 17, Port: 22},
		{Addr: netip.MustParseAddr("192.168.1.1"), Proto: 6, Port: 23}, {Addr: netip.MustParseAddr("::ffff:10.1.2.3"), Proto: 6, Port: 80},
	}
	check := func(step string) {
		t.Helper()
		for _, n := range []string{"N", "P", "I", "Q"} {
			s := r.Get(n)
			for _, k := range keys {
				found, nm, ok := s.kidxLookup(&k, false)
				require.True(t, ok, n)
				id, _ := s.packetFind(&k, c.Now(), nil)
				assert.Equal(t, id >= 0, found, "%s %s %v", step, n, k)
				assert.Equal(t, id >= 0 && *s.flag(uint32(id))&recNomatch != 0, nm, "%s %s %v", step, n, k)
			}
		}
	}
	check("restored")
	m, nm := r.Get("N").Lookup(keys[2], c.Now())
	assert.Equal(t, [2]bool{false, true}, [2]bool{m, nm}, "10.1.9.9 is in the nomatch /16")
	require.NoError(t, r.Add("N", "10.1.0.0/16", true))
	check("nomatch cleared by add -exist")
	require.NoError(t, r.Del("N", "10.1.2.0/24", false))
	require.NoError(t, r.Del("P", "10.0.0.0/8,tcp:80", false))
	require.NoError(t, r.Del("Q", "192.168.1.1,udp:22", false))
	check("deleted")
	require.NoError(t, r.Restore([]byte("create N2 hash:net\nadd N2 10.1.2.0/24 nomatch\nswap N N2\n"), RestoreOptions{}))
	check("swapped")
	require.NoError(t, r.Flush("P"))
	check("flushed")
}
