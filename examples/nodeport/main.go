// Command nodeport replays "Kubernetes Networking – Iptables"
// (https://aiinfrahub.com/about-us/kubernetes-networking-iptables):
// `curl http://<NodeIP>:30811` against a NodePort Service with two
// hello-app pods, one on each node.
//
// It teaches how a NodePort connection finds a pod: nat PREROUTING jumps
// to KUBE-SERVICES, whose last rule sends packets addressed to a local
// address to KUBE-NODEPORTS; the NodePort rule goes to KUBE-EXT, which
// marks the packet for masquerading and hands it to KUBE-SVC. There one
// "statistic mode random probability 0.50000000000" rule and one
// unconditional rule split connections exactly 50/50 between the two
// KUBE-SEP chains, each of which DNATs to its pod. Host.Explain proves the
// split is exactly 1/2 each, not roughly.
//
// The rules are what kube-proxy (current layout, the one the post's
// "-> 172.16.166.130:8080" comments come from) writes for the Service and
// EndpointSlice in testdata/cluster.yaml; the node and client addresses,
// which the post does not show, are made up.
//
// walk.svg draws the whole path of the first SYN, hop by hop
// (render.WalkDOT; redrawn by go test -update).
package main

import (
	_ "embed"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/examples/internal/story"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

//go:embed testdata/cluster.yaml
var clusterYAML []byte

// Addresses of the scenario.
const (
	Client   = "192.168.56.1"
	Host1IP  = "192.168.56.11"
	Host2IP  = "192.168.56.12"
	Pod1     = "172.16.166.130" // hello-app-58d97c88d4-h7s2n on host1
	Pod2     = "172.16.192.89"  // hello-app-58d97c88d4-pkh8c on host2
	NodePort = 30811
	SvcChain = "KUBE-SVC-YG6ZEOBCLVGD3AJB"
	SEP1     = "KUBE-SEP-7I3URQ2O437FVP5U" // -> 172.16.166.130:8080
	SEP2     = "KUBE-SEP-PSPHHDAXPY5YRT7B" // -> 172.16.192.89:8080
)

// scenario is the cluster: a client, two nodes running kube-proxy and
// the two pods, wired together.
type scenario struct {
	net          *story.Net
	host1, host2 *netfilter.Host
}

func node(name, ip, bridge string, seed uint64) (*netfilter.Host, error) {
	cfg := kubeproxy.DefaultConfig(name)
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr(ip)}
	cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectClusterCIDR, CIDR: netip.MustParsePrefix("172.16.0.0/16")}
	doc, err := kubeproxy.GenerateFromYAML(cfg, clusterYAML)
	if err != nil {
		return nil, err
	}
	h, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: seed})
	if err := h.AddInterface("eth0", netip.MustParsePrefix(ip+"/24")); err != nil {
		return nil, err
	}
	// The local pods hang off a bridge with an address in the node's pod
	// block, like kubenet's. (The post's Calico uses cali* interfaces
	// without an address, from which MASQUERADE borrows eth0's address,
	// in packetwalk as in the kernel; the bridge keeps the walk short.)
	if err := h.AddInterface("cni0", netip.MustParsePrefix(bridge)); err != nil {
		return nil, err
	}
	if err := kubeproxy.Install(h, doc); err != nil {
		return nil, err
	}
	return h, nil
}

func newScenario(w io.Writer) (*scenario, error) {
	s := &scenario{net: story.NewNet(w, cluster.Config{})}
	var err error
	if s.host1, err = node("host1", Host1IP, "172.16.166.129/26", 3); err != nil {
		return nil, err
	}
	if s.host2, err = node("host2", Host2IP, "172.16.192.65/26", 4); err != nil {
		return nil, err
	}
	for _, r := range []struct {
		h       *netfilter.Host
		dst, gw string
	}{
		{s.host1, "172.16.192.0/24", Host2IP},
		{s.host2, "172.16.166.0/24", Host1IP},
	} {
		if err := r.h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix(r.dst), Iface: "eth0", Gateway: netip.MustParseAddr(r.gw)}); err != nil {
			return nil, err
		}
	}
	client, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 1})
	if err := client.AddInterface("eth0", netip.MustParsePrefix(Client+"/24")); err != nil {
		return nil, err
	}
	n := s.net
	// The client and the nodes share one Ethernet segment (the switch is
	// a router port per machine); each node's pods hang off its cni0.
	lan, err := n.AddRouter("switch")
	if err != nil {
		return nil, err
	}
	errs := []error{
		n.AddHost("client", client),
		n.AddHost("host1", s.host1),
		n.AddHost("host2", s.host2),
		n.AddBridge("host1", "cni0", "veth1"),
		n.AddBridge("host2", "cni0", "veth2"),
	}
	for _, m := range []struct{ name, ip string }{{"client", Client}, {"host1", Host1IP}, {"host2", Host2IP}} {
		errs = append(errs, lan.AddPort(m.name, netip.MustParsePrefix(m.ip+"/32")),
			n.Link(cluster.Port{Device: m.name, Iface: "eth0"}, cluster.Port{Device: "switch", Iface: m.name}))
	}
	for _, p := range []struct{ name, host, port, ip, gw string }{
		{"pod1", "host1", "veth1", Pod1 + "/26", "172.16.166.129"},
		{"pod2", "host2", "veth2", Pod2 + "/26", "172.16.192.65"},
	} {
		h, err := n.AddPod(p.name, cluster.Pod{Addr: netip.MustParsePrefix(p.ip), Gateway: netip.MustParseAddr(p.gw), Host: netfilter.HostConfig{Seed: 1}})
		if err != nil {
			return nil, err
		}
		h.Tracing = true
		errs = append(errs, n.Link(cluster.Port{Device: p.host, Iface: p.port}, cluster.Port{Device: p.name, Iface: "eth0"}))
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return s, nil
}

// curl is the request packet of one connection of the client.
func curl(sport int) netfilter.Packet {
	return story.TCP(fmt.Sprintf("%s:%d", Client, sport), fmt.Sprintf("%s:%d", Host1IP, NodePort), inet.SYN)
}

func run(w io.Writer) error {
	s, err := newScenario(w)
	if err != nil {
		return err
	}
	fmt.Fprintln(w, "# curl http://192.168.56.11:30811 — a NodePort Service, two hello-app pods")
	fmt.Fprintln(w, "# host1 192.168.56.11 runs pod 172.16.166.130, host2 192.168.56.12 runs pod 172.16.192.89")

	story.Title(w, "Where can the SYN go? (Host.Explain, exact)")
	outs, err := s.host1.Explain("eth0", curl(40000))
	if err != nil {
		return err
	}
	for _, o := range outs {
		fmt.Fprintf(w, "  p=%-4s %s -> %s out %s\n", o.Probability, netfiltertest.Addrs(curl(40000)), netfiltertest.Addrs(o.Result.Packet), o.Result.Packet.Out)
	}

	if err := connections(w, s); err != nil {
		return err
	}

	story.Title(w, "host1 after the walks")
	for _, c := range []string{"KUBE-SERVICES", "KUBE-NODEPORTS", SvcChain, SEP1, SEP2} {
		if err := story.NAT(w, s.host1, c); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	story.Conntrack(w, s.host1, "-p tcp --dport 30811", conntrack.Filter{Proto: inet.TCP, OrigDstPort: NodePort})
	return nil
}

// connections opens connections until one lands on each pod; each is
// walked to the pod and back.
func connections(w io.Writer, s *scenario) error {
	seen := map[netip.Addr]bool{}
	for sport := 40000; len(seen) < 2 && sport < 40020; sport++ {
		story.Title(w, "Connection from port %d: the SYN, client → host1 → pod", sport)
		_, wk, err := s.net.Send("client", curl(sport))
		if err != nil {
			return err
		}
		last := wk.Last()
		if wk.Fate != cluster.Delivered {
			return fmt.Errorf("SYN from port %d: %s on %s (%s)", sport, wk.Fate, last.Device, wk.Reason)
		}
		pod := last.Device
		seen[last.Packet.Dst] = true
		story.Title(w, "The SYN-ACK, %s → client", pod)
		_, back, err := s.net.Reply(wk, inet.SYN|inet.ACK)
		if err != nil {
			return err
		}
		if l := back.Last(); l.Device != "client" || back.Fate != cluster.Delivered {
			return fmt.Errorf("SYN-ACK from %s ended on %s: %s", pod, l.Device, back.Fate)
		}
		story.Title(w, "The client's ACK completes the handshake")
		if _, _, err := s.net.Reply(back, inet.ACK); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "nodeport:", err)
		os.Exit(1)
	}
}
