package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// AHMatch is "-m ah [!] --ahspi SPI[:SPI]", and for IPv6 also
// "[!] --ahlen LEN" and "--ahres". For IPv4 the rule needs "-p ah" and the
// SPI is that of the AH header the packet carries (Packet.SPI); a
// non-first fragment never matches. For IPv6 the AH header is an
// extension header: a packet without one (Packet.IPv6Exts has no
// ExtAuth) never matches; --ahspi tests Packet.AHSPI, --ahlen its
// length in bytes (as the
// kernel's ip6t_ah computes it from the length field, Packet.AHLen) and
// --ahres requires its reserved field to be 0.
//
// Every field is exported and its zero value tests nothing: a nil SPIs
// is an absent --ahspi (any SPI), and InvSPI applies only to a present
// one; Len and InvLen only with HasLen. AHMatch{SPIs: &SPIRange{256, 256}}
// is "-m ah --ahspi 256". Which header it reads follows the packet's
// family, as a rule sees only packets of its own.
type AHMatch struct {
	SPIs     *SPIRange
	InvSPI   bool
	Len      uint32
	HasLen   bool
	InvLen   bool
	Reserved bool
}

// SPIRange is an inclusive range of 32-bit security parameter indexes. A
// reversed range is kept, as iptables keeps it, and matches nothing.
type SPIRange struct{ Lo, Hi uint32 }

var anySPI = SPIRange{0, 0xffffffff}

// testsSPI reports whether r, given with inv, tests the SPI at all: the
// full range uninverted is what iptables leaves out of the rule.
func testsSPI(r *SPIRange, inv bool) bool { return r != nil && (*r != anySPI || inv) }

// passes is the test of an optional range option: a nil r (the option
// absent) passes every value.
func (r *SPIRange) passes(v uint32, inv bool) bool { return r == nil || r.contains(v) != inv }

func (r SPIRange) contains(v uint32) bool { return v >= r.Lo && v <= r.Hi }

// parseSPIRange parses "N", "N:M", ":M" or "N:" with numbers in C syntax
// (0x.., 0..), each at most max, as xtables_parse_range does for the
// IPsec matches.
func parseSPIRange(mod, opt, s string, max uint64) (SPIRange, error) {
	lo, hi, isRange := strings.Cut(s, ":")
	r := SPIRange{0, uint32(max)}
	parse := func(v string) (uint32, error) {
		n, ok := parseCUint(v, max)
		if !ok {
			return 0, badValue(mod, opt, v, "a number 0-"+strconv.FormatUint(max, 10)+" or a range N:M")
		}
		return uint32(n), nil
	}
	var err error
	if !isRange {
		if r.Lo, err = parse(s); err != nil {
			return r, err
		}
		r.Hi = r.Lo
		return r, nil
	}
	if lo != "" {
		if r.Lo, err = parse(lo); err != nil {
			return r, err
		}
	}
	if hi != "" {
		if r.Hi, err = parse(hi); err != nil {
			return r, err
		}
	}
	return r, nil
}

// appendSPIs prints a range as the IPsec matches' save does: "N" or "N:M".
func appendSPIs(b []byte, r SPIRange) []byte {
	b = strconv.AppendUint(b, uint64(r.Lo), 10)
	if r.Lo != r.Hi {
		b = append(b, ':')
		b = strconv.AppendUint(b, uint64(r.Hi), 10)
	}
	return b
}

// appendListSPIs prints a range as the IPsec matches' -L does:
// "spi:N", "spis:N:M", with "!" after the colon when inverted.
func appendListSPIs(b []byte, r SPIRange, inv bool) []byte {
	return appendListRange(b, "spi:", "spis:", r, inv)
}

// appendListRange prints a range as the -L of the IPsec and IPv6 header
// matches does: one, or many for a range, then "!" when inverted and the
// range ("id:5", "ids:!1:9").
func appendListRange(b []byte, one, many string, r SPIRange, inv bool) []byte {
	if r.Lo == r.Hi {
		b = append(b, one...)
	} else {
		b = append(b, many...)
	}
	if inv {
		b = append(b, '!')
	}
	return appendSPIs(b, r)
}

// appendListLen prints " length:N" (" length:!N" inverted), as the -L of
// the IPv6 header matches does.
func appendListLen(b []byte, n uint32, inv bool) []byte {
	b = append(b, " length:"...)
	if inv {
		b = append(b, '!')
	}
	return strconv.AppendUint(b, uint64(n), 10)
}

func init() {
	registerMatch(&module{name: "ah",
		opts: []option{
			{name: "ahspi", args: 1, invert: true},
			{name: "ahlen", args: 1, invert: true, only6: true},
			{name: "ahres", args: 0, only6: true},
		},
		newBuilder: func(*ruleCtx) builder { return &AHMatch{} }})
}

func (m *AHMatch) set(c *ruleCtx, opt string, inv bool, args []string) error {
	if opt != "ahspi" && c.family != IPv6 {
		return unknownOpt("ah", opt)
	}
	switch opt {
	case "ahspi":
		r, err := parseSPIRange("ah", "--ahspi", args[0], 0xffffffff)
		if err != nil {
			return err
		}
		m.SPIs, m.InvSPI = &r, inv
	case "ahlen":
		n, ok := parseCUint(args[0], 0xffffffff)
		if !ok {
			return badValue("ah", "--ahlen", args[0], "a number 0-4294967295")
		}
		m.Len, m.HasLen, m.InvLen = uint32(n), true, inv
	case "ahres":
		m.Reserved = true
	}
	return nil
}

func (m *AHMatch) done(c *ruleCtx) (any, error) {
	if c.family == IPv4 {
		if err := needProto(c, "ah", 51); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Module implements Match.
func (m *AHMatch) Module() string { return "ah" }

func (m *AHMatch) appendSave(b []byte) []byte {
	if testsSPI(m.SPIs, m.InvSPI) {
		b = appendNot(b, m.InvSPI)
		b = append(b, " --ahspi "...)
		b = appendSPIs(b, *m.SPIs)
	}
	if m.HasLen {
		b = appendNot(b, m.InvLen)
		b = append(b, " --ahlen "...)
		b = strconv.AppendUint(b, uint64(m.Len), 10)
	}
	if m.Reserved {
		b = append(b, " --ahres"...)
	}
	return b
}

func (m *AHMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " ah "...)
	if testsSPI(m.SPIs, m.InvSPI) {
		b = appendListSPIs(b, *m.SPIs, m.InvSPI)
	}
	if m.HasLen {
		b = append(b, "length:"...)
		if m.InvLen {
			b = append(b, '!')
		}
		b = strconv.AppendUint(b, uint64(m.Len), 10)
	}
	if m.Reserved {
		b = append(b, " reserved"...)
	}
	return b
}

func (m *AHMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.Family == IPv6 {
		if p.IPv6Exts&ExtAuth == 0 {
			return false
		}
		return m.SPIs.passes(p.AHSPI, m.InvSPI) &&
			(!m.HasLen || ((uint32(p.AHLen)+2)*4 == m.Len) != m.InvLen) &&
			(!m.Reserved || !p.AHReserved)
	}
	if p.FragOffset != 0 || p.Proto != 51 {
		return false
	}
	return m.SPIs.passes(p.SPI, m.InvSPI)
}

// unknownOpt refuses an option the module has only in the other family.
func unknownOpt(mod, opt string) error {
	return fmt.Errorf("%w \"--%s\" (-m %s has it only in ip6tables)", ErrUnknownOption, opt, mod)
}
