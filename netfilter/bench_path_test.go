package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strings"
	"testing"
)

// filterRules is a filter table of n rules none of which match the
// benchmark packet, then an ACCEPT: the packet walks all of them.
func filterRules(n int) string {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT DROP [0:0]\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "-A INPUT -s 10.%d.%d.%d/32 -p tcp -m tcp --dport %d -j DROP\n", i>>16&255, i>>8&255, i&255, 1+i%60000)
	}
	b.WriteString("-A INPUT -p tcp -m tcp --dport 80 -j ACCEPT\nCOMMIT\n")
	return b.String()
}

func BenchmarkReceiveFilter(b *testing.B) {
	for _, n := range []int{10, 1000, 100_000} {
		b.Run(fmt.Sprintf("rules=%d", n), func(b *testing.B) {
			h := NewHost(HostConfig{})
			if err := h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")); err != nil {
				b.Fatal(err)
			}
			if err := h.Restore(IPv4, []byte(filterRules(n)), RestoreOptions{}); err != nil {
				b.Fatal(err)
			}
			p := tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN)
			b.ReportAllocs()
			for b.Loop() {
				if h.Receive("eth0", p).Disposition != Delivered {
					b.Fatal("not delivered")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n+1), "ns/rule")
		})
	}
}

// TestReceiveDoesNotAllocate locks in the hot path: a packet through a
// filter table with tracing off allocates nothing.
func TestReceiveDoesNotAllocate(t *testing.T) {
	h := testHost(t, filterRules(50), HostConfig{})
	p := tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN)
	allocs := testing.AllocsPerRun(100, func() { h.Receive("eth0", p) })
	if allocs != 0 {
		t.Fatalf("Receive allocates %.1f times per packet", allocs)
	}
}
