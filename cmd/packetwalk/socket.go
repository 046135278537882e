package main

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// parseSocketArg reads --socket 'PROTO ADDR:PORT [transparent] [mark N]
// [peer ADDR:PORT [half-open]]': a listener (an unconnected UDP socket)
// bound to ADDR:PORT, or with peer a connection whose local end is
// ADDR:PORT, as -m socket and TPROXY find them. IPv6 addresses take
// brackets ("[::]:15006").
func parseSocketArg(s string) (netfilter.Socket, error) {
	f := strings.Fields(s)
	if len(f) < 2 {
		return netfilter.Socket{}, fmt.Errorf("want PROTO ADDR:PORT [transparent] [mark N] [peer ADDR:PORT [half-open]]")
	}
	var sk netfilter.Socket
	switch f[0] {
	case "tcp":
		sk.Proto = inet.TCP
	case "udp":
		sk.Proto = inet.UDP
	default:
		return sk, fmt.Errorf("protocol %q: want tcp or udp", f[0])
	}
	ap, err := netip.ParseAddrPort(f[1])
	if err != nil {
		return sk, fmt.Errorf("address %q: want ADDR:PORT ([ADDR]:PORT for IPv6)", f[1])
	}
	sk.Addr, sk.Port = ap.Addr().Unmap(), ap.Port()
	for i := 2; i < len(f); i++ {
		switch f[i] {
		case "transparent":
			sk.Transparent = true
		case "half-open":
			sk.HalfOpen = true
		case "mark", "peer":
			if i+1 == len(f) {
				return sk, fmt.Errorf("%s needs a value", f[i])
			}
			if f[i] == "mark" {
				v, err := strconv.ParseUint(f[i+1], 0, 32)
				if err != nil {
					return sk, fmt.Errorf("mark %q: want a 32-bit number", f[i+1])
				}
				sk.Mark = uint32(v)
			} else {
				p, err := netip.ParseAddrPort(f[i+1])
				if err != nil {
					return sk, fmt.Errorf("peer %q: want ADDR:PORT", f[i+1])
				}
				sk.Remote = netip.AddrPortFrom(p.Addr().Unmap(), p.Port())
			}
			i++
		default:
			return sk, fmt.Errorf("%q: want transparent, mark N, peer ADDR:PORT or half-open", f[i])
		}
	}
	return sk, nil
}

// socketText describes a socket as --socket takes it.
func socketText(s *netfilter.Socket) string {
	b := strings.ToLower(s.Proto.String()) + " " + netip.AddrPortFrom(s.Addr, s.Port).String()
	if s.Transparent {
		b += " transparent"
	}
	if s.Mark != 0 {
		b += fmt.Sprintf(" mark %#x", s.Mark)
	}
	if s.Remote.IsValid() {
		b += " peer " + s.Remote.String()
	}
	if s.HalfOpen {
		b += " half-open"
	}
	return b
}
