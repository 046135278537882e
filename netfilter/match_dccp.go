package netfilter

import (
	"strconv"
	"strings"
)

// DCCPMatch is "-p dccp -m dccp [!] --sport P[:Q] [!] --dport P[:Q]
// [!] --dccp-types TYPES [!] --dccp-option N": the ports, the packet
// type (Packet.DCCPType) among a set, and the presence of an option type
// (Packet.DCCPOptions). A non-first fragment never matches.
type DCCPMatch struct {
	SrcPorts, DstPorts       PortRange
	InvSrcPorts, InvDstPorts bool
	HasSrc, HasDst           bool
	// Types is a bit set of packet types (bit t for type t). INVALID
	// stands for the types 10-15, which DCCP does not define.
	Types    uint16
	HasTypes bool
	InvTypes bool
	Option   uint8
	HasOpt   bool
	InvOpt   bool
}

// dccpTypeNames are the names of --dccp-types, types 0-9, then INVALID
// for 10 and above.
var dccpTypeNames = [...]string{"REQUEST", "RESPONSE", "DATA", "ACK", "DATAACK", "CLOSEREQ", "CLOSE", "RESET", "SYNC", "SYNCACK", "INVALID"}

// dccpInvalidTypes is what the name INVALID stands for.
const dccpInvalidTypes uint16 = 0xfc00

func init() {
	registerMatch(&module{name: "dccp",
		opts: []option{
			{name: "sport", args: 1, invert: true, aliases: []string{"source-port"}},
			{name: "dport", args: 1, invert: true, aliases: []string{"destination-port"}},
			{name: "dccp-types", args: 1, invert: true},
			{name: "dccp-option", args: 1, invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &DCCPMatch{SrcPorts: anyPorts, DstPorts: anyPorts} }})
}

// parseDCCPPorts parses "P", "P:Q", ":Q" or "P:", each a service name or
// a decimal number; a reversed range is kept, as iptables 1.8.9 keeps
// it, and matches nothing.
func parseDCCPPorts(opt, s string) (PortRange, error) {
	// Each end is read as udp reads its ports (getaddrinfo's service):
	// decimal with an optional "+", kept modulo 2^16 ("70000" is 4464),
	// or a service of any protocol; "0x10" does not resolve
	// (docs/kernel-notes.md).
	port := func(v string) (uint16, bool) { return parsePort(v, "udp") }
	bad := func(v string) error { return badValue("dccp", opt, v, "a port or a range PORT:PORT") }
	lo, hi, isRange := strings.Cut(s, ":")
	if !isRange {
		p, ok := port(s)
		if !ok {
			return PortRange{}, bad(s)
		}
		return PortRange{p, p}, nil
	}
	r := anyPorts
	var ok bool
	if lo != "" {
		if r.Lo, ok = port(lo); !ok {
			return r, bad(lo)
		}
	}
	if hi != "" {
		if r.Hi, ok = port(hi); !ok {
			return r, bad(hi)
		}
	}
	return r, nil
}

func (m *DCCPMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "sport", "dport":
		r, err := parseDCCPPorts("--"+opt, args[0])
		if err != nil {
			return err
		}
		if opt == "sport" {
			m.SrcPorts, m.InvSrcPorts, m.HasSrc = r, inv, true
		} else {
			m.DstPorts, m.InvDstPorts, m.HasDst = r, inv, true
		}
	case "dccp-types":
		var types uint16
		for _, name := range strings.Split(args[0], ",") {
			if name == "" {
				continue // iptables splits with strtok, which skips empty items
			}
			k := -1
			for i, n := range dccpTypeNames {
				if strings.EqualFold(n, name) {
					k = i
				}
			}
			switch {
			case k < 0:
				return badValue("dccp", "--dccp-types", name, "a list of REQUEST, RESPONSE, DATA, ACK, DATAACK, CLOSEREQ, CLOSE, RESET, SYNC, SYNCACK, INVALID")
			case k == len(dccpTypeNames)-1:
				types |= dccpInvalidTypes
			default:
				types |= 1 << k
			}
		}
		m.Types, m.HasTypes, m.InvTypes = types, true, inv
	case "dccp-option":
		n, ok := parseCUint(args[0], 255)
		if !ok || n == 0 {
			return badValue("dccp", "--dccp-option", args[0], "an option type 1-255")
		}
		m.Option, m.HasOpt, m.InvOpt = uint8(n), true, inv
	}
	return nil
}

func (m *DCCPMatch) done(c *ruleCtx) (any, error) {
	if err := needProto(c, "dccp", 33); err != nil {
		return nil, err
	}
	return m, nil
}

// Module implements Match.
func (m *DCCPMatch) Module() string { return "dccp" }

// appendTypes prints the type set: names (INVALID once, for 10-15) or
// numbers.
func (m *DCCPMatch) appendTypes(b []byte, numeric bool) []byte {
	sep := false
	for t := 0; t < 16; t++ {
		if m.Types&(1<<t) == 0 {
			continue
		}
		if sep {
			b = append(b, ',')
		}
		sep = true
		if numeric {
			b = strconv.AppendUint(b, uint64(t), 10)
			continue
		}
		if t >= 10 {
			return append(b, "INVALID"...)
		}
		b = append(b, dccpTypeNames[t]...)
	}
	return b
}

func (m *DCCPMatch) appendSave(b []byte) []byte {
	if m.HasSrc {
		b = appendPortOpt(b, "sport", m.SrcPorts, m.InvSrcPorts)
	}
	if m.HasDst {
		b = appendPortOpt(b, "dport", m.DstPorts, m.InvDstPorts)
	}
	if m.HasTypes {
		b = appendNot(b, m.InvTypes)
		b = append(b, " --dccp-types "...)
		b = m.appendTypes(b, false)
	}
	if m.HasOpt {
		b = appendNot(b, m.InvOpt)
		b = append(b, " --dccp-option "...)
		b = strconv.AppendUint(b, uint64(m.Option), 10)
	}
	return b
}

func (m *DCCPMatch) appendList(b []byte, numeric bool) []byte {
	b = append(b, " dccp"...)
	// -L leaves out a range of every port unless it is inverted, as it
	// does for tcp, udp and sctp (save and -S keep it).
	full := func(r PortRange, inv bool) bool { return r.Lo == 0 && r.Hi == 0xffff && !inv }
	if m.HasSrc && !full(m.SrcPorts, m.InvSrcPorts) {
		b = appendListPorts(b, "spt", m.SrcPorts, m.InvSrcPorts, true, "dccp")
	}
	if m.HasDst && !full(m.DstPorts, m.InvDstPorts) {
		b = appendListPorts(b, "dpt", m.DstPorts, m.InvDstPorts, true, "dccp")
	}
	if m.HasTypes {
		b = append(b, ' ')
		if m.InvTypes {
			b = append(b, "! "...)
		}
		b = m.appendTypes(b, numeric)
	}
	if m.HasOpt {
		b = append(b, " option="...)
		if m.InvOpt {
			b = append(b, '!')
		}
		b = strconv.AppendUint(b, uint64(m.Option), 10)
	}
	return b
}

func (m *DCCPMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.FragOffset != 0 || p.Proto != 33 {
		return false
	}
	if m.HasSrc && m.SrcPorts.contains(p.SrcPort) == m.InvSrcPorts {
		return false
	}
	if m.HasDst && m.DstPorts.contains(p.DstPort) == m.InvDstPorts {
		return false
	}
	if m.HasTypes && (m.Types&(1<<(p.DCCPType&15)) != 0) == m.InvTypes {
		return false
	}
	if m.HasOpt && (p.DCCPOptions[m.Option/64]&(1<<(m.Option%64)) != 0) == m.InvOpt {
		return false
	}
	return true
}
