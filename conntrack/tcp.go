package conntrack

import (
	"github.com/packetwalk/packetwalk/inet"
	"time"
)

// tcpInfo is the per-connection TCP tracker memory (the kernel's
// ip_ct_tcp): both directions' windows and what the last packets were.
type tcpInfo struct {
	seen      [2]tcpSeen
	lastSeq   uint32 // last pure ACK (retransmission check) or ignored packet
	lastAck   uint32
	lastEnd   uint32
	lastWin   uint16
	lastIndex tcpIndex
	lastDir   Dir
	// lastWScale and lastFlags keep the options of an ignored SYN, in case
	// the answer shows that the endpoints were in sync and we were not;
	// lastFlags also holds lastChallengeAck and lastSimOpen.
	lastWScale uint8
	lastFlags  uint8
	retrans    uint8 // identical ACKs in a row
}

// tcpIndex classifies a segment by its flags (kernel get_conntrack_index).
type tcpIndex uint8

const (
	idxSyn tcpIndex = iota
	idxSynAck
	idxFin
	idxAck
	idxRst
	idxNone
)

func tcpIndexOf(flags inet.TCPFlags) tcpIndex {
	switch {
	case flags&inet.RST != 0:
		return idxRst
	case flags&inet.SYN != 0:
		if flags&inet.ACK != 0 {
			return idxSynAck
		}
		return idxSyn
	case flags&inet.FIN != 0:
		return idxFin
	case flags&inet.ACK != 0:
		return idxAck
	}
	return idxNone
}

// tcpValidFlags reports whether the flag combination is one the kernel
// accepts (tcp_valid_flags, ignoring ECE, CWR and PSH); anything else is
// INVALID before any state is looked at.
func tcpValidFlags(flags inet.TCPFlags) bool {
	switch flags &^ (inet.ECE | inet.CWR | inet.PSH) {
	case inet.SYN, inet.SYN | inet.URG, inet.SYN | inet.ACK,
		inet.RST, inet.RST | inet.ACK,
		inet.FIN | inet.ACK, inet.FIN | inet.ACK | inet.URG,
		inet.ACK, inet.ACK | inet.URG:
		return true
	}
	return false
}

// Transition results beyond the real states.
const (
	sIV = numTCPStates     // invalid segment
	sIG = numTCPStates + 1 // ignored segment
)

// tcpTransitions is the kernel's tcp_conntracks table (nf_conntrack_proto_tcp.c):
// [direction][segment class][old state] → new state.
var tcpTransitions = [2][6][numTCPStates]TCPState{
	Original: {
		//        NO          SS          SR              ES              FW           CW           LA           TW           CL          S2
		idxSyn:    {TCPSynSent, TCPSynSent, sIG, sIG, sIG, sIG, sIG, TCPSynSent, TCPSynSent, TCPSynSent2},
		idxSynAck: {sIV, sIV, TCPSynRecv, sIV, sIV, sIV, sIV, sIV, sIV, TCPSynRecv},
		idxFin:    {sIV, sIV, TCPFinWait, TCPFinWait, TCPLastAck, TCPLastAck, TCPLastAck, TCPTimeWait, TCPClose, sIV},
		idxAck:    {TCPEstablished, sIV, TCPEstablished, TCPEstablished, TCPCloseWait, TCPCloseWait, TCPTimeWait, TCPTimeWait, TCPClose, sIV},
		idxRst:    {sIV, TCPClose, TCPClose, TCPClose, TCPClose, TCPClose, TCPClose, TCPClose, TCPClose, TCPClose},
		idxNone:   {sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV},
	},
	Reply: {
		idxSyn:    {sIV, TCPSynSent2, sIV, sIV, sIV, sIV, sIV, TCPSynSent, sIV, TCPSynSent2},
		idxSynAck: {sIV, TCPSynRecv, sIG, sIG, sIG, sIG, sIG, sIG, sIG, TCPSynRecv},
		idxFin:    {sIV, sIV, TCPFinWait, TCPFinWait, TCPLastAck, TCPLastAck, TCPLastAck, TCPTimeWait, TCPClose, sIV},
		idxAck:    {sIV, sIG, TCPSynRecv, TCPEstablished, TCPCloseWait, TCPCloseWait, TCPTimeWait, TCPTimeWait, TCPClose, sIG},
		idxRst:    {sIV, TCPClose, TCPClose, TCPClose, TCPClose, TCPClose, TCPClose, TCPClose, TCPClose, TCPClose},
		idxNone:   {sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV, sIV},
	},
}

// verdict is what a protocol handler decided for one packet.
type verdict uint8

const (
	vAccept  verdict = iota // state updated (possibly not refreshed)
	vIgnore                 // packet passes, entry untouched
	vInvalid                // packet is INVALID, entry untouched
	vKill                   // packet passes, entry destroyed
	vRepeat                 // old entry destroyed; look the packet up again
)

// tcpNew reports whether a first segment may create an entry (kernel
// tcp_new): a SYN always, a bare ACK only with nf_conntrack_tcp_loose=1.
func tcpNew(flags inet.TCPFlags, loose bool) bool {
	switch tcpTransitions[Original][tcpIndexOf(flags)][TCPNone] {
	case TCPSynSent:
		return true
	case TCPEstablished:
		return loose
	}
	return false
}

// tcpPacket runs the TCP tracker for a packet of e in direction dir
// (kernel nf_conntrack_tcp_packet): state machine, special cases for
// segments the tracker may be out of sync about, then the window check.
func (t *Table) tcpPacket(e *Entry, dir Dir, f *Facts, now time.Time) verdict {
	ti := &e.tcp
	idx := tcpIndexOf(f.TCPFlags)
	old := e.TCPState
	next := tcpTransitions[dir][idx][old]
	checkWindow := true
	switch next {
	case TCPSynSent:
		if old < TCPTimeWait {
			break
		}
		// A SYN reopening a TIME_WAIT/CLOSE connection: if the old one was
		// closed by a FIN (or reset from this side) it is destroyed and the
		// SYN starts a new connection; otherwise the SYN is ignored.
		if (ti.seen[0].flags|ti.seen[1].flags)&seenCloseInit != 0 || (ti.lastDir == dir && ti.lastIndex == idxRst) {
			return vRepeat
		}
		fallthrough
	case sIG:
		if idx == idxSynAck && ti.lastIndex == idxSyn && ti.lastDir != dir && f.Ack == ti.lastEnd {
			// This SYN/ACK answers a SYN we ignored: the endpoints are in
			// sync and we were not. Resynchronise from that SYN.
			old, next = TCPSynSent, TCPSynRecv
			ti.resync(dir)
			break
		}
		ti.annotate(dir, idx, f)
		if idx == idxSyn && dir == Original {
			ti.lastFlags, ti.lastWScale = 0, 0
			var opts tcpSeen
			opts.applyOptions(f)
			ti.lastFlags = opts.flags & (seenWScale | seenSACKPerm)
			ti.lastWScale = opts.scale
			if old == TCPLastAck {
				// The peer may answer with an RFC 5961 challenge ACK,
				// which must not be taken for the ACK of the last FIN.
				ti.lastFlags |= lastChallengeAck
			}
		}
		if old == TCPSynSent && idx == idxAck && dir == Reply {
			ti.lastAck = f.Ack // possible challenge ACK answering the SYN
		}
		return vIgnore
	case sIV:
		return vInvalid
	case TCPTimeWait:
		if old == TCPLastAck && idx == idxAck && ti.lastDir != dir && ti.lastIndex == idxSyn &&
			ti.lastFlags&lastChallengeAck != 0 {
			ti.lastFlags &^= lastChallengeAck
			return vIgnore // challenge ACK: state unchanged
		}
	case TCPSynSent2:
		ti.lastFlags |= lastSimOpen
	case TCPSynRecv:
		if dir == Reply && idx == idxAck && ti.lastFlags&lastSimOpen != 0 {
			next = TCPEstablished
		}
	case TCPClose:
		if idx != idxRst {
			break
		}
		res, keep := t.rstCheck(e, dir, f, old)
		if res == rstInvalid {
			return vInvalid
		}
		checkWindow = res == rstCheckWindow
		if keep {
			next = old
		}
	}
	if checkWindow {
		// The window check sees the stored state, even after a resync.
		switch t.inWindow(ti, e.TCPState, dir, idx, f) {
		case winIgnore:
			if idx == idxSynAck && old == TCPSynSent {
				// Seen in the lab (kernel 6.18), not in the source we
				// read: after a SYN/ACK ignored for its old ack, a RST
				// is no longer taken as answering the first SYN.
				ti.lastIndex, ti.lastDir = idx, dir
			}
			return vIgnore
		case winInvalid:
			t.tcpInvalid(e, dir, idx)
			return vInvalid
		}
	}

	ti.lastIndex, ti.lastDir = idx, dir
	e.TCPState = next
	if old != next && next == TCPFinWait {
		ti.seen[dir].flags |= seenCloseInit
	}
	timeout := t.tcpTimeout(ti, idx, next)
	if e.Status&StatusSeenReply == 0 {
		if idx == idxRst {
			// Only answer was a RST (or the client aborted): destroy now.
			t.account(e, dir, f.Len)
			return vKill
		}
		if idx == idxSyn && old == TCPSynSent {
			// SYN retransmissions do not extend the entry's life.
			t.account(e, dir, f.Len)
			return vAccept
		}
		if next == TCPEstablished && timeout > t.timeouts.TCPUnacknowledged {
			timeout = t.timeouts.TCPUnacknowledged // mid-stream pickup
		}
	} else if e.Status&StatusAssured == 0 && (old == TCPSynRecv || old == TCPEstablished) && next == TCPEstablished {
		e.Status |= StatusAssured
	}
	t.refresh(e, dir, f.Len, timeout, now)
	return vAccept
}

// tcpTimeout picks the timeout after an accepted segment: shorter ones
// apply while segments are retransmitted, data is unacknowledged or the
// last window advertised was zero.
func (t *Table) tcpTimeout(ti *tcpInfo, idx tcpIndex, next TCPState) time.Duration {
	to := &t.timeouts
	d := to.tcp(next)
	switch {
	case ti.retrans >= t.tcpMaxRetrans && d > to.TCPMaxRetrans:
		return to.TCPMaxRetrans
	case idx == idxRst:
		return to.TCPClose
	case (ti.seen[0].flags|ti.seen[1].flags)&seenUnacked != 0 && d > to.TCPUnacknowledged:
		return to.TCPUnacknowledged
	case ti.lastWin == 0 && d > to.TCPMaxRetrans:
		return to.TCPMaxRetrans
	}
	return d
}

// annotate remembers an ignored segment.
func (ti *tcpInfo) annotate(dir Dir, idx tcpIndex, f *Facts) {
	ti.lastIndex, ti.lastDir = idx, dir
	ti.lastSeq, ti.lastEnd, ti.lastWin = f.Seq, segmentEnd(f), f.Window
}

// resync rebuilds the window of the direction that sent the ignored SYN
// from what annotate kept, and forgets the other direction's.
func (ti *tcpInfo) resync(dir Dir) {
	s := &ti.seen[ti.lastDir]
	s.end, s.maxend = ti.lastEnd, ti.lastEnd
	s.maxwin = max(uint32(ti.lastWin), 1)
	s.scale = ti.lastWScale
	ti.lastFlags &^= lastChallengeAck
	s.flags = ti.lastFlags &^ lastSimOpen // CLOSE_INIT cleared too
	r := &ti.seen[dir]
	*r = tcpSeen{flags: r.flags & seenLiberal}
}

// rstResult is what the RST checks decided before the window check.
type rstResult uint8

const (
	rstCheckWindow rstResult = iota // go on with the window check
	rstInWindow                     // accept without window check
	rstInvalid
)

// rstCheck applies the kernel's RST rules: a RST below what the peer
// acknowledged is INVALID; one that does not match the expected sequence
// number exactly keeps an established connection open (the peer answers
// with a challenge ACK: keep is true); RSTs answering segments we let
// through unchecked skip the window check.
func (t *Table) rstCheck(e *Entry, dir Dir, f *Facts, old TCPState) (res rstResult, keep bool) {
	ti := &e.tcp
	switch old {
	case TCPFinWait, TCPLastAck, TCPTimeWait, TCPClose, TCPCloseWait:
		// Closing: the tuple may already be reused, the window is stale.
		return rstInWindow, false
	}
	peer := &ti.seen[1-dir]
	if peer.flags&seenMaxAck != 0 && ti.lastIndex != idxSyn {
		established := old == TCPEstablished && e.Status&StatusAssured != 0
		switch {
		case f.Seq == 0 && !established:
			return rstCheckWindow, false // most likely answers a SYN we let through
		case seqBefore(f.Seq, peer.maxack) && !t.tcpIgnoreInvalidRST:
			return rstInvalid, false
		case !established || f.Seq == peer.maxack:
			return rstCheckWindow, false
		case ti.lastIndex == idxAck && ti.lastDir == dir && f.Seq == ti.lastEnd:
			return rstCheckWindow, false // the RST ends a train of data segments
		}
		keep = true
	}
	if ((e.Status&StatusSeenReply != 0 && ti.lastIndex == idxSyn) ||
		(e.Status&StatusAssured == 0 && ti.lastIndex == idxAck)) && f.Ack == ti.lastEnd {
		// A RST answering a SYN or ACK we ignored: it may acknowledge
		// segments the window never saw.
		return rstInWindow, keep
	}
	if old == TCPSynSent && ti.lastIndex == idxAck && ti.lastDir == Reply && f.Seq == ti.lastAck {
		return rstInWindow, keep // answers a challenge ACK we let through
	}
	return rstCheckWindow, keep
}

// tcpInvalid shortens the life of an assured connection whose FIN or RST
// answers an out-of-window FIN or RST of the other side: both ends are
// probably gone (nf_tcp_handle_invalid).
func (t *Table) tcpInvalid(e *Entry, dir Dir, idx tcpIndex) {
	if e.Status&StatusAssured == 0 || e.Status&StatusFixedTimeout != 0 {
		return
	}
	if idx != idxRst && idx != idxFin {
		return
	}
	ti := &e.tcp
	if ti.lastDir != dir && (ti.lastIndex == idxFin || ti.lastIndex == idxRst) {
		left := e.Timeout(t.clock.Now())
		if left < 120*time.Second {
			return
		}
		if left > t.timeouts.TCPUnacknowledged && e.Confirmed() {
			t.setExpires(e, t.clock.Now().Add(t.timeouts.TCPUnacknowledged))
		}
		return
	}
	ti.lastIndex, ti.lastDir = idx, dir
}
