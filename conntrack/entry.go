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
// 16 bytes; address zones are not kept, packets carry none) and read
// with [Entry.Original], [Entry.Reply] and [Entry.Tuple]. They are set by
// [NewEntry] and changed only by [Table.SetupNAT] (or [Entry.SetTuples]
// outside a table), so an entry in a table cannot drift from its index.
// An Entry is 160 bytes (doc.go, "Scale").
//
// An Entry returned by [Table.Track] is owned by the table; callers may set
// Mark (CONNMARK) and labels.
type Entry struct {
	// Addresses 0–3: original source and destination, reply source and
	// destination, while all four are IPv4 (x.wide unset); otherwise
	// they live in x.
	addr4 [4][4]byte
	// x holds what few entries need: IPv6 addresses, labels, a use
	// count other than 1, a reply tuple of another protocol or zone.
	x        *entryExtra
	port     [4]uint16   // as the addresses: source and destination per direction
	icmp     [2][2]uint8 // ICMP type and code per direction
	proto    inet.Proto  // of both tuples unless x.oddReply
	TCPState TCPState    // TCPNone for non-TCP entries
	zone     uint16      // as proto
	Status   Status
	Mark     uint32
	// ID is the entry's id (`conntrack -o id`).
	ID uint32
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
}

// entryExtra is the part of an Entry that few entries need.
type entryExtra struct {
	// addr holds the four addresses when wide is set, IPv4 ones mapped;
	// bit i of amask says address i is valid, bit 4+i that it is IPv4.
	addr  [4][16]byte
	amask uint8
	wide  bool
	// oddReply says the reply tuple's protocol and zone are rproto and
	// rzone rather than the original's.
	oddReply bool
	rproto   inet.Proto
	rzone    uint16
	use      uint32
	labels   [2]uint64
}

// extra returns e.x, allocating it.
func (e *Entry) extra() *entryExtra {
	if e.x == nil {
		e.x = &entryExtra{use: 1}
	}
	return e.x
}

// wide reports whether the addresses live in e.x.
func (e *Entry) wide() bool { return e.x != nil && e.x.wide }

// NewEntry returns an unconfirmed entry with the given tuples, e.g. for
// [Table.Insert]. Use is 1; set Status, counters and [Entry.SetExpires]
// before inserting.
func NewEntry(orig, reply Tuple) *Entry {
	e := &Entry{}
	e.SetTuples(orig, reply)
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
	d &= 1
	i := 2 * int(d)
	proto, zone := e.protoZone(d)
	return Tuple{
		Src: e.addr(i), Dst: e.addr(i + 1),
		SrcPort: e.port[i], DstPort: e.port[i+1],
		ICMPType: e.icmp[d][0], ICMPCode: e.icmp[d][1],
		Proto: proto, Zone: zone,
	}
}

// protoZone returns the protocol and zone of the tuple of direction d.
func (e *Entry) protoZone(d Dir) (inet.Proto, uint16) {
	if d == Reply && e.x != nil && e.x.oddReply {
		return e.x.rproto, e.x.rzone
	}
	return e.proto, e.zone
}

// setTuple stores t as the tuple of direction d. The original tuple is
// set first: it gives the protocol and zone the reply's are compared with.
func (e *Entry) setTuple(d Dir, t *Tuple) {
	d &= 1
	i := 2 * int(d)
	e.setAddr(i, t.Src)
	e.setAddr(i+1, t.Dst)
	e.port[i], e.port[i+1] = t.SrcPort, t.DstPort
	e.icmp[d] = [2]uint8{t.ICMPType, t.ICMPCode}
	if d == Original {
		if e.x != nil && !e.x.oddReply && (t.Proto != e.proto || t.Zone != e.zone) {
			// Keep the reply's protocol and zone until it is set.
			e.x.oddReply, e.x.rproto, e.x.rzone = true, e.proto, e.zone
		}
		e.proto, e.zone = t.Proto, t.Zone
		return
	}
	switch {
	case t.Proto != e.proto || t.Zone != e.zone:
		x := e.extra()
		x.oddReply, x.rproto, x.rzone = true, t.Proto, t.Zone
	case e.x != nil:
		e.x.oddReply = false
	}
}

// addr returns address i (see Entry).
func (e *Entry) addr(i int) netip.Addr {
	if !e.wide() {
		return netip.AddrFrom4(e.addr4[i])
	}
	bit := uint8(1) << i
	switch {
	case e.x.amask&bit == 0:
		return netip.Addr{}
	case e.x.amask&(bit<<4) != 0:
		return netip.AddrFrom16(e.x.addr[i]).Unmap()
	}
	return netip.AddrFrom16(e.x.addr[i])
}

// sameAddr reports whether address i is a, without building it.
func (e *Entry) sameAddr(i int, a netip.Addr) bool {
	if !e.wide() {
		return netip.AddrFrom4(e.addr4[i]) == a
	}
	return e.addr(i) == a
}

func (e *Entry) setAddr(i int, a netip.Addr) {
	if !e.wide() {
		if a.Is4() {
			e.addr4[i] = a.As4()
			return
		}
		// Not IPv4, or missing: move all four to the wide form.
		x := e.extra()
		x.wide, x.amask = true, 0xff
		for j := range 4 {
			x.addr[j] = netip.AddrFrom4(e.addr4[j]).As16()
		}
		e.addr4 = [4][4]byte{}
	}
	x := e.x
	bit := uint8(1) << i
	x.amask &^= bit | bit<<4
	x.addr[i] = [16]byte{}
	if !a.IsValid() {
		return
	}
	x.amask |= bit
	if a.Is4() {
		x.amask |= bit << 4
	}
	x.addr[i] = a.As16()
}

// matches reports whether t is the entry's tuple of direction d.
func (e *Entry) matches(d Dir, t *Tuple) bool {
	d &= 1
	i := 2 * int(d)
	if e.port[i] != t.SrcPort || e.port[i+1] != t.DstPort || e.icmp[d] != [2]uint8{t.ICMPType, t.ICMPCode} {
		return false
	}
	if e.x == nil {
		// Building the stored addresses compares three words each;
		// reading t's out with As4 would branch and shift more.
		return e.proto == t.Proto && e.zone == t.Zone &&
			netip.AddrFrom4(e.addr4[i]) == t.Src && netip.AddrFrom4(e.addr4[i+1]) == t.Dst
	}
	proto, zone := e.protoZone(d)
	return proto == t.Proto && zone == t.Zone && e.sameAddr(i, t.Src) && e.sameAddr(i+1, t.Dst)
}

// matchesSource reports whether t's source part (address, port, protocol,
// zone) is that of the entry's original tuple.
func (e *Entry) matchesSource(t *Tuple) bool {
	return e.port[0] == t.SrcPort && e.proto == t.Proto && e.zone == t.Zone && e.sameAddr(0, t.Src)
}

// Use returns the reference count conntrack prints (use=): 1 for entries
// the model creates, what the text said for parsed ones.
func (e *Entry) Use() uint32 {
	if e.x == nil {
		return 1
	}
	return e.x.use
}

// SetUse sets the use count printed.
func (e *Entry) SetUse(n uint32) {
	if n != 1 || e.x != nil {
		e.extra().use = n
	}
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
	if e.x == nil {
		return [2]uint64{}
	}
	return e.x.labels
}

// SetLabels sets the connection's label bits.
func (e *Entry) SetLabels(l [2]uint64) {
	if l != [2]uint64{} || e.x != nil {
		e.extra().labels = l
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
	b := append([]byte(nil), e.proto.ConntrackName()...)
	b = append(b, ' ')
	if e.proto == inet.TCP {
		b = append(b, e.TCPState.String()...)
		b = append(b, ' ')
	}
	b = appendTuple(b, e.Original())
	b = appendTuple(b, e.Reply())
	b = append(b, '[')
	b = append(b, e.Status.String()...)
	b = append(b, "] mark="...)
	b = strconv.AppendUint(b, uint64(e.Mark), 10)
	if e.zone != 0 {
		b = append(b, " zone="...)
		b = strconv.AppendUint(b, uint64(e.zone), 10)
	}
	return string(b)
}
