package cluster

import (
	"fmt"
	"net/netip"

	"github.com/packetwalk/packetwalk/inet"
)

// Gateway is an Internet gateway with source NAT (an Azure NAT gateway or
// the default outbound access, an AWS NAT gateway): packets from Inside
// addresses leaving through it get the Public source address, and the
// replies to them are translated back; other packets pass unchanged,
// and unsolicited packets to Public are dropped. Its ports are "inside"
// and "outside".
type Gateway struct {
	name   string
	public netip.Addr
	inside []netip.Prefix
	out    map[flowKey]netip.AddrPort // inside tuple → public source
	in     map[flowKey]netip.AddrPort // reply tuple → inside destination
}

// AddGateway adds a gateway called name that translates the sources in
// inside to public.
func (n *Network) AddGateway(name string, public netip.Addr, inside ...netip.Prefix) (*Gateway, error) {
	if !public.IsValid() {
		return nil, fmt.Errorf("%w: gateway %q has no public address", ErrTopology, name)
	}
	g := &Gateway{name: name, public: public, inside: inside, out: map[flowKey]netip.AddrPort{}, in: map[flowKey]netip.AddrPort{}}
	if err := n.add(name, g); err != nil {
		return nil, err
	}
	return g, nil
}

// Gateway returns the gateway called name, or nil.
func (n *Network) Gateway(name string) *Gateway {
	g, _ := n.devices[name].(*Gateway)
	return g
}

func (*Gateway) kind() Kind { return KindGateway }

func (*Gateway) hasPort(iface string) bool { return iface == "inside" || iface == "outside" }

func (g *Gateway) owns(iface string, a netip.Addr) bool { return iface == "outside" && a == g.public }

func (g *Gateway) translates(a netip.Addr) bool {
	for _, p := range g.inside {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// snat returns the public source of an outgoing packet's tuple: the
// connection's, or a new one that keeps the port when it is free. A
// protocol without ports (ICMP) keeps port 0: its connections are told
// apart by their addresses only.
func (g *Gateway) snat(k flowKey, record bool) netip.AddrPort {
	if s, ok := g.out[k]; ok {
		return s
	}
	if !hasPorts(k.proto) {
		s := netip.AddrPortFrom(g.public, 0)
		if record {
			g.out[k], g.in[flowKey{proto: k.proto, src: k.dst, dst: s}] = s, k.src
		}
		return s
	}
	port := k.src.Port()
	for {
		s := netip.AddrPortFrom(g.public, port)
		r := flowKey{proto: k.proto, src: k.dst, dst: s}
		if _, used := g.in[r]; !used {
			if record {
				g.out[k], g.in[r] = s, k.src
			}
			return s
		}
		port++
		if port < 1024 {
			port = 1024
		}
	}
}

func hasPorts(p inet.Proto) bool { return p.HasPorts() }
