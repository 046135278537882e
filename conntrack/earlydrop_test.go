package conntrack

import (
	"fmt"
	"net/netip"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// bucketOf is the hash bucket of tp among n, as earlyDrop computes it.
func bucketOf(tp Tuple, n uint64) uint64 { return uint64(hashTuple(&tp)) * n >> 32 }

// udpFlow returns the tuple of UDP flow i from 10.1.x.y to 10.2.0.1:53.
func udpFlow(i int) Tuple {
	return TupleFrom(inet.UDP, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), 1000),
		ap("10.2.0.1:53"))
}

// fill inserts entries for the tuples, assured or not, with a long timeout.
func fill(t *testing.T, tb *Table, now time.Time, assured bool, tps ...Tuple) []*Entry {
	t.Helper()
	var out []*Entry
	for _, tp := range tps {
		e := NewEntry(tp, tp.Reverse())
		e.SetExpires(now.Add(time.Hour))
		if assured {
			e.Status = StatusSeenReply | StatusAssured
		}
		require.NoError(t, tb.Insert(e))
		out = append(out, e)
	}
	return out
}

// Early drop looks at the eight buckets from the new tuple's, no further:
// with the table full, a droppable entry seven buckets on is dropped, one
// eight buckets on is not and the packet is dropped (kernel early_drop,
// NF_CT_EVICTION_RANGE 8; docs/kernel-notes.md "Conntrack table full").
func TestEarlyDropNeighbourhood(t *testing.T) {
	const buckets = 1024
	// A new tuple hashed into one of the last buckets: the neighbourhood
	// wraps around to bucket 0.
	var newTuple Tuple
	for i := 1 << 15; ; i++ {
		if newTuple = udpFlow(i); bucketOf(newTuple, buckets) >= buckets-3 {
			break
		}
	}
	home := bucketOf(newTuple, buckets)
	// Find flows at a given distance from the new tuple's bucket; their
	// reply tuples must lie outside the neighbourhood.
	near := func(dist uint64) Tuple {
		for i := 1; i < 1<<15; i++ {
			tp := udpFlow(i)
			r := (bucketOf(tp.Reverse(), buckets) - home + buckets) % buckets
			if (bucketOf(tp, buckets)-home+buckets)%buckets == dist && r > 16 {
				return tp
			}
		}
		t.Fatalf("no flow at distance %d", dist)
		return Tuple{}
	}
	for _, tc := range []struct {
		dist    uint64
		dropped bool
	}{{0, true}, {buckets - home, true}, {7, true}, {8, false}, {100, false}} { // buckets-home: bucket 0
		t.Run(fmt.Sprint(tc.dist), func(t *testing.T) {
			tb, clk := newTestTable(t, Config{Max: 2, Buckets: buckets})
			victim := fill(t, tb, clk.Now(), false, near(tc.dist))[0]
			fill(t, tb, clk.Now(), true, udpFlow(60000))
			f := Facts{Tuple: newTuple, Len: 40}
			info, err := tb.Track(&f)
			if !tc.dropped {
				require.ErrorIs(t, err, ErrTableFull)
				assert.True(t, tb.live(victim))
				assert.Equal(t, Stats{Insert: 2, Drop: 1}, tb.Stats())
				return
			}
			require.NoError(t, err)
			require.NoError(t, tb.Confirm(info.Entry))
			assert.False(t, tb.live(victim))
			assert.Equal(t, Stats{Insert: 2, EarlyDrop: 1}, tb.Stats())
			assert.Equal(t, 2, tb.Len())
		})
	}
}

// With the default 262144 buckets and a small table, early drop almost
// never finds the droppable entries, as in the kernel with a lowered
// nf_conntrack_max: the table is full although most entries could go.
func TestEarlyDropSmallTableRefuses(t *testing.T) {
	tb, clk := newTestTable(t, Config{Max: 16})
	var tps []Tuple
	for i := range 16 {
		tps = append(tps, udpFlow(i+1))
	}
	fill(t, tb, clk.Now(), false, tps...)
	refused := 0
	for i := range 100 {
		f := Facts{Tuple: udpFlow(1000 + i), Len: 40}
		if _, err := tb.Track(&f); err != nil {
			require.ErrorIs(t, err, ErrTableFull)
			refused++
		}
	}
	assert.Equal(t, 100, refused)
	assert.Equal(t, Stats{Insert: 16, Drop: 100}, tb.Stats())
	assert.Equal(t, 16, tb.Len())
}

// At the limit, a refused connection costs a bounded search, not a scan
// of the table: 262144 assured entries, each further SYN well under a
// millisecond (the old model scanned the whole table, 0.33 s each).
func TestTableFullIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("fills 262144 entries")
	}
	tb, clk := newTestTable(t, Config{})
	for i := range DefaultMax {
		tp := TupleFrom(inet.TCP, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), 1000), ap("10.255.0.1:80"))
		e := NewEntry(tp, tp.Reverse())
		e.Status, e.TCPState = StatusSeenReply|StatusAssured, TCPEstablished
		e.SetExpires(clk.Now().Add(time.Hour))
		require.NoError(t, tb.Insert(e))
	}
	start := time.Now()
	for i := range 1000 {
		f := tcpFacts("192.168.0.1:1", "10.255.0.1:80", syn)
		f.SrcPort = uint16(2000 + i)
		_, err := tb.Track(&f)
		require.ErrorIs(t, err, ErrTableFull)
	}
	assert.Less(t, time.Since(start), time.Second, "1000 refused SYNs")
	assert.Equal(t, uint64(1000), tb.Stats().Drop)
}
