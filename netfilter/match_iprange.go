package netfilter

import (
	"net/netip"
	"strings"
)

// AddrRange is an inclusive range of addresses From-To. iptables keeps a
// reversed range as given; it matches nothing.
type AddrRange struct {
	From, To netip.Addr
}

// IsValid reports whether the range is set.
func (r AddrRange) IsValid() bool { return r.From.IsValid() }

func (r AddrRange) contains(a netip.Addr) bool {
	return r.From.Compare(a) <= 0 && a.Compare(r.To) <= 0
}

func (r AddrRange) appendTo(b []byte) []byte {
	b = r.From.AppendTo(b)
	b = append(b, '-')
	return r.To.AppendTo(b)
}

// IPRangeMatch is "-m iprange [!] --src-range A-B [!] --dst-range C-D".
// A range left unset (zero) is not tested.
type IPRangeMatch struct {
	Src, Dst       AddrRange
	InvSrc, InvDst bool
}

func init() {
	registerMatch(&module{name: "iprange",
		opts: []option{
			{name: "src-range", args: 1, invert: true},
			{name: "dst-range", args: 1, invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &IPRangeMatch{} }})
}

// parseAddrRange parses "A-B" or a single "A" (meaning A-A) of family f.
func parseAddrRange(f Family, opt, s string) (AddrRange, error) {
	from, to, isRange := strings.Cut(s, "-")
	if !isRange {
		to = from
	}
	var r AddrRange
	for i, part := range []string{from, to} {
		// iprange reads only iptables' dotted form for IPv4 ("10.1" is
		// 10.1.0.0, octal and hex parts), inet_pton's for IPv6.
		a, err := netip.ParseAddr(part)
		if f == IPv4 {
			var ok bool
			if a, ok = parseIPv4Dotted(part, false); ok {
				err = nil
			} else {
				err = ErrBadValue
			}
		}
		if err != nil || a.Zone() != "" || (f == IPv4) != a.Is4() {
			return AddrRange{}, badValue("iprange", opt, part, "an "+f.String()+" address range FROM-TO")
		}
		if i == 0 {
			r.From = a
		} else {
			r.To = a
		}
	}
	return r, nil
}

func (m *IPRangeMatch) set(c *ruleCtx, opt string, inv bool, args []string) error {
	r, err := parseAddrRange(c.family, "--"+opt, args[0])
	if err != nil {
		return err
	}
	if opt == "src-range" {
		m.Src, m.InvSrc = r, inv
	} else {
		m.Dst, m.InvDst = r, inv
	}
	return nil
}

func (m *IPRangeMatch) done(*ruleCtx) (any, error) {
	if !m.Src.IsValid() && !m.Dst.IsValid() {
		return nil, mustSpecify("iprange", "--src-range\" or \"--dst-range")
	}
	return m, nil
}

// Module implements Match.
func (m *IPRangeMatch) Module() string { return "iprange" }

func (m *IPRangeMatch) appendSave(b []byte) []byte {
	if m.Src.IsValid() {
		b = appendNot(b, m.InvSrc)
		b = append(b, " --src-range "...)
		b = m.Src.appendTo(b)
	}
	if m.Dst.IsValid() {
		b = appendNot(b, m.InvDst)
		b = append(b, " --dst-range "...)
		b = m.Dst.appendTo(b)
	}
	return b
}

func (m *IPRangeMatch) appendList(b []byte, _ bool) []byte {
	if m.Src.IsValid() {
		b = append(b, " source IP range"...)
		b = appendNot(b, m.InvSrc)
		b = append(b, ' ')
		b = m.Src.appendTo(b)
	}
	if m.Dst.IsValid() {
		b = append(b, " destination IP range"...)
		b = appendNot(b, m.InvDst)
		b = append(b, ' ')
		b = m.Dst.appendTo(b)
	}
	return b
}

func (m *IPRangeMatch) match(c *evalCtx) bool {
	p := c.pkt
	if m.Src.IsValid() && m.Src.contains(p.Src) == m.InvSrc {
		return false
	}
	if m.Dst.IsValid() && m.Dst.contains(p.Dst) == m.InvDst {
		return false
	}
	return true
}
