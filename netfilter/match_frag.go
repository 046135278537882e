package netfilter

import (
	"fmt"
	"strconv"
)

// FragMatch is ip6tables "-m frag [!] --fragid ID[:ID] [!] --fraglen N
// [--fragres] [--fragfirst] [--fragmore | --fraglast]": the packet's
// fragment header (Packet.IPv6Exts has ExtFragment) has an
// identification in IDs (Packet.FragID), zero reserved bits when
// --fragres (Packet.FragReserved), offset 0 when --fragfirst, the M flag
// set for --fragmore and clear for --fraglast (Packet.FragMore). A packet
// without a fragment header never matches. --fraglen is stored and
// printed but, as in the kernel's ip6t_frag, never tested. A nil IDs is
// an absent --fragid (any identification), and InvIDs applies only to a
// present one.
type FragMatch struct {
	IDs                    *SPIRange
	InvIDs                 bool
	Len                    uint32
	HasLen, InvLen         bool
	Res, First, More, Last bool
}

func init() {
	registerMatch(&module{name: "frag",
		opts: []option{
			{name: "fragid", args: 1, invert: true},
			{name: "fraglen", args: 1, invert: true},
			{name: "fragres"}, {name: "fragfirst"}, {name: "fragmore"}, {name: "fraglast"},
		},
		families:   []Family{IPv6},
		newBuilder: func(*ruleCtx) builder { return &FragMatch{} }})
}

func (m *FragMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "fragid":
		r, err := parseSPIRange("frag", "--fragid", args[0], 0xffffffff)
		if err != nil {
			return err
		}
		m.IDs, m.InvIDs = &r, inv
	case "fraglen":
		n, ok := parseCUint(args[0], 0xffffffff)
		if !ok {
			return badValue("frag", "--fraglen", args[0], "a length 0-4294967295")
		}
		m.Len, m.HasLen, m.InvLen = uint32(n), true, inv
	case "fragres":
		m.Res = true
	case "fragfirst":
		m.First = true
	case "fragmore", "fraglast":
		if (opt == "fragmore" && m.Last) || (opt == "fraglast" && m.More) {
			return fmt.Errorf("%w: frag: --fragmore and --fraglast together", ErrIncompatibleOpts)
		}
		m.More, m.Last = m.More || opt == "fragmore", m.Last || opt == "fraglast"
	}
	return nil
}

func (m *FragMatch) done(*ruleCtx) (any, error) { return m, nil }

// Module implements Match.
func (m *FragMatch) Module() string { return "frag" }

func (m *FragMatch) appendSave(b []byte) []byte {
	if testsSPI(m.IDs, m.InvIDs) {
		b = appendNot(b, m.InvIDs)
		b = append(b, " --fragid "...)
		b = appendSPIs(b, *m.IDs)
	}
	if m.HasLen {
		b = appendNot(b, m.InvLen)
		b = append(b, " --fraglen "...)
		b = strconv.AppendUint(b, uint64(m.Len), 10)
	}
	if m.Res {
		b = append(b, " --fragres"...)
	}
	if m.First {
		b = append(b, " --fragfirst"...)
	}
	if m.More {
		b = append(b, " --fragmore"...)
	}
	if m.Last {
		b = append(b, " --fraglast"...)
	}
	return b
}

func (m *FragMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " frag "...)
	if testsSPI(m.IDs, m.InvIDs) {
		b = appendListRange(b, "id:", "ids:", *m.IDs, m.InvIDs)
	}
	if m.HasLen {
		b = appendListLen(b, m.Len, m.InvLen)
	}
	if m.Res {
		b = append(b, " reserved"...)
	}
	if m.First {
		b = append(b, " first"...)
	}
	if m.More {
		b = append(b, " more"...)
	}
	if m.Last {
		b = append(b, " last"...)
	}
	return b
}

func (m *FragMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.IPv6Exts&ExtFragment == 0 {
		return false
	}
	return m.IDs.passes(p.FragID, m.InvIDs) &&
		!(m.Res && p.FragReserved) &&
		!(m.First && p.FragOffset != 0) &&
		!(m.More && !p.FragMore) &&
		!(m.Last && p.FragMore)
}
