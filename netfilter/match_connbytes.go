package netfilter

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/conntrack"
)

// ConnbytesMatch is "-m connbytes [!] --connbytes FROM[:TO]
// --connbytes-dir original|reply|both --connbytes-mode
// packets|bytes|avgpkt": the packet's connection's counters (packets,
// bytes or bytes per packet, of one direction or both), which conntrack
// has already updated for this packet, must lie in FROM..TO. As iptables
// stores it, "!" swaps From and To, and the kernel reads From > To as
// "below To or above From". A packet without a connection never matches.
type ConnbytesMatch struct {
	From, To uint64
	Dir      ConnbytesDir
	Mode     ConnbytesMode
}

// ConnbytesDir is the direction --connbytes-dir counts.
type ConnbytesDir uint8

// Connbytes directions, with the kernel's values.
const (
	ConnbytesOriginal ConnbytesDir = iota
	ConnbytesReply
	ConnbytesBoth
)

// ConnbytesMode is what --connbytes-mode counts.
type ConnbytesMode uint8

// Connbytes modes, with the kernel's values.
const (
	ConnbytesPackets ConnbytesMode = iota
	ConnbytesBytes
	ConnbytesAvgPkt
)

var connbytesDirs = []string{"original", "reply", "both"}
var connbytesModes = []string{"packets", "bytes", "avgpkt"}

type connbytesBuilder struct {
	m                         ConnbytesMatch
	hasCount, hasDir, hasMode bool
}

func init() {
	registerMatch(&module{name: "connbytes",
		opts: []option{
			{name: "connbytes", args: 1, invert: true},
			{name: "connbytes-dir", args: 1},
			{name: "connbytes-mode", args: 1},
		},
		newBuilder: func(*ruleCtx) builder { return &connbytesBuilder{} }})
}

func (b *connbytesBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	s := args[0]
	switch opt {
	case "connbytes":
		lo, hi, isRange := strings.Cut(s, ":")
		from, to := uint64(0), ^uint64(0)
		if lo != "" || !isRange {
			var ok bool
			if from, ok = parseCUint(lo, ^uint64(0)); !ok {
				return badValue("connbytes", "--connbytes", s, "FROM[:TO] with counts 0-18446744073709551615")
			}
		}
		if hi != "" {
			var ok bool
			if to, ok = parseCUint(hi, ^uint64(0)); !ok {
				return badValue("connbytes", "--connbytes", s, "FROM[:TO] with counts 0-18446744073709551615")
			}
		}
		if from > to {
			return badValue("connbytes", "--connbytes", s, fmt.Sprintf("FROM:TO with %d less than %d", from, to))
		}
		if inv {
			from, to = to, from
		}
		b.m.From, b.m.To, b.hasCount = from, to, true
	case "connbytes-dir":
		i := indexOf(connbytesDirs, s)
		if i < 0 {
			return badValue("connbytes", "--connbytes-dir", s, "original, reply or both")
		}
		b.m.Dir, b.hasDir = ConnbytesDir(i), true
	case "connbytes-mode":
		i := indexOf(connbytesModes, s)
		if i < 0 {
			return badValue("connbytes", "--connbytes-mode", s, "packets, bytes or avgpkt")
		}
		b.m.Mode, b.hasMode = ConnbytesMode(i), true
	}
	return nil
}

func (b *connbytesBuilder) done(*ruleCtx) (any, error) {
	switch {
	case !b.hasCount:
		return nil, mustSpecify("connbytes", "--connbytes")
	case !b.hasDir:
		return nil, mustSpecify("connbytes", "--connbytes-dir")
	case !b.hasMode:
		return nil, mustSpecify("connbytes", "--connbytes-mode")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *ConnbytesMatch) Module() string { return "connbytes" }

// appendCount prints the range the way libxt_connbytes does: " !" and
// the bounds swapped back when From > To, then name and a single count
// when the upper bound is unlimited, else FROM:TO.
func (m *ConnbytesMatch) appendCount(b []byte, name string) []byte {
	from, to := m.From, m.To
	if from > to {
		b = append(b, " !"...)
		from, to = to, from
	}
	b = append(b, name...)
	b = strconv.AppendUint(b, from, 10)
	if to != ^uint64(0) {
		b = append(b, ':')
		b = strconv.AppendUint(b, to, 10)
	}
	return b
}

func (m *ConnbytesMatch) appendSave(b []byte) []byte {
	b = m.appendCount(b, " --connbytes ")
	b = append(b, " --connbytes-mode "...)
	b = append(b, connbytesModes[m.Mode%3]...)
	b = append(b, " --connbytes-dir "...)
	return append(b, connbytesDirs[m.Dir%3]...)
}

func (m *ConnbytesMatch) appendList(b []byte, _ bool) []byte {
	b = m.appendCount(b, " connbytes ")
	b = append(b, " connbytes mode "...)
	b = append(b, connbytesModes[m.Mode%3]...)
	b = append(b, " connbytes direction "...)
	return append(b, connbytesDirs[m.Dir%3]...)
}

func (m *ConnbytesMatch) match(c *evalCtx) bool {
	e := c.walk.cur.Entry
	if e == nil {
		return false
	}
	o, r := e.Counters[conntrack.Original], e.Counters[conntrack.Reply]
	var pk, by uint64
	switch m.Dir {
	case ConnbytesOriginal:
		pk, by = o.Packets, o.Bytes
	case ConnbytesReply:
		pk, by = r.Packets, r.Bytes
	default:
		pk, by = o.Packets+r.Packets, o.Bytes+r.Bytes
	}
	var what uint64
	switch m.Mode {
	case ConnbytesPackets:
		what = pk
	case ConnbytesBytes:
		what = by
	default:
		if pk != 0 {
			what = by / pk
		}
	}
	if m.To >= m.From {
		return what >= m.From && what <= m.To
	}
	return what < m.To || what > m.From
}
