package netfilter

// ESPMatch is "-p esp -m esp [!] --espspi SPI[:SPI]": the SPI of the
// packet's ESP header (Packet.SPI) must lie in the range. Both families
// need "-p esp"; a non-first fragment never matches. A nil SPIs is an
// absent --espspi (any SPI), and InvSPI applies only to a present one:
// ESPMatch{SPIs: &SPIRange{7, 7}} is "-m esp --espspi 7".
type ESPMatch struct {
	SPIs   *SPIRange
	InvSPI bool
}

func init() {
	registerMatch(&module{name: "esp",
		opts:       []option{{name: "espspi", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &ESPMatch{} }})
}

func (m *ESPMatch) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	r, err := parseSPIRange("esp", "--espspi", args[0], 0xffffffff)
	if err != nil {
		return err
	}
	m.SPIs, m.InvSPI = &r, inv
	return nil
}

func (m *ESPMatch) done(c *ruleCtx) (any, error) {
	if err := needProto(c, "esp", 50); err != nil {
		return nil, err
	}
	return m, nil
}

// Module implements Match.
func (m *ESPMatch) Module() string { return "esp" }

func (m *ESPMatch) appendSave(b []byte) []byte {
	if testsSPI(m.SPIs, m.InvSPI) {
		b = appendNot(b, m.InvSPI)
		b = append(b, " --espspi "...)
		b = appendSPIs(b, *m.SPIs)
	}
	return b
}

func (m *ESPMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " esp"...)
	if testsSPI(m.SPIs, m.InvSPI) {
		b = append(b, ' ')
		b = appendListSPIs(b, *m.SPIs, m.InvSPI)
	}
	return b
}

func (m *ESPMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.FragOffset != 0 || p.Proto != 50 {
		return false
	}
	return m.SPIs.passes(p.SPI, m.InvSPI)
}
