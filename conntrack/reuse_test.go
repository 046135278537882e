package conntrack

import (
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rseg is a segment of a tuple-reuse scenario: fresh says the segment
// must have started a new entry (the old one killed and the packet looked
// up again), assured whether the entry it leaves is ASSURED.
type rseg struct {
	wseg
	fresh, assured bool
}

func rseg1(dir Dir, flags inet.TCPFlags, seq, ack uint32, state State, tcp TCPState) wseg {
	return wseg{dir: dir, flags: flags, seq: seq, ack: ack, wscale: -1, state: state, tcp: tcp}
}

// closedByFin is a connection the client closed with a FIN, left in
// TIME_WAIT: client data, both FINs and the last ACK.
func closedByFin() []rseg {
	var out []rseg
	for i, s := range handshake() {
		out = append(out, rseg{wseg: s, fresh: i == 0, assured: i == 2})
	}
	for _, s := range []wseg{
		rseg1(Original, finack, cISN+1, sISN+1, StateEstablished, TCPFinWait),
		rseg1(Reply, finack, sISN+1, cISN+2, StateEstablished, TCPLastAck),
		rseg1(Original, ack, cISN+2, sISN+2, StateEstablished, TCPTimeWait),
	} {
		out = append(out, rseg{wseg: s, assured: true})
	}
	return out
}

// reopened is a new handshake with the client's ISN moved by delta; the
// SYN must start a new entry.
func reopened(delta uint32) []rseg {
	c, s := cISN+delta, uint32(sISN+777)
	return []rseg{
		{wseg: rseg1(Original, syn, c, 0, StateNew, TCPSynSent), fresh: true},
		{wseg: rseg1(Reply, synack, s, c+1, StateEstablished, TCPSynRecv)},
		{wseg: rseg1(Original, ack, c+1, s+1, StateEstablished, TCPEstablished), assured: true},
	}
}

// resynced is a new handshake over an entry that ignores its SYN: the
// SYN/ACK answering it resynchronises the old entry, kept ASSURED.
func resynced(delta uint32, old TCPState) []rseg {
	c, s := cISN+delta, uint32(sISN+777)
	return []rseg{
		{wseg: rseg1(Original, syn, c, 0, StateEstablished, old), assured: true},
		{wseg: rseg1(Reply, synack, s, c+1, StateEstablished, TCPSynRecv), assured: true},
		{wseg: rseg1(Original, ack, c+1, s+1, StateEstablished, TCPEstablished), assured: true},
	}
}

func cat(parts ...[]rseg) []rseg {
	var out []rseg
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// TestTCPTupleReuse: what the kernel does with a SYN reusing a tuple
// (checked against it by internal/harness/difftest's TestKernelTCPReuse). In
// TIME_WAIT or CLOSE after a FIN, or after a reset of the SYN's own side,
// the old entry is killed and the SYN starts a new one whatever its
// sequence number; after the peer's reset, or on a connection still open
// or half closed (FIN_WAIT, LAST_ACK), the SYN is ignored and its SYN/ACK
// resynchronises the entry.
func TestTCPTupleReuse(t *testing.T) {
	clientRst := cat(closedByFin()[:3], []rseg{{wseg: rseg1(Original, rst, cISN+1, 0, StateEstablished, TCPClose), assured: true}})
	serverRst := cat(closedByFin()[:3], []rseg{{wseg: rseg1(Reply, rst, sISN+1, 0, StateEstablished, TCPClose), assured: true}})
	tests := []struct {
		name string
		segs []rseg
	}{
		{"FIN close, same ISN", cat(closedByFin(), reopened(0))},
		{"FIN close, higher ISN", cat(closedByFin(), reopened(100000))},
		{"FIN close, lower ISN", cat(closedByFin(), reopened(1<<32-100000))},
		{"FIN_WAIT: SYN ignored, SYN/ACK resyncs", cat(closedByFin()[:4], resynced(50, TCPFinWait))},
		{"LAST_ACK: SYN ignored, SYN/ACK resyncs", cat(closedByFin()[:5], resynced(50, TCPLastAck))},
		{"client reset", cat(clientRst, reopened(0))},
		{"server reset: SYN ignored, SYN/ACK resyncs", cat(serverRst, resynced(100000, TCPClose))},
		{"established: SYN ignored, SYN/ACK resyncs", cat(closedByFin()[:3], resynced(100000, TCPEstablished))},
		{"refused, then a new SYN", cat(
			[]rseg{{wseg: rseg1(Original, syn, cISN, 0, StateNew, TCPSynSent), fresh: true},
				{wseg: rseg1(Reply, rstack, 0, cISN+1, StateEstablished, TCPClose)}},
			reopened(0))},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tb, clk := newTestTable(t, Config{})
			var last *Entry
			for i, s := range tc.segs {
				info := track(t, tb, s.facts())
				require.Equal(t, s.state, info.State, "segment %d state", i+1)
				require.NotNil(t, info.Entry, "segment %d", i+1)
				assert.Equal(t, s.fresh, info.Entry != last, "segment %d new entry", i+1)
				require.NoError(t, tb.Confirm(info.Entry))
				assert.Equal(t, s.tcp, info.Entry.TCPState, "segment %d tcp state", i+1)
				assert.Equal(t, s.assured, info.Entry.Status&StatusAssured != 0, "segment %d assured", i+1)
				last = info.Entry
				clk.Advance(100 * time.Millisecond)
			}
			assert.Equal(t, 1, tb.Len())
		})
	}
}

// TestTCPRSTAfterIgnoredSynAck: a SYN/ACK ignored for an ack far below
// the SYN's stops a later RST from passing as the answer to the SYN
// (kernel 6.18, TestKernelTCPIgnoredSynAck): the RST is judged by the
// window, so one below it is ignored and the entry stays SYN_SENT.
func TestTCPRSTAfterIgnoredSynAck(t *testing.T) {
	const low = cISN + 1 - 100000 // 100000 below the SYN's end
	oldSynAck := wseg{dir: Reply, flags: synack, seq: sISN, ack: low, wscale: -1, state: StateEstablished, tcp: TCPSynSent, untouched: true}
	for _, tc := range []struct {
		name string
		rst  wseg
	}{
		{"RST below the window, ack 0", wseg{dir: Original, flags: rst, seq: low, wscale: -1, state: StateEstablished, tcp: TCPSynSent, untouched: true}},
		{"RST in the window closes", wseg{dir: Original, flags: rst, seq: cISN + 1, wscale: -1, state: StateEstablished, tcp: TCPClose}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			runWindow(t, Config{}, []wseg{handshake()[0], oldSynAck, tc.rst})
		})
	}
}
