package cluster

import (
	"fmt"
	"net/netip"
)

// Router is a layer-3 network between its ports: a cloud VNet or VPC with
// its route table, the Internet, or a plain router. It forwards by the
// longest matching prefix among the prefixes its ports reach and its
// routes (a route wins over a port prefix of the same length, as a
// user-defined route wins over a system route in Azure), and does not
// change the packet: cloud networks do not decrement the TTL. A frame
// addressed to a neighbour on one of its ports (a load balancer's packet
// for its backend) goes to that neighbour; every other packet is routed
// by its destination, whatever its sender took for on link, as a cloud
// network does.
type Router struct {
	name   string
	addrs  []netip.Addr
	ports  []routerPort
	routes []RouterRoute
}

type routerPort struct {
	name  string
	reach []netip.Prefix
}

// RouterRoute is a route of a router: packets to Dst go to the neighbour
// NextHop (a node, for a pod CIDR), or, without one, out Port.
type RouterRoute struct {
	Dst     netip.Prefix
	NextHop netip.Addr
	Port    string
}

// AddRouter adds a router called name whose own addresses (the gateway
// address hosts route through, 10.240.0.1 in an Azure subnet) are addrs.
func (n *Network) AddRouter(name string, addrs ...netip.Addr) (*Router, error) {
	r := &Router{name: name, addrs: addrs}
	if err := n.add(name, r); err != nil {
		return nil, err
	}
	return r, nil
}

// Router returns the router called name, or nil.
func (n *Network) Router(name string) *Router {
	r, _ := n.devices[name].(*Router)
	return r
}

func (*Router) kind() Kind { return KindRouter }

func (r *Router) hasPort(iface string) bool { return r.port(iface) != nil }

func (r *Router) owns(_ string, a netip.Addr) bool {
	for _, x := range r.addrs {
		if x == a {
			return true
		}
	}
	return false
}

func (r *Router) port(name string) *routerPort {
	for i := range r.ports {
		if r.ports[i].name == name {
			return &r.ports[i]
		}
	}
	return nil
}

// AddPort adds a port behind which the prefixes reach are on link (a
// node's address as a /32, a load balancer's frontend addresses, a subnet).
// A port no link attaches to is where packets leave the model.
func (r *Router) AddPort(name string, reach ...netip.Prefix) error {
	if name == "" {
		return fmt.Errorf("%w: router %q: a port needs a name", ErrTopology, r.name)
	}
	if r.port(name) != nil {
		return fmt.Errorf("%w: router %q has port %q already", ErrTopology, r.name, name)
	}
	for _, p := range reach {
		if !p.IsValid() {
			return fmt.Errorf("%w: router %q port %q: invalid prefix", ErrTopology, r.name, name)
		}
	}
	r.ports = append(r.ports, routerPort{name: name, reach: append([]netip.Prefix(nil), reach...)})
	return nil
}

// AddRoute adds a route (a user-defined route of a cloud route table).
func (r *Router) AddRoute(rt RouterRoute) error {
	if !rt.Dst.IsValid() {
		return fmt.Errorf("%w: router %q: route without destination", ErrTopology, r.name)
	}
	if rt.NextHop.IsValid() == (rt.Port != "") {
		return fmt.Errorf("%w: router %q: route to %s needs a next hop or a port (one of them)", ErrTopology, r.name, rt.Dst)
	}
	if rt.Port != "" && r.port(rt.Port) == nil {
		return fmt.Errorf("%w: router %q: route to %s via unknown port %q", ErrTopology, r.name, rt.Dst, rt.Port)
	}
	r.routes = append(r.routes, rt)
	return nil
}

// onLink returns the port whose prefixes hold a, by the longest prefix.
func (r *Router) onLink(a netip.Addr) (string, bool) {
	best, port := -1, ""
	for _, p := range r.ports {
		for _, pf := range p.reach {
			if pf.Contains(a) && pf.Bits() > best {
				best, port = pf.Bits(), p.name
			}
		}
	}
	return port, best >= 0
}

// lookup routes dst: the port and the neighbour it goes to (invalid: the
// device behind the port routes it).
func (r *Router) lookup(dst netip.Addr) (port string, next netip.Addr, err error) {
	best := -1
	var rt *RouterRoute
	for i := range r.routes {
		if x := &r.routes[i]; x.Dst.Contains(dst) && x.Dst.Bits() > best {
			best, rt = x.Dst.Bits(), x
		}
	}
	lbest := -1
	for _, p := range r.ports {
		for _, pf := range p.reach {
			if pf.Contains(dst) && pf.Bits() > lbest {
				lbest, port = pf.Bits(), p.name
			}
		}
	}
	if lbest > best {
		return port, dst, nil
	}
	if rt == nil {
		return "", netip.Addr{}, fmt.Errorf("router %s has no route to %s", r.name, dst)
	}
	if rt.Port != "" {
		// The device behind the port routes the packet itself.
		return rt.Port, netip.Addr{}, nil
	}
	p, ok := r.onLink(rt.NextHop)
	if !ok {
		return "", netip.Addr{}, fmt.Errorf("router %s: next hop %s of the route to %s is on no port", r.name, rt.NextHop, rt.Dst)
	}
	return p, rt.NextHop, nil
}
