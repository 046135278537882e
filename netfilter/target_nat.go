package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strconv"
	"strings"
)

// NATTargetKind is which of the NAT targets a NATTarget is. The
// translation it asks conntrack for is a conntrack.NATKind (Manip).
type NATTargetKind uint8

// The NAT targets.
const (
	// NATDestination is DNAT --to-destination (nat PREROUTING, OUTPUT).
	NATDestination NATTargetKind = iota + 1
	// NATSource is SNAT --to-source (nat POSTROUTING, INPUT).
	NATSource
	// NATMasquerade is MASQUERADE: SNAT to the output interface's address.
	NATMasquerade
	// NATRedirect is REDIRECT: DNAT to the host itself.
	NATRedirect
)

var natKindNames = [...]string{NATDestination: "DNAT", NATSource: "SNAT", NATMasquerade: "MASQUERADE", NATRedirect: "REDIRECT"}

// Manip is the translation the target binds: conntrack.DNAT for DNAT and
// REDIRECT, conntrack.SNAT for SNAT and MASQUERADE.
func (k NATTargetKind) Manip() conntrack.NATKind {
	if k == NATDestination || k == NATRedirect {
		return conntrack.DNAT
	}
	return conntrack.SNAT
}

// NATTarget is one of DNAT, SNAT, MASQUERADE and REDIRECT. It ends the nat
// table for the first packet of a connection, asking the host to bind the
// connection to an address and port taken from the ranges.
type NATTarget struct {
	Kind NATTargetKind
	// MinAddr and MaxAddr are the address range (DNAT, SNAT); invalid when
	// only ports are given (--to-destination :80).
	MinAddr, MaxAddr netip.Addr
	// MinPort and MaxPort are the port range when HasPorts is set.
	MinPort, MaxPort uint16
	HasPorts         bool
	// Offset is set by PORT-PORT/BASE: the port is mapped by its offset
	// from BasePort into the range, PORT + (original - BASE) mod size
	// (kernel NF_NAT_RANGE_PROTO_OFFSET), even when the original port is
	// in the range.
	Offset bool
	// BasePort is BASE. Only DNAT carries it to the kernel: SNAT accepts
	// "/BASE" but keeps just the offset flag, so its base is 0 and
	// iptables-save prints "/0".
	BasePort    uint16
	Random      bool // --random
	RandomFully bool // --random-fully (SNAT, MASQUERADE)
	Persistent  bool // --persistent (DNAT, SNAT)
}

func init() {
	random := option{name: "random"}
	fully := option{name: "random-fully"}
	persistent := option{name: "persistent"}
	nat := []TableID{NAT}
	newNAT := func(k NATTargetKind) func(*ruleCtx) builder {
		return func(*ruleCtx) builder { return &natTargetBuilder{t: NATTarget{Kind: k}} }
	}
	// The hooks are those of the kernel's xt_nat and MASQUERADE/REDIRECT
	// registrations, checked against iptables-nft.
	registerTarget(&module{name: "DNAT", newBuilder: newNAT(NATDestination), tables: nat, hooks: []Hook{Prerouting, Output},
		opts: []option{{name: "to-destination", args: 1, aliases: []string{"to"}}, random, persistent}})
	registerTarget(&module{name: "SNAT", newBuilder: newNAT(NATSource), tables: nat, hooks: []Hook{Postrouting, Input},
		opts: []option{{name: "to-source", args: 1, aliases: []string{"to"}}, random, fully, persistent}})
	registerTarget(&module{name: "MASQUERADE", newBuilder: newNAT(NATMasquerade), tables: nat, hooks: []Hook{Postrouting},
		opts: []option{{name: "to-ports", args: 1}, random, fully}})
	registerTarget(&module{name: "REDIRECT", newBuilder: newNAT(NATRedirect), tables: nat, hooks: []Hook{Prerouting, Output},
		opts: []option{{name: "to-ports", args: 1}, random}})
}

type natTargetBuilder struct {
	t     NATTarget
	given bool // --to-destination or --to-source given
}

// errNATNeedsProto is iptables' complaint about ports without a protocol
// that has them.
func errNATNeedsProto(mod string) error {
	return fmt.Errorf("%w: %s: need TCP, UDP, SCTP or DCCP with port specification", ErrNotAllowed, mod)
}

// natProtoHasPorts is iptables' test at option time: only the -p given so
// far counts, and its inversion is ignored; ICMP (protocol 1, its id is
// mapped like a port) is allowed too, by ip6tables as well, which refuses
// ipv6-icmp (docs/kernel-notes.md).
func natProtoHasPorts(c *ruleCtx) bool {
	switch c.ip.Proto {
	case inet.TCP, inet.UDP, inet.SCTP, 33, inet.ICMP: // 33: dccp
		return true
	}
	return false
}

func (b *natTargetBuilder) set(c *ruleCtx, opt string, _ bool, args []string) error {
	mod := natKindNames[b.t.Kind]
	switch opt {
	case "random":
		b.t.Random = true
	case "random-fully":
		b.t.RandomFully = true
	case "persistent":
		b.t.Persistent = true
	case "to-ports":
		lo, hi, err := parseNATPorts(mod, "--to-ports", args[0], false)
		if err != nil {
			return err
		}
		if !natProtoHasPorts(c) {
			return errNATNeedsProto(mod)
		}
		b.t.MinPort, b.t.MaxPort, b.t.HasPorts = lo, hi, true
	default: // to-destination, to-source
		if err := b.parseTo(c, mod, "--"+opt, args[0]); err != nil {
			return err
		}
		b.given = true
	}
	return nil
}

// parseTo parses "[ADDR[-ADDR]][:PORT[-PORT[/BASE]]]", with IPv6
// addresses in brackets when ports follow ("[2001:db8::1]:80").
func (b *natTargetBuilder) parseTo(c *ruleCtx, mod, opt, s string) error {
	addrs, ports, hasPorts := s, "", false
	if c.family == IPv6 {
		switch {
		case strings.HasPrefix(s, "["):
			end := strings.IndexByte(s, ']')
			if end < 0 {
				return badValue(mod, opt, s, "[ADDRESS[-ADDRESS]]:PORT")
			}
			addrs = s[1:end]
			rest := s[end+1:]
			if rest != "" {
				if rest[0] != ':' {
					return badValue(mod, opt, s, "[ADDRESS[-ADDRESS]]:PORT")
				}
				ports, hasPorts = rest[1:], true
			}
		case strings.Count(s, ":") == 1:
			// Without brackets, libxt_NAT takes a lone colon for the port
			// separator and anything with more colons for an address
			// (range): "::1-::5" is a range of addresses, ":80" a port.
			addrs, ports, _ = strings.Cut(s, ":")
			hasPorts = true
		}
	} else if strings.Count(s, ":") == 1 {
		addrs, ports, _ = strings.Cut(s, ":")
		hasPorts = true
	}
	if !hasPorts || addrs != "" {
		lo, hi, ok := strings.Cut(addrs, "-")
		min, err1 := parseNATAddr(c.family, lo)
		max := min
		var err2 error
		if ok {
			max, err2 = parseNATAddr(c.family, hi)
		}
		if err1 != nil || err2 != nil {
			return badValue(mod, opt, s, "ADDRESS[-ADDRESS][:PORT[-PORT]] with "+c.family.String()+" addresses")
		}
		b.t.MinAddr, b.t.MaxAddr = min, max
	}
	if hasPorts {
		lo, hi, err := parseNATPorts(mod, opt, ports, true)
		if err != nil {
			return err
		}
		if !natProtoHasPorts(c) {
			return errNATNeedsProto(mod)
		}
		b.t.MinPort, b.t.MaxPort, b.t.HasPorts = lo, hi, true
		if base, ok := strings.CutPrefix(ports[strings.IndexByte(ports+"/", '/'):], "/"); ok {
			p, _ := parseNATPort(base) // checked by parseNATPorts
			b.t.Offset = true
			if b.t.Kind == NATDestination {
				b.t.BasePort = p
			}
		}
	}
	return nil
}

// parseNATPort reads one NAT port: a number in C notation (010 is 8) or a
// service name of any protocol (xtables_getportbyname).
func parseNATPort(s string) (uint16, bool) {
	if n, ok := parseCUint(s, 65535); ok {
		return uint16(n), true
	}
	return serviceAnyProto(s)
}

func parseNATAddr(f Family, s string) (netip.Addr, error) {
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" || a.Is4() != (f == IPv4) {
		return netip.Addr{}, fmt.Errorf("bad IP address %q", s)
	}
	return a, nil
}

// parseNATPorts parses "PORT[-PORT]", and "/BASE" after a range when
// withBase is set. Ports may be service names.
func parseNATPorts(mod, opt, s string, withBase bool) (lo, hi uint16, err error) {
	spec, base, hasBase := strings.Cut(s, "/")
	if strings.Contains(spec, ":") {
		return 0, 0, badValue(mod, opt, s, "a port range PORT-PORT (use a dash, not a colon)")
	}
	if hasBase && !withBase {
		return 0, 0, fmt.Errorf("%w: %s: shifted port range %q in %s", ErrNotModelled, mod, s, opt)
	}
	// iptables 1.8.9 first reads the whole spec as one port, a number or a
	// service name of any protocol (--to-ports ftp-data is 20); otherwise
	// it is a range of two numbers (22-http is refused).
	isRange := false
	if p, ok := parseNATPort(spec); ok {
		lo, hi = p, p
	} else {
		a, bs, dash := strings.Cut(spec, "-")
		l, ok1 := parseCUint(a, 65535)
		h, ok2 := parseCUint(bs, 65535)
		if !dash || !ok1 || !ok2 {
			return 0, 0, badValue(mod, opt, s, "a port 0-65535, a service name or a range of numbers PORT-PORT")
		}
		lo, hi, isRange = uint16(l), uint16(h), true
		if hi < lo {
			return 0, 0, badValue(mod, opt, s, "a port range LOW-HIGH")
		}
	}
	if hasBase {
		bp, ok := parseNATPort(base)
		if !isRange || !ok || bp == 0 {
			return 0, 0, badValue(mod, opt, s, "PORT-PORT/BASE with a base port 1-65535")
		}
	}
	return lo, hi, nil
}

func (b *natTargetBuilder) done(*ruleCtx) (any, error) {
	mod := natKindNames[b.t.Kind]
	switch {
	case b.t.Kind == NATDestination && !b.given:
		return nil, mustSpecify(mod, "--to-destination")
	case b.t.Kind == NATSource && !b.given:
		return nil, mustSpecify(mod, "--to-source")
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *NATTarget) Name() string {
	if int(t.Kind) < len(natKindNames) && t.Kind != 0 {
		return natKindNames[t.Kind]
	}
	return "NAT"
}

// appendRange appends the --to-destination/--to-source argument.
func (t *NATTarget) appendRange(b []byte) []byte {
	v6 := t.MinAddr.Is6() || t.MaxAddr.Is6()
	bracket := v6 && t.HasPorts
	if bracket {
		b = append(b, '[')
	}
	if t.MinAddr.IsValid() {
		b = inet.AppendAddr(b, t.MinAddr)
		if t.MaxAddr != t.MinAddr {
			b = append(b, '-')
			b = inet.AppendAddr(b, t.MaxAddr)
		}
	}
	if bracket {
		b = append(b, ']')
	}
	if t.HasPorts {
		b = append(b, ':')
		b = t.appendPorts(b)
		if t.Offset || t.BasePort != 0 {
			b = append(b, '/')
			b = strconv.AppendUint(b, uint64(t.BasePort), 10)
		}
	}
	return b
}

func (t *NATTarget) appendPorts(b []byte) []byte {
	b = strconv.AppendUint(b, uint64(t.MinPort), 10)
	if t.MaxPort != t.MinPort {
		b = append(b, '-')
		b = strconv.AppendUint(b, uint64(t.MaxPort), 10)
	}
	return b
}

func (t *NATTarget) appendFlags(b []byte, prefix string) []byte {
	if t.Random {
		b = append(b, prefix...)
		b = append(b, "random"...)
	}
	if t.RandomFully {
		b = append(b, prefix...)
		b = append(b, "random-fully"...)
	}
	if t.Persistent {
		b = append(b, prefix...)
		b = append(b, "persistent"...)
	}
	return b
}

func (t *NATTarget) appendSave(b []byte) []byte {
	switch t.Kind {
	case NATDestination, NATSource:
		if t.Kind == NATDestination {
			b = append(b, " --to-destination "...)
		} else {
			b = append(b, " --to-source "...)
		}
		b = t.appendRange(b)
	default:
		if t.HasPorts {
			b = append(b, " --to-ports "...)
			b = t.appendPorts(b)
		}
	}
	return t.appendFlags(b, " --")
}

func (t *NATTarget) appendList(b []byte, _ bool) []byte {
	switch t.Kind {
	case NATDestination, NATSource:
		b = append(b, " to:"...)
		b = t.appendRange(b)
	case NATMasquerade:
		if t.HasPorts {
			b = append(b, " masq ports: "...)
			b = t.appendPorts(b)
		}
	case NATRedirect:
		if t.HasPorts {
			b = append(b, " redir ports "...)
			b = t.appendPorts(b)
		}
	}
	return t.appendFlags(b, " ")
}

// request describes the binding for the host; it is built on each use so
// hand-built targets need no preparation. It is written field by field
// into the host's storage: a natRequest built whole and copied there
// stalls on the stores of its small fields.
func (t *NATTarget) request(r *natRequest) {
	r.minAddr, r.maxAddr, r.minPort, r.maxPort = t.MinAddr, t.MaxAddr, 0, 0
	r.random, r.randomFull, r.persistent = t.Random, t.RandomFully, t.Persistent
	r.offset, r.basePort = t.Offset || t.BasePort != 0, t.BasePort
	r.kind = 0
	switch t.Kind {
	case NATDestination:
		r.kind = natDNAT
	case NATSource:
		r.kind = natSNAT
	case NATMasquerade:
		r.kind = natMasquerade
	case NATRedirect:
		r.kind = natRedirect
	}
	if t.HasPorts {
		r.minPort, r.maxPort = t.MinPort, t.MaxPort
	}
}

func (t *NATTarget) apply(c *evalCtx) verdict {
	c.nat = &c.natReq
	t.request(c.nat)
	return vAccept
}
