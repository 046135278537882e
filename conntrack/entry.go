package conntrack

import (
	"net/netip"
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

// Entry is one tracked connection (kernel struct nf_conn). Its Original
// tuple is that of the first packet; its Reply tuple the one replies are
// expected to carry. Without NAT, Reply == Original.Reverse(); a NAT
// binding rewrites Reply (DNAT its source, SNAT its destination).
//
// The tuples are stored compactly (an IPv4 connection's four addresses in
// 16 bytes) and read with [Entry.Original], [Entry.Reply] and
// [Entry.Tuple]; they are set by [NewEntry] and changed only by
// [Table.SetupNAT], so an entry in a table cannot drift from its index.
// An entry is 176 bytes, a million of them with their index about 240
// (doc.go, "Scale").
//
// An Entry returned by [Table.Track] is owned by the table; callers may set
// Mark (CONNMARK) and labels.
type Entry struct {
	// Addresses 0–3: original source and destination, reply source and
	// destination. While all are IPv4 they live in addr4; otherwise all
	// in addr6, as IPv4-mapped for those that are IPv4 (bit 4+i of amask).
	// Bit i of amask says address i is valid. Address zones are not kept:
	// packets carry none.
	addr4 [4][4]byte
	addr6 *[4][16]byte
	port  [4]uint16   // as the addresses: source and destination per direction
	icmp  [2][2]uint8 // ICMP type and code per direction
	proto [2]inet.Proto
	zone  [2]uint16
	amask uint8

	TCPState TCPState // TCPNone for non-TCP entries
	Status   Status
	Mark     uint32
	// ID is the entry's id (`conntrack -o id`).
	ID uint32
	// Use is the reference count conntrack prints (use=); 1 for entries
	// the model creates.
	Use uint32
	// tcp is the TCP tracker's state; a UDP entry keeps the start of its
	// stream rule there instead (udpStart).
	tcp      tcpInfo
	Counters [2]Counter // indexed by Dir
	// expires is when the entry times out (confirmed entries), Unix ns;
	// 0 for the zero time (the zero Entry has expired).
	expires int64
	// timer is, until confirmation, the timeout Confirm will start (ns);
	// once confirmed, the deadline slot the entry is filed under, 0 if
	// none (expiry.go).
	timer int64
	// labels are the 128 connlabel bits, allocated when one is first set:
	// few connections carry any.
	labels *[2]uint64
}

// NewEntry returns an unconfirmed entry with the given tuples, e.g. for
// [Table.Insert]. Use is 1; set Status, counters and [Entry.SetExpires]
// before inserting.
func NewEntry(orig, reply Tuple) *Entry {
	e := &Entry{Use: 1}
	e.setTuple(Original, &orig)
	e.setTuple(Reply, &reply)
	return e
}

// SetTuples replaces the tuples of an entry that is in no table: one
// built for [Table.Insert], or taken out with [Table.Remove] to be
// inserted again under other tuples. (A table's index would not find an
// entry whose tuples changed under it; NAT bindings are set up with
// [Table.SetupNAT].)
func (e *Entry) SetTuples(orig, reply Tuple) {
	e.setTuple(Original, &orig)
	e.setTuple(Reply, &reply)
}

// Original returns the tuple of the connection's first packet.
func (e *Entry) Original() Tuple { return e.Tuple(Original) }

// Reply returns the tuple replies are expected to carry.
func (e *Entry) Reply() Tuple { return e.Tuple(Reply) }

// Tuple returns the entry's tuple for direction d.
func (e *Entry) Tuple(d Dir) Tuple {
	i := 2 * int(d&1)
	return Tuple{
		Src: e.addr(i), Dst: e.addr(i + 1),
		SrcPort: e.port[i], DstPort: e.port[i+1],
		ICMPType: e.icmp[d&1][0], ICMPCode: e.icmp[d&1][1],
		Proto: e.proto[d&1], Zone: e.zone[d&1],
	}
}

// setTuple stores t as the tuple of direction d.
func (e *Entry) setTuple(d Dir, t *Tuple) {
	d &= 1
	i := 2 * int(d)
	e.setAddr(i, t.Src)
	e.setAddr(i+1, t.Dst)
	e.port[i], e.port[i+1] = t.SrcPort, t.DstPort
	e.icmp[d] = [2]uint8{t.ICMPType, t.ICMPCode}
	e.proto[d], e.zone[d] = t.Proto, t.Zone
}

// addr returns address i (see Entry).
func (e *Entry) addr(i int) netip.Addr {
	bit := uint8(1) << i
	switch {
	case e.amask&bit == 0:
		return netip.Addr{}
	case e.addr6 == nil:
		return netip.AddrFrom4(e.addr4[i])
	case e.amask&(bit<<4) != 0:
		return netip.AddrFrom16(e.addr6[i]).Unmap()
	}
	return netip.AddrFrom16(e.addr6[i])
}

// sameAddr reports whether address i is a, without building it.
func (e *Entry) sameAddr(i int, a netip.Addr) bool {
	if e.addr6 == nil && a.Is4() && e.amask&(1<<i) != 0 {
		return e.addr4[i] == a.As4()
	}
	return e.addr(i) == a
}

func (e *Entry) setAddr(i int, a netip.Addr) {
	bit := uint8(1) << i
	e.amask &^= bit | bit<<4
	if e.addr6 != nil {
		e.addr6[i] = [16]byte{}
	}
	e.addr4[i] = [4]byte{}
	if !a.IsValid() {
		return
	}
	e.amask |= bit
	if e.addr6 == nil {
		if a.Is4() {
			e.addr4[i] = a.As4()
			return
		}
		// The first IPv6 address: move the others to the wide form.
		e.addr6 = new([4][16]byte)
		for j := range 4 {
			if j != i && e.amask&(1<<j) != 0 {
				e.addr6[j] = netip.AddrFrom4(e.addr4[j]).As16()
				e.amask |= 1 << (4 + j)
			}
		}
		e.addr4 = [4][4]byte{}
	}
	if a.Is4() {
		e.amask |= bit << 4
	}
	e.addr6[i] = a.As16()
}

// matches reports whether t is the entry's tuple of direction d.
func (e *Entry) matches(d Dir, t *Tuple) bool {
	d &= 1
	i := 2 * int(d)
	return e.port[i] == t.SrcPort && e.port[i+1] == t.DstPort && e.proto[d] == t.Proto &&
		e.icmp[d] == [2]uint8{t.ICMPType, t.ICMPCode} && e.zone[d] == t.Zone &&
		e.sameAddr(i, t.Src) && e.sameAddr(i+1, t.Dst)
}

// matchesSource reports whether t's source part (address, port, protocol,
// zone) is that of the entry's original tuple.
func (e *Entry) matchesSource(t *Tuple) bool {
	return e.port[0] == t.SrcPort && e.proto[0] == t.Proto && e.zone[0] == t.Zone && e.sameAddr(0, t.Src)
}

// Expires returns when the entry times out (confirmed entries); the zero
// time if it was never set. Printed as the remaining whole seconds,
// rounded down, as the kernel does.
func (e *Entry) Expires() time.Time {
	if e.expires == 0 {
		return time.Time{}
	}
	return time.Unix(0, e.expires)
}

// SetExpires sets when an entry not yet in a table times out, for
// [Table.Insert] (a table sets the deadlines of its own entries).
func (e *Entry) SetExpires(at time.Time) { e.expires = unixNano(at) }

// expired reports whether the entry's deadline is at or before now.
func (e *Entry) expired(now time.Time) bool { return now.UnixNano() >= e.expires }

// unixNano is t in Unix ns, 0 for the zero time.
func unixNano(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixNano()
}

// Labels returns the connection's 128 label bits (bit n of word n/64),
// which iptables -m connlabel tests and sets.
func (e *Entry) Labels() [2]uint64 {
	if e.labels == nil {
		return [2]uint64{}
	}
	return *e.labels
}

// SetLabels sets the connection's label bits.
func (e *Entry) SetLabels(l [2]uint64) {
	switch {
	case e.labels != nil:
		*e.labels = l
	case l != [2]uint64{}:
		e.labels = &l
	}
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
	d := time.Duration(e.expires - now.UnixNano())
	if d < 0 {
		return 0
	}
	return d
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
	b := append([]byte(nil), e.proto[0].ConntrackName()...)
	b = append(b, ' ')
	if e.proto[0] == inet.TCP {
		b = append(b, e.TCPState.String()...)
		b = append(b, ' ')
	}
	b = appendTuple(b, e.Original())
	b = appendTuple(b, e.Reply())
	b = append(b, '[')
	b = append(b, e.Status.String()...)
	b = append(b, "] mark="...)
	b = strconv.AppendUint(b, uint64(e.Mark), 10)
	if e.zone[0] != 0 {
		b = append(b, " zone="...)
		b = strconv.AppendUint(b, uint64(e.zone[0]), 10)
	}
	return string(b)
}
