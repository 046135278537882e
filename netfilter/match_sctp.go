package netfilter

import (
	"fmt"
	"strings"
)

// SCTPMatch is "-p sctp -m sctp [!] --sport P[:Q] [!] --dport P[:Q]".
// --chunk-types is refused as not modelled (packets carry no chunk list).
type SCTPMatch struct {
	SrcPorts, DstPorts       PortRange
	InvSrcPorts, InvDstPorts bool
	// HasSrc and HasDst say which port options were given.
	HasSrc, HasDst bool
}

func init() {
	registerMatch(&module{name: "sctp",
		opts: []option{
			{name: "sport", args: 1, invert: true, aliases: []string{"source-port"}},
			{name: "dport", args: 1, invert: true, aliases: []string{"destination-port"}},
			{name: "chunk-types", args: 2, invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &SCTPMatch{SrcPorts: anyPorts, DstPorts: anyPorts} }})
}

// parseSCTPPorts parses "P", "P:Q", ":Q" or "P:"; unlike tcp, a reversed
// range is an error.
func parseSCTPPorts(opt, s string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(s, ":")
	bad := func(v string) error {
		return badValue("sctp", opt, v, "a port or a range PORT:PORT")
	}
	if !isRange {
		p, ok := parseServicePort(s, "sctp")
		if !ok {
			return PortRange{}, bad(s)
		}
		return PortRange{p, p}, nil
	}
	r := anyPorts
	var ok bool
	if lo != "" {
		if r.Lo, ok = parseServicePort(lo, "sctp"); !ok {
			return r, bad(lo)
		}
	}
	if hi != "" {
		if r.Hi, ok = parseServicePort(hi, "sctp"); !ok {
			return r, bad(hi)
		}
	}
	if r.Lo > r.Hi {
		return r, badValue("sctp", opt, s, "a range with min <= max")
	}
	return r, nil
}

func (m *SCTPMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "sport":
		r, err := parseSCTPPorts("--sport", args[0])
		if err != nil {
			return err
		}
		m.SrcPorts, m.InvSrcPorts, m.HasSrc = r, inv, true
	case "dport":
		r, err := parseSCTPPorts("--dport", args[0])
		if err != nil {
			return err
		}
		m.DstPorts, m.InvDstPorts, m.HasDst = r, inv, true
	case "chunk-types":
		return fmt.Errorf("%w: sctp --chunk-types (SCTP chunks are not modelled)", ErrUnsupported)
	}
	return nil
}

func (m *SCTPMatch) done(c *ruleCtx) (any, error) {
	if err := needProto(c, "sctp", ProtoSCTP); err != nil {
		return nil, err
	}
	return m, nil
}

// Module implements Match.
func (m *SCTPMatch) Module() string { return "sctp" }

func (m *SCTPMatch) appendSave(b []byte) []byte {
	if m.HasSrc {
		b = appendPortOpt(b, "sport", m.SrcPorts, m.InvSrcPorts)
	}
	if m.HasDst {
		b = appendPortOpt(b, "dport", m.DstPorts, m.InvDstPorts)
	}
	return b
}

func (m *SCTPMatch) appendList(b []byte, numeric bool) []byte {
	b = append(b, " sctp"...)
	if m.HasSrc {
		b = appendListPorts(b, "spt", m.SrcPorts, m.InvSrcPorts, numeric, "sctp")
	}
	if m.HasDst {
		b = appendListPorts(b, "dpt", m.DstPorts, m.InvDstPorts, numeric, "sctp")
	}
	return b
}

func (m *SCTPMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.FragOffset != 0 {
		return false
	}
	return m.SrcPorts.contains(p.SrcPort) != m.InvSrcPorts && m.DstPorts.contains(p.DstPort) != m.InvDstPorts
}
