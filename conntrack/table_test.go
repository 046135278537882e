package conntrack

import (
	"errors"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestUDPTimeouts(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	req, rep := udpFacts("192.168.10.2:40001", "10.0.0.1:53"), udpFacts("10.0.0.1:53", "192.168.10.2:40001")

	info := track(t, tb, req)
	e := info.Entry
	require.Equal(t, StateNew, info.State)
	require.NoError(t, tb.Confirm(e))
	assert.Equal(t, 30*time.Second, e.Timeout(clk.Now()))
	assert.Zero(t, e.Status&StatusSeenReply, "UNREPLIED")

	clk.Advance(time.Second)
	info = track(t, tb, rep)
	assert.Equal(t, StateEstablished, info.State)
	assert.Equal(t, Reply, info.Dir)
	assert.Equal(t, 30*time.Second, e.Timeout(clk.Now()), "one exchange: still 30 s")
	assert.Equal(t, StatusSeenReply, e.Status&(StatusSeenReply|StatusAssured), "replied, not assured")

	clk.Advance(500 * time.Millisecond)
	track(t, tb, req) // 1.5 s after the first packet: not a stream yet
	assert.Equal(t, 30*time.Second, e.Timeout(clk.Now()))
	assert.Zero(t, e.Status&StatusAssured)

	clk.Advance(time.Second) // 2.5 s: a stream
	info = track(t, tb, req)
	assert.Equal(t, StateEstablished, info.State)
	assert.Equal(t, 120*time.Second, e.Timeout(clk.Now()))
	assert.NotZero(t, e.Status&StatusAssured)

	clk.Advance(120 * time.Second)
	assert.Equal(t, 1, tb.Expire())
	assert.Zero(t, tb.Len())
}

func TestUnconfirmedEntryIsInvisible(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	f := udpFacts("10.0.0.2:1000", "10.0.0.1:53")
	a := track(t, tb, f)
	b := track(t, tb, f) // the first packet was dropped before confirmation
	assert.NotSame(t, a.Entry, b.Entry)
	assert.Equal(t, StateNew, b.State)
	_, _, ok := tb.Lookup(f.Tuple)
	assert.False(t, ok)
	require.NoError(t, tb.Confirm(b.Entry))
	require.NoError(t, tb.Confirm(b.Entry), "confirming twice is a no-op")
	err := tb.Confirm(a.Entry)
	require.ErrorIs(t, err, ErrClash)
	assert.Contains(t, err.Error(), "src=10.0.0.2 dst=10.0.0.1 sport=1000 dport=53")
	// The refused confirmation counts as the kernel's insert_failed.
	assert.Equal(t, Stats{InsertFailed: 1}, tb.Stats())
}

func TestICMP(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	a, b := ip("192.168.10.2"), ip("10.0.0.1")
	info := track(t, tb, Facts{Tuple: ICMPTuple(a, b, 8, 0, 77)})
	require.Equal(t, StateNew, info.State)
	e := info.Entry
	require.NoError(t, tb.Confirm(e))
	assert.Equal(t, ICMPTuple(b, a, 0, 0, 77), e.Reply())
	assert.Equal(t, 30*time.Second, e.Timeout(clk.Now()))

	info = track(t, tb, Facts{Tuple: ICMPTuple(b, a, 0, 0, 77)})
	assert.Equal(t, StateEstablished, info.State)
	assert.Equal(t, Reply, info.Dir)

	// An echo reply nobody asked for cannot start a connection.
	info = track(t, tb, Facts{Tuple: ICMPTuple(b, a, 0, 0, 78)})
	assert.Equal(t, StateInvalid, info.State)

	// ICMPv6 echo.
	info = track(t, tb, Facts{Tuple: ICMPTuple(ip("fd00::1"), ip("fd00::2"), 128, 0, 5)})
	require.Equal(t, StateNew, info.State)
	assert.Equal(t, inet.ICMPv6, info.Entry.Original().Proto)
	assert.Equal(t, uint8(129), info.Entry.Reply().ICMPType)
}

func TestICMPErrorRelated(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	req := udpFacts("192.168.10.2:40003", "10.244.1.5:5999")
	info := track(t, tb, req)
	require.NoError(t, tb.Confirm(info.Entry))

	unreach := Facts{Tuple: ICMPTuple(ip("10.244.1.5"), ip("192.168.10.2"), 3, 3, 0), Inner: req.Tuple}
	got := track(t, tb, unreach)
	assert.Equal(t, StateRelated, got.State)
	assert.Same(t, info.Entry, got.Entry)
	assert.Equal(t, Reply, got.Dir)
	assert.Zero(t, info.Entry.Status&StatusSeenReply, "an error is not a reply: still UNREPLIED")

	stray := unreach
	stray.Inner.SrcPort = 1
	assert.Equal(t, StateInvalid, track(t, tb, stray).State)
	noInner := unreach
	noInner.Inner = Tuple{}
	assert.Equal(t, StateInvalid, track(t, tb, noInner).State)
}

func TestGenericProtocol(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	f := Facts{Tuple: Tuple{Src: ip("10.0.0.1"), Dst: ip("10.0.0.2"), Proto: 47}}
	info := track(t, tb, f)
	require.NoError(t, tb.Confirm(info.Entry))
	assert.Equal(t, 600*time.Second, info.Entry.Timeout(clk.Now()))
	assert.Equal(t, StateEstablished, track(t, tb, Facts{Tuple: f.Reverse()}).State)
}

func TestTableFullEarlyDrop(t *testing.T) {
	// One bucket: every entry is in the new tuple's neighbourhood.
	tb, clk := newTestTable(t, Config{Max: 3, Buckets: 1})
	// One assured TCP connection and two unreplied UDP flows.
	e1 := track(t, tb, tcpFacts(cli, srv, syn)).Entry
	require.NoError(t, tb.Confirm(e1))
	track(t, tb, tcpFacts(srv, cli, synack))
	track(t, tb, tcpFacts(cli, srv, ack))
	require.NotZero(t, e1.Status&StatusAssured)
	e2 := track(t, tb, udpFacts("10.0.0.9:1", "10.0.0.1:53")).Entry
	require.NoError(t, tb.Confirm(e2))
	e4 := track(t, tb, udpFacts("10.0.0.9:4", "10.0.0.1:53")).Entry
	require.NoError(t, tb.Confirm(e4))
	clk.Advance(time.Second)

	// Full: both non-assured entries of the bucket are dropped early.
	e3 := track(t, tb, udpFacts("10.0.0.9:2", "10.0.0.1:53")).Entry
	require.NoError(t, tb.Confirm(e3))
	for _, e := range []*Entry{e2, e4} {
		_, _, ok := tb.Lookup(e.Original())
		assert.False(t, ok)
		assert.NotZero(t, e.Status&StatusDying)
	}
	assert.Equal(t, 2, tb.Len())
	assert.Equal(t, Stats{EarlyDrop: 2}, tb.Stats())

	// Make e3 assured too and fill the table: nothing can go and the
	// packet is dropped.
	tb.Remove(e3)
	e3.Status |= StatusAssured
	require.NoError(t, tb.Insert(e3))
	tp5 := TupleFrom(inet.UDP, ap("10.0.0.9:5"), ap("10.0.0.1:53"))
	e5 := NewEntry(tp5, tp5.Reverse())
	e5.Status = StatusAssured | StatusSeenReply
	e5.SetExpires(clk.Now().Add(100 * time.Second))
	require.NoError(t, tb.Insert(e5))
	dns := udpFacts("10.0.0.9:3", "10.0.0.1:53")
	_, err := tb.Track(&dns)
	require.ErrorIs(t, err, ErrTableFull)
	assert.Equal(t, Stats{Insert: 2, Drop: 1, EarlyDrop: 2}, tb.Stats())
	// conntrack -I finds no room either; it does not count a drop.
	tp6 := TupleFrom(inet.UDP, ap("10.0.0.9:6"), ap("10.0.0.1:53"))
	e6 := NewEntry(tp6, tp6.Reverse())
	e6.SetExpires(clk.Now().Add(time.Minute))
	require.ErrorIs(t, tb.Insert(e6), ErrTableFull)
	assert.Equal(t, Stats{Insert: 2, Drop: 1, EarlyDrop: 2}, tb.Stats())

	// Established packets still pass.
	assert.Equal(t, StateEstablished, track(t, tb, tcpFacts(cli, srv, ack)).State)

	// Expired entries make room, without counting as early drops.
	clk.Advance(200 * time.Second)
	_, err = tb.Track(&dns)
	require.NoError(t, err)
	assert.Equal(t, Stats{Insert: 2, Drop: 1, EarlyDrop: 2}, tb.Stats())
}

func TestDeleteFilters(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	n := &node{tb: tb, masq: ip("10.244.1.1"), dnat: func(tp Tuple) (NATRange, bool) {
		if tp.Dst == ip("10.96.0.53") {
			return NATRange{MinAddr: ip("10.244.1.5"), MinPort: 5353}, true
		}
		return NATRange{}, false
	}}
	for _, f := range []Facts{
		udpFacts("192.168.10.2:40001", "10.96.0.53:53"),
		udpFacts("192.168.10.3:40001", "10.96.0.53:53"),
		udpFacts("192.168.10.2:40002", "10.96.0.99:53"),
		tcpFacts("192.168.10.2:40003", "10.96.0.53:53", syn),
	} {
		_, _, ok := n.forward(t, f)
		require.True(t, ok)
	}
	tb.Entries()[0].Mark = 0x1a
	tests := []struct {
		name string
		f    Filter
		want int
	}{
		{"orig dst + proto", Filter{Proto: inet.UDP, OrigDst: ip("10.96.0.53")}, 2},
		{"reply src (endpoint)", Filter{ReplySrc: ip("10.244.1.5")}, 3},
		{"reply src port", Filter{Proto: inet.UDP, ReplySrcPort: 5353}, 2},
		{"orig src", Filter{OrigSrc: ip("192.168.10.3")}, 1},
		{"reply dst", Filter{ReplyDst: ip("10.244.1.1")}, 4},
		{"orig dport", Filter{OrigDstPort: 53}, 4},
		{"orig sport", Filter{OrigSrcPort: 40002}, 1},
		{"reply dport", Filter{ReplyDstPort: 40001}, 1}, // the second client was moved off 40001
		{"mark", Filter{Mark: 0x1a, MarkMask: 0xffffffff}, 1},
		{"tcp state", Filter{TCPState: TCPSynSent}, 1},
		{"status", Filter{Status: StatusSeenReply}, 0},
		{"status dnat", Filter{Status: StatusDstNAT}, 3},
		{"nothing", Filter{OrigDst: ip("1.1.1.1")}, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := 0
			for _, e := range tb.Entries() {
				if tc.f.Match(e) {
					m++
				}
			}
			assert.Equal(t, tc.want, m)
		})
	}
	assert.Equal(t, 2, tb.Delete(Filter{Proto: inet.UDP, OrigDst: ip("10.96.0.53")}))
	assert.Equal(t, 2, tb.Flush())
	assert.Zero(t, tb.Len())
}

// The kube-proxy stale UDP problem: the endpoint is gone but the entry,
// refreshed by the client's retries, keeps steering traffic to it until
// the entry is flushed.
func TestStaleUDPEntryPinsTrafficUntilFlushed(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	backend := ip("10.244.1.5")
	n := &node{tb: tb, masq: ip("10.244.1.1"), dnat: func(tp Tuple) (NATRange, bool) {
		return NATRange{MinAddr: backend, MinPort: 5353}, true
	}}
	q := udpFacts("192.168.10.2:40001", "10.96.0.53:53")
	out, _, ok := n.forward(t, q)
	require.True(t, ok)
	assert.Equal(t, ap("10.244.1.5:5353"), out.DstAddrPort())

	// The endpoint moves; the rule now points to a new backend.
	backend = ip("10.244.2.7")
	for range 10 { // a client retrying every 20 s keeps the entry alive
		clk.Advance(20 * time.Second)
		out, info, ok := n.forward(t, q)
		require.True(t, ok)
		assert.Equal(t, StateNew, info.State, "never replied")
		assert.Equal(t, ap("10.244.1.5:5353"), out.DstAddrPort(), "still pinned to the dead endpoint")
	}
	// kube-proxy: conntrack -D -p udp --orig-dst 10.96.0.53
	assert.Equal(t, 1, tb.Delete(Filter{Proto: inet.UDP, OrigDst: ip("10.96.0.53")}))
	out, _, ok = n.forward(t, q)
	require.True(t, ok)
	assert.Equal(t, ap("10.244.2.7:5353"), out.DstAddrPort())
}

func TestStrings(t *testing.T) {
	assert.Equal(t, "SEEN_REPLY|ASSURED|CONFIRMED", (StatusSeenReply | StatusAssured | StatusConfirmed).String())
	assert.Equal(t, "NONE", Status(0).String())
	assert.Equal(t, "HW_OFFLOAD|0x10000", (StatusHWOffload | 1<<16).String())
	assert.Equal(t, "ESTABLISHED", StateEstablished.String())
	assert.Equal(t, "State(9)", State(9).String())
	assert.Equal(t, "TIME_WAIT", TCPTimeWait.String())
	assert.Equal(t, "reply", Reply.String())
	assert.Equal(t, "DNAT", DNAT.String())
	assert.Equal(t, "tcp src=1.2.3.4 dst=5.6.7.8 sport=1 dport=2",
		TupleFrom(inet.TCP, ap("1.2.3.4:1"), ap("5.6.7.8:2")).String())
	assert.Equal(t, "icmp src=1.2.3.4 dst=5.6.7.8 type=8 code=0 id=9",
		ICMPTuple(ip("1.2.3.4"), ip("5.6.7.8"), 8, 0, 9).String())
	assert.True(t, errors.Is(&ParseError{Err: ErrSyntax}, ErrSyntax))
}

// REJECT --reject-with tcp-reset closes the connection it answers
// (nf_ct_set_closing): CLOSE with the close timeout, confirmed entries
// only. Seen in the NAT kernel-differential suite (kernel 6.18).
func TestSetClosing(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	info := track(t, tb, tcpFacts("192.168.10.2:40000", "10.244.1.5:80", inet.SYN))
	tb.SetClosing(info.Entry) // unconfirmed: untouched
	require.Equal(t, TCPSynSent, info.Entry.TCPState)
	require.NoError(t, tb.Confirm(info.Entry))
	clk.Advance(time.Second)
	tb.SetClosing(info.Entry)
	require.Equal(t, TCPClose, info.Entry.TCPState)
	require.Equal(t, 10*time.Second, info.Entry.Timeout(clk.Now()))
	udp := track(t, tb, udpFacts("192.168.10.2:5000", "10.244.1.5:53"))
	require.NoError(t, tb.Confirm(udp.Entry))
	before := udp.Entry.Expires()
	tb.SetClosing(udp.Entry) // not TCP: untouched
	require.Equal(t, before, udp.Entry.Expires())
}
