package ipset

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/require"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
)

func benchRegistry(b *testing.B, create string, line func(i int, rng *rand.Rand) string) *Set {
	b.Helper()
	rng := rand.New(rand.NewPCG(1, 1))
	var sb strings.Builder
	sb.WriteString(create + "\n")
	for i := range 100_000 {
		sb.WriteString(line(i, rng) + "\n")
	}
	r, _ := newTestRegistry()
	if err := r.Restore([]byte(sb.String()), RestoreOptions{Exist: true}); err != nil {
		b.Fatal(err)
	}
	return r.Get("S")
}

func BenchmarkLookupHashNet100k(b *testing.B) {
	s := benchRegistry(b, "create S hash:net maxelem 200000", func(i int, rng *rand.Rand) string {
		a := netip.AddrFrom4([4]byte{byte(rng.IntN(256)), byte(rng.IntN(256)), byte(rng.IntN(256)), 0})
		return fmt.Sprintf("add S %s", netip.PrefixFrom(a, 16+rng.IntN(9)).Masked())
	})
	k := Key{Addr: netip.MustParseAddr("10.20.30.40")}
	now := s.now()
	b.ReportAllocs()
	for b.Loop() {
		s.Lookup(k, now)
	}
}

func BenchmarkLookupHashIPPort100k(b *testing.B) {
	s := benchRegistry(b, "create S hash:ip,port maxelem 200000", func(i int, rng *rand.Rand) string {
		return fmt.Sprintf("add S 10.%d.%d.%d,tcp:%d", i>>16, (i>>8)&255, i&255, 80+rng.IntN(3))
	})
	k := Key{Addr: netip.MustParseAddr("10.1.2.3"), Proto: inet.TCP, Port: 81}
	now := s.now()
	b.ReportAllocs()
	for b.Loop() {
		s.Lookup(k, now)
	}
}

// Lookups allocate nothing in any hash type: the most specific prefix
// walk (with and without the prefix filter), a nomatch entry deciding,
// counters, timeouts and misses included.
func TestLookupDoesNotAllocate(t *testing.T) {
	for _, filterMin := range []int{pfilterMin, 1} {
		r, c := newTestRegistry()
		r.filterMin = filterMin
		require.NoError(t, r.Restore([]byte("create S hash:net counters\nadd S 10.0.0.0/8\nadd S 10.1.0.0/16 nomatch\nadd S 10.1.2.0/24\n"+
			"create F hash:net,iface\nadd F 10.0.0.0/8,eth+\n"+
			"create I hash:ip timeout 100\nadd I 10.1.2.3\n"+
			"create P hash:ip,port\nadd P 10.1.2.3,tcp:80\n"+
			"create NP hash:net,port\nadd NP 10.1.0.0/16,tcp:80\nadd NP 10.1.2.0/24,tcp:80 nomatch\n"+
			"create IPN hash:ip,port,net family inet6\nadd IPN fd00::1,udp:53,fd00:1::/64\n"), RestoreOptions{}))
		now := c.Now()
		keys := []Key{
			{Addr: netip.MustParseAddr("10.1.2.3"), Iface: "eth7", Proto: inet.TCP, Port: 80},
			{Addr: netip.MustParseAddr("10.1.3.3"), Iface: "eth7", Proto: inet.TCP, Port: 80},
			{Addr: netip.MustParseAddr("192.0.2.1"), Proto: inet.UDP, Port: 53},
			{Addr: netip.MustParseAddr("fd00::1"), Addr2: netip.MustParseAddr("fd00:1::9"), Proto: inet.UDP, Port: 53},
		}
		m, nm := r.Get("S").Lookup(keys[1], now)
		require.True(t, !m && nm, "10.1.3.3 is in the nomatch /16")
		m, _ = r.Get("IPN").Lookup(keys[3], now)
		require.True(t, m)
		o := &MatchOptions{Len: 100, PacketsOp: CounterGT, Packets: 0}
		allocs := testing.AllocsPerRun(100, func() {
			for _, name := range []string{"S", "F", "I", "P", "NP", "IPN"} {
				s := r.Get(name)
				for _, k := range keys {
					s.Lookup(k, now)
					s.LookupCount(k, now, 100)
					s.Match(k, now, o)
				}
			}
		})
		if allocs != 0 {
			t.Fatalf("filterMin %d: lookups allocate %v per run", filterMin, allocs)
		}
	}
}
