package conntrack

import (
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	cli = "192.168.10.2:41001"
	srv = "10.244.1.5:8080"
)

type seg struct {
	dir   Dir
	flags inet.TCPFlags
	// expectations after the segment
	state   State
	tcp     TCPState
	timeout time.Duration
	status  Status // bits that must be set
	unset   Status // bits that must be clear
}

func runSegments(t *testing.T, tb *Table, clk *manualClock, segs []seg) *Entry {
	t.Helper()
	var e *Entry
	for i, s := range segs {
		f := tcpFacts(cli, srv, s.flags)
		if s.dir == Reply {
			f = tcpFacts(srv, cli, s.flags)
		}
		info := track(t, tb, f)
		require.Equal(t, s.state, info.State, "segment %d state", i)
		if info.Entry != nil {
			e = info.Entry
			require.NoError(t, tb.Confirm(e))
			assert.Equal(t, s.dir, info.Dir, "segment %d dir", i)
			assert.Equal(t, s.tcp, e.TCPState, "segment %d tcp state", i)
			assert.Equal(t, s.timeout, e.Timeout(clk.Now()), "segment %d timeout", i)
			assert.Equal(t, s.status, e.Status&s.status, "segment %d status %v", i, e.Status)
			assert.Zero(t, e.Status&s.unset, "segment %d status %v", i, e.Status)
		}
		clk.Advance(10 * time.Millisecond)
	}
	return e
}

const (
	syn    = inet.SYN
	synack = inet.SYN | inet.ACK
	ack    = inet.ACK
	finack = inet.FIN | inet.ACK
	rst    = inet.RST
	rstack = inet.RST | inet.ACK
)

func TestTCPFullConnection(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	e := runSegments(t, tb, clk, []seg{
		{Original, syn, StateNew, TCPSynSent, 120 * time.Second, StatusConfirmed, StatusSeenReply},
		{Reply, synack, StateEstablished, TCPSynRecv, 60 * time.Second, StatusSeenReply, StatusAssured},
		{Original, ack, StateEstablished, TCPEstablished, 432000 * time.Second, StatusAssured, 0},
		{Original, ack | inet.PSH, StateEstablished, TCPEstablished, 432000 * time.Second, StatusAssured, 0},
		{Original, finack, StateEstablished, TCPFinWait, 120 * time.Second, 0, 0},
		{Reply, ack, StateEstablished, TCPCloseWait, 60 * time.Second, 0, 0},
		{Reply, finack, StateEstablished, TCPLastAck, 30 * time.Second, 0, 0},
		{Original, ack, StateEstablished, TCPTimeWait, 120 * time.Second, 0, 0},
	})
	assert.Equal(t, uint64(6), e.Counters[Original].Packets+e.Counters[Reply].Packets-2)
	clk.Advance(119 * time.Second)
	_, _, ok := tb.Lookup(e.Original())
	assert.True(t, ok, "alive before 120 s")
	clk.Advance(time.Second)
	_, _, ok = tb.Lookup(e.Original())
	assert.False(t, ok, "expired after TIME_WAIT")
	assert.Zero(t, tb.Len())
}

// The event trace of docs/kernel-notes.md, "conntrack: events and
// timeouts": FIN_WAIT → CLOSE_WAIT → CLOSE by a RST.
func TestTCPResetAfterClose(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	runSegments(t, tb, clk, []seg{
		{Original, syn, StateNew, TCPSynSent, 120 * time.Second, 0, 0},
		{Reply, synack, StateEstablished, TCPSynRecv, 60 * time.Second, 0, 0},
		{Original, ack, StateEstablished, TCPEstablished, 432000 * time.Second, StatusAssured, 0},
		{Original, finack, StateEstablished, TCPFinWait, 120 * time.Second, 0, 0},
		{Reply, ack, StateEstablished, TCPCloseWait, 60 * time.Second, 0, 0},
		{Original, rst, StateEstablished, TCPClose, 10 * time.Second, 0, 0},
	})
	clk.Advance(10 * time.Second)
	assert.Empty(t, tb.Entries())
}

func TestTCPSynAnsweredByRSTDestroysEntry(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	info := track(t, tb, tcpFacts(cli, srv, syn))
	require.NoError(t, tb.Confirm(info.Entry))
	info = track(t, tb, tcpFacts(srv, cli, rstack))
	assert.Equal(t, StateEstablished, info.State, "the RST itself is attached to the entry")
	assert.Equal(t, Reply, info.Dir)
	assert.Zero(t, tb.Len(), "entry destroyed at once")
	assert.Empty(t, tb.Entries())
}

func TestTCPMidStreamPickup(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	runSegments(t, tb, clk, []seg{
		{Original, ack, StateNew, TCPEstablished, 300 * time.Second, 0, StatusSeenReply},
		// SEEN_REPLY is set after the reply is processed, so it still gets 300 s.
		{Reply, ack, StateEstablished, TCPEstablished, 300 * time.Second, StatusSeenReply, StatusAssured},
		{Original, ack, StateEstablished, TCPEstablished, 432000 * time.Second, StatusAssured, 0},
	})
}

func TestTCPInvalid(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		first  inet.TCPFlags
		second *seg
	}{
		{name: "strict pickup", cfg: Config{TCPStrict: true}, first: ack},
		{name: "FIN first", first: finack},
		{name: "RST first", first: rst},
		{name: "SYN-ACK first", first: synack},
		{name: "no flags", first: 0},
		{name: "SYN+FIN", first: inet.SYN | inet.FIN},
		{name: "FIN without ACK", first: inet.FIN},
		{name: "ACK before SYN-ACK", first: syn, second: &seg{dir: Original, flags: ack}},
		{name: "FIN in SYN_SENT", first: syn, second: &seg{dir: Reply, flags: finack}},
		{name: "SYN from reply in SYN_RECV", first: syn, second: &seg{dir: Reply, flags: synack}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb, _ := newTestTable(t, tc.cfg)
			info := track(t, tb, tcpFacts(cli, srv, tc.first))
			if tc.second == nil {
				assert.Equal(t, StateInvalid, info.State)
				assert.Nil(t, info.Entry)
				return
			}
			require.NoError(t, tb.Confirm(info.Entry))
			f := tcpFacts(cli, srv, tc.second.flags)
			if tc.second.dir == Reply {
				f = tcpFacts(srv, cli, tc.second.flags)
			}
			if tc.name == "SYN from reply in SYN_RECV" {
				track(t, tb, f) // SYN_RECV
				f = tcpFacts(srv, cli, syn)
			}
			before := *info.Entry
			info2 := track(t, tb, f)
			assert.Equal(t, StateInvalid, info2.State)
			assert.Equal(t, before.TCPState, info.Entry.TCPState, "entry untouched")
		})
	}
}

func TestTCPIgnoredAndRetransmittedSegments(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	info := track(t, tb, tcpFacts(cli, srv, syn))
	e := info.Entry
	require.NoError(t, tb.Confirm(e))
	clk.Advance(30 * time.Second)
	// A retransmitted SYN does not extend SYN_SENT.
	info = track(t, tb, tcpFacts(cli, srv, syn))
	assert.Equal(t, StateNew, info.State)
	assert.Equal(t, 90*time.Second, e.Timeout(clk.Now()))
	// A reply ACK in SYN_SENT is ignored.
	info = track(t, tb, tcpFacts(srv, cli, ack))
	assert.Equal(t, StateEstablished, info.State)
	assert.Equal(t, TCPSynSent, e.TCPState)
	track(t, tb, tcpFacts(srv, cli, synack))
	track(t, tb, tcpFacts(cli, srv, ack))
	require.Equal(t, TCPEstablished, e.TCPState)
	// A SYN on an established connection is ignored, not fatal.
	info = track(t, tb, tcpFacts(cli, srv, syn))
	assert.Equal(t, StateEstablished, info.State)
	assert.Equal(t, TCPEstablished, e.TCPState)
}

func TestTCPReopenFromTimeWait(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	old := runSegments(t, tb, clk, []seg{
		{Original, syn, StateNew, TCPSynSent, 120 * time.Second, 0, 0},
		{Reply, synack, StateEstablished, TCPSynRecv, 60 * time.Second, 0, 0},
		{Original, ack, StateEstablished, TCPEstablished, 432000 * time.Second, 0, 0},
		{Original, finack, StateEstablished, TCPFinWait, 120 * time.Second, 0, 0},
		{Reply, finack, StateEstablished, TCPLastAck, 30 * time.Second, 0, 0},
		{Original, ack, StateEstablished, TCPTimeWait, 120 * time.Second, 0, 0},
	})
	info := track(t, tb, tcpFacts(cli, srv, syn))
	assert.Equal(t, StateNew, info.State)
	assert.NotSame(t, old, info.Entry, "a new connection replaces the closed one")
	assert.False(t, info.Entry.Confirmed())
	assert.Zero(t, tb.Len())
}

func TestTCPSimultaneousOpen(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	runSegments(t, tb, clk, []seg{
		{Original, syn, StateNew, TCPSynSent, 120 * time.Second, 0, 0},
		// A SYN seen in SYN_SENT before any reply does not restart the timer.
		{Reply, syn, StateEstablished, TCPSynSent2, 120*time.Second - 10*time.Millisecond, 0, 0},
		{Original, synack, StateEstablished, TCPSynRecv, 60 * time.Second, 0, 0},
		{Reply, ack, StateEstablished, TCPEstablished, 432000 * time.Second, StatusAssured, 0},
	})
}
