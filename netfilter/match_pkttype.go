package netfilter

import "strings"

// PktType is the link-layer class of a packet (the kernel's skb->pkt_type,
// offset by one so that the zero value means "not set").
type PktType uint8

// Packet types.
const (
	// PktAuto derives the type from the destination address: multicast,
	// broadcast (an IPv4 broadcast address of the host) or unicast.
	PktAuto PktType = iota
	PktUnicast
	PktBroadcast
	PktMulticast
	PktOtherHost
	PktOutgoing
	PktLoopback
)

var pktTypeNames = []struct {
	t    PktType
	name string
}{
	{PktUnicast, "unicast"}, {PktBroadcast, "broadcast"}, {PktMulticast, "multicast"},
	{PktUnicast, "host"}, {PktOtherHost, "otherhost"}, {PktOutgoing, "outgoing"}, {PktLoopback, "loopback"},
}

// String returns the name iptables prints for t.
func (t PktType) String() string {
	for _, n := range pktTypeNames {
		if n.t == t {
			return n.name
		}
	}
	return "auto"
}

// PktTypeMatch is "-m pkttype [!] --pkt-type unicast|broadcast|multicast|
// otherhost" ("host" is unicast).
type PktTypeMatch struct {
	Type   PktType
	Invert bool
}

func init() {
	registerMatch(&module{name: "pkttype",
		opts:       []option{{name: "pkt-type", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &PktTypeMatch{} }})
}

func (m *PktTypeMatch) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	for _, n := range pktTypeNames {
		// iptables 1.8.9 accepts only these five names (case-insensitive).
		if n.t > PktOtherHost {
			continue
		}
		if strings.EqualFold(n.name, args[0]) {
			m.Type, m.Invert = n.t, inv
			return nil
		}
	}
	return badValue("pkttype", "--pkt-type", args[0], "unicast, broadcast, multicast, host or otherhost")
}

func (m *PktTypeMatch) done(*ruleCtx) (any, error) {
	if m.Type == PktAuto {
		return nil, mustSpecify("pkttype", "--pkt-type")
	}
	return m, nil
}

// Module implements Match.
func (m *PktTypeMatch) Module() string { return "pkttype" }

func (m *PktTypeMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --pkt-type "...)
	return append(b, m.Type.String()...)
}

func (m *PktTypeMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " PKTTYPE "...)
	if m.Invert {
		b = append(b, "!= "...)
	} else {
		b = append(b, "= "...)
	}
	return append(b, m.Type.String()...)
}

// pktType resolves the packet's type as xt_pkttype sees it: a looped-back
// packet counts as multicast (IPv6, or an IPv4 multicast destination) or
// broadcast.
func pktType(c *evalCtx) PktType {
	p := c.pkt
	t := p.PktType
	if t == PktAuto {
		switch {
		case p.Dst.IsMulticast():
			return PktMulticast
		case p.Dst.Is4() && AddrType(c.host.addrType(p.Dst, p.In))&AddrBroadcast != 0:
			return PktBroadcast
		}
		return PktUnicast
	}
	if t == PktLoopback {
		if p.Family == IPv6 || p.Dst.IsMulticast() {
			return PktMulticast
		}
		return PktBroadcast
	}
	return t
}

func (m *PktTypeMatch) match(c *evalCtx) bool {
	return (pktType(c) == m.Type) != m.Invert
}
