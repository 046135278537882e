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
// packetwalk has no socket table (-m socket, listeners): a host refuses to
// load it.
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

func (t *TPROXYTarget) unmodelled() string {
	return "transparent proxying needs local listening sockets, which are not modelled"
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
