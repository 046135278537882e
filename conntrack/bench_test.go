package conntrack

import (
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
)

func BenchmarkTrackNew(b *testing.B) {
	tb, _ := newTestTable(b, Config{Max: 1 << 30})
	f := udpFacts("10.0.0.1:1", "10.1.0.1:53")
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		f.Src = netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)})
		info, err := tb.Track(&f)
		if err != nil {
			b.Fatal(err)
		}
		if err := tb.Confirm(info.Entry); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkTrackEstablished(b *testing.B) {
	tb, _ := newTestTable(b, Config{})
	n := masqNode(tb, 0)
	n.forward(b, tcpFacts("192.168.10.2:41001", "10.96.0.10:80", syn))
	n.forward(b, tcpFacts("10.244.1.5:8080", "10.244.1.1:41001", synack))
	f := tcpFacts("192.168.10.2:41001", "10.96.0.10:80", inet.ACK)
	b.ReportAllocs()
	for b.Loop() {
		info, _ := tb.Track(&f)
		info.Entry.Translate(DNAT, info.Dir, f.Tuple)
	}
}

func TestTrackEstablishedAllocatesNothing(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	n := masqNode(tb, 0)
	n.forward(t, tcpFacts("192.168.10.2:41001", "10.96.0.10:80", syn))
	n.forward(t, tcpFacts("10.244.1.5:8080", "10.244.1.1:41001", synack))
	f := tcpFacts("192.168.10.2:41001", "10.96.0.10:80", inet.ACK)
	allocs := testing.AllocsPerRun(100, func() {
		info, _ := tb.Track(&f)
		tp, _ := info.Entry.Translate(DNAT, info.Dir, f.Tuple)
		_, _ = info.Entry.Translate(SNAT, info.Dir, tp)
		_ = tb.Confirm(info.Entry)
	})
	assert.Zero(t, allocs)
}
