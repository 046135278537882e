package ipset

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
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

func TestLookupDoesNotAllocate(t *testing.T) {
	r, c := restoreText(t, "create S hash:net\nadd S 10.0.0.0/8\nadd S 10.1.0.0/16 nomatch\n"+
		"create F hash:net,iface\nadd F 10.0.0.0/8,eth+\n")
	s, f := r.Get("S"), r.Get("F")
	k := Key{Addr: netip.MustParseAddr("10.1.2.3"), Iface: "eth7"}
	now := c.Now()
	allocs := testing.AllocsPerRun(100, func() {
		s.Lookup(k, now)
		f.Lookup(k, now)
	})
	if allocs != 0 {
		t.Fatalf("Lookup allocates %v per run", allocs)
	}
}
