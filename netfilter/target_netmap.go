package netfilter

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strings"
)

// NETMAPTarget is "-j NETMAP --to ADDR[/MASK]" (nat table, both
// families): a one-to-one mapping of a whole prefix. In PREROUTING and
// OUTPUT the destination address keeps its host bits and takes the network
// bits of To (a DNAT); in POSTROUTING and INPUT the source address does
// (an SNAT). Ports are kept unless they clash, as with SNAT/DNAT to a
// single address, and the connection is bound as the kernel's
// nf_nat_setup_info binds it: later packets and replies follow the
// binding without crossing nat. The rule ends the nat table.
type NETMAPTarget struct {
	// To is the prefix mapped to, with its host bits clear.
	To netip.Prefix
}

func init() {
	registerTarget(&module{name: "NETMAP", tables: []TableID{NAT},
		opts:       []option{{name: "to", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &netmapTargetBuilder{} }})
}

type netmapTargetBuilder struct {
	t     NETMAPTarget
	given bool
}

func (b *netmapTargetBuilder) set(c *ruleCtx, _ string, _ bool, args []string) error {
	p, err := parseNetmapPrefix(c.family, args[0])
	if err != nil {
		return err
	}
	b.t.To, b.given = p, true
	return nil
}

// parseNetmapPrefix reads ADDR, ADDR/BITS or ADDR/MASK with a contiguous
// mask; the host bits are cleared, as iptables-save shows. iptables also
// takes a mask that is not a prefix (and prints it as /32), whose kernel
// mapping packetwalk does not model: it is refused by name.
func parseNetmapPrefix(f Family, s string) (netip.Prefix, error) {
	as, ms, hasMask := strings.Cut(s, "/")
	// The address is read as a host name would be: inet_aton's forms
	// ("1.2.3", "010.1.1.1", "80") and IPv4-mapped addresses in iptables
	// (docs/kernel-notes.md).
	a, err := parseHostAddr(f, as, false)
	if err != nil {
		return netip.Prefix{}, badValue("NETMAP", "--to", s, "an "+f.String()+" address with an optional /prefix length or mask")
	}
	n := a.BitLen()
	if hasMask {
		// A length is a C number with an optional "+" ("0x10", "010", "+8").
		if v, ok := parseCUint(strings.TrimPrefix(ms, "+"), uint64(a.BitLen())); ok {
			n = int(v)
		} else if m, err := netip.ParseAddr(ms); err == nil && m.BitLen() == a.BitLen() {
			b := m.AsSlice()
			ones := 0
			for _, x := range b {
				ones += bits.OnesCount8(x)
			}
			p, _ := m.Prefix(ones)
			if p.Addr() != m {
				return netip.Prefix{}, fmt.Errorf("%w: NETMAP --to %s: a mask that is not a prefix", ErrNotModelled, s)
			}
			n = ones
		} else {
			return netip.Prefix{}, fmt.Errorf("%w: NETMAP --to %s: a prefix length over %d or an unreadable mask", ErrNotModelled, s, a.BitLen())
		}
	}
	p, _ := a.Prefix(n)
	return p, nil
}

func (b *netmapTargetBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("NETMAP", "--to")
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *NETMAPTarget) Name() string { return "NETMAP" }

func (t *NETMAPTarget) appendSave(b []byte) []byte {
	b = append(b, " --to "...)
	return t.To.AppendTo(b)
}

func (t *NETMAPTarget) appendList(b []byte, _ bool) []byte {
	b = append(b, " to:"...)
	return t.To.AppendTo(b)
}

// mapPrefix returns a with its first bits taken from p.
func mapPrefix(a netip.Addr, p netip.Prefix) netip.Addr {
	n := p.Bits()
	if a.Is4() {
		x, y := a.As4(), p.Addr().As4()
		for i := range x {
			x[i] = mergeBits(x[i], y[i], n-8*i)
		}
		return netip.AddrFrom4(x)
	}
	x, y := a.As16(), p.Addr().As16()
	for i := range x {
		x[i] = mergeBits(x[i], y[i], n-8*i)
	}
	return netip.AddrFrom16(x)
}

// mergeBits takes the first n bits (n may be out of 0-8) from net and the
// rest from host.
func mergeBits(host, net byte, n int) byte {
	switch {
	case n <= 0:
		return host
	case n >= 8:
		return net
	}
	m := byte(0xff) << (8 - n)
	return net&m | host&^m
}

func (t *NETMAPTarget) apply(c *evalCtx) verdict {
	r := &c.natReq
	*r = natRequest{}
	if c.hook == Prerouting || c.hook == Output {
		r.kind = natDNAT
		r.minAddr = mapPrefix(c.pkt.Dst, t.To)
	} else {
		r.kind = natSNAT
		r.minAddr = mapPrefix(c.pkt.Src, t.To)
	}
	r.maxAddr = r.minAddr
	c.nat = r
	return vAccept
}
