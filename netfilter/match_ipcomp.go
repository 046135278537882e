package netfilter

// IPCompMatch is "-p ipcomp -m ipcomp [!] --ipcompspi CPI[:CPI]
// [--compres]" (both families: libxt_ipcomp and xt_ipcomp serve IPv6
// too): the CPI of the packet's IPComp header
// (Packet.SPI) must lie in the range. iptables 1.8.9 always stores a
// range, 0:0 when --ipcompspi is absent, so a bare -m ipcomp matches
// only CPI 0. --compres is stored and printed; the kernel's match does
// not read it. A non-first fragment never matches.
type IPCompMatch struct {
	SPIs     SPIRange
	InvSPI   bool
	Reserved bool
}

func init() {
	registerMatch(&module{name: "ipcomp",
		opts: []option{
			{name: "ipcompspi", args: 1, invert: true},
			{name: "compres", args: 0},
		},
		newBuilder: func(*ruleCtx) builder { return &IPCompMatch{} }})
}

func (m *IPCompMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	if opt == "compres" {
		m.Reserved = true
		return nil
	}
	r, err := parseSPIRange("ipcomp", "--ipcompspi", args[0], 0xffffffff)
	if err != nil {
		return err
	}
	m.SPIs, m.InvSPI = r, inv
	return nil
}

func (m *IPCompMatch) done(c *ruleCtx) (any, error) {
	if err := needProto(c, "ipcomp", 108); err != nil {
		return nil, err
	}
	return m, nil
}

// Module implements Match.
func (m *IPCompMatch) Module() string { return "ipcomp" }

func (m *IPCompMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.InvSPI)
	b = append(b, " --ipcompspi "...)
	b = appendSPIs(b, m.SPIs)
	if m.Reserved {
		b = append(b, " --compres"...)
	}
	return b
}

func (m *IPCompMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " comp "...)
	b = appendListSPIs(b, m.SPIs, m.InvSPI)
	if m.Reserved {
		b = append(b, " reserved"...)
	}
	return b
}

func (m *IPCompMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.FragOffset != 0 || p.Proto != 108 {
		return false
	}
	// The CPI is 16 bits on the wire.
	return m.SPIs.contains(p.SPI&0xffff) != m.InvSPI
}
