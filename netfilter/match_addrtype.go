package netfilter

import (
	"fmt"
	"strings"
)

// AddrType is a set of address types as -m addrtype names them; the bits
// are 1<<RTN_* of the kernel.
type AddrType uint16

// Address types.
const (
	AddrUnspec AddrType = 1 << iota
	AddrUnicast
	AddrLocal
	AddrBroadcast
	AddrAnycast
	AddrMulticast
	AddrBlackhole
	AddrUnreachable
	AddrProhibit
	AddrThrow
	AddrNAT
	AddrXResolve
)

var addrTypeNames = []string{"UNSPEC", "UNICAST", "LOCAL", "BROADCAST", "ANYCAST", "MULTICAST",
	"BLACKHOLE", "UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE"}

// String returns the types comma-separated in iptables' order ("LOCAL,BROADCAST").
func (t AddrType) String() string {
	var parts []string
	for i, n := range addrTypeNames {
		if t&(1<<i) != 0 {
			parts = append(parts, n)
		}
	}
	return strings.Join(parts, ",")
}

// AddrTypeMatch is "-m addrtype [!] --src-type TYPES [!] --dst-type TYPES
// [--limit-iface-in|--limit-iface-out]" (revision 1). A zero type set is
// not tested. The host's interfaces and routes decide each address's type.
type AddrTypeMatch struct {
	Src, Dst       AddrType
	InvSrc, InvDst bool
	// LimitIfaceIn and LimitIfaceOut restrict the lookup to the addresses
	// of the packet's input or output interface.
	LimitIfaceIn, LimitIfaceOut bool
}

func init() {
	registerMatch(&module{name: "addrtype",
		opts: []option{
			{name: "src-type", args: 1, invert: true},
			{name: "dst-type", args: 1, invert: true},
			{name: "limit-iface-in"},
			{name: "limit-iface-out"},
		},
		newBuilder: func(*ruleCtx) builder { return &AddrTypeMatch{} }})
}

func parseAddrTypes(opt, s string) (AddrType, error) {
	var t AddrType
	for _, part := range strings.Split(s, ",") {
		found := false
		for i, n := range addrTypeNames {
			if strings.EqualFold(n, part) {
				t |= 1 << i
				found = true
			}
		}
		if !found {
			return 0, badValue("addrtype", opt, part, "a type among "+strings.Join(addrTypeNames, ","))
		}
	}
	return t, nil
}

// addrTypesNotIPv6 are the types the kernel refuses for ip6tables.
const addrTypesNotIPv6 = AddrBlackhole | AddrProhibit | AddrThrow | AddrNAT | AddrXResolve | AddrBroadcast

func (m *AddrTypeMatch) set(c *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "src-type", "dst-type":
		t, err := parseAddrTypes("--"+opt, args[0])
		if err != nil {
			return err
		}
		if opt == "src-type" {
			m.Src, m.InvSrc = t, inv
		} else {
			m.Dst, m.InvDst = t, inv
		}
	case "limit-iface-in", "limit-iface-out":
		if m.LimitIfaceIn || m.LimitIfaceOut {
			return fmt.Errorf("%w: addrtype: --limit-iface-in cannot be used together with --limit-iface-out", ErrIncompatibleOpts)
		}
		m.LimitIfaceIn, m.LimitIfaceOut = opt == "limit-iface-in", opt == "limit-iface-out"
	}
	return nil
}

func (m *AddrTypeMatch) done(c *ruleCtx) (any, error) {
	if m.Src == 0 && m.Dst == 0 {
		return nil, mustSpecify("addrtype", "--src-type\" or \"--dst-type")
	}
	if c.family == IPv6 {
		if bad := (m.Src | m.Dst) & addrTypesNotIPv6; bad != 0 {
			return nil, fmt.Errorf("%w: addrtype: ip6tables cannot match %s", ErrNotAllowed, bad)
		}
	}
	return m, nil
}

// checkHooks applies the kernel's placement rules for the interface
// limits.
func (m *AddrTypeMatch) checkHooks(mask uint8) error {
	if m.LimitIfaceIn && mask&(1<<Output|1<<Postrouting) != 0 {
		return fmt.Errorf("%w: addrtype: input interface limitation not valid in POSTROUTING and OUTPUT", ErrNotAllowed)
	}
	if m.LimitIfaceOut && mask&(1<<Prerouting|1<<Input) != 0 {
		return fmt.Errorf("%w: addrtype: output interface limitation not valid in PREROUTING and INPUT", ErrNotAllowed)
	}
	return nil
}

// Module implements Match.
func (m *AddrTypeMatch) Module() string { return "addrtype" }

func (m *AddrTypeMatch) appendSave(b []byte) []byte {
	if m.Src != 0 {
		b = appendNot(b, m.InvSrc)
		b = append(b, " --src-type "...)
		b = append(b, m.Src.String()...)
	}
	if m.Dst != 0 {
		b = appendNot(b, m.InvDst)
		b = append(b, " --dst-type "...)
		b = append(b, m.Dst.String()...)
	}
	if m.LimitIfaceIn {
		b = append(b, " --limit-iface-in"...)
	}
	if m.LimitIfaceOut {
		b = append(b, " --limit-iface-out"...)
	}
	return b
}

func (m *AddrTypeMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " ADDRTYPE match"...)
	if m.Src != 0 {
		b = append(b, " src-type "...)
		if m.InvSrc {
			b = append(b, '!')
		}
		b = append(b, m.Src.String()...)
	}
	if m.Dst != 0 {
		b = append(b, " dst-type "...)
		if m.InvDst {
			b = append(b, '!')
		}
		b = append(b, m.Dst.String()...)
	}
	if m.LimitIfaceIn {
		b = append(b, " limit-in"...)
	}
	if m.LimitIfaceOut {
		b = append(b, " limit-out"...)
	}
	return b
}

// typeMatches applies the kernel's test of an address's types t against
// the rule's set want: for IPv4 t is a single type that must be in want;
// for IPv6 (match_type6) every one of MULTICAST, UNICAST and UNSPEC in
// want must hold, and then one of the looked-up types if any is asked for.
func typeMatches(v6 bool, t, want AddrType) bool {
	if !v6 {
		return t&want != 0
	}
	for _, k := range []AddrType{AddrMulticast, AddrUnicast, AddrUnspec} {
		if want&k != 0 && t&k == 0 {
			return false
		}
	}
	const lookedUp = AddrLocal | AddrAnycast | AddrUnreachable
	if want&lookedUp != 0 {
		return t&want&lookedUp != 0
	}
	return true
}

func (m *AddrTypeMatch) match(c *evalCtx) bool {
	p := c.pkt
	iface := ""
	if m.LimitIfaceIn {
		iface = p.In
	} else if m.LimitIfaceOut {
		iface = p.Out
	}
	v6 := p.Family == IPv6
	if m.Src != 0 && typeMatches(v6, AddrType(c.host.addrType(p.Src, iface)), m.Src) == m.InvSrc {
		return false
	}
	if m.Dst != 0 && typeMatches(v6, AddrType(c.host.addrType(p.Dst, iface)), m.Dst) == m.InvDst {
		return false
	}
	return true
}
