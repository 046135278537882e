package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
)

// Socket is a listening socket of a local process, as -m socket finds it:
// bound to Addr (the unspecified address for a wildcard bind) and Port,
// for Proto (TCP or UDP). Transparent is IP_TRANSPARENT, Mark is SO_MARK
// (what --restore-skmark copies to the packet).
type Socket struct {
	Proto       inet.Proto
	Addr        netip.Addr
	Port        uint16
	Transparent bool
	Mark        uint32
}

// AddSocket adds a listening socket to the host, for -m socket. Only
// listening sockets are modelled: established connections' sockets are
// not, so a packet of an established connection finds the listener.
func (h *Host) AddSocket(s Socket) error {
	if s.Proto != inet.TCP && s.Proto != inet.UDP {
		return fmt.Errorf("%w: socket protocol %d (want tcp or udp)", ErrBadValue, s.Proto)
	}
	if !s.Addr.IsValid() {
		return fmt.Errorf("%w: socket address unset (use 0.0.0.0 or :: for a wildcard bind)", ErrBadValue)
	}
	h.sockets = append(h.sockets, s)
	return nil
}

// Sockets returns the host's listening sockets.
func (h *Host) Sockets() []Socket { return append([]Socket(nil), h.sockets...) }

// lookupSocket finds the listener for (addr, port): one bound to addr
// wins over a wildcard one, as the kernel's scoring does.
func (h *Host) lookupSocket(proto inet.Proto, addr netip.Addr, port uint16) *Socket {
	var wild *Socket
	for i := range h.sockets {
		s := &h.sockets[i]
		if s.Proto != proto || s.Port != port || s.Addr.Is4() != addr.Is4() {
			continue
		}
		if s.Addr == addr {
			return s
		}
		if s.Addr.IsUnspecified() && wild == nil {
			wild = s
		}
	}
	return wild
}

// SocketMatch is "-m socket": the packet belongs to a local socket (in
// PREROUTING or INPUT). A socket bound to the wildcard address does not
// count unless NoWildcard; with Transparent only IP_TRANSPARENT sockets
// count; RestoreMark copies the socket's mark to the packet when the
// socket counts (xt_socket revision 3).
type SocketMatch struct {
	Transparent, NoWildcard, RestoreMark bool
}

func init() {
	registerMatch(&module{name: "socket",
		opts:       []option{{name: "transparent"}, {name: "nowildcard"}, {name: "restore-skmark"}},
		newBuilder: func(*ruleCtx) builder { return &SocketMatch{} },
		hooks:      []Hook{Prerouting, Input}})
}

func (m *SocketMatch) set(_ *ruleCtx, opt string, _ bool, _ []string) error {
	switch opt {
	case "transparent":
		m.Transparent = true
	case "nowildcard":
		m.NoWildcard = true
	case "restore-skmark":
		m.RestoreMark = true
	}
	return nil
}

func (m *SocketMatch) done(*ruleCtx) (any, error) { return m, nil }

// Module implements Match.
func (m *SocketMatch) Module() string { return "socket" }

func (m *SocketMatch) appendSave(b []byte) []byte {
	if m.Transparent {
		b = append(b, " --transparent"...)
	}
	if m.NoWildcard {
		b = append(b, " --nowildcard"...)
	}
	if m.RestoreMark {
		b = append(b, " --restore-skmark"...)
	}
	return b
}

func (m *SocketMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " socket"...)
	return m.appendSave(b)
}

// match follows xt_socket's socket_match with nf_sk_lookup_slow: the
// packet's destination (for an ICMP error, the source of the packet it
// quotes) is looked up among the host's listeners.
func (m *SocketMatch) match(c *evalCtx) bool {
	p := c.pkt
	proto, addr, port := p.Proto, p.Dst, p.DstPort
	if p.Inner.Proto != 0 && (p.Proto == inet.ICMP || p.Proto == inet.ICMPv6) {
		proto, addr, port = p.Inner.Proto, p.Inner.Src, p.Inner.SrcPort
	}
	if proto != inet.TCP && proto != inet.UDP {
		return false
	}
	s := c.host.lookupSocket(proto, addr, port)
	if s == nil {
		return false
	}
	wildcard := !m.NoWildcard && s.Addr.IsUnspecified()
	transparent := !m.Transparent || s.Transparent
	if m.RestoreMark && !wildcard && transparent {
		p.Mark = s.Mark
	}
	return !wildcard && transparent
}
