package cluster_test

import (
	"errors"
	"fmt"
	"net/netip"
	"runtime/debug"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// fuzzProgram reads a fuzzer's bytes as a network description and walks:
// each byte chooses an operation (add a host, router, load balancer,
// gateway, bridge, tunnel, an iptables rule or an ip rule, link two
// ports, send a packet) and the bytes after it its arguments; reading
// past the end gives zeros.
type fuzzProgram struct {
	b []byte
	i int
}

func (p *fuzzProgram) next() byte {
	if p.i >= len(p.b) {
		p.i++
		return 0
	}
	p.i++
	return p.b[p.i-1]
}

func (p *fuzzProgram) done() bool { return p.i >= len(p.b) }

// addr is one of a few addresses, so that routes, links and packets meet.
func (p *fuzzProgram) addr() netip.Addr {
	return netip.AddrFrom4([4]byte{10, 0, p.next() % 3, 1 + p.next()%4})
}

// fuzzRules are iptables lines a host may get: the targets that change
// the packet or emit one, and conntrack.
var fuzzRules = []string{
	"-A INPUT -p tcp -j REJECT --reject-with tcp-reset",
	"-A INPUT -p udp -j REJECT",
	"-A FORWARD -j REJECT --reject-with icmp-host-prohibited",
	"-A FORWARD -m conntrack --ctstate RELATED -j ACCEPT",
	"-A OUTPUT -p tcp --dport 9 -j REJECT --reject-with tcp-reset",
	"-t nat -A POSTROUTING -o eth0 -j MASQUERADE",
	"-t nat -A PREROUTING -p tcp --dport 80 -j DNAT --to-destination 10.0.1.2:8080",
	"-t nat -A PREROUTING -p udp -m statistic --mode random --probability 0.5 -j DNAT --to-destination 10.0.2.3",
	"-t mangle -A PREROUTING -j TTL --ttl-set 1",
	"-t mangle -A PREROUTING -j MARK --set-mark 7",
	"-A FORWARD -j DROP",
}

// runFuzzProgram builds and walks the network b describes, reporting
// what no input may do: panic (the fuzzer sees it), fail with an error
// that is not one of the named ones, end a walk without a fate, or give
// Explain probabilities that do not sum to 1.
func runFuzzProgram(b []byte) error {
	var failed error
	t := fuzzFailer{&failed}
	defer func() {
		if r := recover(); r != nil && r != errFuzzFailed {
			panic(r)
		}
	}()
	p := &fuzzProgram{b: b}
	n := cluster.New(cluster.Config{Seed: uint64(p.next()), MaxHops: 1 + int(p.next()%32)})
	var ports []cluster.Port
	var hosts []string
	port := func() cluster.Port {
		if len(ports) == 0 {
			return cluster.Port{Device: "none", Iface: "eth0"}
		}
		return ports[int(p.next())%len(ports)]
	}
	allowed := func(err error) bool {
		return err == nil || errors.Is(err, cluster.ErrTopology) || errors.Is(err, cluster.ErrLoop) ||
			errors.Is(err, cluster.ErrNotDelivered) || errors.Is(err, netfilter.ErrBadPacket) || errors.Is(err, inet.ErrNotModelled)
	}
	check := func(what string, err error) {
		if !allowed(err) {
			t.Fatalf("%s: unnamed error %v", what, err)
		}
	}
	var checkWalk func(what string, w cluster.Walk, depth int)
	checkWalk = func(what string, w cluster.Walk, depth int) {
		if len(w.Hops) == 0 || w.Fate < cluster.Delivered || w.Fate > cluster.Left {
			t.Fatalf("%s: walk of %d hops ended %v", what, len(w.Hops), w.Fate)
		}
		for _, e := range w.Emitted {
			if n.Kind(e.Hops[0].Device) != cluster.KindHost {
				t.Fatalf("%s: emitted walk starts at %s", what, e.Hops[0].Device)
			}
			checkWalk(what+" emitted", e, depth+1)
		}
	}
	for steps := 0; !p.done() && steps < 64; steps++ {
		switch op := p.next() % 10; op {
		case 0: // a host with one to three interfaces, maybe a default route
			name := fmt.Sprintf("h%d", len(hosts))
			h := netfilter.NewHost(netfilter.HostConfig{})
			for j := range 1 + int(p.next()%3) {
				ifc := fmt.Sprintf("eth%d", j)
				_ = h.AddInterface(ifc, netip.PrefixFrom(p.addr(), 24))
				ports = append(ports, cluster.Port{Device: name, Iface: ifc})
			}
			if p.next()%2 == 0 {
				_ = h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: p.addr()})
			}
			if n.AddHost(name, h) == nil {
				hosts = append(hosts, name)
			}
		case 1: // a router with a port and a route
			name := fmt.Sprintf("r%d", p.next()%3)
			r := n.Router(name)
			if r == nil {
				var err error
				if r, err = n.AddRouter(name, p.addr()); err != nil {
					continue
				}
			}
			pn := fmt.Sprintf("p%d", p.next()%4)
			if r.AddPort(pn, netip.PrefixFrom(p.addr(), 16+int(p.next()%17)).Masked()) == nil {
				ports = append(ports, cluster.Port{Device: name, Iface: pn})
			}
			if p.next()%2 == 0 {
				_ = r.AddRoute(cluster.RouterRoute{Dst: netip.PrefixFrom(p.addr(), int(p.next()%33)).Masked(), NextHop: p.addr()})
			} else {
				_ = r.AddRoute(cluster.RouterRoute{Dst: netip.MustParsePrefix("0.0.0.0/0"), Port: pn})
			}
		case 2: // a load balancer
			if lb, err := n.AddLoadBalancer("lb"); err == nil {
				_ = lb.AddRule(cluster.LBRule{Frontend: netip.AddrPortFrom(p.addr(), 80), Proto: inet.TCP, FloatingIP: p.next()%2 == 0,
					Backends: []cluster.Backend{{Name: "b0", Addr: p.addr()}, {Name: "b1", Addr: p.addr()}}})
				ports = append(ports, cluster.Port{Device: "lb", Iface: "frontend"}, cluster.Port{Device: "lb", Iface: "backend"})
			}
		case 3: // a gateway
			if _, err := n.AddGateway("gw", p.addr(), netip.MustParsePrefix("10.0.0.0/8")); err == nil {
				ports = append(ports, cluster.Port{Device: "gw", Iface: "inside"}, cluster.Port{Device: "gw", Iface: "outside"})
			}
		case 4: // a link
			check("link", errOrTopology(n.Link(port(), port())))
		case 5, 6: // a bridge, a tunnel
			if len(hosts) == 0 {
				continue
			}
			h := hosts[int(p.next())%len(hosts)]
			if op == 5 {
				if n.AddBridge(h, "eth1", "q0", "q1") == nil {
					ports = append(ports, cluster.Port{Device: h, Iface: "q0"}, cluster.Port{Device: h, Iface: "q1"})
				}
			} else {
				_ = n.AddTunnel(h, "eth1", cluster.Tunnel{Kind: cluster.TunnelKind(1 + p.next()%2), Local: p.addr()})
			}
		case 7, 8: // an iptables rule, an ip rule
			if len(hosts) == 0 {
				continue
			}
			h := n.Host(hosts[int(p.next())%len(hosts)])
			if op == 7 {
				_ = h.Exec(fuzzRules[int(p.next())%len(fuzzRules)])
			} else {
				_ = h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: p.addr(), Table: 5})
				_ = h.AddRule(netfilter.RouteRule{Family: netfilter.IPv4, Priority: 100, Src: netip.PrefixFrom(p.addr(), 32), Table: 5})
			}
		case 9: // a packet: sent, answered, explained, received
			if len(hosts) == 0 {
				continue
			}
			from := hosts[int(p.next())%len(hosts)]
			src, dst := netip.AddrPortFrom(p.addr(), 1000), netip.AddrPortFrom(p.addr(), []uint16{80, 9, 53}[p.next()%3])
			var pk netfilter.Packet
			switch p.next() % 3 {
			case 0:
				pk = netfilter.TCP(src, dst, inet.SYN)
			case 1:
				pk = netfilter.UDP(src, dst)
			default:
				pk = netfilter.ICMP(src.Addr(), dst.Addr(), 8, 0)
			}
			pk.TTL = 1 + p.next()%8
			w, err := n.Send(from, pk)
			check("send", err)
			if err == nil {
				checkWalk("send", w, 0)
				r, err := n.Reply(w, inet.SYN|inet.ACK)
				check("reply", err)
				if err == nil {
					checkWalk("reply", r, 0)
				}
			}
			outs, err := n.Explain(from, pk)
			check("explain", err)
			if err == nil && sum(outs).RatString() != "1" {
				t.Fatalf("explain: probabilities sum to %s", sum(outs).RatString())
			}
			w, err = n.Receive(port(), pk)
			check("receive", err)
			if err == nil {
				checkWalk("receive", w, 0)
			}
		}
	}
	return failed
}

var errFuzzFailed = errors.New("fuzz input failed")

// fuzzFailer records the first failure and stops the program, from the
// goroutine that runs it (testing.T's Fatalf may not be called there).
type fuzzFailer struct{ err *error }

func (f fuzzFailer) Fatalf(format string, args ...any) {
	*f.err = fmt.Errorf(format, args...)
	panic(errFuzzFailed)
}

// errOrTopology keeps a description error only when it is not a
// topology one, which bad links are.
func errOrTopology(err error) error {
	if errors.Is(err, cluster.ErrTopology) {
		return nil
	}
	return err
}

// FuzzNetwork builds random networks and walks random packets through
// them: never a panic, never a hang (each input must finish in seconds),
// only named errors, every walk (and every emitted packet's) ended with a
// fate, Explain's probabilities summing to 1. testdata/fuzz/FuzzNetwork
// holds the seed corpus: a host rejecting a datagram (an ICMP error
// walked back), a Linux router answering TTL 1 with a time exceeded, and
// a mix of router, load balancer, gateway, bridge, tunnel and ip rule.
// Run it with go test -run '^$' -fuzz FuzzNetwork ./cluster/.
func FuzzNetwork(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{1, 16, 0, 1, 0, 1, 1, 0, 0, 1, 0, 1, 2, 9, 0, 0, 0, 1, 1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		done := make(chan error, 1)
		go func() {
			defer func() {
				if r := recover(); r != nil {
					done <- fmt.Errorf("panic: %v\n%s", r, debug.Stack())
				}
			}()
			done <- runFuzzProgram(b)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("input %x: %v", b, err)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("input %x: no end after 10 s", b)
		}
	})
}
