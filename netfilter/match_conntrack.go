package netfilter

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
)

// CTState is a set of connection-tracking states as -m conntrack --ctstate
// and -m state --state test them.
type CTState uint16

// Connection-tracking states. SNAT and DNAT are set when the connection's
// addresses are translated in that direction.
const (
	CTInvalid CTState = 1 << iota
	CTNew
	CTRelated
	CTEstablished
	CTUntracked
	CTSNAT
	CTDNAT
)

var ctStateNames = []struct {
	s    CTState
	name string
}{{CTInvalid, "INVALID"}, {CTNew, "NEW"}, {CTRelated, "RELATED"}, {CTEstablished, "ESTABLISHED"},
	{CTUntracked, "UNTRACKED"}, {CTSNAT, "SNAT"}, {CTDNAT, "DNAT"}}

// String returns the states comma-separated in iptables' order.
func (s CTState) String() string {
	var parts []string
	for _, n := range ctStateNames {
		if s&n.s != 0 {
			parts = append(parts, n.name)
		}
	}
	return strings.Join(parts, ",")
}

func parseCTState(s string, withNAT bool) (CTState, bool) {
	var st CTState
	for _, part := range strings.Split(s, ",") {
		found := false
		for _, n := range ctStateNames {
			if n.name == part && (withNAT || n.s < CTSNAT) {
				st |= n.s
				found = true
			}
		}
		if !found {
			return 0, false
		}
	}
	return st, true
}

// CTStatus is the kernel's connection status bits (IPS_*) that
// --ctstatus tests.
type CTStatus uint32

// Status bits --ctstatus names.
const (
	CTStatusExpected  CTStatus = 1 << 0
	CTStatusSeenReply CTStatus = 1 << 1
	CTStatusAssured   CTStatus = 1 << 2
	CTStatusConfirmed CTStatus = 1 << 3
)

var ctStatusNames = []struct {
	s    CTStatus
	name string
}{{CTStatusExpected, "EXPECTED"}, {CTStatusSeenReply, "SEEN_REPLY"}, {CTStatusAssured, "ASSURED"}, {CTStatusConfirmed, "CONFIRMED"}}

// ctInfo is what the conntrack matches read about the packet's connection;
// the host fills it at the conntrack hook.
// The connection's tuples and timeout are read from the entry itself by
// the few rules that test them (see ConntrackMatch.match).
type ctInfo struct {
	tracked   bool // the packet has a connection (ct != NULL)
	untracked bool // NOTRACK / CT --notrack
	tmpl      bool // a CT template (CT --zone...): zero tuples, no timeout
	state     CTState
	status    CTStatus
	reply     bool // the packet travels in the reply direction
	mark      uint32
}

// ConntrackMatch is "-m conntrack". Fields left zero are not tested.
type ConntrackMatch struct {
	State                    CTState
	Proto                    uint8
	OrigSrc, OrigDst         netip.Prefix
	ReplSrc, ReplDst         netip.Prefix
	OrigSrcPort, OrigDstPort PortRange
	ReplSrcPort, ReplDstPort PortRange
	Status                   CTStatus
	ExpireLo, ExpireHi       uint32
	Direction                string // "ORIGINAL" or "REPLY"
	flags, inv               uint16 // which tests are set and inverted
}

const (
	ctfState uint16 = 1 << iota
	ctfProto
	ctfOrigSrc
	ctfOrigDst
	ctfReplSrc
	ctfReplDst
	ctfOrigSrcPort
	ctfOrigDstPort
	ctfReplSrcPort
	ctfReplDstPort
	ctfStatus
	ctfExpire
	ctfDir
)

var ctOptOrder = []struct {
	name string
	flag uint16
}{{"ctstate", ctfState}, {"ctproto", ctfProto}, {"ctorigsrc", ctfOrigSrc}, {"ctorigdst", ctfOrigDst},
	{"ctreplsrc", ctfReplSrc}, {"ctrepldst", ctfReplDst}, {"ctorigsrcport", ctfOrigSrcPort},
	{"ctorigdstport", ctfOrigDstPort}, {"ctreplsrcport", ctfReplSrcPort}, {"ctrepldstport", ctfReplDstPort},
	{"ctstatus", ctfStatus}, {"ctexpire", ctfExpire}, {"ctdir", ctfDir}}

// StateMatch is "-m state --state".
type StateMatch struct {
	State  CTState
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
		newBuilder: func(*ruleCtx) builder { return &ConnmarkMatch{} }})
}

// Module implements Match.
func (m *ConntrackMatch) Module() string { return "conntrack" }

// Module implements Match.
func (m *StateMatch) Module() string { return "state" }

// Module implements Match.
func (m *ConnmarkMatch) Module() string { return "connmark" }

func (m *ConntrackMatch) set(c *ruleCtx, opt string, inv bool, args []string) error {
	v := args[0]
	var flag uint16
	for _, o := range ctOptOrder {
		if o.name == opt {
			flag = o.flag
		}
	}
	m.flags |= flag
	if inv {
		m.inv |= flag
	}
	bad := func(want string) error { return badValue("conntrack", "--"+opt, v, want) }
	var ok bool
	switch opt {
	case "ctstate":
		if m.State, ok = parseCTState(v, true); !ok {
			return bad("states INVALID, NEW, RELATED, ESTABLISHED, UNTRACKED, SNAT, DNAT")
		}
	case "ctproto":
		p, ok := parseProto(strings.ToLower(v))
		if !ok || p == 0 {
			return bad("a protocol name or number")
		}
		m.Proto = p
	case "ctorigsrc", "ctorigdst", "ctreplsrc", "ctrepldst":
		pfx, err := parseAddrMask(c.family, v)
		if err != nil {
			return err
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
		r, ok := parseNumRange(v)
		if !ok {
			return bad("a port or a range PORT:PORT")
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
			if part == "NONE" {
				continue
			}
			found := false
			for _, n := range ctStatusNames {
				if n.name == part {
					m.Status |= n.s
					found = true
				}
			}
			if !found {
				return bad("statuses NONE, EXPECTED, SEEN_REPLY, ASSURED, CONFIRMED")
			}
		}
	case "ctexpire":
		lo, hi, isRange := strings.Cut(v, ":")
		a, err1 := strconv.ParseUint(lo, 10, 32)
		b := a
		var err2 error
		if isRange {
			b, err2 = strconv.ParseUint(hi, 10, 32)
		}
		if err1 != nil || err2 != nil || b < a {
			return bad("seconds or a range MIN:MAX")
		}
		m.ExpireLo, m.ExpireHi = uint32(a), uint32(b)
	case "ctdir":
		if v != "ORIGINAL" && v != "REPLY" {
			return bad("ORIGINAL or REPLY")
		}
		m.Direction = v
	}
	return nil
}

// parseNumRange parses the conntrack match's "P" or "P:Q". iptables 1.8.9
// reads each port as the udp match does (a decimal number truncated to 16
// bits, or a service name of any protocol); -L prints numbers.
func parseNumRange(v string) (PortRange, bool) {
	lo, hi, isRange := strings.Cut(v, ":")
	a, ok := parsePort(lo, "udp")
	if !ok {
		return PortRange{}, false
	}
	b := a
	if isRange {
		// iptables-nft also takes a reversed range (saved as written,
		// matching nothing); packetwalk refuses it.
		if b, ok = parsePort(hi, "udp"); !ok || b < a {
			return PortRange{}, false
		}
	}
	return PortRange{a, b}, true
}

func (m *ConntrackMatch) done(*ruleCtx) (any, error) {
	if m.flags == 0 {
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

// appendOpts writes the options in iptables' order with prefix "--" for
// save or "" for -L.
func (m *ConntrackMatch) appendOpts(b []byte, prefix string) []byte {
	for _, o := range ctOptOrder {
		if m.flags&o.flag == 0 {
			continue
		}
		if m.inv&o.flag != 0 {
			b = append(b, " !"...)
		}
		b = append(b, ' ')
		b = append(b, prefix...)
		b = append(b, o.name...)
		b = append(b, ' ')
		switch o.flag {
		case ctfState:
			b = append(b, m.State.String()...)
		case ctfProto:
			b = strconv.AppendUint(b, uint64(m.Proto), 10)
		case ctfOrigSrc:
			b = appendCTAddr(b, m.OrigSrc)
		case ctfOrigDst:
			b = appendCTAddr(b, m.OrigDst)
		case ctfReplSrc:
			b = appendCTAddr(b, m.ReplSrc)
		case ctfReplDst:
			b = appendCTAddr(b, m.ReplDst)
		case ctfOrigSrcPort:
			b = m.OrigSrcPort.appendSave(b)
		case ctfOrigDstPort:
			b = m.OrigDstPort.appendSave(b)
		case ctfReplSrcPort:
			b = m.ReplSrcPort.appendSave(b)
		case ctfReplDstPort:
			b = m.ReplDstPort.appendSave(b)
		case ctfStatus:
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
		case ctfExpire:
			b = strconv.AppendUint(b, uint64(m.ExpireLo), 10)
			if m.ExpireHi != m.ExpireLo {
				b = append(b, ':')
				b = strconv.AppendUint(b, uint64(m.ExpireHi), 10)
			}
		case ctfDir:
			b = append(b, m.Direction...)
		}
	}
	return b
}

func (m *ConntrackMatch) appendSave(b []byte) []byte         { return m.appendOpts(b, "--") }
func (m *ConntrackMatch) appendList(b []byte, _ bool) []byte { return m.appendOpts(b, "") }

func (m *ConntrackMatch) test(flag uint16, ok bool) bool {
	return m.flags&flag == 0 || ok != (m.inv&flag != 0)
}

// match follows the kernel's conntrack_mt: the state test works for every
// packet; the other tests need a connection.
func (m *ConntrackMatch) match(c *evalCtx) bool {
	ct := c.conn()
	if !m.test(ctfState, ctStateOf(ct)&m.State != 0) {
		return false
	}
	if !ct.tracked {
		return m.flags == ctfState
	}
	if !m.test(ctfDir, (m.Direction == "REPLY") == ct.reply) ||
		!m.test(ctfStatus, ct.status&m.Status != 0) {
		return false
	}
	if m.flags&^(ctfState|ctfDir|ctfStatus) == 0 {
		return true // kube-proxy's --ctstate rules end here
	}
	e := c.walk.cur.Entry
	var orig, repl *conntrack.Tuple
	var zero conntrack.Tuple
	if !ct.tmpl {
		orig, repl = &e.Original, &e.Reply
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
	if !m.test(ctfProto, orig.Proto == m.Proto) ||
		!m.test(ctfOrigSrc, m.OrigSrc.Contains(orig.Src)) ||
		!m.test(ctfOrigDst, m.OrigDst.Contains(orig.Dst)) ||
		!m.test(ctfReplSrc, m.ReplSrc.Contains(repl.Src)) ||
		!m.test(ctfReplDst, m.ReplDst.Contains(repl.Dst)) ||
		!m.test(ctfOrigSrcPort, m.OrigSrcPort.contains(orig.SrcPort)) ||
		!m.test(ctfOrigDstPort, m.OrigDstPort.contains(orig.DstPort)) ||
		!m.test(ctfReplSrcPort, m.ReplSrcPort.contains(repl.SrcPort)) ||
		!m.test(ctfReplDstPort, m.ReplDstPort.contains(repl.DstPort)) {
		return false
	}
	if m.flags&ctfExpire != 0 {
		left := uint32(0)
		if !ct.tmpl {
			left = uint32(e.Timeout(c.host.clock.Now()) / time.Second)
		}
		return m.test(ctfExpire, left >= m.ExpireLo && left <= m.ExpireHi)
	}
	return true
}

// ctStateOf is the state bit set of the packet, NAT bits included.
func ctStateOf(ct *ctInfo) CTState {
	switch {
	case ct.untracked:
		return CTUntracked
	case !ct.tracked:
		return CTInvalid
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
	return (ctStateOf(c.conn())&m.State&^(CTSNAT|CTDNAT) != 0) != m.Invert
}

// parseMarkMask parses "VALUE[/MASK]" (decimal, hex or octal, as strtoul).
func parseMarkMask(s string) (v, mask uint32, ok bool) {
	vs, ms, hasMask := strings.Cut(s, "/")
	a, err := strconv.ParseUint(vs, 0, 32)
	if err != nil {
		return 0, 0, false
	}
	mask = 0xffffffff
	if hasMask {
		m, err := strconv.ParseUint(ms, 0, 32)
		if err != nil {
			return 0, 0, false
		}
		mask = uint32(m)
	}
	return uint32(a), mask, true
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

func (m *ConnmarkMatch) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	v, mask, ok := parseMarkMask(args[0])
	if !ok {
		return badValue("connmark", "--mark", args[0], "VALUE[/MASK]")
	}
	m.Value, m.Mask, m.Invert = v, mask, inv
	return nil
}

func (m *ConnmarkMatch) done(*ruleCtx) (any, error) { return m, nil }

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
