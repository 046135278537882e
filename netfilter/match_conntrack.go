package netfilter

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
)

// CTStates is the set of states a --ctstate or --state option lists: a bit
// for each conntrack.State (CTStatesOf) and, for --ctstate, the virtual
// states SNAT and DNAT of a connection translated that way (NATStates).
// The states themselves are conntrack's; this is only the match's set.
type CTStates uint16

// CTStatesOf returns the set of the given states.
func CTStatesOf(states ...conntrack.State) CTStates {
	var s CTStates
	for _, st := range states {
		s |= stateBit(st)
	}
	return s
}

// NATStates returns the set of --ctstate's virtual states SNAT and DNAT for
// the given kinds of translation.
func NATStates(kinds ...conntrack.NATKind) CTStates {
	var s CTStates
	for _, k := range kinds {
		s |= natStateBit(k)
	}
	return s
}

func stateBit(s conntrack.State) CTStates      { return 1 << s }
func natStateBit(k conntrack.NATKind) CTStates { return 1 << (5 + CTStates(k)) }

// ctNATStates are the virtual states; every real state's bit is below them.
const ctNATStates = CTStates(1<<5 | 1<<6)

// ctStateNames lists the states in the order iptables prints them.
var ctStateNames = []struct {
	s    CTStates
	name string
}{{stateBit(conntrack.StateInvalid), "INVALID"}, {stateBit(conntrack.StateNew), "NEW"},
	{stateBit(conntrack.StateRelated), "RELATED"}, {stateBit(conntrack.StateEstablished), "ESTABLISHED"},
	{stateBit(conntrack.StateUntracked), "UNTRACKED"}, {natStateBit(conntrack.SNAT), "SNAT"}, {natStateBit(conntrack.DNAT), "DNAT"}}

// String returns the states comma-separated in iptables' order.
func (s CTStates) String() string {
	var parts []string
	for _, n := range ctStateNames {
		if s&n.s != 0 {
			parts = append(parts, n.name)
		}
	}
	return strings.Join(parts, ",")
}

// parseCTState parses --state and --ctstate lists. As libxt_conntrack
// does, each comma-separated word may be any prefix of a state's name, in
// any case ("e,r" is ESTABLISHED,RELATED); an empty word is refused.
func parseCTState(s string, withNAT bool) (CTStates, bool) {
	var st CTStates
	for _, part := range strings.Split(s, ",") {
		found := false
		for _, n := range ctStateNames {
			if (withNAT || n.s&ctNATStates == 0) && isNamePrefix(part, n.name) {
				st |= n.s
				found = true
				break
			}
		}
		if !found {
			return 0, false
		}
	}
	return st, true
}

// isNamePrefix reports whether word is a non-empty prefix of name, case
// ignored: the strncasecmp(word, name, len(word)) test of the iptables
// extensions that take lists of names.
func isNamePrefix(word, name string) bool {
	return word != "" && len(word) <= len(name) && strings.EqualFold(word, name[:len(word)])
}

// ctStatusNames are the conntrack.Status bits --ctstatus names, in
// iptables' order.
var ctStatusNames = []struct {
	s    conntrack.Status
	name string
}{{conntrack.StatusExpected, "EXPECTED"}, {conntrack.StatusSeenReply, "SEEN_REPLY"}, {conntrack.StatusAssured, "ASSURED"}, {conntrack.StatusConfirmed, "CONFIRMED"}}

// ctInfo is what the conntrack matches read about the packet's connection;
// the host fills it at the conntrack hook.
// The connection's tuples and timeout are read from the entry itself by
// the few rules that test them (see ConntrackMatch.match).
type ctInfo struct {
	tracked   bool // the packet has a connection (ct != NULL)
	untracked bool // NOTRACK / CT --notrack
	tmpl      bool // a CT template (CT --zone...): zero tuples, no timeout
	state     CTStates
	status    conntrack.Status
	reply     bool // the packet travels in the reply direction
	mark      uint32
}

// ConntrackMatch is "-m conntrack".
//
// Tests says which options are given and Inverted which of those carry
// "!"; a field whose option is not in Tests is not tested, so the zero
// value tests nothing. ConntrackMatch{State: CTStatesOf(conntrack.StateNew),
// Tests: CTTestState} is "-m conntrack --ctstate NEW"; a zero Proto, port
// range or Status in Tests is the option given as 0 ("--ctproto 0",
// "--ctstatus NONE").
type ConntrackMatch struct {
	State                    CTStates
	Proto                    inet.Proto
	OrigSrc, OrigDst         netip.Prefix
	ReplSrc, ReplDst         netip.Prefix
	OrigSrcPort, OrigDstPort PortRange
	ReplSrcPort, ReplDstPort PortRange
	Status                   conntrack.Status
	ExpireLo, ExpireHi       uint32
	Direction                string // "ORIGINAL" or "REPLY"
	Tests, Inverted          ConntrackTests
}

// ConntrackTests is a set of the conntrack match's options, a bit each.
type ConntrackTests uint16

// The conntrack options, in the order iptables prints them.
const (
	CTTestState       ConntrackTests = 1 << iota // --ctstate: State
	CTTestProto                                  // --ctproto: Proto
	CTTestOrigSrc                                // --ctorigsrc: OrigSrc
	CTTestOrigDst                                // --ctorigdst: OrigDst
	CTTestReplSrc                                // --ctreplsrc: ReplSrc
	CTTestReplDst                                // --ctrepldst: ReplDst
	CTTestOrigSrcPort                            // --ctorigsrcport: OrigSrcPort
	CTTestOrigDstPort                            // --ctorigdstport: OrigDstPort
	CTTestReplSrcPort                            // --ctreplsrcport: ReplSrcPort
	CTTestReplDstPort                            // --ctrepldstport: ReplDstPort
	CTTestStatus                                 // --ctstatus: Status
	CTTestExpire                                 // --ctexpire: ExpireLo, ExpireHi
	CTTestDirection                              // --ctdir: Direction
)

var ctOptOrder = []struct {
	name string
	flag ConntrackTests
}{{"ctstate", CTTestState}, {"ctproto", CTTestProto}, {"ctorigsrc", CTTestOrigSrc}, {"ctorigdst", CTTestOrigDst},
	{"ctreplsrc", CTTestReplSrc}, {"ctrepldst", CTTestReplDst}, {"ctorigsrcport", CTTestOrigSrcPort},
	{"ctorigdstport", CTTestOrigDstPort}, {"ctreplsrcport", CTTestReplSrcPort}, {"ctrepldstport", CTTestReplDstPort},
	{"ctstatus", CTTestStatus}, {"ctexpire", CTTestExpire}, {"ctdir", CTTestDirection}}

// StateMatch is "-m state --state".
type StateMatch struct {
	State  CTStates
	Invert bool
}

// ConnmarkMatch is "-m connmark --mark VALUE[/MASK]": the connection's
// mark, masked, equals Value.
type ConnmarkMatch struct {
	Value, Mask uint32
	Invert      bool
}

func init() {
	var opts []option
	for _, o := range ctOptOrder {
		opts = append(opts, option{name: o.name, args: 1, invert: o.name != "ctdir"})
	}
	registerMatch(&module{name: "conntrack", opts: opts,
		newBuilder: func(*ruleCtx) builder { return &ConntrackMatch{} }})
	registerMatch(&module{name: "state", opts: []option{{name: "state", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &StateMatch{} }})
	registerMatch(&module{name: "connmark", opts: []option{{name: "mark", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &connmarkBuilder{} }})
}

// Module implements Match.
func (m *ConntrackMatch) Module() string { return "conntrack" }

// Module implements Match.
func (m *StateMatch) Module() string { return "state" }

// Module implements Match.
func (m *ConnmarkMatch) Module() string { return "connmark" }

func (m *ConntrackMatch) set(c *ruleCtx, opt string, inv bool, args []string) error {
	v := args[0]
	var flag ConntrackTests
	for _, o := range ctOptOrder {
		if o.name == opt {
			flag = o.flag
		}
	}
	m.Tests |= flag
	if inv {
		m.Inverted |= flag
	}
	bad := func(want string) error { return badValue("conntrack", "--"+opt, v, want) }
	var ok bool
	switch opt {
	case "ctstate":
		if m.State, ok = parseCTState(v, true); !ok {
			return bad("states INVALID, NEW, RELATED, ESTABLISHED, UNTRACKED, SNAT, DNAT")
		}
	case "ctproto":
		// iptables 1.8.9 takes protocol 0 ("all", "0"): it prints
		// "--ctproto 0" and the rule matches no connection.
		p, ok := inet.ParseProto(strings.ToLower(v))
		if !ok {
			return bad("a protocol name or number")
		}
		if p == 0 && m.Inverted&CTTestStatus != 0 {
			// libxt_conntrack 1.8.9 tests the bit of IPT_INV_PROTO in
			// the match's own inversion flags, where it is --ctstatus's:
			// protocol 0 after "! --ctstatus" is refused, whatever the
			// "!" on --ctproto (docs/kernel-notes.md).
			return fmt.Errorf("%w: conntrack: rule would never match protocol", ErrBadValue)
		}
		m.Proto = p
	case "ctorigsrc", "ctorigdst", "ctreplsrc", "ctrepldst":
		// A prefix length here is a strtoul number ("/033" is 27, "/0x10"
		// 16); for IPv4, iptables 1.8.9 takes any 32-bit length and treats
		// one over 32 as 32, for IPv6 it refuses one over 128.
		if as, ms, ok := strings.Cut(v, "/"); ok && ms != "" && !strings.ContainsAny(ms, ".:") {
			n, ok := parseCUint(ms, 0xffffffff)
			if !ok || c.family == IPv6 && n > 128 {
				return bad("ADDRESS[/MASK]")
			}
			if c.family == IPv4 {
				n = min(n, 32)
			}
			v = as + "/" + strconv.FormatUint(n, 10)
		}
		pfx, mask, err := parseAddrMask(c.family, v)
		if err != nil {
			return err
		}
		if mask.IsValid() {
			return fmt.Errorf("%w: conntrack --%s with a non-contiguous mask %q", ErrNotModelled, opt, v)
		}
		// The match keeps the address as given, host bits included, and
		// iptables prints it so ("--ctorigdst 10.1.2.3/8"); the test masks
		// both sides, as netip.Prefix.Contains does.
		as, _, _ := strings.Cut(v, "/")
		if a, err := parseHostAddr(c.family, as, false); err == nil && a.BitLen() == pfx.Addr().BitLen() {
			pfx = netip.PrefixFrom(a, pfx.Bits())
		}
		switch opt {
		case "ctorigsrc":
			m.OrigSrc = pfx
		case "ctorigdst":
			m.OrigDst = pfx
		case "ctreplsrc":
			m.ReplSrc = pfx
		default:
			m.ReplDst = pfx
		}
	case "ctorigsrcport", "ctorigdstport", "ctreplsrcport", "ctrepldstport":
		r, ok := parseCTPortRange(v)
		if !ok {
			return bad("a port, a service name or a range PORT:PORT")
		}
		switch opt {
		case "ctorigsrcport":
			m.OrigSrcPort = r
		case "ctorigdstport":
			m.OrigDstPort = r
		case "ctreplsrcport":
			m.ReplSrcPort = r
		default:
			m.ReplDstPort = r
		}
	case "ctstatus":
		for _, part := range strings.Split(v, ",") {
			if isNamePrefix(part, "NONE") {
				continue
			}
			found := false
			for _, n := range ctStatusNames {
				if isNamePrefix(part, n.name) {
					m.Status |= n.s
					found = true
					break
				}
			}
			if !found {
				return bad("statuses NONE, EXPECTED, SEEN_REPLY, ASSURED, CONFIRMED")
			}
		}
	case "ctexpire":
		// A uint32 range as strtoul reads each end; an empty end is 0 or
		// the maximum, and a reversed range is kept (it never matches).
		lo, hi, isRange := strings.Cut(v, ":")
		a, b := uint64(0), uint64(0xffffffff)
		ok1, ok2 := lo == "" && isRange, hi == ""
		if lo != "" {
			a, ok1 = parseCUint(lo, 0xffffffff)
		}
		if !isRange {
			b, ok2 = a, true
		} else if hi != "" {
			b, ok2 = parseCUint(hi, 0xffffffff)
		}
		if !ok1 || !ok2 {
			return bad("seconds or a range MIN:MAX")
		}
		m.ExpireLo, m.ExpireHi = uint32(a), uint32(b)
	case "ctdir":
		switch {
		case strings.EqualFold(v, "ORIGINAL"):
			m.Direction = "ORIGINAL"
		case strings.EqualFold(v, "REPLY"):
			m.Direction = "REPLY"
		default:
			return bad("ORIGINAL or REPLY")
		}
	}
	return nil
}

// parseCTPortRange parses the --ct*port arguments as iptables 1.8.9 does:
// "P", "P:Q", ":Q", "P:" or ":", each port a decimal number (a larger one
// keeps its low 16 bits: 65536 is 0) or a service name; a reversed range
// is kept (it never matches).
func parseCTPortRange(v string) (PortRange, bool) {
	port := func(s string) (uint16, bool) {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			n, err := strconv.ParseUint(s, 10, 32)
			return uint16(n), err == nil
		}
		return serviceAnyProto(s)
	}
	lo, hi, isRange := strings.Cut(v, ":")
	if !isRange {
		p, ok := port(v)
		return PortRange{p, p}, ok
	}
	r := PortRange{0, 65535}
	var ok bool
	if lo != "" {
		if r.Lo, ok = port(lo); !ok {
			return r, false
		}
	}
	if hi != "" {
		if r.Hi, ok = port(hi); !ok {
			return r, false
		}
	}
	return r, true
}

func (m *ConntrackMatch) done(*ruleCtx) (any, error) {
	if m.Tests == 0 {
		return nil, fmt.Errorf("%w: at least one option is required", ErrMissingArgument)
	}
	return m, nil
}

func appendCTAddr(b []byte, p netip.Prefix) []byte {
	b = p.Addr().AppendTo(b)
	if p.Bits() != p.Addr().BitLen() {
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(p.Bits()), 10)
	}
	return b
}

// appendCTPorts prints a --ct*port range as libxt_conntrack does: the low
// port alone when the range is one port or its high end is 0 ("22:0"
// prints "22" though it matches no port; docs/kernel-notes.md).
func appendCTPorts(b []byte, r PortRange) []byte {
	b = strconv.AppendUint(b, uint64(r.Lo), 10)
	if r.Hi != 0 && r.Hi != r.Lo {
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(r.Hi), 10)
	}
	return b
}

// appendOpts writes the options in iptables' order with prefix "--" for
// save or "" for -L.
func (m *ConntrackMatch) appendOpts(b []byte, prefix string) []byte {
	for _, o := range ctOptOrder {
		if m.Tests&o.flag == 0 {
			continue
		}
		if m.Inverted&o.flag != 0 {
			b = append(b, " !"...)
		}
		b = append(b, ' ')
		b = append(b, prefix...)
		b = append(b, o.name...)
		b = append(b, ' ')
		switch o.flag {
		case CTTestState:
			b = append(b, m.State.String()...)
		case CTTestProto:
			b = strconv.AppendUint(b, uint64(m.Proto), 10)
		case CTTestOrigSrc:
			b = appendCTAddr(b, m.OrigSrc)
		case CTTestOrigDst:
			b = appendCTAddr(b, m.OrigDst)
		case CTTestReplSrc:
			b = appendCTAddr(b, m.ReplSrc)
		case CTTestReplDst:
			b = appendCTAddr(b, m.ReplDst)
		case CTTestOrigSrcPort:
			b = appendCTPorts(b, m.OrigSrcPort)
		case CTTestOrigDstPort:
			b = appendCTPorts(b, m.OrigDstPort)
		case CTTestReplSrcPort:
			b = appendCTPorts(b, m.ReplSrcPort)
		case CTTestReplDstPort:
			b = appendCTPorts(b, m.ReplDstPort)
		case CTTestStatus:
			var parts []string
			for _, n := range ctStatusNames {
				if m.Status&n.s != 0 {
					parts = append(parts, n.name)
				}
			}
			if len(parts) == 0 {
				parts = []string{"NONE"}
			}
			b = append(b, strings.Join(parts, ",")...)
		case CTTestExpire:
			b = strconv.AppendUint(b, uint64(m.ExpireLo), 10)
			if m.ExpireHi != m.ExpireLo {
				b = append(b, ':')
				b = strconv.AppendUint(b, uint64(m.ExpireHi), 10)
			}
		case CTTestDirection:
			b = append(b, m.Direction...)
		}
	}
	return b
}

func (m *ConntrackMatch) appendSave(b []byte) []byte         { return m.appendOpts(b, "--") }
func (m *ConntrackMatch) appendList(b []byte, _ bool) []byte { return m.appendOpts(b, "") }

func (m *ConntrackMatch) test(flag ConntrackTests, ok bool) bool {
	return m.Tests&flag == 0 || ok != (m.Inverted&flag != 0)
}

// match follows the kernel's conntrack_mt: the state test works for every
// packet; the other tests need a connection.
// ctDstPort is the destination "port" xt_conntrack reads from a tuple:
// its dst.u.all, which for ICMP and ICMPv6 holds the type and code
// (type<<8 | code; an echo request is 2048). The source side holds the
// echo id, which Tuple.SrcPort already is (docs/kernel-notes.md).
func ctDstPort(t *conntrack.Tuple) uint16 {
	if t.IsICMP() {
		return uint16(t.ICMPType)<<8 | uint16(t.ICMPCode)
	}
	return t.DstPort
}

func (m *ConntrackMatch) match(c *evalCtx) bool {
	ct := c.conn()
	if !m.test(CTTestState, ctStateOf(ct)&m.State != 0) {
		return false
	}
	if !ct.tracked {
		// The kernel's conntrack_mt stops here for a packet without a
		// connection: it matches when --ctstate was given (and passed),
		// whatever the other options say.
		return m.Tests&CTTestState != 0
	}
	if !m.test(CTTestDirection, (m.Direction == "REPLY") == ct.reply) ||
		!m.test(CTTestStatus, ct.status&m.Status != 0) {
		return false
	}
	if m.Tests&^(CTTestState|CTTestDirection|CTTestStatus) == 0 {
		return true // kube-proxy's --ctstate rules end here
	}
	e := c.walk.cur.Entry
	var orig, repl *conntrack.Tuple
	var zero conntrack.Tuple
	if !ct.tmpl {
		o, r := e.Original(), e.Reply()
		orig, repl = &o, &r
	} else {
		// A CT template's tuples are all zero (0.0.0.0/0 and port 0
		// match), and it has no time left.
		zero.Src = netip.IPv4Unspecified()
		if c.pkt.Family == IPv6 {
			zero.Src = netip.IPv6Unspecified()
		}
		zero.Dst = zero.Src
		orig, repl = &zero, &zero
	}
	if !m.test(CTTestProto, orig.Proto == m.Proto) ||
		!m.test(CTTestOrigSrc, m.OrigSrc.Contains(orig.Src)) ||
		!m.test(CTTestOrigDst, m.OrigDst.Contains(orig.Dst)) ||
		!m.test(CTTestReplSrc, m.ReplSrc.Contains(repl.Src)) ||
		!m.test(CTTestReplDst, m.ReplDst.Contains(repl.Dst)) ||
		!m.test(CTTestOrigSrcPort, m.OrigSrcPort.contains(orig.SrcPort)) ||
		!m.test(CTTestOrigDstPort, m.OrigDstPort.contains(ctDstPort(orig))) ||
		!m.test(CTTestReplSrcPort, m.ReplSrcPort.contains(repl.SrcPort)) ||
		!m.test(CTTestReplDstPort, m.ReplDstPort.contains(ctDstPort(repl))) {
		return false
	}
	if m.Tests&CTTestExpire != 0 {
		left := uint32(0)
		if !ct.tmpl {
			left = uint32(e.Timeout(c.host.clock.Now()) / time.Second)
		}
		return m.test(CTTestExpire, left >= m.ExpireLo && left <= m.ExpireHi)
	}
	return true
}

// ctStateOf is the state bit set of the packet, NAT bits included.
func ctStateOf(ct *ctInfo) CTStates {
	switch {
	case ct.untracked:
		return stateBit(conntrack.StateUntracked)
	case !ct.tracked:
		return stateBit(conntrack.StateInvalid)
	}
	return ct.state
}

func (m *StateMatch) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	st, ok := parseCTState(args[0], false)
	if !ok {
		return badValue("state", "--state", args[0], "states INVALID, NEW, RELATED, ESTABLISHED, UNTRACKED")
	}
	m.State, m.Invert = st, inv
	return nil
}

func (m *StateMatch) done(*ruleCtx) (any, error) {
	if m.State == 0 {
		return nil, fmt.Errorf("%w: option \"--state\" must be specified", ErrMissingArgument)
	}
	return m, nil
}

func (m *StateMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --state "...)
	return append(b, m.State.String()...)
}

func (m *StateMatch) appendList(b []byte, _ bool) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " state "...)
	return append(b, m.State.String()...)
}

func (m *StateMatch) match(c *evalCtx) bool {
	return (ctStateOf(c.conn())&m.State&^ctNATStates != 0) != m.Invert
}

func appendMarkMask(b []byte, v, mask uint32) []byte {
	b = append(b, "0x"...)
	b = strconv.AppendUint(b, uint64(v), 16)
	if mask != 0xffffffff {
		b = append(b, "/0x"...)
		b = strconv.AppendUint(b, uint64(mask), 16)
	}
	return b
}

// connmarkBuilder parses -m connmark, whose --mark is mandatory.
type connmarkBuilder struct {
	m     ConnmarkMatch
	given bool
}

func (b *connmarkBuilder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	v, mask, ok := parseMarkArg(args[0])
	if !ok {
		return badValue("connmark", "--mark", args[0], "VALUE[/MASK]")
	}
	b.m, b.given = ConnmarkMatch{Value: v, Mask: mask, Invert: inv}, true
	return nil
}

func (b *connmarkBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("connmark", "--mark")
	}
	m := b.m
	return &m, nil
}

func (m *ConnmarkMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --mark "...)
	return appendMarkMask(b, m.Value, m.Mask)
}

// appendList reproduces iptables' "connmark match  0x1" (two spaces when
// not inverted).
func (m *ConnmarkMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " connmark match "...)
	if m.Invert {
		b = append(b, '!')
	}
	b = append(b, ' ')
	return appendMarkMask(b, m.Value, m.Mask)
}

func (m *ConnmarkMatch) match(c *evalCtx) bool {
	if !c.conn().tracked {
		return false
	}
	return (c.ct.mark&m.Mask == m.Value) != m.Invert
}
