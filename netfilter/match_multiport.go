package netfilter

import (
	"fmt"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
)

// MultiportDir says which port of the packet -m multiport tests.
type MultiportDir uint8

// Multiport directions.
const (
	MultiportSource      MultiportDir = iota // --sports
	MultiportDestination                     // --dports
	MultiportEither                          // --ports: source or destination
)

// maxMultiportSlots is XT_MULTIPORT_PORTS: a single port takes one slot
// and a range two.
const maxMultiportSlots = 15

// MultiportMatch is "-m multiport [!] --sports|--dports|--ports LIST"
// (revision 1, with ranges). It needs -p tcp, udp, udplite, sctp or dccp.
//
// Every field is exported: MultiportMatch{Dir: MultiportDestination,
// Ports: []PortRange{{80, 80}, {443, 443}}, Proto: inet.TCP} is
// "-m multiport --dports 80,443" in a "-p tcp" rule.
type MultiportMatch struct {
	Dir    MultiportDir
	Ports  []PortRange
	Invert bool
	// Proto is the rule's -p, whose service names iptables -L prints
	// for the ports ("http"); 0 lists numbers. It changes nothing else.
	Proto inet.Proto
}

func init() {
	registerMatch(&module{name: "multiport",
		opts: []option{
			{name: "sports", args: 1, invert: true, aliases: []string{"source-ports"}},
			{name: "dports", args: 1, invert: true, aliases: []string{"destination-ports"}},
			{name: "ports", args: 1, invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &multiportBuilder{} }})
}

type multiportBuilder struct {
	m     MultiportMatch
	given string
}

// multiportProto returns the rule's protocol name for service lookups, or
// iptables' complaint when the protocol carries no ports.
func multiportProto(c *ruleCtx) (string, error) {
	if c.ip.InvProto || (c.ip.Proto != 0 && !c.ip.Proto.HasPorts()) {
		return "", fmt.Errorf("%w: multiport only works with TCP, UDP, UDPLITE, SCTP and DCCP", ErrNotAllowed)
	}
	if c.ip.Proto == 0 {
		return "", fmt.Errorf("%w: multiport needs \"-p tcp\", \"-p udp\", \"-p udplite\", \"-p sctp\" or \"-p dccp\"", ErrNotAllowed)
	}
	return c.ip.Proto.String(), nil
}

func (b *multiportBuilder) set(c *ruleCtx, opt string, inv bool, args []string) error {
	if b.given != "" {
		return fmt.Errorf("%w: multiport: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, opt, b.given)
	}
	proto, err := multiportProto(c)
	if err != nil {
		return err
	}
	ports, err := parseMultiport(args[0], proto)
	if err != nil {
		return err
	}
	b.given = opt
	b.m.Ports, b.m.Invert = ports, inv
	switch opt {
	case "sports":
		b.m.Dir = MultiportSource
	case "dports":
		b.m.Dir = MultiportDestination
	default:
		b.m.Dir = MultiportEither
	}
	return nil
}

// parseMultiport parses "P,Q:R,..." with at most 15 slots; a range must
// be increasing, and each end is a number or a service name for proto.
func parseMultiport(s, proto string) ([]PortRange, error) {
	var out []PortRange
	slots := 0
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, ":")
		need := 1
		if isRange {
			need = 2
		}
		if slots+need > maxMultiportSlots {
			return nil, badValue("multiport", "--ports", s, "at most 15 ports (a range counts as two)")
		}
		slots += need
		a, ok := parseServicePort(lo, proto)
		if !ok {
			return nil, badValue("multiport", "--ports", lo, "a port number or a "+proto+" service name")
		}
		r := PortRange{a, a}
		if isRange {
			z, ok := parseServicePort(hi, proto)
			if !ok {
				return nil, badValue("multiport", "--ports", hi, "a port number or a "+proto+" service name")
			}
			if a >= z {
				return nil, badValue("multiport", "--ports", part, "an increasing range LOW:HIGH")
			}
			r.Hi = z
		}
		out = append(out, r)
	}
	return out, nil
}

// parseServicePort is xtables_parse_port: a service name for proto first,
// then a number (strtoul base 0) up to 65535.
func parseServicePort(s, proto string) (uint16, bool) {
	if s == "" {
		return 0, false
	}
	if p, ok := serviceByName(s, proto); ok {
		return p, true
	}
	n, ok := parsePortNumber(s, 65535)
	return uint16(n), ok
}

func (b *multiportBuilder) done(c *ruleCtx) (any, error) {
	if b.given == "" {
		return nil, fmt.Errorf("%w: multiport needs one of --sports, --dports or --ports", ErrMissingArgument)
	}
	// The kernel checks the protocol again at load time.
	if _, err := multiportProto(c); err != nil {
		return nil, err
	}
	m := b.m
	m.Proto = c.ip.Proto
	return &m, nil
}

// Module implements Match.
func (m *MultiportMatch) Module() string { return "multiport" }

func (m *MultiportMatch) dirName() string {
	switch m.Dir {
	case MultiportSource:
		return "sports"
	case MultiportDestination:
		return "dports"
	}
	return "ports"
}

func (m *MultiportMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --"...)
	b = append(b, m.dirName()...)
	b = append(b, ' ')
	for i, r := range m.Ports {
		if i > 0 {
			b = append(b, ',')
		}
		b = r.appendSave(b)
	}
	return b
}

// appendList renders "multiport dports 80,443" and, inverted,
// "multiport dports  !80,443" (iptables prints the double space).
func (m *MultiportMatch) appendList(b []byte, numeric bool) []byte {
	b = append(b, " multiport "...)
	b = append(b, m.dirName()...)
	b = append(b, ' ')
	if m.Invert {
		b = append(b, " !"...)
	}
	proto := m.Proto.String()
	numeric = numeric || m.Proto == 0
	for i, r := range m.Ports {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendServ(b, r.Lo, proto, numeric)
		if r.Hi != r.Lo {
			b = append(b, ':')
			b = appendServ(b, r.Hi, proto, numeric)
		}
	}
	return b
}

func (m *MultiportMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.FragOffset != 0 {
		return false
	}
	for _, r := range m.Ports {
		switch m.Dir {
		case MultiportSource:
			if r.contains(p.SrcPort) {
				return !m.Invert
			}
		case MultiportDestination:
			if r.contains(p.DstPort) {
				return !m.Invert
			}
		default:
			if r.contains(p.SrcPort) || r.contains(p.DstPort) {
				return !m.Invert
			}
		}
	}
	return m.Invert
}
