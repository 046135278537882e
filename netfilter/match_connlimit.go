package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/conntrack"
)

// ConnlimitMatch is "-m connlimit": it counts the connections this rule
// has seen from the packet's source address (or to its destination
// address with --connlimit-daddr), masked to Mask bits, and matches when
// the count, the packet's own connection included, is above Limit
// (--connlimit-above) or at most Limit (--connlimit-upto).
//
// As in the kernel (nf_conncount), each rule keeps its own list of
// connections; a connection leaves it once conntrack no longer has it or
// it is a closed TCP connection (TIME_WAIT, CLOSE).
type ConnlimitMatch struct {
	Limit uint32
	// Upto is --connlimit-upto (match when count ≤ Limit); otherwise
	// --connlimit-above (count > Limit).
	Upto bool
	Mask uint8 // prefix length; 32 or 128 by default
	Dst  bool  // --connlimit-daddr
}

func init() {
	registerMatch(&module{name: "connlimit",
		opts: []option{
			{name: "connlimit-upto", args: 1, invert: true},
			{name: "connlimit-above", args: 1, invert: true},
			{name: "connlimit-mask", args: 1},
			{name: "connlimit-saddr"},
			{name: "connlimit-daddr"},
		},
		newBuilder: func(c *ruleCtx) builder {
			b := &connlimitBuilder{m: ConnlimitMatch{Mask: 32}}
			if c.family == IPv6 {
				b.m.Mask = 128
			}
			return b
		}})
}

type connlimitBuilder struct {
	m        ConnlimitMatch
	given    string
	addrSide string
}

func (b *connlimitBuilder) set(c *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "connlimit-upto", "connlimit-above":
		if b.given != "" {
			return fmt.Errorf("%w: connlimit: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, b.given, opt)
		}
		n, ok := parseCUint(args[0], 0xffffffff)
		if !ok {
			return badValue("connlimit", "--"+opt, args[0], "a number of connections 0-4294967295")
		}
		b.given, b.m.Limit = opt, uint32(n)
		b.m.Upto = (opt == "connlimit-upto") != inv
	case "connlimit-mask":
		// A prefix length as a C number (white space, "+", "0x10",
		// "010"), else a mask in an address's form (inet_aton's for IPv4:
		// "1.5", "33" and "256" are masks, which iptables prints as 32
		// when they are not contiguous; docs/kernel-notes.md).
		full := uint64(32)
		if c.family == IPv6 {
			full = 128
		}
		t := strings.TrimPrefix(strings.TrimLeft(args[0], " \t\n\v\f\r"), "+")
		if n, ok := parseCUint(t, full); ok {
			b.m.Mask = uint8(n)
			break
		}
		var m netip.Addr
		ok := false
		if c.family == IPv4 {
			m, ok = parseIPv4Aton(args[0])
		} else if a, err := netip.ParseAddr(args[0]); err == nil && a.Is6() && a.Zone() == "" {
			m, ok = a, true
		}
		if !ok {
			return badValue("connlimit", "--connlimit-mask", args[0], fmt.Sprintf("a prefix length 0-%d or a mask", full))
		}
		ones, contiguous := maskOnes(m)
		if !contiguous {
			if c.family == IPv6 {
				return fmt.Errorf("%w: connlimit --connlimit-mask %s: a non-contiguous mask", ErrNotModelled, args[0])
			}
			ones = 32
		}
		b.m.Mask = uint8(ones)
	case "connlimit-saddr", "connlimit-daddr":
		if b.addrSide != "" && b.addrSide != opt {
			return fmt.Errorf("%w: connlimit: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, b.addrSide, opt)
		}
		b.addrSide = opt
		b.m.Dst = opt == "connlimit-daddr"
	}
	return nil
}

func (b *connlimitBuilder) done(*ruleCtx) (any, error) {
	if b.given == "" {
		return nil, fmt.Errorf("%w: connlimit: you must specify \"--connlimit-above\" or \"--connlimit-upto\"", ErrMissingArgument)
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *ConnlimitMatch) Module() string { return "connlimit" }

func (m *ConnlimitMatch) appendSave(b []byte) []byte {
	if m.Upto {
		b = append(b, " --connlimit-upto "...)
	} else {
		b = append(b, " --connlimit-above "...)
	}
	b = strconv.AppendUint(b, uint64(m.Limit), 10)
	b = append(b, " --connlimit-mask "...)
	b = strconv.AppendUint(b, uint64(m.Mask), 10)
	if m.Dst {
		return append(b, " --connlimit-daddr"...)
	}
	return append(b, " --connlimit-saddr"...)
}

func (m *ConnlimitMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " #conn "...)
	if m.Dst {
		b = append(b, "dst/"...)
	} else {
		b = append(b, "src/"...)
	}
	b = strconv.AppendUint(b, uint64(m.Mask), 10)
	if m.Upto {
		b = append(b, " <= "...)
	} else {
		b = append(b, " > "...)
	}
	return strconv.AppendUint(b, uint64(m.Limit), 10)
}

// connlimitConn is one connection of a rule's list: its original tuple
// and the jiffy it was added in.
type connlimitConn struct {
	tuple conntrack.Tuple
	added int64
}

// connlimitState is a rule's connection lists, by masked address.
type connlimitState struct {
	lists map[netip.Addr][]connlimitConn
}

func (m *ConnlimitMatch) newState() any {
	return &connlimitState{lists: map[netip.Addr][]connlimitConn{}}
}

// match follows xt_connlimit's connlimit_mt and nf_conncount's count.
func (m *ConnlimitMatch) match(c *evalCtx) bool {
	st, _ := c.rule.extra.ext[c.matchIdx].(*connlimitState)
	if st == nil {
		return false
	}
	p := c.pkt
	a := p.Src
	if m.Dst {
		a = p.Dst
	}
	key := netip.PrefixFrom(a, int(m.Mask)).Masked().Addr()
	var tuple conntrack.Tuple
	if e := c.walk.cur.Entry; e != nil {
		tuple = e.Original()
	} else {
		tuple = packetTuple(p)
	}
	now := c.host.jiffies()
	ct := c.host.ct
	list := st.lists[key]
	kept := list[:0]
	if c.host.explaining {
		kept = make([]connlimitConn, 0, len(list)+1)
	}
	found := false
	for _, x := range list {
		if x.tuple == tuple {
			found = true
			kept = append(kept, x)
			continue
		}
		e, _, ok := ct.Lookup(x.tuple)
		switch {
		case !ok && now-x.added <= 1:
			// Added a moment ago and not confirmed yet: nf_conncount keeps
			// it for the jiffy it may take to be confirmed.
			kept = append(kept, x)
		case !ok:
		case e.Original().Proto == inet.TCP && (e.TCPState == conntrack.TCPTimeWait || e.TCPState == conntrack.TCPClose):
		default:
			kept = append(kept, x)
		}
	}
	if !found {
		kept = append(kept, connlimitConn{tuple, now})
	}
	n := uint32(len(kept))
	if !c.host.explaining {
		if len(kept) == 0 {
			delete(st.lists, key)
		} else {
			st.lists[key] = kept
		}
	}
	return (n > m.Limit) != m.Upto
}
