package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strconv"
	"strings"
)

// IPVS test bits (XT_IPVS_*), in option order.
const (
	ipvsProperty uint8 = 1 << iota
	ipvsProto
	ipvsVAddr
	ipvsVPort
	ipvsDir
	ipvsMethod
	ipvsVPortCtl
)

// IPVSMatch is "-m ipvs": properties of the IPVS (kernel load balancer)
// connection a packet belongs to. packetwalk has no IPVS, so no packet
// belongs to one: "--ipvs" matches nothing, "! --ipvs" every packet, and
// any other option (each implies --ipvs) matches nothing, inverted or
// not (xt_ipvs tests the skb's ipvs_property first).
//
// Printing follows libxt_ipvs of iptables 1.8.9, which the reference
// kernel (without IP_VS) cannot load, so it was checked against the
// source only; note that it prints --vproto as "--proto N".
type IPVSMatch struct {
	Bits, Inv uint8
	Proto     inet.Proto
	VAddr     netip.Prefix
	VPort     uint16
	Reply     bool   // --vdir REPLY
	Method    string // GATE, IPIP or MASQ
	VPortCtl  uint16
}

func init() {
	registerMatch(&module{name: "ipvs",
		opts: []option{
			{name: "ipvs", invert: true}, {name: "vproto", args: 1, invert: true},
			{name: "vaddr", args: 1, invert: true}, {name: "vport", args: 1, invert: true},
			{name: "vdir", args: 1}, {name: "vmethod", args: 1, invert: true},
			{name: "vportctl", args: 1, invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &IPVSMatch{} }})
}

func (m *IPVSMatch) set(c *ruleCtx, opt string, inv bool, args []string) error {
	var bit uint8
	switch opt {
	case "ipvs":
		bit = ipvsProperty
	case "vproto":
		p, ok := inet.ParseProto(strings.ToLower(args[0]))
		if !ok {
			return badValue("ipvs", "--vproto", args[0], "a protocol name or number")
		}
		bit, m.Proto = ipvsProto, p
	case "vaddr":
		pfx, err := parseAddrKeepHost(c.family, args[0])
		if err != nil {
			return badValue("ipvs", "--vaddr", args[0], "an address[/mask]")
		}
		bit, m.VAddr = ipvsVAddr, pfx
	case "vport", "vportctl":
		port, ok := parseServicePort(args[0], "tcp")
		if !ok {
			return badValue("ipvs", "--"+opt, args[0], "a port number or service name")
		}
		if opt == "vport" {
			bit, m.VPort = ipvsVPort, port
		} else {
			bit, m.VPortCtl = ipvsVPortCtl, port
		}
	case "vdir":
		switch strings.ToUpper(args[0]) {
		case "ORIGINAL":
			m.Reply = false
		case "REPLY":
			m.Reply = true
		default:
			return badValue("ipvs", "--vdir", args[0], "ORIGINAL or REPLY")
		}
		bit = ipvsDir
	case "vmethod":
		v := strings.ToUpper(args[0])
		if v != "GATE" && v != "IPIP" && v != "MASQ" {
			return badValue("ipvs", "--vmethod", args[0], "GATE, IPIP or MASQ")
		}
		bit, m.Method = ipvsMethod, v
	}
	m.Bits |= bit
	if inv {
		m.Inv |= bit
	}
	return nil
}

func (m *IPVSMatch) done(*ruleCtx) (any, error) {
	if m.Bits == 0 {
		return nil, fmt.Errorf("%w: IPVS: at least one option is required", ErrMissingArgument)
	}
	if m.Bits&^ipvsProperty != 0 {
		if m.Inv&ipvsProperty != 0 {
			return nil, fmt.Errorf("%w: ipvs: ! --ipvs cannot be together with other options", ErrIncompatibleOpts)
		}
		m.Bits |= ipvsProperty
	}
	return m, nil
}

// Module implements Match.
func (m *IPVSMatch) Module() string { return "ipvs" }

func (m *IPVSMatch) appendDump(b []byte, pre string, numeric bool) []byte {
	item := func(b []byte, bit uint8, name string) []byte {
		b = appendNot(b, m.Inv&bit != 0)
		b = append(b, ' ')
		b = append(b, pre...)
		return append(b, name...)
	}
	if m.Bits == ipvsProperty {
		b = item(b, ipvsProperty, "ipvs")
	}
	if m.Bits&ipvsProto != 0 {
		b = item(b, ipvsProto, "proto ")
		b = strconv.AppendUint(b, uint64(m.Proto), 10)
	}
	if m.Bits&ipvsVAddr != 0 {
		b = item(b, ipvsVAddr, "vaddr ")
		if !numeric && m.VAddr.Addr().IsUnspecified() {
			b = append(b, "anywhere"...)
		} else {
			b = appendHostMask(b, m.VAddr)
		}
	}
	if m.Bits&ipvsVPort != 0 {
		b = item(b, ipvsVPort, "vport ")
		b = strconv.AppendUint(b, uint64(m.VPort), 10)
	}
	if m.Bits&ipvsDir != 0 {
		b = append(b, ' ')
		b = append(b, pre...)
		if m.Reply {
			b = append(b, "vdir REPLY"...)
		} else {
			b = append(b, "vdir ORIGINAL"...)
		}
	}
	if m.Bits&ipvsMethod != 0 {
		b = item(b, ipvsMethod, "vmethod ")
		b = append(b, m.Method...)
	}
	if m.Bits&ipvsVPortCtl != 0 {
		b = item(b, ipvsVPortCtl, "vportctl ")
		b = strconv.AppendUint(b, uint64(m.VPortCtl), 10)
	}
	return b
}

func (m *IPVSMatch) appendSave(b []byte) []byte { return m.appendDump(b, "--", true) }

func (m *IPVSMatch) appendList(b []byte, numeric bool) []byte {
	return m.appendDump(b, "", numeric)
}

// match: no packet has the ipvs property without IPVS.
func (m *IPVSMatch) match(*evalCtx) bool {
	if m.Bits == ipvsProperty {
		return m.Inv&ipvsProperty != 0
	}
	return false
}
