package conntrack

import (
	"cmp"
	"errors"
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"iter"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"
)

// Errors returned by the table. Wrapped errors name the tuple involved.
var (
	// ErrTableFull means nf_conntrack_max entries exist and none could be
	// dropped early; the kernel drops the packet ("table full, dropping
	// packet").
	ErrTableFull = errors.New("conntrack table full")
	// ErrClash means the entry's tuple is already used by another entry at
	// confirmation; the kernel drops the packet.
	ErrClash = errors.New("conntrack tuple clash")
	// ErrConfirmed means a NAT binding was requested for an entry that is
	// already confirmed (only the first packet of a connection sees nat).
	ErrConfirmed = errors.New("conntrack entry already confirmed")
	// ErrNATDone means a binding of that kind was already set up.
	ErrNATDone = errors.New("conntrack NAT binding already set up")
	// ErrBadRange means a NAT range is malformed (reversed, wrong family).
	ErrBadRange = errors.New("bad NAT range")
)

// fullError is ErrTableFull for a new connection's tuple, formatted only
// when printed: a full table refuses packets at a high rate.
type fullError struct{ tuple Tuple }

func (e *fullError) Error() string { return "new " + e.tuple.String() + ": " + ErrTableFull.Error() }
func (e *fullError) Unwrap() error { return ErrTableFull }

// DefaultMax is the nf_conntrack_max used when Config.Max is zero. The
// kernel derives its default from memory size; 262144 is a common value.
const DefaultMax = 262144

// DefaultBuckets is the nf_conntrack_buckets used when Config.Buckets is
// zero (the kernel sizes its hash from memory too; 262144 on the test
// machine, whatever nf_conntrack_max is set to).
const DefaultBuckets = 262144

// evictionRange is how many hash buckets, from the new tuple's on, the
// kernel searches for entries to drop early (NF_CT_EVICTION_RANGE).
const evictionRange = 8

// Config configures a [Table]. The zero value of each field selects the
// kernel default, except Clock, which is required.
type Config struct {
	Clock Clock      // required
	Rand  *rand.Rand // NAT port choice; nil means a PCG seeded with Seed
	Seed  uint64     // used when Rand is nil
	// Timeouts; a zero Timeouts means DefaultTimeouts().
	Timeouts Timeouts
	// Max is nf_conntrack_max; zero means DefaultMax.
	Max int
	// Buckets is nf_conntrack_buckets, the size of the kernel's hash
	// table; zero means DefaultBuckets. It sets the neighbourhood early
	// drop searches when the table is full: the entries hashed into the
	// evictionRange buckets from the new tuple's (docs/kernel-notes.md,
	// "Conntrack table full"). The model's hash is its own, so which
	// entries share a bucket differs from the kernel's, not how many.
	Buckets int
	// TCPStrict disables mid-stream pickup (nf_conntrack_tcp_loose=0).
	TCPStrict bool
	// TCPBeLiberal accepts TCP segments outside the window instead of
	// marking them INVALID (nf_conntrack_tcp_be_liberal=1).
	TCPBeLiberal bool
	// TCPMaxRetrans is how many identical ACKs in a row switch a
	// connection to Timeouts.TCPMaxRetrans (nf_conntrack_tcp_max_retrans);
	// zero means the kernel default, 3.
	TCPMaxRetrans int
	// TCPIgnoreInvalidRST lets a RST below the acknowledged sequence pass
	// without INVALID (nf_conntrack_tcp_ignore_invalid_rst=1).
	TCPIgnoreInvalidRST bool
}

// Table is a connection-tracking table for one network namespace.
//
// Only confirmed entries are stored. [Table.Track] returns a new entry
// unconfirmed; it becomes visible to lookups when [Table.Confirm] runs (at
// the last hook, as in the kernel). Expired entries are removed lazily when
// a lookup meets them and by [Table.Expire]; [Table.Entries] and listings
// never show them.
//
// A Table is not safe for concurrent use.
type Table struct {
	clock    Clock
	rng      *rand.Rand
	timeouts Timeouts
	max      int
	loose    bool
	// TCP window tracking sysctls (see Config).
	tcpLiberal          bool
	tcpIgnoreInvalidRST bool
	tcpMaxRetrans       uint8
	idx                 index // both tuples of every confirmed entry
	bySrc               index // SNATed entries by original source
	count               int
	buckets             uint64
	timers              timers
	stats               Stats
	scratch             []*Entry // early drop's candidates
}

// Stats are the table's statistics counters, as `conntrack -S` prints
// them (summed over CPUs). The model counts those it has a cause for.
type Stats struct {
	// Insert counts entries added by Insert (`conntrack -I`); the kernel
	// does not count confirmations here.
	Insert uint64
	// InsertFailed counts confirmations refused for a clash (ErrClash).
	InsertFailed uint64
	// Drop counts packets dropped because the table was full
	// (ErrTableFull from Track).
	Drop uint64
	// EarlyDrop counts entries removed to make room for a new one.
	EarlyDrop uint64
}

// Stats returns the statistics counters.
func (t *Table) Stats() Stats { return t.stats }

// NewTable returns an empty table. It panics if cfg.Clock is nil, a
// programming error.
func NewTable(cfg Config) *Table {
	if cfg.Clock == nil {
		panic("conntrack: NewTable needs a Clock")
	}
	t := &Table{
		clock:    cfg.Clock,
		rng:      cfg.Rand,
		timeouts: cfg.Timeouts,
		max:      cfg.Max,
		buckets:  uint64(cfg.Buckets),
		loose:    !cfg.TCPStrict,
		// The kernel compares a u8 counter with the sysctl.
		tcpLiberal:          cfg.TCPBeLiberal,
		tcpIgnoreInvalidRST: cfg.TCPIgnoreInvalidRST,
		tcpMaxRetrans:       uint8(min(max(cfg.TCPMaxRetrans, 0), 255)),
		bySrc:               index{bySource: true},
	}
	if t.rng == nil {
		t.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	}
	if t.timeouts == (Timeouts{}) {
		t.timeouts = DefaultTimeouts()
	}
	if t.max <= 0 {
		t.max = DefaultMax
	}
	if cfg.Buckets <= 0 {
		t.buckets = DefaultBuckets
	}
	if cfg.TCPMaxRetrans == 0 {
		t.tcpMaxRetrans = 3
	}
	if t.timeouts.TCPMaxRetrans == 0 {
		t.timeouts.TCPMaxRetrans = DefaultTimeouts().TCPMaxRetrans
	}
	return t
}

// Facts is everything the tracker needs from one packet.
type Facts struct {
	// Tuple is the packet's own tuple as seen at the hook (for ICMP: type,
	// code and, for queries, the identifier in SrcPort).
	Tuple
	// TCPFlags is the TCP flags byte (TCPSyn|TCPAck, ...).
	TCPFlags inet.TCPFlags
	// Len is the packet's length in bytes (IP total length) for counters.
	Len int
	// Inner is, for an ICMP error, the tuple of the packet embedded in it,
	// exactly as it appears inside the error. Ignored otherwise.
	Inner Tuple

	// The TCP fields below feed the sequence-window check.

	// Seq, Ack and Window are the TCP header's sequence number,
	// acknowledgement number and window field (unscaled).
	Seq, Ack uint32
	Window   uint16
	// PayloadLen is the number of TCP payload bytes (IP length minus the
	// IP and TCP headers).
	PayloadLen int
	// HasOptions says the TCP header carries options (data offset > 5);
	// a SYN with options resets the options remembered for its side.
	HasOptions bool
	// WScale is the window scale option's shift, present if HasWScale.
	WScale    uint8
	HasWScale bool
	// SACKPerm says the header carries the SACK-permitted option.
	SACKPerm bool
	// SACKEnd is the highest right edge among the SACK blocks, present if
	// HasSACK.
	SACKEnd uint32
	HasSACK bool
}

// Len returns the number of confirmed entries, expired or not yet reaped.
func (t *Table) Len() int { return t.count }

// Track looks the packet up and updates the connection's state, as the
// kernel's nf_conntrack_in does at PREROUTING and OUTPUT.
//
//   - A packet of a known connection returns its entry and direction; its
//     state is ESTABLISHED, or NEW for original-direction packets before a
//     reply was seen. The protocol state machine may instead mark it
//     INVALID (entry untouched) or destroy the entry (a RST before any
//     reply; the packet itself still carries the entry).
//   - An ICMP error whose embedded packet belongs to a connection is
//     RELATED to it; one that matches nothing is INVALID.
//   - Otherwise a new, unconfirmed entry is created with state NEW, unless
//     the packet cannot start a connection (INVALID: a TCP segment other
//     than SYN or, with loose pickup, ACK; an ICMP reply or error).
//
// The error is ErrTableFull when a new entry is needed, the table holds
// Max entries and none is droppable; the packet must be dropped. Track
// reads f and does not keep it (a pointer, as it runs for every packet);
// it allocates only when it creates an entry.
func (t *Table) Track(f *Facts) (Info, error) {
	now := t.clock.Now()
	if f.IsICMP() && IsICMPError(f.Proto, f.ICMPType) {
		return t.related(f, now), nil
	}
	if f.Proto == inet.TCP && !tcpValidFlags(f.TCPFlags) {
		return Info{State: StateInvalid}, nil
	}
	for range 2 {
		e, dir, ok := t.lookup(&f.Tuple, now)
		if !ok {
			return t.create(f, now)
		}
		state := StateEstablished
		if dir == Original && e.Status&StatusSeenReply == 0 {
			state = StateNew
		}
		switch t.packet(e, dir, f, now) {
		case vInvalid:
			return Info{State: StateInvalid}, nil
		case vRepeat:
			t.Remove(e)
			continue
		case vKill:
			t.Remove(e)
		}
		if dir == Reply {
			e.Status |= StatusSeenReply
		}
		return Info{Entry: e, Dir: dir, State: state}, nil
	}
	return Info{State: StateInvalid}, nil // unreachable: a removed entry cannot be found again
}

// related handles an ICMP error (kernel nf_conntrack_inet_error).
func (t *Table) related(f *Facts, now time.Time) Info {
	if f.Inner.Proto == 0 || !f.Inner.Src.IsValid() {
		return Info{State: StateInvalid}
	}
	in := f.Inner
	in.Zone = f.Zone
	rev := in.Reverse()
	e, dir, ok := t.lookup(&rev, now)
	if !ok {
		return Info{State: StateInvalid}
	}
	return Info{Entry: e, Dir: dir, State: StateRelated}
}

// create makes a new unconfirmed entry for the first packet of a flow.
func (t *Table) create(f *Facts, now time.Time) (Info, error) {
	switch {
	case f.Proto == inet.TCP:
		if !tcpNew(f.TCPFlags, t.loose) {
			return Info{State: StateInvalid}, nil
		}
	case f.IsICMP():
		if !icmpIsQuery(f.Proto, f.ICMPType) {
			return Info{State: StateInvalid}, nil
		}
	}
	if !t.room(hashTuple(&f.Tuple)) {
		t.stats.Drop++
		return Info{}, &fullError{f.Tuple}
	}
	e := &Entry{ID: t.rng.Uint32()}
	e.setTuple(Original, &f.Tuple)
	var rev Tuple
	f.Tuple.reverseInto(&rev)
	e.setTuple(Reply, &rev)
	if f.Proto == inet.TCP {
		e.tcp.initWindow(f)
	}
	t.packet(e, Original, f, now)
	return Info{Entry: e, Dir: Original, State: StateNew}, nil
}

// packet runs the protocol handler for one packet of e.
func (t *Table) packet(e *Entry, dir Dir, f *Facts, now time.Time) verdict {
	switch {
	case f.Proto == inet.TCP:
		return t.tcpPacket(e, dir, f, now)
	case f.Proto == inet.UDP || f.Proto == 136: // UDP-Lite shares the UDP timeouts
		if !e.Confirmed() {
			e.setUDPStart(now.UnixNano())
		}
		if e.Status&StatusSeenReply == 0 {
			t.refresh(e, dir, f.Len, t.timeouts.UDP, now)
			return vAccept
		}
		// Still active more than two seconds after the first packets:
		// a stream, which earns the long timeout and ASSURED.
		if now.UnixNano()-e.udpStart() > int64(2*time.Second) {
			t.refresh(e, dir, f.Len, t.timeouts.UDPStream, now)
			if e.Status&StatusNATClash == 0 {
				e.Status |= StatusAssured
			}
		} else {
			t.refresh(e, dir, f.Len, t.timeouts.UDP, now)
		}
	case f.Proto == inet.ICMP:
		t.refresh(e, dir, f.Len, t.timeouts.ICMP, now)
	case f.Proto == inet.ICMPv6:
		t.refresh(e, dir, f.Len, t.timeouts.ICMPv6, now)
	default:
		t.refresh(e, dir, f.Len, t.timeouts.Generic, now)
	}
	return vAccept
}

func (t *Table) account(e *Entry, dir Dir, length int) {
	e.Counters[dir].Packets++
	if length > 0 {
		e.Counters[dir].Bytes += uint64(length)
	}
}

// refresh counts the packet and restarts the entry's timer.
func (t *Table) refresh(e *Entry, dir Dir, length int, d time.Duration, now time.Time) {
	t.account(e, dir, length)
	if e.Confirmed() {
		t.setExpires(e, now.Add(d))
	} else {
		e.timer = int64(d) // until Confirm
	}
}

// lookup finds a live confirmed entry holding tuple tp, reaping it if it
// has expired.
func (t *Table) lookup(tp *Tuple, now time.Time) (*Entry, Dir, bool) {
	e, dir, ok := t.idx.get(tp)
	if !ok {
		return nil, Original, false
	}
	if e.expired(now) {
		t.Remove(e)
		return nil, Original, false
	}
	return e, dir, true
}

// Lookup returns the live entry having tuple tp in either direction and
// that direction. It reaps the entry if it has expired.
func (t *Table) Lookup(tp Tuple) (*Entry, Dir, bool) {
	return t.lookup(&tp, t.clock.Now())
}

// Confirm inserts a new entry into the table (kernel __nf_conntrack_confirm
// at the last hook), starting its timer. Confirming nil or an already
// confirmed entry does nothing. If either tuple is already held by another
// live entry the result wraps ErrClash and the packet must be dropped.
func (t *Table) Confirm(e *Entry) error {
	if e == nil || e.Confirmed() {
		return nil
	}
	now := t.clock.Now()
	for _, tp := range [2]Tuple{e.Original(), e.Reply()} {
		if _, _, ok := t.lookup(&tp, now); ok {
			t.stats.InsertFailed++
			return fmt.Errorf("confirm %v: %w", tp, ErrClash)
		}
	}
	e.Status |= StatusConfirmed
	e.expires = now.UnixNano() + e.timer
	t.insert(e)
	return nil
}

func (t *Table) insert(e *Entry) {
	// Reply first: a tuple that is its own reverse is then found as
	// Original, the direction listings go by.
	t.idx.put(e, Reply)
	t.idx.put(e, Original)
	t.count++
	if e.Status&StatusSrcNATDone != 0 {
		t.bySrc.put(e, Original)
	}
	e.timer = 0
	t.schedule(e)
}

// Insert adds a confirmed entry as given, e.g. one parsed from a
// `conntrack -L` snapshot: its Expires, status and counters are kept and
// StatusConfirmed is set. It fails with ErrClash if a tuple is taken and
// with ErrTableFull at Max entries if early drop, which for `conntrack -I`
// starts at hash bucket 0, frees nothing (the kernel's "Operation failed:
// not enough memory"). Stats.Insert counts the entries added.
func (t *Table) Insert(e *Entry) error {
	now := t.clock.Now()
	for _, tp := range [2]Tuple{e.Original(), e.Reply()} {
		if _, _, ok := t.lookup(&tp, now); ok {
			return fmt.Errorf("insert %v: %w", tp, ErrClash)
		}
	}
	// ctnetlink allocates without the packet's hash: early drop starts
	// at bucket 0 (nf_conntrack_alloc).
	if !t.room(0) {
		return fmt.Errorf("insert %v: %w", e.Original(), ErrTableFull)
	}
	t.stats.Insert++
	e.Status |= StatusConfirmed
	if e.Use() == 0 {
		e.SetUse(1)
	}
	if e.proto == inet.TCP && e.tcp.seen[Original].maxwin == 0 && e.tcp.seen[Reply].maxwin == 0 {
		// A snapshot does not carry the windows: pick them up from the
		// next segments and never judge them, as for a loose pickup.
		e.tcp.seen[Original].flags |= seenLiberal | seenSACKPerm
		e.tcp.seen[Reply].flags |= seenLiberal | seenSACKPerm
	}
	t.insert(e)
	return nil
}

// Remove deletes e from the table and reports whether it was there.
func (t *Table) Remove(e *Entry) bool {
	if e == nil {
		return false
	}
	orig, reply := e.Original(), e.Reply()
	if !t.idx.del(&orig, e) {
		return false
	}
	t.idx.del(&reply, e)
	t.bySrc.del(&orig, e)
	t.count--
	e.Status |= StatusDying
	e.timer = 0
	return true
}

// room makes room for one more entry, as the kernel's
// __nf_conntrack_alloc does, and reports whether there is room. At Max
// entries it first reaps what has expired (the kernel's garbage collector
// would have), then drops entries early near hash h (earlyDrop).
func (t *Table) room(h uint32) bool {
	if t.count < t.max {
		return true
	}
	t.Expire()
	return t.count < t.max || t.earlyDrop(h)
}

// earlyDrop frees room the way the kernel's early_drop does: it searches
// the evictionRange hash buckets from the one of hash h, and in the first
// bucket holding any entry it may drop (confirmed, not ASSURED, not
// dying) drops all of them, counting them in Stats.EarlyDrop. Expired
// entries met on the way are reaped without counting. It reports whether
// it dropped anything: if not, the new entry is refused, however many
// droppable entries lie elsewhere.
func (t *Table) earlyDrop(h uint32) bool {
	b := uint64(h) * t.buckets >> 32 // the kernel's reciprocal_scale
	now := t.clock.Now()
	// Bucket bk holds the hashes from ceil(bk<<32/buckets) on.
	first := func(bk uint64) uint64 { return (bk<<32 + t.buckets - 1) / t.buckets }
	bk, lo := b, first(b)
	for range evictionRange {
		hi := first(bk + 1)
		t.scratch = t.scratch[:0]
		t.idx.rangeSlots(lo, hi, func(e *Entry) { t.scratch = append(t.scratch, e) })
		drops := 0
		for _, e := range t.scratch {
			switch {
			case e.Status&StatusDying != 0:
			case e.expired(now):
				t.Remove(e)
			case e.Status&StatusAssured != 0:
			case t.Remove(e):
				drops++
			}
		}
		clear(t.scratch)
		if drops > 0 {
			t.stats.EarlyDrop += uint64(drops)
			return true
		}
		if bk++; bk == t.buckets {
			bk, hi = 0, 0
		}
		lo = hi
	}
	return false
}

// All yields the live entries in table order (hash order, as the kernel
// lists them), without sorting, copying or reaping: the way to walk a
// large table. Expired entries are skipped. The table must not change
// during the walk.
func (t *Table) All() iter.Seq[*Entry] {
	return func(yield func(*Entry) bool) {
		now := t.clock.Now()
		for i := range t.idx.n {
			e, hw := t.idx.at(i)
			if e == nil || Dir(hw&1) != Original || e.expired(now) {
				continue
			}
			if !yield(e) {
				return
			}
		}
	}
}

// Entries returns the live entries sorted by original tuple (protocol,
// source, destination, ports), then reply tuple. It reaps expired entries
// first. The kernel lists in hash order; sorting keeps output stable.
func (t *Table) Entries() []*Entry {
	t.Expire()
	out := make([]*Entry, 0, t.count)
	t.idx.entries(func(e *Entry) { out = append(out, e) })
	slices.SortFunc(out, func(a, b *Entry) int {
		if c := compareTuple(a.Original(), b.Original()); c != 0 {
			return c
		}
		return compareTuple(a.Reply(), b.Reply())
	})
	return out
}

func compareTuple(a, b Tuple) int {
	return cmp.Or(
		cmp.Compare(a.Proto, b.Proto),
		a.Src.Compare(b.Src),
		a.Dst.Compare(b.Dst),
		cmp.Compare(a.SrcPort, b.SrcPort),
		cmp.Compare(a.DstPort, b.DstPort),
		cmp.Compare(a.ICMPType, b.ICMPType),
		cmp.Compare(a.ICMPCode, b.ICMPCode),
		cmp.Compare(a.Zone, b.Zone),
	)
}

// Filter selects entries like the options of `conntrack -L/-D`. Zero
// fields match anything: Proto 0, invalid addresses, port 0, MarkMask 0,
// Status 0 and TCPState TCPNone.
type Filter struct {
	Proto              inet.Proto // -p
	OrigSrc, OrigDst   netip.Addr // -s/--orig-src, -d/--orig-dst
	ReplySrc, ReplyDst netip.Addr // -r/--reply-src, -q/--reply-dst
	OrigSrcPort        uint16     // --sport/--orig-port-src
	OrigDstPort        uint16     // --dport/--orig-port-dst
	ReplySrcPort       uint16     // --reply-port-src
	ReplyDstPort       uint16     // --reply-port-dst
	Mark, MarkMask     uint32     // -m MARK/MASK: matches if entry mark & MarkMask == Mark
	Status             Status     // -u: all these bits set
	TCPState           TCPState   // --state
}

// Match reports whether e satisfies every set field of f.
func (f Filter) Match(e *Entry) bool {
	o, r := e.Original(), e.Reply()
	switch {
	case f.Proto != 0 && o.Proto != f.Proto,
		f.OrigSrc.IsValid() && o.Src != f.OrigSrc,
		f.OrigDst.IsValid() && o.Dst != f.OrigDst,
		f.ReplySrc.IsValid() && r.Src != f.ReplySrc,
		f.ReplyDst.IsValid() && r.Dst != f.ReplyDst,
		f.OrigSrcPort != 0 && (!o.Proto.HasPorts() || o.SrcPort != f.OrigSrcPort),
		f.OrigDstPort != 0 && (!o.Proto.HasPorts() || o.DstPort != f.OrigDstPort),
		f.ReplySrcPort != 0 && (!r.Proto.HasPorts() || r.SrcPort != f.ReplySrcPort),
		f.ReplyDstPort != 0 && (!r.Proto.HasPorts() || r.DstPort != f.ReplyDstPort),
		f.MarkMask != 0 && e.Mark&f.MarkMask != f.Mark,
		e.Status&f.Status != f.Status,
		f.TCPState != TCPNone && e.TCPState != f.TCPState:
		return false
	}
	return true
}

// Delete removes every live entry matching f (`conntrack -D`) and returns
// how many it removed.
func (t *Table) Delete(f Filter) int {
	n := 0
	for _, e := range t.Entries() {
		if f.Match(e) && t.Remove(e) {
			n++
		}
	}
	return n
}

// Flush removes every entry (`conntrack -F`) and returns how many were live.
func (t *Table) Flush() int {
	t.Expire() // what is left is live
	n := t.count
	t.idx.entries(func(e *Entry) { e.timer = 0 })
	t.idx.clear()
	t.bySrc.clear()
	t.count = 0
	t.timers.reset()
	return n
}

// SetClosing moves a confirmed TCP connection to CLOSE with the close
// timeout, as the kernel does when REJECT answers one of its packets with a
// reset (nf_ct_set_closing, nf_conntrack_tcp_set_closing). Other entries,
// unconfirmed ones and ones already closing are left alone.
func (t *Table) SetClosing(e *Entry) {
	if e == nil || !e.Confirmed() || e.proto != inet.TCP || e.TCPState == TCPClose {
		return
	}
	e.TCPState = TCPClose
	if e.Status&StatusFixedTimeout == 0 {
		t.setExpires(e, t.clock.Now().Add(t.timeouts.TCPClose))
	}
}
