package bench

import (
	"fmt"
	"os"
	"testing"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// EnvLarge adds the 10,000-service cluster (about 170k rules, seconds to
// build) to the benchmarks.
const EnvLarge = "PACKETWALK_BENCH_10K"

func sizes() []int {
	if os.Getenv(EnvLarge) == "1" {
		return []int{100, 1000, 10000}
	}
	return []int{100, 1000}
}

var setups = map[int]*Setup{}

func setup(b *testing.B, n int) *Setup {
	b.Helper()
	if s := setups[n]; s != nil {
		return s
	}
	s, err := New(n)
	require.NoError(b, err)
	setups[n] = s
	return s
}

func forSizes(b *testing.B, f func(b *testing.B, s *Setup)) {
	for _, n := range sizes() {
		b.Run(fmt.Sprintf("services=%d", n), func(b *testing.B) { f(b, setup(b, n)) })
	}
}

func BenchmarkLoad(b *testing.B) { forSizes(b, LoadBench) }

func BenchmarkNewConnFirst(b *testing.B) {
	forSizes(b, func(b *testing.B, s *Setup) { NewConnBench(b, s, 0) })
}

func BenchmarkNewConnLast(b *testing.B) {
	forSizes(b, func(b *testing.B, s *Setup) { NewConnBench(b, s, s.Services-1) })
}

func BenchmarkEstablished(b *testing.B) { forSizes(b, EstablishedBench) }

func BenchmarkEstablishedTo(b *testing.B) { forSizes(b, EstablishedToBench) }

func BenchmarkExplain(b *testing.B) { forSizes(b, ExplainBench) }

// TestSetup pins the cluster shape and that every service is reachable,
// and that an established flow allocates nothing.
func TestSetup(t *testing.T) {
	s, err := New(100)
	require.NoError(t, err)
	assert.Greater(t, s.Rules, 100*15)
	for _, svc := range []int{0, 50, 99} {
		res := s.Host.Receive("eth0", SYN(svc, 2000))
		require.Equal(t, netfilter.Forwarded, res.Disposition, res.Reason)
		assert.True(t, PodsCIDR.Contains(res.Packet.Dst), "DNAT to %v", res.Packet.Dst)
	}
	ack, err := Establish(s, 3000)
	require.NoError(t, err)
	allocs := testing.AllocsPerRun(100, func() {
		if r := s.Host.Receive("eth0", ack); r.Disposition != netfilter.Forwarded {
			t.Fatalf("ACK: %v (%s)", r.Disposition, r.Reason)
		}
	})
	assert.Zero(t, allocs, "established flow allocates")
	var r netfilter.Result
	allocs = testing.AllocsPerRun(100, func() {
		if s.Host.ReceiveTo(&r, "eth0", &ack); r.Disposition != netfilter.Forwarded {
			t.Fatalf("ACK: %v (%s)", r.Disposition, r.Reason)
		}
	})
	assert.Zero(t, allocs, "established flow through ReceiveTo allocates")
}

// setSizes are the set sizes of the set benchmarks; EnvLarge adds the
// million-member sets.
func setSizes() []int {
	if os.Getenv(EnvLarge) == "1" {
		return []int{10_000, 100_000, 1_000_000}
	}
	return []int{10_000, 100_000}
}

var setSetups = map[string]*SetSetup{}

func forSets(b *testing.B, f func(b *testing.B, s *SetSetup)) {
	for _, typ := range SetTypes {
		for _, n := range setSizes() {
			b.Run(fmt.Sprintf("%s/members=%d", typ, n), func(b *testing.B) {
				key := fmt.Sprint(typ, n)
				s := setSetups[key]
				if s == nil {
					var err error
					s, err = NewSetSetup(typ, n)
					require.NoError(b, err)
					setSetups[key] = s
				}
				f(b, s)
			})
		}
	}
}

func BenchmarkSetRestore(b *testing.B) { forSets(b, SetRestoreBench) }

func BenchmarkSetLookup(b *testing.B) { forSets(b, SetLookupBench) }

// The generated sets hold the members asked for, and their keys answer as
// built: a member's address matches, one in a nomatch /28 is nomatch.
func TestSetSetup(t *testing.T) {
	for _, typ := range SetTypes {
		s, err := NewSetSetup(typ, 5000)
		require.NoError(t, err, typ)
		matches, nomatches := 0, 0
		for _, w := range s.Want {
			if w[0] {
				matches++
			}
			if w[1] {
				nomatches++
			}
		}
		assert.GreaterOrEqual(t, matches, 5000/16, typ)
		if typ == "hash:net" || typ == "hash:net,port" {
			assert.GreaterOrEqual(t, nomatches, 5000/16-5, typ)
		}
	}
}

// ctSizes are CTSizes without the million unless EnvLarge is set.
func ctSizes() []int {
	if os.Getenv(EnvLarge) == "1" {
		return CTSizes
	}
	return CTSizes[:2]
}

var ctTables = map[int]*CTTable{}

func forCTSizes(b *testing.B, f func(b *testing.B, n int)) {
	for _, n := range ctSizes() {
		b.Run(fmt.Sprintf("conns=%d", n), func(b *testing.B) { f(b, n) })
	}
}

func ctTable(b *testing.B, n int) *CTTable {
	b.Helper()
	if c := ctTables[n]; c != nil {
		return c
	}
	c, err := NewCT(n)
	require.NoError(b, err)
	ctTables[n] = c
	return c
}

func BenchmarkConntrackInsert(b *testing.B) { forCTSizes(b, CTInsertBench) }

func BenchmarkConntrackEstablished(b *testing.B) {
	forCTSizes(b, func(b *testing.B, n int) { CTEstablishedBench(b, ctTable(b, n)) })
}

func BenchmarkConntrackExpire(b *testing.B) { forCTSizes(b, CTExpireBench) }

func BenchmarkConntrackExpireNone(b *testing.B) {
	forCTSizes(b, func(b *testing.B, n int) { CTExpireNoneBench(b, ctTable(b, n)) })
}

func BenchmarkConntrackList(b *testing.B) {
	forCTSizes(b, func(b *testing.B, n int) { CTListBench(b, ctTable(b, n)) })
}

func BenchmarkConntrackFull(b *testing.B) {
	forCTSizes(b, func(b *testing.B, n int) { CTFullBench(b, ctTable(b, n)) })
}

// TestConntrackScale pins what the conntrack benchmarks rely on: a table
// of 10,000 established connections, lookups that allocate nothing, a
// listing whose allocations do not grow with the table, a full table
// that refuses new connections, and everything expiring at once.
func TestConntrackScale(t *testing.T) {
	c, err := NewCT(10_000)
	require.NoError(t, err)
	f := CTConn(1234, inet.ACK, false)
	allocs := testing.AllocsPerRun(100, func() {
		if info, err := c.Table.Track(&f); err != nil || info.State != conntrack.StateEstablished {
			t.Fatalf("%v %v", info.State, err)
		}
	})
	assert.Zero(t, allocs)
	list := testing.Benchmark(func(b *testing.B) { CTListBench(b, c) })
	assert.Less(t, list.AllocedBytesPerOp(), int64(100<<10), "listing 10,000 entries")
	syn := CTConn(20_000, inet.SYN, false)
	_, err = c.Table.Track(&syn)
	require.ErrorIs(t, err, conntrack.ErrTableFull)
	assert.Equal(t, conntrack.Stats{Drop: 1}, c.Table.Stats())
	per, err := CTRetainedPerEntry(10_000)
	require.NoError(t, err)
	t.Logf("%.0f bytes per entry", per)
	assert.Less(t, per, 600.0)
}
