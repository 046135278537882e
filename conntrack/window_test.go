package conntrack

import (
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// wseg is one segment of a window scenario and what must follow from it.
type wseg struct {
	dir       Dir
	flags     inet.TCPFlags
	seq, ack  uint32
	payload   int
	win       uint16 // 0 means 64240
	zeroWin   bool
	wscale    int8 // -1: no option
	sackPerm  bool
	sackEnd   uint32 // 0: no SACK block
	state     State
	tcp       TCPState      // checked when state is not INVALID
	timeout   time.Duration // checked when non-zero
	untouched bool          // the entry's counters must not move (ignored)
	inv       bool          // est: the segment is INVALID
}

// Client and server initial sequence numbers of the scenarios.
const (
	cISN = 1_000_000
	sISN = 5_000_000
)

func (s wseg) facts() Facts {
	src, dst := cli, srv
	if s.dir == Reply {
		src, dst = srv, cli
	}
	f := tcpFacts(src, dst, s.flags)
	f.Seq, f.Ack, f.PayloadLen = s.seq, s.ack, s.payload
	f.Len = 40 + s.payload
	switch {
	case s.zeroWin:
		f.Window = 0
	case s.win != 0:
		f.Window = s.win
	}
	if s.wscale >= 0 {
		f.WScale, f.HasWScale, f.HasOptions = uint8(s.wscale), true, true
	}
	if s.sackPerm {
		f.SACKPerm, f.HasOptions = true, true
	}
	if s.sackEnd != 0 {
		f.SACKEnd, f.HasSACK, f.HasOptions = s.sackEnd, true, true
	}
	return f
}

// handshake is a client SYN, server SYN/ACK and client ACK without options.
func handshake() []wseg {
	return []wseg{
		{dir: Original, flags: syn, seq: cISN, wscale: -1, state: StateNew, tcp: TCPSynSent},
		{dir: Reply, flags: synack, seq: sISN, ack: cISN + 1, wscale: -1, state: StateEstablished, tcp: TCPSynRecv},
		{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1, wscale: -1, state: StateEstablished, tcp: TCPEstablished,
			timeout: 432000 * time.Second},
	}
}

func runWindow(t *testing.T, cfg Config, segs []wseg) {
	t.Helper()
	tb, clk := newTestTable(t, cfg)
	var last *Entry
	for i, s := range segs {
		var before [2]Counter
		if last != nil {
			before = last.Counters
		}
		info := track(t, tb, s.facts())
		require.Equal(t, s.state, info.State, "segment %d state", i+1)
		if info.Entry == nil {
			continue
		}
		last = info.Entry
		require.NoError(t, tb.Confirm(last))
		assert.Equal(t, s.tcp, last.TCPState, "segment %d tcp state", i+1)
		if s.timeout != 0 {
			assert.Equal(t, s.timeout, last.Timeout(clk.Now()), "segment %d timeout", i+1)
		}
		if s.untouched {
			assert.Equal(t, before, last.Counters, "segment %d counted", i+1)
		}
		clk.Advance(time.Second)
	}
}

func est(s wseg) wseg {
	s.state = StateEstablished
	if s.inv {
		s.state = StateInvalid
	}
	if s.tcp == 0 {
		s.tcp = TCPEstablished
	}
	if s.wscale == 0 {
		s.wscale = -1
	}
	return s
}

func TestTCPWindow(t *testing.T) {
	// After handshake() the client's td_maxend is the server's ack plus
	// its window: cISN+1+64240.
	const cMaxEnd = cISN + 1 + 64240
	tests := []struct {
		name string
		cfg  Config
		segs []wseg
	}{
		{"data in window and its ack", Config{}, append(handshake(),
			est(wseg{dir: Original, flags: ack | inet.PSH, seq: cISN + 1, ack: sISN + 1, payload: 100, timeout: 300 * time.Second}),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 101, timeout: 432000 * time.Second}),
		)},
		{"seq at the right edge", Config{}, append(handshake(),
			est(wseg{dir: Original, flags: ack, seq: cMaxEnd, ack: sISN + 1}),
		)},
		{"seq far over the right edge is INVALID", Config{}, append(handshake(),
			est(wseg{dir: Original, flags: ack, seq: cMaxEnd + 70000, ack: sISN + 1, inv: true}),
		)},
		{"a little over the right edge is ignored", Config{}, append(handshake(),
			est(wseg{dir: Original, flags: ack, seq: cMaxEnd + 1, ack: sISN + 1, payload: 10, untouched: true}),
		)},
		{"ack of data not sent is INVALID", Config{}, append(handshake(),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 2, inv: true}),
		)},
		{"ack far below the left edge is ignored", Config{}, append(handshake(),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1 - 70000, untouched: true}),
		)},
		{"old ack within MAXACKWINDOW", Config{}, append(handshake(),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1 - 60000}),
		)},
		{"retransmission of acknowledged data is ignored", Config{}, append(handshake(),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1, payload: 100}),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 101}),
			// Ends more than the server's largest window before the data seen.
			est(wseg{dir: Original, flags: ack, seq: cISN + 101 - 64240 - 100, ack: sISN + 1, payload: 10, untouched: true}),
		)},
		{"be_liberal accepts the far segment", Config{TCPBeLiberal: true}, append(handshake(),
			est(wseg{dir: Original, flags: ack, seq: cMaxEnd + 70000, ack: sISN + 1}),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1000, payload: 1}),
		)},
		{"mid-stream pickup is liberal", Config{}, []wseg{
			{dir: Original, flags: ack, seq: 123456, ack: 777, wscale: -1, state: StateNew, tcp: TCPEstablished, timeout: 300 * time.Second},
			est(wseg{dir: Reply, flags: ack, seq: 9, ack: 1 << 31}),
			est(wseg{dir: Original, flags: ack, seq: 42, ack: 7}),
		}},
		{"mid-stream pickup refused when strict", Config{TCPStrict: true}, []wseg{
			{dir: Original, flags: ack, seq: 123456, ack: 777, wscale: -1, state: StateInvalid},
		}},
		{"SYN/ACK with a wrong ack is INVALID", Config{}, []wseg{
			handshake()[0],
			{dir: Reply, flags: synack, seq: sISN, ack: cISN + 7, wscale: -1, state: StateInvalid},
			handshake()[1],
		}},
		{"RST answering a SYN with seq 0 kills the entry", Config{}, []wseg{
			handshake()[0],
			{dir: Reply, flags: rstack, seq: 0, ack: cISN + 1, wscale: -1, state: StateEstablished, tcp: TCPClose},
			{dir: Original, flags: ack, seq: cISN + 1, ack: 1, wscale: -1, state: StateNew, tcp: TCPEstablished},
		}},
		{"RST with a wrong ack in SYN_SENT is INVALID", Config{}, []wseg{
			handshake()[0],
			{dir: Reply, flags: rstack, seq: 0, ack: cISN + 9, wscale: -1, state: StateInvalid},
		}},
		{"RST at the expected seq closes", Config{}, append(handshake(),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1}),
			est(wseg{dir: Original, flags: rst, seq: cISN + 1, tcp: TCPClose, timeout: 10 * time.Second}),
		)},
		{"RST in window but not exact keeps ESTABLISHED", Config{}, append(handshake(),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1}),
			est(wseg{dir: Original, flags: rst, seq: cISN + 50, timeout: 10 * time.Second}),
		)},
		{"RST below the acknowledged seq is INVALID", Config{}, append(handshake(),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1}),
			est(wseg{dir: Original, flags: rst, seq: cISN - 5, inv: true}),
		)},
		{"RST below the acknowledged seq with ignore_invalid_rst", Config{TCPIgnoreInvalidRST: true}, append(handshake(),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1}),
			est(wseg{dir: Original, flags: rst, seq: cISN - 5, timeout: 10 * time.Second}),
		)},
		{"RST out of window is INVALID", Config{}, append(handshake(),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1}),
			est(wseg{dir: Original, flags: rst, seq: cMaxEnd + 70000, inv: true}),
		)},
		{"retransmitted ACKs shorten the timeout", Config{}, append(handshake(),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1, timeout: 432000 * time.Second}),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1, timeout: 432000 * time.Second}),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1, timeout: 300 * time.Second}),
		)},
		{"max_retrans 5", Config{TCPMaxRetrans: 5}, append(handshake(),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1}),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1}),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1}),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1, timeout: 432000 * time.Second}),
		)},
		{"zero window shortens the timeout", Config{}, append(handshake(),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1, zeroWin: true, timeout: 300 * time.Second}),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1, win: 100, timeout: 432000 * time.Second}),
		)},
		{"scaled windows", Config{}, []wseg{
			{dir: Original, flags: syn, seq: cISN, wscale: 7, state: StateNew, tcp: TCPSynSent},
			{dir: Reply, flags: synack, seq: sISN, ack: cISN + 1, wscale: 7, state: StateEstablished, tcp: TCPSynRecv},
			// 1000 << 7 = 128000 bytes the client may send.
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1, win: 1000}),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1, win: 1000}),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1 + 120000, ack: sISN + 1, win: 1000}),
		}},
		{"scaling needs both SYNs", Config{}, []wseg{
			{dir: Original, flags: syn, seq: cISN, wscale: 7, state: StateNew, tcp: TCPSynSent},
			{dir: Reply, flags: synack, seq: sISN, ack: cISN + 1, wscale: -1, state: StateEstablished, tcp: TCPSynRecv},
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1, win: 1000}),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1, win: 1000}),
			est(wseg{dir: Original, flags: ack, seq: cISN + 1 + 140000, ack: sISN + 1, win: 1000, inv: true}),
		}},
		{"SACK beyond the data seen is INVALID", Config{}, []wseg{
			{dir: Original, flags: syn, seq: cISN, wscale: -1, sackPerm: true, state: StateNew, tcp: TCPSynSent},
			{dir: Reply, flags: synack, seq: sISN, ack: cISN + 1, wscale: -1, sackPerm: true, state: StateEstablished, tcp: TCPSynRecv},
			est(wseg{dir: Original, flags: ack, seq: cISN + 1, ack: sISN + 1, payload: 100}),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1, sackEnd: cISN + 101}),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1, sackEnd: cISN + 500, inv: true}),
		}},
		{"SYN/ACK answering an ignored SYN resynchronises", Config{}, append(handshake(),
			est(wseg{dir: Original, flags: syn, seq: 7_000_000, untouched: true}),
			est(wseg{dir: Reply, flags: synack, seq: 9_000_000, ack: 7_000_001, tcp: TCPSynRecv}),
			est(wseg{dir: Original, flags: ack, seq: 7_000_001, ack: 9_000_001}),
			est(wseg{dir: Original, flags: ack, seq: 7_000_001 + 1<<20, ack: 9_000_001, inv: true}),
		)},
		{"SACK blocks are ignored without SACK_PERM", Config{}, append(handshake(),
			est(wseg{dir: Reply, flags: ack, seq: sISN + 1, ack: cISN + 1, sackEnd: cISN + 500}),
		)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runWindow(t, tt.cfg, tt.segs) })
	}
}

func TestTCPWindowInvalidLeavesEntry(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	var e *Entry
	for _, s := range handshake() {
		info := track(t, tb, s.facts())
		e = info.Entry
		require.NoError(t, tb.Confirm(e))
	}
	before := *e
	info := track(t, tb, est(wseg{dir: Original, flags: ack, seq: cISN + 1<<20, ack: sISN + 1}).facts())
	assert.Equal(t, StateInvalid, info.State)
	assert.Nil(t, info.Entry)
	assert.Equal(t, before, *e)
}

func TestSegmentEnd(t *testing.T) {
	tests := []struct {
		flags   inet.TCPFlags
		seq     uint32
		payload int
		want    uint32
	}{
		{syn, 10, 0, 11},
		{finack, 10, 5, 16},
		{ack, 0xffffffff, 2, 1},
		{rst, 7, 0, 7},
	}
	for _, tt := range tests {
		f := Facts{TCPFlags: tt.flags, Seq: tt.seq, PayloadLen: tt.payload}
		assert.Equal(t, tt.want, segmentEnd(&f))
	}
}

// TestTCPWindowInOrderStreamsStayValid: two endpoints that follow TCP
// (data within the advertised window, acks of what was received) never
// produce an INVALID or ignored segment, whatever the sizes, windows and
// scales.
func TestTCPWindowInOrderStreamsStayValid(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tb, _ := newTestTable(t, Config{})
		isn := [2]uint32{rapid.Uint32().Draw(rt, "cisn"), rapid.Uint32().Draw(rt, "sisn")}
		scale := [2]int8{int8(rapid.IntRange(-1, 14).Draw(rt, "cscale")), int8(rapid.IntRange(-1, 14).Draw(rt, "sscale"))}
		win := [2]uint16{uint16(rapid.IntRange(1, 65535).Draw(rt, "cwin")), uint16(rapid.IntRange(1, 65535).Draw(rt, "swin"))}
		shift := [2]uint8{}
		if scale[0] >= 0 && scale[1] >= 0 {
			shift = [2]uint8{uint8(scale[0]), uint8(scale[1])}
		}
		steps := []wseg{
			{dir: Original, flags: syn, seq: isn[0], win: win[0], wscale: scale[0]},
			{dir: Reply, flags: synack, seq: isn[1], ack: isn[0] + 1, win: win[1], wscale: scale[1]},
		}
		next := [2]uint32{isn[0] + 1, isn[1] + 1}
		for _, s := range steps {
			sf := s.facts()
			info, err := tb.Track(&sf)
			require.NoError(rt, err)
			require.NotEqual(rt, StateInvalid, info.State)
			require.NoError(rt, tb.Confirm(info.Entry))
		}
		for i := range rapid.IntRange(1, 30).Draw(rt, "n") {
			d := Dir(rapid.IntRange(0, 1).Draw(rt, "dir"))
			// What the peer allows: its window, scaled, capped to keep
			// payloads reasonable.
			allowed := min(int(win[1-d])<<shift[1-d], 60000)
			n := rapid.IntRange(0, allowed).Draw(rt, "len")
			s := wseg{dir: d, flags: ack, seq: next[d], ack: next[1-d], payload: n, win: win[d], wscale: -1}
			sf := s.facts()
			info, err := tb.Track(&sf)
			require.NoError(rt, err)
			require.Equal(rt, StateEstablished, info.State, "segment %d", i)
			e := info.Entry
			next[d] += uint32(n)
			// The peer acknowledges at once, so each side's window stays open.
			a := wseg{dir: 1 - d, flags: ack, seq: next[1-d], ack: next[d], win: win[1-d], wscale: -1}
			before := e.Counters[1-d].Packets
			af := a.facts()
			info, err = tb.Track(&af)
			require.NoError(rt, err)
			require.Equal(rt, StateEstablished, info.State, "ack %d", i)
			require.Equal(rt, before+1, e.Counters[1-d].Packets, "ack %d ignored", i)
		}
	})
}
