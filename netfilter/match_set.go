package netfilter

import (
	"fmt"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/ipset"
)

// SetMatch is "-m set --match-set NAME FLAGS": the packet, read along the
// set's dimensions by FLAGS (src or dst for each), is in set NAME. The set
// is looked up by name in the host's registry when the packet arrives, so
// sets can be changed, swapped or renamed under loaded rules.
type SetMatch struct {
	Name string
	// Dirs holds one entry per flag: true for "src", false for "dst".
	Dirs   []bool
	Invert bool
	// ReturnNomatch makes a nomatch entry count as a match.
	ReturnNomatch bool
	// NoUpdateCounters and NoUpdateSubcounters are "! --update-counters"
	// and "! --update-subcounters".
	NoUpdateCounters, NoUpdateSubcounters bool
	// PacketsOp and BytesOp are --packets-eq/-lt/-gt and --bytes-eq/-lt/-gt
	// ("! --packets-eq" is CounterNE) against Packets and Bytes: the entry
	// that would decide must have such counters (this packet included), or
	// the lookup goes on past it. No effect on a set without counters.
	PacketsOp, BytesOp ipset.CounterOp
	Packets, Bytes     uint64
}

func init() {
	registerMatch(&module{name: "set", opts: []option{
		{name: "match-set", args: 2, invert: true, aliases: []string{"set"}},
		{name: "return-nomatch"},
		{name: "update-counters", invert: true},
		{name: "update-subcounters", invert: true},
		{name: "packets-eq", args: 1, invert: true}, {name: "packets-lt", args: 1}, {name: "packets-gt", args: 1},
		{name: "bytes-eq", args: 1, invert: true}, {name: "bytes-lt", args: 1}, {name: "bytes-gt", args: 1},
	}, newBuilder: func(*ruleCtx) builder { return &SetMatch{} }})
}

// Module implements Match.
func (m *SetMatch) Module() string { return "set" }

func (m *SetMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "match-set":
		if m.Name != "" {
			return fmt.Errorf("%w: --match-set can be specified only once", ErrMultipleFlags)
		}
		if args[0] == "" || len(args[0]) > 31 {
			return badValue("set", "--match-set", args[0], "a set name of 1 to 31 characters")
		}
		m.Name, m.Invert = args[0], inv
		for _, f := range strings.Split(args[1], ",") {
			switch f {
			case "src":
				m.Dirs = append(m.Dirs, true)
			case "dst":
				m.Dirs = append(m.Dirs, false)
			default:
				return badValue("set", "--match-set", args[1], "a comma-separated list of src and dst")
			}
		}
		if len(m.Dirs) > 6 {
			return badValue("set", "--match-set", args[1], "at most 6 dimensions")
		}
	case "return-nomatch":
		m.ReturnNomatch = true
	case "update-counters":
		m.NoUpdateCounters = inv
	case "update-subcounters":
		m.NoUpdateSubcounters = inv
	default:
		return m.setCounter(opt, inv, args[0])
	}
	return nil
}

func (m *SetMatch) done(*ruleCtx) (any, error) {
	if m.Name == "" {
		return nil, fmt.Errorf("%w: you must specify --match-set", ErrMissingArgument)
	}
	return m, nil
}

func (m *SetMatch) flags() string {
	parts := make([]string, len(m.Dirs))
	for i, src := range m.Dirs {
		parts[i] = "dst"
		if src {
			parts[i] = "src"
		}
	}
	return strings.Join(parts, ",")
}

func (m *SetMatch) appendOpts(b []byte, prefix string) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, ' ')
	b = append(b, prefix...)
	b = append(b, "match-set "...)
	b = append(b, m.Name...)
	b = append(b, ' ')
	b = append(b, m.flags()...)
	if m.ReturnNomatch {
		b = append(b, ' ')
		b = append(b, prefix...)
		b = append(b, "return-nomatch"...)
	}
	if m.NoUpdateCounters {
		b = append(b, " ! "...)
		b = append(b, prefix...)
		b = append(b, "update-counters"...)
	}
	if m.NoUpdateSubcounters {
		b = append(b, " ! "...)
		b = append(b, prefix...)
		b = append(b, "update-subcounters"...)
	}
	b = appendCounterCmp(b, prefix, "packets-", m.PacketsOp, m.Packets)
	b = appendCounterCmp(b, prefix, "bytes-", m.BytesOp, m.Bytes)
	return b
}

func (m *SetMatch) appendSave(b []byte) []byte         { return m.appendOpts(b, "--") }
func (m *SetMatch) appendList(b []byte, _ bool) []byte { return m.appendOpts(b, "") }

// key reads the packet along the set's dimensions.
func (m *SetMatch) key(s *ipset.Set, p *Packet) ipset.Key { return setKey(s, m.Dirs, p) }

// setKey reads the packet along a set's dimensions, as the set match and
// the SET target do: addresses for IP and net dimensions, the port (with
// the protocol) or the interface for the second, the first flag's port for
// bitmap:port; dirs holds the src (true) or dst (false) flag of each
// dimension. The key does not depend on the set's type: a list:set passes
// the same flags to members of every type (kernel ip_set_test with the
// list's opt), so each member reads the dimensions it has.
func setKey(_ *ipset.Set, dirs []bool, p *Packet) ipset.Key {
	k := ipset.Key{Dims: len(dirs)}
	dir := func(i int) bool { return i < len(dirs) && dirs[i] }
	k.Proto = p.Proto
	k.PortFirst = portOf(p, dir(0))
	if dir(0) {
		k.Addr = p.Src
	} else {
		k.Addr = p.Dst
	}
	if len(dirs) > 1 {
		k.Port = portOf(p, dir(1))
		if dir(1) {
			k.Iface = p.In
		} else {
			k.Iface = p.Out
		}
	}
	if len(dirs) > 2 {
		if dir(2) {
			k.Addr2 = p.Src
		} else {
			k.Addr2 = p.Dst
		}
	}
	return k
}

// portOf is the port an ipset dimension reads: the source or destination
// port, or for ICMP the type and code.
func portOf(p *Packet, src bool) uint16 {
	switch {
	case p.Proto == inet.ICMP || p.Proto == inet.ICMPv6:
		return ipset.ICMPPort(p.ICMPType, p.ICMPCode)
	case src:
		return p.SrcPort
	}
	return p.DstPort
}

func (m *SetMatch) match(c *evalCtx) bool {
	s := c.host.sets.Get(m.Name)
	if s == nil {
		return m.Invert
	}
	o := ipset.MatchOptions{
		Dims: len(m.Dirs), Len: c.pkt.Length,
		NoUpdate: m.NoUpdateCounters || c.host.explaining, NoUpdateSub: m.NoUpdateSubcounters || c.host.explaining,
		ReturnNomatch: m.ReturnNomatch,
		PacketsOp:     m.PacketsOp, BytesOp: m.BytesOp, Packets: m.Packets, Bytes: m.Bytes,
	}
	return s.Match(m.key(s, c.pkt), c.host.clock.Now(), &o) != m.Invert
}
