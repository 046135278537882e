package netfilter

// EUI64Match is ip6tables "-m eui64": the low 64 bits of the source
// address are the modified EUI-64 built from the frame's Ethernet source
// (Packet.SrcMAC: its first three bytes with the universal/local bit
// flipped, ff:fe, its last three bytes). A packet with no Ethernet
// header (HasMAC false) never matches. The kernel allows the match in
// PREROUTING, INPUT and FORWARD.
type EUI64Match struct{}

func init() {
	registerMatch(&module{name: "eui64",
		families:   []Family{IPv6},
		hooks:      []Hook{Prerouting, Input, Forward},
		newBuilder: func(*ruleCtx) builder { return &EUI64Match{} }})
}

func (m *EUI64Match) set(*ruleCtx, string, bool, []string) error { return nil }

func (m *EUI64Match) done(*ruleCtx) (any, error) { return m, nil }

// Module implements Match.
func (m *EUI64Match) Module() string { return "eui64" }

func (m *EUI64Match) appendSave(b []byte) []byte { return b }

func (m *EUI64Match) appendList(b []byte, _ bool) []byte { return b }

func (m *EUI64Match) match(c *evalCtx) bool {
	p := c.pkt
	if !p.HasMAC || !p.Src.Is6() {
		return false
	}
	a := p.Src.As16()
	mac := p.SrcMAC
	want := [8]byte{mac[0] ^ 0x02, mac[1], mac[2], 0xff, 0xfe, mac[3], mac[4], mac[5]}
	return [8]byte(a[8:]) == want
}
