package bench

import (
	"fmt"
	"io"
	"net/netip"
	"runtime"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
)

// CTSizes are the conntrack table sizes of the benchmarks.
var CTSizes = []int{10_000, 100_000, 1_000_000}

// ctClock is a manual clock for the conntrack benchmarks.
type ctClock struct{ now time.Time }

func (c *ctClock) Now() time.Time { return c.now }

// CTTable is a conntrack table holding n established, assured TCP
// connections, as a node forwarding them sees them (null NAT bindings
// included), with nf_conntrack_max and nf_conntrack_buckets equal to n.
type CTTable struct {
	N     int
	Table *conntrack.Table
	clock *ctClock
}

// CTConn returns the TCP segment of connection i with the given flags, in
// the original direction or, with reply, back.
func CTConn(i int, flags inet.TCPFlags, reply bool) conntrack.Facts {
	src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), uint16(1024+i%50000))
	dst := netip.AddrPortFrom(netip.AddrFrom4([4]byte{172, 16, byte(i >> 6 & 63), byte(1 + i&63)}), 80)
	f := conntrack.Facts{Tuple: conntrack.TupleFrom(inet.TCP, src, dst), TCPFlags: flags, Len: 40, Window: 64240}
	if reply {
		f.Tuple = f.Tuple.Reverse()
	}
	return f
}

// newCT returns an empty table for n connections.
func newCT(n int) *CTTable {
	clk := &ctClock{now: time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)}
	return &CTTable{N: n, clock: clk, Table: conntrack.NewTable(conntrack.Config{Clock: clk, Max: n, Buckets: n})}
}

// open tracks the SYN of connection i through the hooks of a forwarding
// node (track, null DNAT and SNAT bindings, confirm).
func (c *CTTable) open(i int) error {
	f := CTConn(i, inet.SYN, false)
	info, err := c.Table.Track(&f)
	if err != nil {
		return err
	}
	if err := c.Table.SetupNullNAT(info.Entry, conntrack.DNAT); err != nil {
		return err
	}
	if err := c.Table.SetupNullNAT(info.Entry, conntrack.SNAT); err != nil {
		return err
	}
	return c.Table.Confirm(info.Entry)
}

// establish answers connection i (SYN/ACK, ACK): ESTABLISHED and ASSURED.
func (c *CTTable) establish(i int) error {
	for _, f := range []conntrack.Facts{CTConn(i, inet.SYN|inet.ACK, true), CTConn(i, inet.ACK, false)} {
		if _, err := c.Table.Track(&f); err != nil {
			return err
		}
	}
	return nil
}

// NewCT returns a table holding n established connections.
func NewCT(n int) (*CTTable, error) {
	c := newCT(n)
	for i := range n {
		if err := c.open(i); err != nil {
			return nil, err
		}
		if err := c.establish(i); err != nil {
			return nil, err
		}
	}
	if c.Table.Len() != n {
		return nil, fmt.Errorf("conntrack: %d entries, want %d", c.Table.Len(), n)
	}
	return c, nil
}

// CTInsertBench fills an empty table with n new connections (their SYNs)
// per iteration and reports ns/conn.
func CTInsertBench(b *testing.B, n int) {
	b.ReportAllocs()
	for b.Loop() {
		c := newCT(n)
		for i := range n {
			if err := c.open(i); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/conn")
}

// CTRetainedPerEntry returns the heap bytes a table of n established
// connections keeps per entry (after a GC, the table's own structures
// included).
func CTRetainedPerEntry(n int) (float64, error) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	before := ms.HeapAlloc
	c, err := NewCT(n)
	if err != nil {
		return 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	runtime.KeepAlive(c)
	return float64(ms.HeapAlloc-before) / float64(n), nil
}

// CTEstablishedBench tracks ACKs of the table's connections in turn, each
// a lookup in a table of c.N entries.
func CTEstablishedBench(b *testing.B, c *CTTable) {
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		f := CTConn(i, inet.ACK, false)
		info, err := c.Table.Track(&f)
		if err != nil || info.State != conntrack.StateEstablished {
			b.Fatalf("connection %d: %v %v", i, info.State, err)
		}
		if i++; i == c.N {
			i = 0
		}
	}
}

// CTExpireBench fills a table of n connections (untimed), moves the
// clock past their timeout and times the Expire that removes them all;
// it reports ns/conn.
func CTExpireBench(b *testing.B, n int) {
	for range b.N {
		b.StopTimer()
		c, err := NewCT(n)
		if err != nil {
			b.Fatal(err)
		}
		c.clock.now = c.clock.now.Add(conntrack.DefaultTimeouts().TCPEstablished + time.Second)
		b.StartTimer()
		if got := c.Table.Expire(); got != n {
			b.Fatalf("expired %d of %d", got, n)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/conn")
}

// CTExpireNoneBench times Expire on a table where nothing is due: what a
// periodic garbage-collector tick costs.
func CTExpireNoneBench(b *testing.B, c *CTTable) {
	for b.Loop() {
		if c.Table.Expire() != 0 {
			b.Fatal("expired something")
		}
	}
}

// CTListBench writes the table as `conntrack -L` (table order, streamed)
// to io.Discard; it reports ns/conn and, through B/op, that the memory a
// listing takes does not grow with the table.
func CTListBench(b *testing.B, c *CTTable) {
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Table.Dump(io.Discard, conntrack.Format{TableOrder: true}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*c.N), "ns/conn")
}

// CTFullBench sends new connections to the full table of assured
// connections: each is refused after early drop's bounded search.
func CTFullBench(b *testing.B, c *CTTable) {
	i := 0
	for b.Loop() {
		f := CTConn(c.N+i%1_000_000, inet.SYN, false)
		if _, err := c.Table.Track(&f); err == nil {
			b.Fatal("a full table of assured connections took a new one")
		}
		i++
	}
}

// CTEntries returns n assured, established TCP entries for Table.Insert,
// as `conntrack -I` would create them, and the same as `conntrack -R`
// input lines.
func CTEntries(n int, now time.Time) ([]*conntrack.Entry, []byte) {
	es := make([]*conntrack.Entry, n)
	var text []byte
	for i := range es {
		tp := CTConn(i, inet.ACK, false).Tuple
		es[i] = conntrack.NewEntry(tp, tp.Reverse())
		es[i].TCPState, es[i].Status = conntrack.TCPEstablished, conntrack.StatusSeenReply|conntrack.StatusAssured
		es[i].SetExpires(now.Add(time.Hour))
		text = fmt.Appendf(text, "-I -p tcp -s %s -d %s --sport %d --dport %d --state ESTABLISHED -t 3600 -u SEEN_REPLY,ASSURED\n",
			tp.Src, tp.Dst, tp.SrcPort, tp.DstPort)
	}
	return es, text
}

// CTInsertEntriesBench adds n prepared entries to an empty table per
// iteration (Table.Insert, the model's `conntrack -I`); ns/conn.
func CTInsertEntriesBench(b *testing.B, n int) {
	for range b.N {
		b.StopTimer()
		c := newCT(n)
		es, _ := CTEntries(n, c.clock.now)
		b.StartTimer()
		for _, e := range es {
			if err := c.Table.Insert(e); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*n), "ns/conn")
}

// CTExpireOnce fills a table of n connections, moves the clock past their
// timeout and returns the ns per connection of the Expire that removes
// them all (the benchmark without its repeated untimed fills).
func CTExpireOnce(n int) (float64, error) {
	c, err := NewCT(n)
	if err != nil {
		return 0, err
	}
	c.clock.now = c.clock.now.Add(conntrack.DefaultTimeouts().TCPEstablished + time.Second)
	start := time.Now()
	if got := c.Table.Expire(); got != n {
		return 0, fmt.Errorf("expired %d of %d", got, n)
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n), nil
}

// CTInsertEntriesOnce returns the ns per entry of inserting n prepared
// entries into an empty table.
func CTInsertEntriesOnce(n int) (float64, error) {
	c := newCT(n)
	es, _ := CTEntries(n, c.clock.now)
	start := time.Now()
	for _, e := range es {
		if err := c.Table.Insert(e); err != nil {
			return 0, err
		}
	}
	return float64(time.Since(start).Nanoseconds()) / float64(n), nil
}

// CTEstablishedN tracks n ACKs of the table's connections in turn (the
// loop of CTEstablishedBench, for timing by other means).
func CTEstablishedN(c *CTTable, n int) error {
	for i := range n {
		f := CTConn(i%c.N, inet.ACK, false)
		if info, err := c.Table.Track(&f); err != nil || info.State != conntrack.StateEstablished {
			return fmt.Errorf("connection %d: %v %v", i%c.N, info.State, err)
		}
	}
	return nil
}
