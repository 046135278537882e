package kerneltest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"

	"golang.org/x/sys/unix"
)

// SocketSpec describes a local socket to open inside a namespace, as a
// proxy behind TPROXY or a service behind -m socket opens it.
type SocketSpec struct {
	Proto string         // "tcp" (a listener) or "udp"
	Addr  netip.AddrPort // the bind address; 0.0.0.0 or :: for a wildcard bind
	// Transparent sets IP_TRANSPARENT (IPV6_TRANSPARENT for IPv6), which
	// TPROXY and -m socket --transparent look for.
	Transparent bool
	Mark        uint32 // SO_MARK, when not 0
}

// Socket is a socket opened in a namespace by [NS.OpenSocket]. It is
// non-blocking: [Socket.Datagrams] and [Socket.Accept] return what has
// arrived so far (after [Lab.Settle], everything sent). Connections it
// accepts stay open until Close, so the kernel keeps finding them.
type Socket struct {
	spec     SocketSpec
	fd       int
	accepted []int
}

// Datagram is what a UDP socket received: the sender and the original
// destination (IP_ORIGDSTADDR, the address the packet was sent to, which
// differs from the socket's own for a packet TPROXY diverted).
type Datagram struct {
	From, OrigDst netip.AddrPort
	Len           int
}

// Conn is a TCP connection a listener accepted.
type Conn struct {
	Local, Remote netip.AddrPort
}

// OpenSocket opens, inside the namespace, a TCP listener or a UDP socket
// bound as spec says; the caller closes it (or registers t.Cleanup).
func (n *NS) OpenSocket(spec SocketSpec) (*Socket, error) {
	s := &Socket{spec: spec, fd: -1}
	typ := unix.SOCK_DGRAM
	switch spec.Proto {
	case "udp":
	case "tcp":
		typ = unix.SOCK_STREAM
	default:
		return nil, fmt.Errorf("kerneltest: socket protocol %q, want tcp or udp", spec.Proto)
	}
	if !spec.Addr.IsValid() {
		return nil, errors.New("kerneltest: socket address unset")
	}
	v6 := spec.Addr.Addr().Is6()
	err := inNetns(n.name, func() error {
		family := unix.AF_INET
		if v6 {
			family = unix.AF_INET6
		}
		fd, err := unix.Socket(family, typ|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("kerneltest: socket in %s: %w", n.name, err)
		}
		s.fd = fd
		opts := []struct{ level, opt, val int }{{unix.SOL_SOCKET, unix.SO_REUSEADDR, 1}}
		if spec.Transparent {
			if v6 {
				opts = append(opts, struct{ level, opt, val int }{unix.SOL_IPV6, unix.IPV6_TRANSPARENT, 1})
			} else {
				opts = append(opts, struct{ level, opt, val int }{unix.SOL_IP, unix.IP_TRANSPARENT, 1})
			}
		}
		if spec.Mark != 0 {
			opts = append(opts, struct{ level, opt, val int }{unix.SOL_SOCKET, unix.SO_MARK, int(spec.Mark)})
		}
		if spec.Proto == "udp" {
			if v6 {
				opts = append(opts, struct{ level, opt, val int }{unix.SOL_IPV6, unix.IPV6_RECVORIGDSTADDR, 1})
			} else {
				opts = append(opts, struct{ level, opt, val int }{unix.SOL_IP, unix.IP_RECVORIGDSTADDR, 1})
			}
		}
		for _, o := range opts {
			if err := unix.SetsockoptInt(fd, o.level, o.opt, o.val); err != nil {
				return fmt.Errorf("kerneltest: setsockopt %d/%d: %w", o.level, o.opt, err)
			}
		}
		if err := unix.Bind(fd, sockaddrOf(spec.Addr)); err != nil {
			return fmt.Errorf("kerneltest: bind %s in %s: %w", spec.Addr, n.name, err)
		}
		if spec.Proto == "tcp" {
			if err := unix.Listen(fd, 16); err != nil {
				return fmt.Errorf("kerneltest: listen %s: %w", spec.Addr, err)
			}
		}
		return nil
	})
	if err != nil {
		if s.fd >= 0 {
			unix.Close(s.fd)
		}
		return nil, err
	}
	return s, nil
}

func sockaddrOf(a netip.AddrPort) unix.Sockaddr {
	if a.Addr().Is4() {
		return &unix.SockaddrInet4{Port: int(a.Port()), Addr: a.Addr().As4()}
	}
	return &unix.SockaddrInet6{Port: int(a.Port()), Addr: a.Addr().As16()}
}

func addrPortOf(sa unix.Sockaddr) netip.AddrPort {
	switch sa := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(sa.Port))
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(sa.Addr), uint16(sa.Port))
	}
	return netip.AddrPort{}
}

// Datagrams returns the datagrams a UDP socket received since the last
// call.
func (s *Socket) Datagrams() ([]Datagram, error) {
	var out []Datagram
	buf, oob := make([]byte, 65536), make([]byte, 256)
	for {
		n, oobn, _, from, err := unix.Recvmsg(s.fd, buf, oob, 0)
		if err == unix.EAGAIN {
			return out, nil
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("kerneltest: recvmsg on %s: %w", s.spec.Addr, err)
		}
		d := Datagram{From: addrPortOf(from), Len: n}
		msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
		if err != nil {
			return out, fmt.Errorf("kerneltest: control message: %w", err)
		}
		for _, m := range msgs {
			switch {
			case m.Header.Level == unix.SOL_IP && m.Header.Type == unix.IP_ORIGDSTADDR && len(m.Data) >= 8:
				d.OrigDst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(m.Data[4:8])), binary.BigEndian.Uint16(m.Data[2:4]))
			case m.Header.Level == unix.SOL_IPV6 && m.Header.Type == unix.IPV6_ORIGDSTADDR && len(m.Data) >= 24:
				d.OrigDst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(m.Data[8:24])), binary.BigEndian.Uint16(m.Data[2:4]))
			}
		}
		out = append(out, d)
	}
}

// Accept accepts the connections a TCP listener has completed since the
// last call, keeping them open, and returns their addresses.
func (s *Socket) Accept() ([]Conn, error) {
	var out []Conn
	for {
		fd, sa, err := unix.Accept4(s.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err == unix.EAGAIN {
			return out, nil
		}
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return out, fmt.Errorf("kerneltest: accept on %s: %w", s.spec.Addr, err)
		}
		s.accepted = append(s.accepted, fd)
		local, err := unix.Getsockname(fd)
		if err != nil {
			return out, fmt.Errorf("kerneltest: getsockname: %w", err)
		}
		out = append(out, Conn{Local: addrPortOf(local), Remote: addrPortOf(sa)})
	}
}

// Close closes the socket and the connections it accepted.
func (s *Socket) Close() error {
	var errs []error
	for _, fd := range s.accepted {
		errs = append(errs, unix.Close(fd))
	}
	s.accepted = nil
	if s.fd >= 0 {
		errs = append(errs, unix.Close(s.fd))
		s.fd = -1
	}
	return errors.Join(errs...)
}

// SendFromNodeAs sends an IP packet from the node as [Lab.SendFromNode]
// does, from a raw socket opened with filesystem user and group ids uid
// and gid, which is what -m owner --uid-owner and --gid-owner read (the
// credentials the socket was opened with).
func (l *Lab) SendFromNodeAs(uid, gid uint32, pkt []byte) error {
	r := &rawIPSock{fd4: -1, fd6: -1}
	defer r.close()
	err := inNetns(l.node.name, func() error {
		// setfsuid and setfsgid change the calling thread only, which
		// inNetns holds locked; the raw socket needs CAP_NET_RAW, which
		// they leave alone.
		oldGID, err := unix.SetfsgidRetGid(int(gid))
		if err != nil {
			return fmt.Errorf("kerneltest: setfsgid %d: %w", gid, err)
		}
		defer unix.SetfsgidRetGid(oldGID)
		oldUID, err := unix.SetfsuidRetUid(int(uid))
		if err != nil {
			return fmt.Errorf("kerneltest: setfsuid %d: %w", uid, err)
		}
		defer unix.SetfsuidRetUid(oldUID)
		if r.fd4, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
			return fmt.Errorf("kerneltest: raw IPv4 socket as uid %d: %w", uid, err)
		}
		if r.fd6, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
			return fmt.Errorf("kerneltest: raw IPv6 socket as uid %d: %w", uid, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	return onCPU(l.cpu, func() error { return r.send(pkt) })
}
