package kerneltest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// inNetns runs fn on an OS thread switched into namespace name, then switches
// the thread back. Sockets created by fn stay in that namespace for their
// whole life. If the switch back fails the thread stays locked, so the Go
// runtime discards it instead of reusing a thread in the wrong namespace.
func inNetns(name string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("kerneltest: open own netns: %w", err)
	}
	defer unix.Close(orig)
	target, err := unix.Open(filepath.Join(netnsDir, name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("kerneltest: open netns %s: %w", name, err)
	}
	defer unix.Close(target)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("kerneltest: setns %s: %w", name, err)
	}
	fnErr := fn()
	if err := unix.Setns(orig, unix.CLONE_NEWNET); err != nil {
		return errors.Join(fnErr, fmt.Errorf("kerneltest: setns back from %s: %w", name, err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

// onCPU runs fn on a thread pinned to cpu, then restores the thread's
// affinity. Frames sent from one CPU enter that CPU's receive backlog, which
// the kernel processes in FIFO order; this is what makes [Lab.Settle] exact.
func onCPU(cpu int, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, pin unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		return fmt.Errorf("kerneltest: sched_getaffinity: %w", err)
	}
	pin.Set(cpu)
	if err := unix.SchedSetaffinity(0, &pin); err != nil {
		return fmt.Errorf("kerneltest: pin to cpu %d: %w", cpu, err)
	}
	fnErr := fn()
	if err := unix.SchedSetaffinity(0, &old); err != nil {
		return errors.Join(fnErr, fmt.Errorf("kerneltest: restore affinity: %w", err))
	}
	return fnErr
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// packetSock is an AF_PACKET socket bound to one interface of one namespace.
type packetSock struct {
	fd      int
	ifindex int
	buf     []byte
}

// openPacketSock opens an AF_PACKET socket on dev inside namespace ns. With
// capture it receives every frame (ETH_P_ALL); without it, it only sends.
func openPacketSock(ns, dev string, capture bool) (*packetSock, error) {
	s := &packetSock{fd: -1, buf: make([]byte, 65536)}
	err := inNetns(ns, func() error {
		ifi, err := net.InterfaceByName(dev)
		if err != nil {
			return fmt.Errorf("kerneltest: interface %s in %s: %w", dev, ns, err)
		}
		s.ifindex = ifi.Index
		proto := uint16(0)
		if capture {
			proto = htons(unix.ETH_P_ALL)
		}
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, int(proto))
		if err != nil {
			return fmt.Errorf("kerneltest: AF_PACKET socket in %s: %w", ns, err)
		}
		s.fd = fd
		if capture {
			_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 8<<20)
		}
		return unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: s.ifindex})
	})
	if err != nil {
		if s.fd >= 0 {
			unix.Close(s.fd)
		}
		return nil, err
	}
	return s, nil
}

func (s *packetSock) close() error { return unix.Close(s.fd) }

// send writes one complete Ethernet frame to the wire.
func (s *packetSock) send(frame []byte) error {
	if len(frame) < 14 {
		return fmt.Errorf("kerneltest: frame of %d bytes is shorter than an Ethernet header", len(frame))
	}
	sa := &unix.SockaddrLinklayer{Ifindex: s.ifindex, Halen: 6, Protocol: htons(uint16(frame[12])<<8 | uint16(frame[13]))}
	copy(sa.Addr[:], frame[0:6])
	return unix.Sendto(s.fd, frame, 0, sa)
}

// rawFrame is one captured frame with its packet type (unix.PACKET_*).
type rawFrame struct {
	pktType uint8
	data    []byte
}

// recv returns the next frame, waiting at most until deadline; ok is false
// on timeout.
func (s *packetSock) recv(deadline time.Time) (f rawFrame, ok bool, err error) {
	for {
		n, from, err := unix.Recvfrom(s.fd, s.buf, unix.MSG_DONTWAIT)
		if err == nil {
			ll, _ := from.(*unix.SockaddrLinklayer)
			var pt uint8
			if ll != nil {
				pt = ll.Pkttype
			}
			return rawFrame{pktType: pt, data: append([]byte(nil), s.buf[:n]...)}, true, nil
		}
		if err == unix.EINTR {
			continue
		}
		if err != unix.EAGAIN {
			return rawFrame{}, false, fmt.Errorf("kerneltest: recv: %w", err)
		}
		wait := time.Until(deadline)
		if wait <= 0 {
			return rawFrame{}, false, nil
		}
		ms := int(wait / time.Millisecond)
		if ms == 0 {
			ms = 1
		}
		pfd := []unix.PollFd{{Fd: int32(s.fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(pfd, ms); err != nil && err != unix.EINTR {
			return rawFrame{}, false, fmt.Errorf("kerneltest: poll: %w", err)
		}
	}
}

// drain returns every frame already queued, without waiting.
func (s *packetSock) drain() ([]rawFrame, error) {
	var out []rawFrame
	for {
		f, ok, err := s.recv(time.Time{})
		if err != nil || !ok {
			return out, err
		}
		out = append(out, f)
	}
}

// rawIPSock sends IP packets whose header the caller wrote (IP_HDRINCL),
// from inside a namespace, so that they traverse OUTPUT like locally
// generated traffic.
type rawIPSock struct {
	fd4, fd6 int
}

func openRawIPSock(ns string) (*rawIPSock, error) {
	r := &rawIPSock{fd4: -1, fd6: -1}
	err := inNetns(ns, func() error {
		var err error
		// IPPROTO_RAW implies IP_HDRINCL (and IPV6_HDRINCL for AF_INET6).
		if r.fd4, err = unix.Socket(unix.AF_INET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
			return fmt.Errorf("kerneltest: raw IPv4 socket in %s: %w", ns, err)
		}
		if r.fd6, err = unix.Socket(unix.AF_INET6, unix.SOCK_RAW|unix.SOCK_CLOEXEC, unix.IPPROTO_RAW); err != nil {
			return fmt.Errorf("kerneltest: raw IPv6 socket in %s: %w", ns, err)
		}
		return nil
	})
	if err != nil {
		r.close()
		return nil, err
	}
	return r, nil
}

func (r *rawIPSock) close() {
	if r.fd4 >= 0 {
		unix.Close(r.fd4)
	}
	if r.fd6 >= 0 {
		unix.Close(r.fd6)
	}
}

// send transmits an IPv4 or IPv6 packet (version read from the first byte)
// to the destination address in its header.
func (r *rawIPSock) send(pkt []byte) error {
	if len(pkt) == 0 {
		return errors.New("kerneltest: empty IP packet")
	}
	switch pkt[0] >> 4 {
	case 4:
		if len(pkt) < 20 {
			return fmt.Errorf("kerneltest: IPv4 packet of %d bytes is shorter than its header", len(pkt))
		}
		dst, _ := netip.AddrFromSlice(pkt[16:20])
		return unix.Sendto(r.fd4, pkt, 0, &unix.SockaddrInet4{Addr: dst.As4()})
	case 6:
		if len(pkt) < 40 {
			return fmt.Errorf("kerneltest: IPv6 packet of %d bytes is shorter than its header", len(pkt))
		}
		dst, _ := netip.AddrFromSlice(pkt[24:40])
		return unix.Sendto(r.fd6, pkt, 0, &unix.SockaddrInet6{Addr: dst.As16()})
	default:
		return fmt.Errorf("kerneltest: IP version %d in first byte 0x%02x, want 4 or 6", pkt[0]>>4, pkt[0])
	}
}
