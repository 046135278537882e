package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strconv"
)

// TPROXYTarget is "-j TPROXY --on-port PORT [--on-ip ADDR]
// [--tproxy-mark VALUE[/MASK]]" (mangle PREROUTING, "-p tcp" or "-p
// udp"): the kernel assigns the packet to a local listening socket
// (ADDR:PORT, 0 meaning the packet's own) without rewriting it, and marks
// it. iptables-save always prints the address (0.0.0.0 or ::) and the
// mark (0x0/0x0 when not given; a mark without mask means /0xffffffff).
// The sockets are the host's (Host.AddSocket); apply says how one is
// chosen.
type TPROXYTarget struct {
	Port       uint16
	Addr       netip.Addr
	Mark, Mask uint32
}

func init() {
	registerTarget(&module{name: "TPROXY", tables: mangle, hooks: []Hook{Prerouting},
		opts:       []option{{name: "on-port", args: 1}, {name: "on-ip", args: 1}, {name: "tproxy-mark", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &tproxyTargetBuilder{} }})
}

type tproxyTargetBuilder struct {
	t    TPROXYTarget
	port bool
}

func (b *tproxyTargetBuilder) set(c *ruleCtx, opt string, _ bool, args []string) error {
	switch opt {
	case "on-port":
		// getaddrinfo's service: a decimal number kept modulo 2^16 or a
		// service of any protocol ("ntp"), as udp reads its ports
		// (docs/kernel-notes.md).
		p, ok := parsePort(args[0], "udp")
		if !ok {
			return badValue("TPROXY", "--on-port", args[0], "a port number or service name")
		}
		b.t.Port, b.port = p, true
	case "on-ip":
		a, err := parseHostAddr(c.family, args[0], false) // as TEE's --gateway
		if err != nil {
			return badValue("TPROXY", "--on-ip", args[0], "an "+c.family.String()+" address")
		}
		b.t.Addr = a
	default:
		v, m, hasMask, ok := parseValueMask(args[0])
		if !ok {
			return badValue("TPROXY", "--tproxy-mark", args[0], "VALUE[/MASK] with 32-bit numbers")
		}
		if !hasMask {
			m = 0xffffffff
		}
		b.t.Mark, b.t.Mask = v, m
	}
	return nil
}

func (b *tproxyTargetBuilder) done(c *ruleCtx) (any, error) {
	if !b.port {
		return nil, mustSpecify("TPROXY", "--on-port")
	}
	if (c.ip.Proto != inet.TCP && c.ip.Proto != inet.UDP) || c.ip.InvProto {
		return nil, fmt.Errorf("%w: TPROXY needs \"-p tcp\" or \"-p udp\"", ErrNotAllowed)
	}
	t := b.t
	if !t.Addr.IsValid() {
		t.Addr = netip.IPv4Unspecified()
		if c.family == IPv6 {
			t.Addr = netip.IPv6Unspecified()
		}
	}
	return &t, nil
}

// Name implements Target.
func (t *TPROXYTarget) Name() string { return "TPROXY" }

// apply follows xt_TPROXY (tproxy_tg4, tproxy_tg6_v1): a connected
// socket of the packet's own addresses wins (the packets after the first
// of a proxied connection); else the listener of the address and port the
// rule names, the address 0 (::) standing for the receiving interface's
// first address (Host.firstAddr), not the packet's destination, and the port 0 for the
// packet's. A socket found and transparent takes the packet: the mark is
// set ((mark & ~mask) ^ value) and the table ends as with ACCEPT; the
// routing decision must then deliver the packet locally, or it is
// dropped (Host.walkHooks). No such socket drops the packet.
func (t *TPROXYTarget) apply(c *evalCtx) verdict {
	p, h := c.pkt, c.host
	s := h.lookupConnected(p.Proto, p.Src, p.SrcPort, p.Dst, p.DstPort)
	if s == nil {
		laddr, lport := t.Addr, t.Port
		if laddr.IsUnspecified() {
			laddr = h.firstAddr(p.In, p.Family)
			if !laddr.IsValid() {
				laddr = p.Dst
			}
		}
		if lport == 0 {
			lport = p.DstPort
		}
		s = h.lookupListener(p.Proto, laddr, lport)
	}
	if s == nil || !s.Transparent {
		return vDrop
	}
	p.Mark = (p.Mark &^ t.Mask) ^ t.Mark
	c.walk.sock = s
	return vAccept
}

// firstAddr is the address TPROXY takes for --on-ip 0 on interface
// iface, or the zero Addr: for IPv4 the first address (the primary one of
// the first subnet added); for IPv6 the head of the kernel's address
// list, which keeps wider scopes first (link-local before global) and,
// within a scope, the address added last first (docs/kernel-notes.md).
// lo has 127.0.0.1 and ::1.
func (h *Host) firstAddr(iface string, f Family) netip.Addr {
	if i := h.byName[iface]; i != nil {
		var best netip.Addr
		for _, a := range i.Addrs {
			x := a.Addr()
			if x.Is4() != (f == IPv4) {
				continue
			}
			if f == IPv4 {
				return x
			}
			if !best.IsValid() || x.IsLinkLocalUnicast() || !best.IsLinkLocalUnicast() {
				best = x
			}
		}
		if best.IsValid() {
			return best
		}
	}
	if iface == "lo" {
		if f == IPv4 {
			return netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
		return netip.IPv6Loopback()
	}
	return netip.Addr{}
}

func (t *TPROXYTarget) appendSave(b []byte) []byte {
	b = strconv.AppendUint(append(b, " --on-port "...), uint64(t.Port), 10)
	b = t.Addr.AppendTo(append(b, " --on-ip "...))
	return appendHexPair(append(b, " --tproxy-mark "...), t.Mark, t.Mask)
}

func (t *TPROXYTarget) appendList(b []byte, _ bool) []byte {
	b = t.Addr.AppendTo(append(b, " TPROXY redirect "...))
	b = strconv.AppendUint(append(b, ':'), uint64(t.Port), 10)
	return appendHexPair(append(b, " mark "...), t.Mark, t.Mask)
}
