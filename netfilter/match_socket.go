package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
)

// Socket is a socket of a local process, as -m socket and TPROXY find
// it: bound to Addr (the unspecified address for a wildcard bind) and
// Port, for Proto (TCP or UDP). Remote is the peer of a connected socket
// (an accepted or connected TCP connection, a connected UDP socket),
// whose Addr is then the connection's local address; it is the zero value
// for a listener (an unconnected UDP socket). Transparent is
// IP_TRANSPARENT (an accepted connection inherits its listener's), Mark
// is SO_MARK (what --restore-skmark copies to the packet; an accepted
// connection inherits its listener's). HalfOpen marks a TCP connection
// whose handshake is not complete (the kernel's request socket, from the
// SYN to the ACK that completes it): it is found, but is not a full
// socket, so --restore-skmark leaves the packet's mark alone.
type Socket struct {
	Proto       inet.Proto
	Addr        netip.Addr
	Port        uint16
	Remote      netip.AddrPort
	Transparent bool
	Mark        uint32
	HalfOpen    bool
}

// AddSocket adds a socket to the host, for -m socket and TPROXY.
// Connections are not made by the host: a test that lets a SYN reach a
// listener adds the accepted connection's socket itself, as accept()
// would give it.
func (h *Host) AddSocket(s Socket) error {
	if s.Proto != inet.TCP && s.Proto != inet.UDP {
		return fmt.Errorf("%w: socket protocol %d (want tcp or udp)", ErrBadValue, s.Proto)
	}
	if !s.Addr.IsValid() {
		return fmt.Errorf("%w: socket address unset (use 0.0.0.0 or :: for a wildcard bind)", ErrBadValue)
	}
	if s.Remote.IsValid() {
		if s.Addr.IsUnspecified() {
			return fmt.Errorf("%w: connected socket to %s with the wildcard local address %s (a connection has a local address)", ErrBadValue, s.Remote, s.Addr)
		}
		if s.Remote.Addr().Is4() != s.Addr.Is4() {
			return fmt.Errorf("%w: connected socket from %s to %s of another family", ErrBadValue, s.Addr, s.Remote)
		}
	}
	if s.HalfOpen && (s.Proto != inet.TCP || !s.Remote.IsValid()) {
		return fmt.Errorf("%w: a half-open socket is a TCP connection (Remote set)", ErrBadValue)
	}
	h.sockets = append(h.sockets, s)
	return nil
}

// RemoveSocket removes the host's first socket equal to s (a connection
// closed, or a half-open one to be replaced by the accepted one), and
// reports whether there was one.
func (h *Host) RemoveSocket(s Socket) bool {
	for i := range h.sockets {
		if h.sockets[i] == s {
			h.sockets = append(h.sockets[:i:i], h.sockets[i+1:]...)
			return true
		}
	}
	return false
}

// Sockets returns the host's sockets.
func (h *Host) Sockets() []Socket { return append([]Socket(nil), h.sockets...) }

// lookupListener finds the listener (an unconnected socket) for (addr,
// port): one bound to addr wins over a wildcard one, as the kernel's
// scoring does.
func (h *Host) lookupListener(proto inet.Proto, addr netip.Addr, port uint16) *Socket {
	var wild *Socket
	for i := range h.sockets {
		s := &h.sockets[i]
		if s.Proto != proto || s.Port != port || s.Remote.IsValid() || s.Addr.Is4() != addr.Is4() {
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

// lookupConnected finds the connected socket of the packet's four-tuple
// (the kernel's established lookup): local (dst, dport), peer (src,
// sport).
func (h *Host) lookupConnected(proto inet.Proto, src netip.Addr, sport uint16, dst netip.Addr, dport uint16) *Socket {
	for i := range h.sockets {
		s := &h.sockets[i]
		if s.Proto == proto && s.Port == dport && s.Addr == dst && s.Remote.IsValid() &&
			s.Remote.Port() == sport && s.Remote.Addr() == src {
			return s
		}
	}
	return nil
}

// lookupSocket is the socket lookup of a packet to (dst, dport) from
// (src, sport): a connected socket first, then a listener, as
// inet_lookup and the UDP lookup find them.
func (h *Host) lookupSocket(proto inet.Proto, src netip.Addr, sport uint16, dst netip.Addr, dport uint16) *Socket {
	if s := h.lookupConnected(proto, src, sport, dst, dport); s != nil {
		return s
	}
	return h.lookupListener(proto, dst, dport)
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

// match follows xt_socket's socket_match: the socket the packet is
// already assigned to (by TPROXY earlier on its way), else the lookup of
// nf_sk_lookup_slow among the host's sockets, a connected one first, for
// the packet's addresses (for an ICMP error, those of the packet it
// quotes, seen from this side). A listener bound to the wildcard address
// does not count unless NoWildcard (a connection always has a local
// address); with Transparent only IP_TRANSPARENT sockets count.
func (m *SocketMatch) match(c *evalCtx) bool {
	p := c.pkt
	s := c.walk.sock
	if s == nil {
		proto, src, sport, dst, dport := p.Proto, p.Src, p.SrcPort, p.Dst, p.DstPort
		if p.Inner.Proto != 0 && (p.Proto == inet.ICMP || p.Proto == inet.ICMPv6) {
			proto, src, sport, dst, dport = p.Inner.Proto, p.Inner.Dst, p.Inner.DstPort, p.Inner.Src, p.Inner.SrcPort
		}
		if proto != inet.TCP && proto != inet.UDP {
			return false
		}
		s = c.host.lookupSocket(proto, src, sport, dst, dport)
	}
	if s == nil {
		return false
	}
	wildcard := !m.NoWildcard && s.Addr.IsUnspecified()
	transparent := !m.Transparent || s.Transparent
	if m.RestoreMark && !wildcard && transparent && !s.HalfOpen {
		p.Mark = s.Mark
	}
	return !wildcard && transparent
}
