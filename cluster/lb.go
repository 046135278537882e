package cluster

import (
	"fmt"
	"net/http"
	"net/netip"

	"github.com/packetwalk/packetwalk/inet"
)

// LoadBalancer is a cloud load balancer (the Azure Standard LB, an AWS
// NLB): it spreads the connections to a frontend IP:port over the
// backends whose health probe answers 200, keeping each connection on
// its backend, and translates the replies back. The source address is
// kept (the client's, as Azure's LB does). Its ports are "frontend", the
// clients' side, and "backend", the side the backends are reached
// through; replies coming back from a backend are recognised by the
// router the backend side is linked to.
type LoadBalancer struct {
	name  string
	rules []LBRule
	flows map[flowKey]lbFlow // by the client's original tuple
	back  map[flowKey]lbFlow // by the backend's reply tuple
}

// LBRule is a load-balancing rule.
type LBRule struct {
	// Frontend is the frontend IP and port, Proto the protocol (TCP or
	// UDP).
	Frontend netip.AddrPort
	Proto    inet.Proto
	// Backends is the backend pool.
	Backends []Backend
	// BackendPort is the port the backends receive on (the Service's
	// NodePort); 0 means the frontend port.
	BackendPort uint16
	// FloatingIP is Azure's floating IP (Direct Server Return): the
	// backend receives the packet still addressed to the frontend IP and
	// port, which kube-proxy's load-balancer rules expect; without it
	// the destination becomes the backend's address and BackendPort.
	FloatingIP bool
	// ProbePort is the port the health probe asks (the Service's
	// healthCheckNodePort); it is shown with the probes' answers.
	ProbePort int
}

// Backend is a member of a backend pool.
type Backend struct {
	// Name names the backend (the node) in walks and probe answers.
	Name string
	// Addr is the backend's address on the backend side.
	Addr netip.Addr
	// Probe answers the health probe; nil means always healthy (a TCP
	// probe on a port every node answers).
	Probe Prober
}

// Prober answers a load balancer's HTTP health probe, as kube-proxy's
// health-check server does on healthCheckNodePort (kubeproxy.HealthCheck
// is one): status 200 means healthy.
type Prober interface {
	Response(proxyHealthy bool) (status int, header http.Header, body []byte)
}

// ProbeAnswer is a backend's answer to the health probe.
type ProbeAnswer struct {
	Backend string
	Addr    netip.Addr
	Port    int
	Status  int
	Body    string
	Healthy bool
}

type flowKey struct {
	proto    inet.Proto
	src, dst netip.AddrPort
}

type lbFlow struct {
	rule, backend int
	front         netip.AddrPort // the frontend the client addressed
	client        netip.AddrPort
}

// AddLoadBalancer adds a load balancer called name.
func (n *Network) AddLoadBalancer(name string) (*LoadBalancer, error) {
	lb := &LoadBalancer{name: name, flows: map[flowKey]lbFlow{}, back: map[flowKey]lbFlow{}}
	if err := n.add(name, lb); err != nil {
		return nil, err
	}
	return lb, nil
}

// LoadBalancer returns the load balancer called name, or nil.
func (n *Network) LoadBalancer(name string) *LoadBalancer {
	lb, _ := n.devices[name].(*LoadBalancer)
	return lb
}

func (*LoadBalancer) kind() Kind { return KindLoadBalancer }

func (*LoadBalancer) hasPort(iface string) bool { return iface == "frontend" || iface == "backend" }

func (lb *LoadBalancer) owns(iface string, a netip.Addr) bool {
	if iface != "frontend" {
		return false
	}
	for _, r := range lb.rules {
		if r.Frontend.Addr() == a {
			return true
		}
	}
	return false
}

// AddRule adds a load-balancing rule.
func (lb *LoadBalancer) AddRule(r LBRule) error {
	if !r.Frontend.IsValid() || r.Frontend.Port() == 0 {
		return fmt.Errorf("%w: load balancer %q: rule needs a frontend address and port", ErrTopology, lb.name)
	}
	if r.Proto != inet.TCP && r.Proto != inet.UDP {
		return fmt.Errorf("%w: load balancer %q: rule for %s: protocol %s (tcp or udp)", ErrTopology, lb.name, r.Frontend, r.Proto)
	}
	if len(r.Backends) == 0 {
		return fmt.Errorf("%w: load balancer %q: rule for %s has no backends", ErrTopology, lb.name, r.Frontend)
	}
	for _, b := range r.Backends {
		if !b.Addr.IsValid() {
			return fmt.Errorf("%w: load balancer %q: backend %q of %s has no address", ErrTopology, lb.name, b.Name, r.Frontend)
		}
	}
	for _, o := range lb.rules {
		if o.Frontend == r.Frontend && o.Proto == r.Proto {
			return fmt.Errorf("%w: load balancer %q: two rules for %s %s", ErrTopology, lb.name, r.Proto, r.Frontend)
		}
	}
	r.Backends = append([]Backend(nil), r.Backends...)
	lb.rules = append(lb.rules, r)
	return nil
}

// Probe returns every backend's answer to the health probe of the rule
// for frontend, in the pool's order.
func (lb *LoadBalancer) Probe(proto inet.Proto, frontend netip.AddrPort) ([]ProbeAnswer, error) {
	i := lb.rule(proto, frontend)
	if i < 0 {
		return nil, fmt.Errorf("load balancer %q has no rule for %s %s", lb.name, proto, frontend)
	}
	r := lb.rules[i]
	out := make([]ProbeAnswer, len(r.Backends))
	for j, b := range r.Backends {
		out[j] = probe(r, b)
	}
	return out, nil
}

func probe(r LBRule, b Backend) ProbeAnswer {
	a := ProbeAnswer{Backend: b.Name, Addr: b.Addr, Port: r.ProbePort, Status: http.StatusOK, Healthy: true}
	if b.Probe != nil {
		st, _, body := b.Probe.Response(true)
		a.Status, a.Body, a.Healthy = st, string(body), st == http.StatusOK
	}
	return a
}

func (lb *LoadBalancer) rule(proto inet.Proto, front netip.AddrPort) int {
	for i, r := range lb.rules {
		if r.Proto == proto && r.Frontend == front {
			return i
		}
	}
	return -1
}

// healthy returns the indexes of the rule's healthy backends.
func (lb *LoadBalancer) healthy(i int) []int {
	var out []int
	for j, b := range lb.rules[i].Backends {
		if probe(lb.rules[i], b).Healthy {
			out = append(out, j)
		}
	}
	return out
}
