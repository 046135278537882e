package cluster

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"

	"github.com/packetwalk/packetwalk/netfilter"
)

// Errors of a network's description and of walks; the error texts name the
// device, port or address at fault.
var (
	// ErrTopology is a description the network cannot use: an unknown or
	// duplicate device, a port linked twice or to nothing known, a host
	// sending out an interface that leads nowhere.
	ErrTopology = errors.New("cluster: bad topology")
	// ErrLoop is a walk that crossed more hops than Config.MaxHops: a
	// forwarding loop between the devices.
	ErrLoop = errors.New("cluster: forwarding loop")
	// ErrNotDelivered is a Reply to a walk that did not end delivered.
	ErrNotDelivered = errors.New("cluster: walk not delivered")
)

// Config configures a Network.
type Config struct {
	// Seed seeds the random source of the load balancers' choices in
	// walks, so that a walk is the same on every run.
	Seed uint64
	// Source, when set, is the random source of those choices instead
	// (a test's own, replayed); the network is its only user.
	Source rand.Source
	// MaxHops bounds the hops of one walk; 0 means 64.
	MaxHops int
}

// Network is a set of hosts and of the links, bridges, routers, load
// balancers, gateways and tunnels between them. It is not safe for
// concurrent use.
type Network struct {
	cfg     Config
	rng     *rand.Rand
	devices map[string]device
	names   []string
	links   map[Port]Port
}

// Port is one end of a link: an interface (or bridge port) of a host, or a
// port of a router, load balancer or gateway.
type Port struct {
	Device, Iface string
}

func (p Port) String() string { return p.Device + "/" + p.Iface }

// Kind is the kind of a device of the network.
type Kind uint8

// Kinds of devices.
const (
	KindHost Kind = iota + 1
	KindRouter
	KindLoadBalancer
	KindGateway
)

var kindNames = [...]string{KindHost: "host", KindRouter: "router", KindLoadBalancer: "load balancer", KindGateway: "gateway"}

func (k Kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// MarshalText makes a Kind its name in JSON ("load balancer").
func (k Kind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// device is what every kind of device has.
type device interface {
	kind() Kind
	// hasPort reports whether iface is a port links may attach to.
	hasPort(iface string) bool
	// owns reports whether the device answers at the link layer for
	// addr on port iface (the device's own addresses there).
	owns(iface string, addr netip.Addr) bool
}

// New returns an empty network.
func New(cfg Config) *Network {
	if cfg.MaxHops <= 0 {
		cfg.MaxHops = 64
	}
	src := cfg.Source
	if src == nil {
		src = rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)
	}
	return &Network{
		cfg:     cfg,
		rng:     rand.New(src),
		devices: map[string]device{},
		links:   map[Port]Port{},
	}
}

func (n *Network) add(name string, d device) error {
	if name == "" {
		return fmt.Errorf("%w: a device needs a name", ErrTopology)
	}
	if old, ok := n.devices[name]; ok {
		return fmt.Errorf("%w: device %q already exists (a %s)", ErrTopology, name, old.kind())
	}
	n.devices[name] = d
	n.names = append(n.names, name)
	return nil
}

// Devices returns the names of the network's devices in the order they
// were added.
func (n *Network) Devices() []string { return slices.Clone(n.names) }

// Kind returns the kind of the device called name, or 0.
func (n *Network) Kind(name string) Kind {
	if d, ok := n.devices[name]; ok {
		return d.kind()
	}
	return 0
}

// hostDev is a host of the network: its netfilter host, its bridges and
// its tunnels.
type hostDev struct {
	name    string
	h       *netfilter.Host
	bridges map[string][]string // bridge device → its ports, in order
	portOf  map[string]string   // bridge port → its bridge
	tunnels map[string]*Tunnel
}

func (*hostDev) kind() Kind { return KindHost }

func (d *hostDev) hasPort(iface string) bool {
	if _, ok := d.portOf[iface]; ok {
		return true
	}
	return d.h.Interface(iface) != nil
}

func (d *hostDev) owns(iface string, a netip.Addr) bool {
	if _, ok := d.portOf[iface]; ok {
		// A bridge port: the bridge's own address answers through it.
		iface = d.portOf[iface]
	}
	if i := d.h.Interface(iface); i != nil {
		for _, p := range i.Addrs {
			if p.Addr() == a {
				return true
			}
		}
	}
	return false
}

// AddHost adds a host (a node, a pod, a client) under name.
func (n *Network) AddHost(name string, h *netfilter.Host) error {
	if h == nil {
		return fmt.Errorf("%w: host %q is nil", ErrTopology, name)
	}
	return n.add(name, &hostDev{name: name, h: h, bridges: map[string][]string{}, portOf: map[string]string{}, tunnels: map[string]*Tunnel{}})
}

// Host returns the host called name, or nil.
func (n *Network) Host(name string) *netfilter.Host {
	if d, ok := n.devices[name].(*hostDev); ok {
		return d.h
	}
	return nil
}

func (n *Network) host(name string) (*hostDev, error) {
	d, ok := n.devices[name]
	if !ok {
		return nil, fmt.Errorf("%w: no device %q", ErrTopology, name)
	}
	hd, ok := d.(*hostDev)
	if !ok {
		return nil, fmt.Errorf("%w: %q is a %s, not a host", ErrTopology, name, d.kind())
	}
	return hd, nil
}

// Pod describes a pod's network namespace: one interface with its address
// and a default route.
type Pod struct {
	// Iface is the pod's interface; "" means eth0.
	Iface string
	// Addr is the pod's address with its prefix length (10.244.1.5/24);
	// the prefix gives the on-link route, as the CNI plugin sets it.
	Addr netip.Prefix
	// Gateway is the default route's gateway (the node's bridge address,
	// or 169.254.1.1 for Calico); unset means a default route straight
	// out the interface.
	Gateway netip.Addr
	// Host configures the pod's host; Tracing is turned on.
	Host netfilter.HostConfig
}

// AddPod adds a pod as a host called name and returns it, to load rules
// into (most pods have none) or link. Link its interface to a bridge port
// or a veth peer on its node.
func (n *Network) AddPod(name string, p Pod) (*netfilter.Host, error) {
	if p.Iface == "" {
		p.Iface = "eth0"
	}
	if !p.Addr.IsValid() {
		return nil, fmt.Errorf("%w: pod %q has no address", ErrTopology, name)
	}
	h := netfilter.NewHost(p.Host)
	h.Tracing = true
	if err := h.AddInterface(p.Iface, p.Addr); err != nil {
		return nil, fmt.Errorf("pod %q: %w", name, err)
	}
	dflt := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if p.Addr.Addr().Is6() {
		dflt = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	if err := h.AddRoute(netfilter.Route{Dst: dflt, Iface: p.Iface, Gateway: p.Gateway}); err != nil {
		return nil, fmt.Errorf("pod %q: %w", name, err)
	}
	if err := n.AddHost(name, h); err != nil {
		return nil, err
	}
	return h, nil
}

// AddBridge declares that the host's interface bridge is a Linux bridge
// with br_netfilter (net.bridge.bridge-nf-call-iptables=1) whose ports
// are ports: frames between two ports cross the host's iptables as
// bridged traffic (-m physdev), frames to the bridge's own address go up
// to the host on the bridge device. Link each port to its peer (a pod's
// interface, an uplink). A port need not be an interface of the host.
func (n *Network) AddBridge(host, bridge string, ports ...string) error {
	d, err := n.host(host)
	if err != nil {
		return err
	}
	if d.h.Interface(bridge) == nil {
		return fmt.Errorf("%w: host %q has no interface %q for the bridge (add it with AddInterface)", ErrTopology, host, bridge)
	}
	if _, ok := d.bridges[bridge]; ok {
		return fmt.Errorf("%w: bridge %s/%s declared twice", ErrTopology, host, bridge)
	}
	d.bridges[bridge] = nil
	return n.AddBridgePort(host, bridge, ports...)
}

// AddBridgePort adds ports to a bridge AddBridge declared.
func (n *Network) AddBridgePort(host, bridge string, ports ...string) error {
	d, err := n.host(host)
	if err != nil {
		return err
	}
	if _, ok := d.bridges[bridge]; !ok {
		return fmt.Errorf("%w: host %q has no bridge %q (declare it with AddBridge)", ErrTopology, host, bridge)
	}
	for _, p := range ports {
		if p == "" || p == bridge {
			return fmt.Errorf("%w: bad port %q for bridge %s/%s", ErrTopology, p, host, bridge)
		}
		if b, ok := d.portOf[p]; ok {
			return fmt.Errorf("%w: %s/%s is already a port of bridge %s", ErrTopology, host, p, b)
		}
		if _, ok := d.bridges[p]; ok {
			return fmt.Errorf("%w: %s/%s is a bridge, not a port", ErrTopology, host, p)
		}
		d.portOf[p] = bridge
		d.bridges[bridge] = append(d.bridges[bridge], p)
	}
	return nil
}

// Link connects two ports, as a veth pair or a cable does: what leaves one
// arrives at the other. A host's port is one of its interfaces or bridge
// ports; a router's, one AddPort declared; a load balancer's, "frontend"
// or "backend"; a gateway's, "inside" or "outside".
func (n *Network) Link(a, b Port) error {
	for _, p := range []Port{a, b} {
		d, ok := n.devices[p.Device]
		if !ok {
			return fmt.Errorf("%w: link %s — %s: no device %q", ErrTopology, a, b, p.Device)
		}
		if !d.hasPort(p.Iface) {
			return fmt.Errorf("%w: link %s — %s: %s %q has no port %q", ErrTopology, a, b, d.kind(), p.Device, p.Iface)
		}
		if q, ok := n.links[p]; ok {
			return fmt.Errorf("%w: link %s — %s: %s is already linked to %s", ErrTopology, a, b, p, q)
		}
	}
	if a == b {
		return fmt.Errorf("%w: link %s to itself", ErrTopology, a)
	}
	n.links[a], n.links[b] = b, a
	return nil
}

// Peer returns the port linked to p.
func (n *Network) Peer(p Port) (Port, bool) {
	q, ok := n.links[p]
	return q, ok
}
