package cluster

import (
	"fmt"
	"net/netip"
)

// TunnelKind is an encapsulation.
type TunnelKind uint8

// Encapsulations.
const (
	// IPIP is IP-in-IP (protocol 4), Calico's default overlay (tunl0).
	IPIP TunnelKind = iota + 1
	// VXLAN is VXLAN over UDP, Flannel's (flannel.1, port 8472) and
	// Calico's (vxlan.calico, port 4789) overlay.
	VXLAN
)

func (k TunnelKind) String() string {
	switch k {
	case IPIP:
		return "ipip"
	case VXLAN:
		return "vxlan"
	}
	return fmt.Sprintf("TunnelKind(%d)", k)
}

// MarshalText makes a TunnelKind its name in JSON ("vxlan").
func (k TunnelKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// Tunnel is an overlay device of a host: a packet the host routes out the
// tunnel's interface is encapsulated in an outer packet from Local to the
// remote node and sent by the host (the outer packet crosses its OUTPUT
// and POSTROUTING); an outer packet delivered to Local on another host
// with the same kind of tunnel is decapsulated and received on that
// host's tunnel interface.
type Tunnel struct {
	Kind TunnelKind
	// Local is the host's underlay address, the outer source.
	Local netip.Addr
	// Port is VXLAN's UDP destination port; 0 means 4789.
	Port uint16
	// SrcPortMin and SrcPortMax are the range of VXLAN's UDP source
	// ports, MAX excluded, as `ip link add ... type vxlan srcport MIN
	// MAX` sets it: the port is picked in it from a hash of the inner
	// flow. Zero means the local port range, 32768 to 61000.
	SrcPortMin, SrcPortMax uint16
	// Remotes maps the next hop of a route through the tunnel to the
	// remote node's underlay address: for VXLAN the forwarding database
	// (Flannel routes 10.244.2.0/24 via 10.244.2.0 onlink, whose entry
	// leads to the node 10.240.0.5). A next hop not in the map is the
	// remote itself, as with IP-in-IP routes via the node's address.
	Remotes map[netip.Addr]netip.Addr
}

// Ports and lengths of the encapsulations.
const (
	vxlanPort     = 4789
	ipipProto     = 4
	ipipOverhead  = 20
	vxlanOverhead = 50 // outer IP 20, UDP 8, VXLAN 8, inner Ethernet 14
)

// AddTunnel makes the host's interface iface a tunnel.
func (n *Network) AddTunnel(host, iface string, t Tunnel) error {
	d, err := n.host(host)
	if err != nil {
		return err
	}
	if d.h.Interface(iface) == nil {
		return fmt.Errorf("%w: host %q has no interface %q for the tunnel (add it with AddInterface)", ErrTopology, host, iface)
	}
	if t.Kind != IPIP && t.Kind != VXLAN {
		return fmt.Errorf("%w: tunnel %s/%s: unknown kind %s (ipip or vxlan)", ErrTopology, host, iface, t.Kind)
	}
	if !t.Local.Is4() {
		return fmt.Errorf("%w: tunnel %s/%s needs an IPv4 local address", ErrTopology, host, iface)
	}
	if t.Port == 0 {
		t.Port = vxlanPort
	}
	if t.SrcPortMin == 0 && t.SrcPortMax == 0 {
		t.SrcPortMin, t.SrcPortMax = 32768, 61000
	}
	if t.SrcPortMax <= t.SrcPortMin {
		return fmt.Errorf("%w: tunnel %s/%s: source port range %d-%d is empty (MAX is excluded)", ErrTopology, host, iface, t.SrcPortMin, t.SrcPortMax)
	}
	if _, ok := d.tunnels[iface]; ok {
		return fmt.Errorf("%w: tunnel %s/%s declared twice", ErrTopology, host, iface)
	}
	d.tunnels[iface] = &t
	return nil
}
