package conntrack

import (
	"strconv"
	"strings"
	"time"

	"github.com/packetwalk/packetwalk/inet"
)

// Clock is the time source of a [Table]. Tests pass a manual clock.
type Clock interface{ Now() time.Time }

// Dir is the direction of a packet relative to its connection.
type Dir uint8

// Directions. A packet matching the entry's Original tuple travels in the
// Original direction; one matching its Reply tuple in the Reply direction.
const (
	Original Dir = 0
	Reply    Dir = 1
)

// String returns "original" or "reply".
func (d Dir) String() string {
	if d == Reply {
		return "reply"
	}
	return "original"
}

// State is the conntrack state of one packet, as tested by
// `-m conntrack --ctstate` / `-m state --state`.
type State uint8

// Packet states. StateNew is the first packet of a connection and every
// later original-direction packet until a reply was seen; StateEstablished
// is a packet of a connection that has seen a reply (and every reply);
// StateRelated is an ICMP error about a tracked connection; StateInvalid is
// a packet conntrack could not attach to a valid entry; StateUntracked is
// set by the raw table's NOTRACK/CT --notrack (never returned by Track).
const (
	StateInvalid State = iota
	StateNew
	StateEstablished
	StateRelated
	StateUntracked
)

var stateNames = [...]string{"INVALID", "NEW", "ESTABLISHED", "RELATED", "UNTRACKED"}

// String returns the iptables spelling ("NEW", "ESTABLISHED", ...).
func (s State) String() string {
	if int(s) < len(stateNames) {
		return stateNames[s]
	}
	return "State(" + itoa(uint64(s)) + ")"
}

// Status is the entry's status bit set; the bit values are the kernel's
// IPS_* values (include/uapi/linux/netfilter/nf_conntrack_common.h), so a
// `--ctstatus` mask can be tested directly.
type Status uint32

// Status bits.
const (
	StatusExpected     Status = 1 << 0
	StatusSeenReply    Status = 1 << 1
	StatusAssured      Status = 1 << 2
	StatusConfirmed    Status = 1 << 3
	StatusSrcNAT       Status = 1 << 4
	StatusDstNAT       Status = 1 << 5
	StatusSeqAdjust    Status = 1 << 6
	StatusSrcNATDone   Status = 1 << 7
	StatusDstNATDone   Status = 1 << 8
	StatusDying        Status = 1 << 9
	StatusFixedTimeout Status = 1 << 10
	StatusTemplate     Status = 1 << 11
	StatusNATClash     Status = 1 << 12 // shares the old IPS_UNTRACKED bit
	StatusHelper       Status = 1 << 13
	StatusOffload      Status = 1 << 14
	StatusHWOffload    Status = 1 << 15

	// StatusNATMask is SrcNAT|DstNAT.
	StatusNATMask = StatusSrcNAT | StatusDstNAT
)

var statusNames = [...]string{"EXPECTED", "SEEN_REPLY", "ASSURED", "CONFIRMED", "SRC_NAT", "DST_NAT",
	"SEQ_ADJUST", "SRC_NAT_DONE", "DST_NAT_DONE", "DYING", "FIXED_TIMEOUT", "TEMPLATE", "NAT_CLASH",
	"HELPER", "OFFLOAD", "HW_OFFLOAD"}

// String returns the set bits joined by "|" ("SEEN_REPLY|ASSURED|CONFIRMED"),
// or "NONE".
func (s Status) String() string {
	if s == 0 {
		return "NONE"
	}
	var parts []string
	for i, n := range statusNames {
		if s&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	if rest := s &^ (1<<len(statusNames) - 1); rest != 0 {
		parts = append(parts, "0x"+strings.ToLower(hex(uint64(rest))))
	}
	return strings.Join(parts, "|")
}

// TCPState is the TCP tracker's state (kernel enum tcp_conntrack).
type TCPState uint8

// TCP states in kernel order.
const (
	TCPNone TCPState = iota
	TCPSynSent
	TCPSynRecv
	TCPEstablished
	TCPFinWait
	TCPCloseWait
	TCPLastAck
	TCPTimeWait
	TCPClose
	TCPSynSent2
	numTCPStates
)

var tcpStateNames = [...]string{"NONE", "SYN_SENT", "SYN_RECV", "ESTABLISHED", "FIN_WAIT",
	"CLOSE_WAIT", "LAST_ACK", "TIME_WAIT", "CLOSE", "SYN_SENT2"}

// String returns the name conntrack prints ("TIME_WAIT", ...).
func (s TCPState) String() string {
	if s < numTCPStates {
		return tcpStateNames[s]
	}
	return "NONE"
}

// Counter counts the packets and bytes of one direction.
type Counter struct {
	Packets, Bytes uint64
}

// Entry is one tracked connection (kernel struct nf_conn). Original is the
// tuple of the first packet; Reply is the tuple replies are expected to
// carry. Without NAT, Reply == Original.Reverse(); a NAT binding rewrites
// Reply (DNAT its source, SNAT its destination).
//
// An Entry returned by [Table.Track] is owned by the table; callers may set
// Mark (CONNMARK) but should change tuples only through [Table.SetupNAT].
type Entry struct {
	Original, Reply Tuple
	Status          Status
	Mark            uint32
	// ID is the entry's id (`conntrack -o id`).
	ID uint32
	// Use is the reference count conntrack prints (use=); 1 for entries
	// the model creates.
	Use uint32
	// Labels are the connection's 128 label bits (bit n of Labels[n/64]),
	// which iptables -m connlabel tests and sets.
	Labels   [2]uint64
	Counters [2]Counter // indexed by Dir
	// Expires is when the entry times out (confirmed entries). Printed as
	// the remaining whole seconds, rounded down, as the kernel does.
	Expires time.Time

	// timer is, until confirmation, the timeout Confirm will start (ns);
	// once confirmed, the deadline slot the entry is filed under, 0 if
	// none (expiry.go). One field for both keeps an Entry at 288 bytes,
	// a smaller allocation size class than 320, for a million of them.
	timer int64
	// tcp is the TCP tracker's state; a UDP entry keeps the start of its
	// stream rule there instead (udpStart).
	tcp      tcpInfo
	TCPState TCPState // TCPNone for non-TCP entries
}

// udpStart returns the time (Unix ns) of the last packet before
// confirmation, for the UDP stream rule; setUDPStart sets it. A UDP entry
// has no TCP state, so the time lives in its first two words.
func (e *Entry) udpStart() int64 {
	s := &e.tcp.seen[0]
	return int64(uint64(s.end)<<32 | uint64(s.maxend))
}

func (e *Entry) setUDPStart(ns int64) {
	s := &e.tcp.seen[0]
	s.end, s.maxend = uint32(uint64(ns)>>32), uint32(ns)
}

// Confirmed reports whether the entry is in the table.
func (e *Entry) Confirmed() bool { return e.Status&StatusConfirmed != 0 }

// Timeout returns the time left before the entry expires at now (zero if
// expired). For an unconfirmed entry it is the timeout that Confirm will
// start.
func (e *Entry) Timeout(now time.Time) time.Duration {
	if !e.Confirmed() {
		return time.Duration(e.timer)
	}
	d := e.Expires.Sub(now)
	if d < 0 {
		return 0
	}
	return d
}

// Tuple returns the entry's tuple for direction d.
func (e *Entry) Tuple(d Dir) Tuple {
	if d == Reply {
		return e.Reply
	}
	return e.Original
}

// NATed reports whether the binding of kind k changes addresses or ports
// (the SRC_NAT / DST_NAT status bits, `--ctstate SNAT/DNAT`).
func (e *Entry) NATed(k NATKind) bool {
	if k == SNAT {
		return e.Status&StatusSrcNAT != 0
	}
	return e.Status&StatusDstNAT != 0
}

// Info is what [Table.Track] found for one packet: the entry (nil for
// StateInvalid), the packet's direction and its state.
type Info struct {
	Entry *Entry
	Dir   Dir
	State State
}

func itoa(v uint64) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + v%10)
		v /= 10
		if v == 0 {
			return string(b[i:])
		}
	}
}

func hex(v uint64) string {
	const digits = "0123456789ABCDEF"
	var b [16]byte
	i := len(b)
	for {
		i--
		b[i] = digits[v&15]
		v >>= 4
		if v == 0 {
			return string(b[i:])
		}
	}
}

// String returns the entry in one line for logs and test diffs: the
// `conntrack -L` fields without the timeout and the use count, e.g.
// "tcp ESTABLISHED src=10.0.0.1 dst=10.0.0.2 sport=40000 dport=80
// src=10.0.0.2 dst=10.0.0.1 sport=80 dport=40000 [SEEN_REPLY|ASSURED|CONFIRMED] mark=0".
func (e *Entry) String() string {
	b := append([]byte(nil), e.Original.Proto.ConntrackName()...)
	b = append(b, ' ')
	if e.Original.Proto == inet.TCP {
		b = append(b, e.TCPState.String()...)
		b = append(b, ' ')
	}
	b = appendTuple(b, e.Original)
	b = appendTuple(b, e.Reply)
	b = append(b, '[')
	b = append(b, e.Status.String()...)
	b = append(b, "] mark="...)
	b = strconv.AppendUint(b, uint64(e.Mark), 10)
	if e.Original.Zone != 0 {
		b = append(b, " zone="...)
		b = strconv.AppendUint(b, uint64(e.Original.Zone), 10)
	}
	return string(b)
}
