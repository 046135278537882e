package bench

import (
	"fmt"
	"os"
	"testing"

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
