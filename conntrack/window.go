package conntrack

import "github.com/packetwalk/packetwalk/inet"

// Sequence-window tracking (the kernel's tcp_in_window and its helpers in
// nf_conntrack_proto_tcp.c). Every TCP segment of a tracked connection is
// checked against what the tracker has seen of both directions; a segment
// outside the window is INVALID, or silently ignored when it is a harmless
// retransmission, unless the connection (or the table) is liberal.

// Per-direction flags (the kernel's IP_CT_TCP_FLAG_* values).
const (
	seenWScale   uint8 = 0x01 // the SYN of this direction carried a window scale
	seenSACKPerm uint8 = 0x02 // the SYN of this direction allowed SACK
	seenLiberal  uint8 = 0x08 // never mark this direction's segments INVALID
	seenUnacked  uint8 = 0x10 // data sent in this direction is not acknowledged yet
	seenMaxAck   uint8 = 0x20 // maxack holds a value
	// seenCloseInit: this direction sent a FIN (IP_CT_TCP_FLAG_CLOSE_INIT).
	seenCloseInit uint8 = 0x04
)

// lastFlags bits beyond the option flags above (IP_CT_EXP_CHALLENGE_ACK,
// IP_CT_TCP_SIMULTANEOUS_OPEN).
const (
	lastChallengeAck uint8 = 0x40
	lastSimOpen      uint8 = 0x80
)

// maxWScale is TCP_MAX_WSCALE: larger shifts are clamped.
const maxWScale = 14

// maxAckWinConst is the kernel's MAXACKWINCONST: the lower bound for
// acknowledgements is at least this far below the highest seen end.
const maxAckWinConst = 66000

// tcpSeen is what the tracker knows of one direction (struct
// ip_ct_tcp_state).
type tcpSeen struct {
	end    uint32 // highest seq+len sent
	maxend uint32 // highest seq the receiver's window allows
	maxwin uint32 // largest window advertised (scaled), at least 1 once seen
	maxack uint32 // highest ack sent (valid with seenMaxAck)
	scale  uint8  // window scale shift
	flags  uint8
}

// windowAction is what the window check decided (enum nf_ct_tcp_action).
type windowAction uint8

const (
	winAccept windowAction = iota
	winIgnore
	winInvalid
)

// seqBefore reports a < b in sequence space (the kernel's before()).
func seqBefore(a, b uint32) bool { return int32(a-b) < 0 }

// seqAfter reports a > b in sequence space.
func seqAfter(a, b uint32) bool { return seqBefore(b, a) }

// segmentEnd is seq plus the segment's length in sequence space: payload
// bytes, one for SYN and one for FIN.
func segmentEnd(f *Facts) uint32 {
	end := f.Seq + uint32(max(f.PayloadLen, 0))
	if f.TCPFlags&inet.SYN != 0 {
		end++
	}
	if f.TCPFlags&inet.FIN != 0 {
		end++
	}
	return end
}

// applyOptions records the SYN options of one direction (tcp_options).
// The kernel resets the option state only when the header has options.
func (s *tcpSeen) applyOptions(f *Facts) {
	if !f.HasOptions && !f.HasWScale && !f.SACKPerm {
		return
	}
	s.scale = 0
	s.flags &= seenLiberal
	if f.SACKPerm {
		s.flags |= seenSACKPerm
	}
	if f.HasWScale {
		s.scale = min(f.WScale, maxWScale)
		s.flags |= seenWScale
	}
}

// initSender starts a direction's window from a SYN or SYN/ACK
// (tcp_init_sender).
func initSender(sender, receiver *tcpSeen, f *Facts, end uint32, dir Dir) {
	sender.end, sender.maxend = end, end
	sender.maxwin = max(uint32(f.Window), 1)
	sender.applyOptions(f)
	// Scaling is in effect only if both SYNs carried the option.
	if dir == Reply && (sender.flags&seenWScale == 0 || receiver.flags&seenWScale == 0) {
		sender.scale, receiver.scale = 0, 0
	}
}

// initWindow sets up the original direction for the first packet of a new
// connection (tcp_new): a SYN starts a strict window; a picked-up segment
// starts a liberal one, since its history (scaling included) is unknown.
func (ti *tcpInfo) initWindow(f *Facts) {
	*ti = tcpInfo{lastIndex: idxNone}
	s := &ti.seen[Original]
	s.end = segmentEnd(f)
	s.maxwin = max(uint32(f.Window), 1)
	if f.TCPFlags&inet.SYN != 0 {
		s.maxend = s.end
		s.applyOptions(f)
		return
	}
	s.maxend = s.end + s.maxwin
	ti.seen[Original].flags = seenSACKPerm | seenLiberal
	ti.seen[Reply].flags = seenSACKPerm | seenLiberal
}

func maxAckWindow(s *tcpSeen) uint32 { return max(s.maxwin, maxAckWinConst) }

// inWindow checks a segment against the windows and, when it fits,
// updates them (tcp_in_window). state is the connection's state before the
// segment.
func (t *Table) inWindow(ti *tcpInfo, state TCPState, dir Dir, idx tcpIndex, f *Facts) windowAction {
	sender, receiver := &ti.seen[dir], &ti.seen[1-dir]
	syn, hasAck := f.TCPFlags&inet.SYN != 0, f.TCPFlags&inet.ACK != 0
	seq, ack := f.Seq, f.Ack
	sack := ack
	win := uint32(f.Window)
	end := segmentEnd(f)
	if f.HasSACK && receiver.flags&seenSACKPerm != 0 && seqAfter(f.SACKEnd, sack) {
		sack = f.SACKEnd
	}

	switch {
	case sender.maxwin == 0:
		if syn {
			initSender(sender, receiver, f, end, dir)
			if !hasAck {
				return winAccept // simultaneous open
			}
			break
		}
		// Picked up mid-stream in this direction: trust the segment.
		sender.end = end
		sender.maxwin = max(win<<sender.scale, 1)
		sender.maxend = end + sender.maxwin
		if receiver.maxwin == 0 {
			// Nothing seen the other way yet: let the ack pass the checks.
			receiver.end, receiver.maxend = sack, sack
		} else if sack == receiver.end+1 {
			receiver.end++ // likely the answer to a keepalive
		}
	case syn && seqAfter(end, sender.end) && (state == TCPSynSent || state == TCPSynRecv):
		// A SYN (or SYN/ACK) with a higher sequence number restarts the
		// direction (RFC 793 reinitialisation).
		initSender(sender, receiver, f, end, dir)
		if dir == Reply && !hasAck {
			return winAccept
		}
	}

	if !hasAck || (f.TCPFlags&inet.RST != 0 && ack == 0) {
		// No ACK (or a RST with a zero ack from a broken stack): pretend it
		// acknowledges everything seen.
		ack, sack = receiver.end, receiver.end
	}
	if f.TCPFlags&inet.RST != 0 && seq == 0 && state == TCPSynSent {
		seq, end = sender.end, sender.end // RST answering a SYN
	}

	liberal := t.tcpLiberal || sender.flags&seenLiberal != 0
	verdict := func(a windowAction) windowAction {
		if liberal {
			return winAccept
		}
		return a
	}
	if !seqBefore(seq, sender.maxend+1) {
		overshot := end - sender.maxend + 1
		ackOK := seqAfter(sack, receiver.end-maxAckWindow(sender)-1)
		inRecv := receiver.maxwin != 0 && seqAfter(end, sender.end-receiver.maxwin-1)
		if inRecv && ackOK && overshot <= receiver.maxwin && seqBefore(sack, receiver.end+1) {
			// More data than the window allows, but otherwise fine:
			// remember it so that the peer's ack of it stays valid.
			sender.end = end
			sender.flags |= seenUnacked
			return verdict(winIgnore)
		}
		return verdict(winInvalid) // SEQ over the upper bound
	}
	if !seqBefore(sack, receiver.end+1) {
		return verdict(winInvalid) // ACK of data not seen yet
	}
	if receiver.maxwin != 0 && !seqAfter(end, sender.end-receiver.maxwin-1) {
		return verdict(winIgnore) // retransmission of acknowledged data
	}
	if !seqAfter(sack, receiver.end-maxAckWindow(sender)-1) {
		return verdict(winIgnore) // overly delayed ACK
	}

	if !syn {
		win <<= sender.scale
	}
	sender.maxwin = max(sender.maxwin, win+(sack-ack))
	if seqAfter(end, sender.end) {
		sender.end = end
		sender.flags |= seenUnacked
	}
	if hasAck {
		if sender.flags&seenMaxAck == 0 {
			sender.maxack = ack
			sender.flags |= seenMaxAck
		} else if seqAfter(ack, sender.maxack) {
			sender.maxack = ack
		}
	}
	if receiver.maxwin != 0 && seqAfter(end, sender.maxend) {
		receiver.maxwin += end - sender.maxend
	}
	if seqAfter(sack+win, receiver.maxend-1) {
		receiver.maxend = sack + win
		if win == 0 {
			receiver.maxend++
		}
	}
	if ack == receiver.end {
		receiver.flags &^= seenUnacked
	}
	if idx == idxAck {
		// Count identical repeats of the last pure ACK (retransmissions).
		if ti.lastDir == dir && ti.lastSeq == seq && ti.lastAck == ack && ti.lastEnd == end && ti.lastWin == f.Window {
			ti.retrans++ // a u8 in the kernel too
		} else {
			ti.lastDir, ti.lastSeq, ti.lastAck, ti.lastEnd, ti.lastWin = dir, seq, ack, end, f.Window
			ti.retrans = 0
		}
	}
	return winAccept
}
