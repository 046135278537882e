package conntrack

// TCP header flag bits as they appear in the TCP header's flags byte.
const (
	TCPFin uint8 = 0x01
	TCPSyn uint8 = 0x02
	TCPRst uint8 = 0x04
	TCPPsh uint8 = 0x08
	TCPAck uint8 = 0x10
	TCPUrg uint8 = 0x20
	TCPEce uint8 = 0x40
	TCPCwr uint8 = 0x80
)

// tcpInfo is the per-connection TCP tracker memory the model keeps (the
// kernel's ip_ct_tcp minus the sequence-window fields).
type tcpInfo struct {
	lastIndex tcpIndex
	lastDir   Dir
	closeInit [2]bool // a FIN was sent in that direction
	simOpen   bool
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

func tcpIndexOf(flags uint8) tcpIndex {
	switch {
	case flags&TCPRst != 0:
		return idxRst
	case flags&TCPSyn != 0:
		if flags&TCPAck != 0 {
			return idxSynAck
		}
		return idxSyn
	case flags&TCPFin != 0:
		return idxFin
	case flags&TCPAck != 0:
		return idxAck
	}
	return idxNone
}

// tcpValidFlags reports whether the flag combination is one the kernel
// accepts (tcp_valid_flags, ignoring ECE, CWR and PSH); anything else is
// INVALID before any state is looked at.
func tcpValidFlags(flags uint8) bool {
	switch flags &^ (TCPEce | TCPCwr | TCPPsh) {
	case TCPSyn, TCPSyn | TCPUrg, TCPSyn | TCPAck,
		TCPRst, TCPRst | TCPAck,
		TCPFin | TCPAck, TCPFin | TCPAck | TCPUrg,
		TCPAck, TCPAck | TCPUrg:
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
func tcpNew(flags uint8, loose bool) bool {
	switch tcpTransitions[Original][tcpIndexOf(flags)][TCPNone] {
	case TCPSynSent:
		return true
	case TCPEstablished:
		return loose
	}
	return false
}

// tcpPacket runs the TCP state machine for a packet of e in direction dir
// (kernel nf_conntrack_tcp_packet without sequence-window checks).
func (t *Table) tcpPacket(e *Entry, dir Dir, flags uint8, length int) verdict {
	idx := tcpIndexOf(flags)
	old := e.TCPState
	next := tcpTransitions[dir][idx][old]
	switch next {
	case TCPSynSent:
		if old < TCPTimeWait {
			break
		}
		// A SYN reopening a TIME_WAIT/CLOSE connection: if the old one was
		// closed by a FIN (or reset from this side) it is destroyed and the
		// SYN starts a new connection; otherwise the SYN is ignored.
		if e.tcp.closeInit[0] || e.tcp.closeInit[1] || (e.tcp.lastDir == dir && e.tcp.lastIndex == idxRst) {
			return vRepeat
		}
		fallthrough
	case sIG:
		e.tcp.lastIndex, e.tcp.lastDir = idx, dir
		return vIgnore
	case sIV:
		return vInvalid
	case TCPSynSent2:
		e.tcp.simOpen = true
	case TCPSynRecv:
		if dir == Reply && idx == idxAck && e.tcp.simOpen {
			next = TCPEstablished
		}
	}
	e.tcp.lastIndex, e.tcp.lastDir = idx, dir
	e.TCPState = next
	if old != next && next == TCPFinWait {
		e.tcp.closeInit[dir] = true
	}
	timeout := t.timeouts.tcp(next)
	if idx == idxRst {
		timeout = t.timeouts.TCPClose
	}
	if e.Status&StatusSeenReply == 0 {
		if idx == idxRst {
			// Only answer was a RST (or the client aborted): destroy now.
			t.account(e, dir, length)
			return vKill
		}
		if idx == idxSyn && old == TCPSynSent {
			// SYN retransmissions do not extend the entry's life.
			t.account(e, dir, length)
			return vAccept
		}
		if next == TCPEstablished && timeout > t.timeouts.TCPUnacknowledged {
			timeout = t.timeouts.TCPUnacknowledged // mid-stream pickup
		}
	} else if e.Status&StatusAssured == 0 && (old == TCPSynRecv || old == TCPEstablished) && next == TCPEstablished {
		e.Status |= StatusAssured
	}
	t.refresh(e, dir, length, timeout)
	return vAccept
}
