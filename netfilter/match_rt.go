package netfilter

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// RTMatch is ip6tables "-m rt [!] --rt-type T [!] --rt-segsleft N[:M]
// [!] --rt-len N [--rt-0-res] [--rt-0-addrs ADDR,... [--rt-0-not-strict]]":
// the packet's routing header (Packet.IPv6Exts has ExtRouting) has type
// T (Packet.RTType), segments left in N..M (Packet.RTSegsLeft), a length
// in bytes ((field+1)*8, as the kernel's ip6t_rt computes it) of N, and
// with --rt-0-res a zero reserved field (Packet.RTReserved). The
// --rt-0-* options need "--rt-type 0" before them (iptables refuses
// them otherwise), --rt-0-not-strict --rt-0-addrs too. --rt-0-addrs tests the addresses of a type 0 header,
// which Packet does not carry: such a rule is loaded and printed but
// refused when the ruleset is loaded into a Host. A nil SegsLeft is an
// absent --rt-segsleft, and InvSegsLeft applies only to a present one.
type RTMatch struct {
	Type             uint32
	HasType, InvType bool
	SegsLeft         *SPIRange
	InvSegsLeft      bool
	Len              uint32
	HasLen, InvLen   bool
	Res              bool
	Addrs            []netip.Addr
	NotStrict        bool
}

func init() {
	registerMatch(&module{name: "rt",
		opts: []option{
			{name: "rt-type", args: 1, invert: true},
			{name: "rt-segsleft", args: 1, invert: true},
			{name: "rt-len", args: 1, invert: true},
			{name: "rt-0-res"},
			{name: "rt-0-addrs", args: 1},
			{name: "rt-0-not-strict"},
		},
		families:   []Family{IPv6},
		newBuilder: func(*ruleCtx) builder { return &RTMatch{} }})
}

func (m *RTMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "rt-type":
		// The kernel keeps 32 bits; a type above 255 matches no header.
		n, ok := parseCUint(args[0], 0xffffffff)
		if !ok {
			return badValue("rt", "--rt-type", args[0], "a type 0-4294967295")
		}
		m.Type, m.HasType, m.InvType = uint32(n), true, inv
	case "rt-segsleft":
		r, err := parseSPIRange("rt", "--rt-segsleft", args[0], 0xffffffff)
		if err != nil {
			return err
		}
		m.SegsLeft, m.InvSegsLeft = &r, inv
	case "rt-len":
		n, ok := parseCUint(args[0], 0xffffffff)
		if !ok {
			return badValue("rt", "--rt-len", args[0], "a length 0-4294967295")
		}
		m.Len, m.HasLen, m.InvLen = uint32(n), true, inv
	case "rt-0-res", "rt-0-addrs", "rt-0-not-strict":
		// iptables checks these against the options before them.
		if !m.HasType || m.Type != 0 || m.InvType {
			return fmt.Errorf("%w: rt: \"--rt-type 0\" required before \"--%s\"", ErrNotAllowed, opt)
		}
		if opt == "rt-0-not-strict" && len(m.Addrs) == 0 {
			return fmt.Errorf("%w: rt: \"--rt-0-addrs\" required before \"--rt-0-not-strict\"", ErrMissingArgument)
		}
	}
	switch opt {
	case "rt-0-res":
		m.Res = true
	case "rt-0-addrs":
		m.Addrs = m.Addrs[:0]
		for _, s := range strings.Split(args[0], ",") {
			// An IPv4-mapped address is an IPv6 one like any other here.
			a, err := netip.ParseAddr(s)
			if err != nil || !a.Is6() || a.Zone() != "" {
				return badValue("rt", "--rt-0-addrs", s, "IPv6 addresses separated by commas")
			}
			if len(m.Addrs) == 16 {
				return badValue("rt", "--rt-0-addrs", args[0], "at most 16 addresses")
			}
			m.Addrs = append(m.Addrs, a)
		}
	case "rt-0-not-strict":
		m.NotStrict = true
	}
	return nil
}

func (m *RTMatch) done(*ruleCtx) (any, error) {
	return m, nil
}

func (m *RTMatch) unmodelled() string {
	if len(m.Addrs) > 0 {
		return "--rt-0-addrs (the addresses of a type 0 routing header)"
	}
	return ""
}

// Module implements Match.
func (m *RTMatch) Module() string { return "rt" }

func (m *RTMatch) appendAddrs(b []byte) []byte {
	for i, a := range m.Addrs {
		if i > 0 {
			b = append(b, ',')
		}
		b = a.AppendTo(b)
	}
	return b
}

func (m *RTMatch) appendSave(b []byte) []byte {
	if m.HasType {
		b = appendNot(b, m.InvType)
		b = append(b, " --rt-type "...)
		b = strconv.AppendUint(b, uint64(m.Type), 10)
	}
	if testsSPI(m.SegsLeft, m.InvSegsLeft) {
		b = appendNot(b, m.InvSegsLeft)
		b = append(b, " --rt-segsleft "...)
		b = appendSPIs(b, *m.SegsLeft)
	}
	if m.HasLen {
		b = appendNot(b, m.InvLen)
		b = append(b, " --rt-len "...)
		b = strconv.AppendUint(b, uint64(m.Len), 10)
	}
	if m.Res {
		b = append(b, " --rt-0-res"...)
	}
	if len(m.Addrs) > 0 {
		b = append(b, " --rt-0-addrs "...)
		b = m.appendAddrs(b)
	}
	if m.NotStrict {
		b = append(b, " --rt-0-not-strict"...)
	}
	return b
}

func (m *RTMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " rt"...)
	if m.HasType {
		b = append(b, " type:"...)
		if m.InvType {
			b = append(b, '!')
		}
		b = strconv.AppendUint(b, uint64(m.Type), 10)
	}
	if testsSPI(m.SegsLeft, m.InvSegsLeft) {
		b = appendListRange(b, " segsleft:", " segslefts:", *m.SegsLeft, m.InvSegsLeft)
	}
	if m.HasLen {
		b = appendListLen(b, m.Len, m.InvLen)
	}
	if m.Res {
		b = append(b, " reserved"...)
	}
	if len(m.Addrs) > 0 {
		b = append(b, " 0-addrs "...)
		b = m.appendAddrs(b)
	}
	if m.NotStrict {
		b = append(b, " 0-not-strict"...)
	}
	return b
}

func (m *RTMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.IPv6Exts&ExtRouting == 0 {
		return false
	}
	return m.SegsLeft.passes(uint32(p.RTSegsLeft), m.InvSegsLeft) &&
		(!m.HasLen || ((uint32(p.RTLen)+1)*8 == m.Len) != m.InvLen) &&
		(!m.HasType || (uint32(p.RTType) == m.Type) != m.InvType) &&
		!(m.Res && p.RTReserved)
}
