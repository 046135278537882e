package conntrack

import (
	"slices"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Expire, filed by deadline slot, removes exactly what a scan of the
// table would: through packets that extend or shorten timeouts (FIN, RST,
// REJECT's close), removals, inserts and clock steps within and across
// slots.
func TestExpireMatchesScan(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tb, clk := newTestTable(t, Config{Timeouts: Timeouts{
			TCPSynSent: 3 * time.Second, TCPSynRecv: 2 * time.Second, TCPEstablished: 20 * time.Second,
			TCPFinWait: 2 * time.Second, TCPCloseWait: 2 * time.Second, TCPLastAck: time.Second,
			TCPTimeWait: 2 * time.Second, TCPClose: time.Second, TCPSynSent2: 2 * time.Second,
			TCPUnacknowledged: 5 * time.Second, UDP: 3 * time.Second, UDPStream: 7 * time.Second,
			ICMP: time.Second, ICMPv6: time.Second, Generic: 4 * time.Second,
		}})
		flags := []inet.TCPFlags{syn, synack, inet.ACK, inet.FIN | inet.ACK, inet.RST}
		for range rapid.IntRange(1, 120).Draw(rt, "steps") {
			port := rapid.IntRange(1, 6).Draw(rt, "port")
			src, dst := "10.0.0.1:"+itoa(uint64(port)), "10.0.0.2:80"
			switch rapid.IntRange(0, 5).Draw(rt, "op") {
			case 0, 1:
				var f Facts
				if rapid.Bool().Draw(rt, "udp") {
					f = udpFacts(src, dst)
				} else {
					f = tcpFacts(src, dst, rapid.SampledFrom(flags).Draw(rt, "flags"))
					f.Window = 0xffff
				}
				if rapid.Bool().Draw(rt, "reply") {
					f.Tuple = f.Tuple.Reverse()
				}
				info, err := tb.Track(&f)
				require.NoError(rt, err)
				if info.Entry != nil && !info.Entry.Confirmed() {
					_ = tb.Confirm(info.Entry)
				}
			case 2:
				clk.Advance(time.Duration(rapid.IntRange(0, 3000).Draw(rt, "ms")) * time.Millisecond)
			case 3:
				for _, e := range all(tb) {
					if rapid.Bool().Draw(rt, "close") {
						tb.SetClosing(e)
					}
				}
			case 4:
				if es := all(tb); len(es) > 0 {
					tb.Remove(es[rapid.IntRange(0, len(es)-1).Draw(rt, "victim")])
				}
			case 5:
				now := clk.Now()
				var due int
				tb.idx.entries(func(e *Entry) {
					if !now.Before(e.Expires()) {
						due++
					}
				})
				require.Equal(rt, due, tb.Expire())
				require.Equal(rt, len(all(tb)), tb.Len())
			}
		}
	})
}

func all(tb *Table) []*Entry { return slices.Collect(tb.All()) }

// A deadline moved earlier inside the slot Expire last scanned (the slot
// now is in) is still honoured: Expire skips rescanning that slot only
// until the earliest deadline left in it.
func TestExpireCurrentSlotShortened(t *testing.T) {
	tb, clk := newTestTable(t, Config{Timeouts: Timeouts{UDP: 900 * time.Millisecond, TCPSynSent: 800 * time.Millisecond,
		TCPClose: 100 * time.Millisecond}.WithDefaults()})
	clk.now = time.Unix(0, (clk.now.UnixNano()>>slotShift+1)<<slotShift) // the start of a slot
	x := track(t, tb, udpFacts("10.0.0.1:1", "10.0.0.2:53")).Entry
	require.NoError(t, tb.Confirm(x))
	y := track(t, tb, tcpFacts("10.0.0.1:2", "10.0.0.2:80", syn)).Entry
	require.NoError(t, tb.Confirm(y))
	require.Zero(t, tb.Expire()) // scans the current slot: earliest left 0.8 s
	tb.SetClosing(y)             // now 0.1 s
	clk.Advance(500 * time.Millisecond)
	require.Equal(t, 1, tb.Expire())
	require.False(t, tb.live(y))
	require.True(t, tb.live(x))
	clk.Advance(400 * time.Millisecond)
	require.Equal(t, 1, tb.Expire())
	require.Zero(t, tb.Len())
}

// Flush counts the live entries only, as `conntrack -F` reports the
// entries it deleted: expired ones were already gone.
func TestFlushCountsLive(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	for i, d := range []time.Duration{time.Minute, time.Hour, 2 * time.Hour} {
		tp := udpFlow(i)
		e := NewEntry(tp, tp.Reverse())
		e.SetExpires(clk.Now().Add(d))
		require.NoError(t, tb.Insert(e))
	}
	clk.Advance(90 * time.Second)
	require.Equal(t, 3, tb.Len())
	require.Equal(t, 2, tb.Flush())
	require.Zero(t, tb.Len())
	require.Zero(t, tb.Expire())
}
