// Command day-in-the-life replays "A Day in the Life of a Packet in Azure
// Kubernetes Service (part 1): Azure CNI"
// (https://blog.cloudtrooper.net/2019/01/21/a-day-in-the-life-of-a-packet-in-azure-kubernetes-service-with-the-azure-cni/):
// a browser connects to the public IP of a LoadBalancer Service on an AKS
// v1.11 node.
//
// It teaches:
//   - With the Azure LB's floating IP (Direct Server Return) the packet
//     reaches the node still addressed to the public VIP 51.144.176.251,
//     so kube-proxy needs a "loadbalancer IP" rule in KUBE-SERVICES.
//   - That rule leads to KUBE-FW, which jumps to KUBE-MARK-MASQ (MARK or
//     0x4000) and then to KUBE-SVC, whose 0.50000000000 statistic rule
//     picks a KUBE-SEP chain that DNATs to a pod.
//   - In POSTROUTING, KUBE-POSTROUTING masquerades packets carrying
//     0x4000: the pod sees the node (10.13.76.4), not the client, and
//     `conntrack -L` shows the reply tuple addressed to the node.
//   - With externalTrafficPolicy Local the FW chain jumps to KUBE-XLB
//     without marking: the client IP is preserved up to the pod and in
//     the conntrack reply tuple, and kube-proxy answers the Azure LB's
//     probe on the health-check node port with the local endpoint count.
//
// The rules are kube-proxy's legacy layout (v1.11 port names and
// probabilities) for the Services in testdata/*.yaml; the tests check they
// contain the post's `iptables-save | grep whereami` lines
// (testdata/seed-*.save) rule for rule. The two MASQUERADE rules AKS adds
// to POSTROUTING are appended as the post lists them.
//
// walk.svg draws the whole path of the first SYN across the machines,
// path.svg the node's nat table with its path (redrawn by go test
// -update).
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
	"github.com/packetwalk/packetwalk/render"
)

var (
	//go:embed testdata/cluster.yaml
	clusterYAML []byte
	//go:embed testdata/local.yaml
	localYAML []byte
)

// Addresses and chains of the scenario (the post's).
const (
	NodeName  = "aks-nodepool1-31351229-0"
	NodeIP    = "10.13.76.4"
	Laptop    = "109.125.120.58"
	VIP       = "51.144.176.251"
	Laptop2   = "167.220.196.180" // "I changed laptops in the meantime"
	VIPLocal  = "13.93.66.174"
	FWChain   = "KUBE-FW-7G2JV7LNOR6DDNIY"
	SvcChain  = "KUBE-SVC-7G2JV7LNOR6DDNIY"
	XLBChain  = "KUBE-XLB-7G2JV7LNOR6DDNIY"
	HealthzNP = 32364
)

// aksPostrouting are the MASQUERADE rules of the node besides kube-proxy's
// (post: `iptables-save | grep MASQUERADE`).
var aksPostrouting = []string{
	"-t nat -A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE",
	"-t nat -A POSTROUTING ! -d 10.0.0.0/8 -m iprange ! --dst-range 168.63.129.16-168.63.129.16 -m addrtype ! --dst-type LOCAL -j MASQUERADE",
}

func proxyConfig() kubeproxy.Config { return nodeConfig(NodeName, NodeIP) }

func nodeConfig(name, ip string) kubeproxy.Config {
	cfg := kubeproxy.DefaultConfig(name)
	cfg.Layout = kubeproxy.LayoutLegacy
	cfg.LegacyPortNames = true
	cfg.LegacyProbability = true
	cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectClusterCIDR, CIDR: netip.MustParsePrefix("10.13.76.0/24")}
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr(ip)}
	return cfg
}

// Node2 is the second node of part 2, with no whereami pod: the post's
// cluster has three nodes, and the Azure LB probes each.
const (
	Node2Name = "aks-nodepool1-31351229-1"
	Node2IP   = "10.13.76.5"
)

// newNode builds a node called name from the Service objects in yaml: its
// address on the azure0 bridge, whose ports are eth0 (the NIC, towards
// the VNet) and the pods' veths; kube-proxy's rules and AKS's
// POSTROUTING rules.
func newNode(n *story.Net, host, name, ip string, yaml []byte, seed uint64) error {
	doc, err := kubeproxy.GenerateFromYAML(nodeConfig(name, ip), yaml)
	if err != nil {
		return err
	}
	node, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: seed})
	if err := node.AddInterface("azure0", netip.MustParsePrefix(ip+"/24")); err != nil {
		return err
	}
	if err := node.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "azure0", Gateway: netip.MustParseAddr("10.13.76.1")}); err != nil {
		return err
	}
	if err := kubeproxy.Install(node, doc); err != nil {
		return err
	}
	for _, r := range aksPostrouting {
		if err := node.Exec(r); err != nil {
			return err
		}
	}
	for _, err := range []error{
		n.AddHost(host, node),
		n.AddBridge(host, "azure0", "eth0"),
		n.Router("vnet").AddPort(host, netip.MustParsePrefix(ip+"/32")),
		n.Link(cluster.Port{Device: host, Iface: "eth0"}, cluster.Port{Device: "vnet", Iface: host}),
	} {
		if err != nil {
			return err
		}
	}
	return nil
}

// Pool is the Azure LB's backend pool.
type Pool int

// Pools of the story.
const (
	// OneNode: part 1, the node alone.
	OneNode Pool = iota
	// Probed: part 2, node and node2, each probed on the health-check
	// node port.
	Probed
	// Unprobed: node and node2 without the probe, to show what it
	// prevents.
	Unprobed
)

// newNet builds the network of the story: the laptops on the Internet,
// the Azure LB (floating IP) in front of the node, the VNet, the node
// from the Service objects in yaml and its pods on the azure0 bridge.
// With Probed and Unprobed, part 2's second node joins the LB's pool.
func newNet(w io.Writer, yaml []byte, pool Pool, pods ...string) (*story.Net, error) {
	node2 := pool != OneNode
	n := story.NewNet(w, cluster.Config{Seed: 1})
	internet, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 1})
	if err := internet.AddInterface("eth0", netip.MustParsePrefix(Laptop+"/32"), netip.MustParsePrefix(Laptop2+"/32")); err != nil {
		return nil, err
	}
	if err := internet.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0"}); err != nil {
		return nil, err
	}
	if err := n.AddHost("laptop", internet); err != nil {
		return nil, err
	}
	inet4, err := n.AddRouter("internet")
	if err != nil {
		return nil, err
	}
	vnet, err := n.AddRouter("vnet", netip.MustParseAddr("10.13.76.1"))
	if err != nil {
		return nil, err
	}
	lb, err := n.AddLoadBalancer("azure-lb")
	if err != nil {
		return nil, err
	}
	for _, err := range []error{
		inet4.AddPort("laptop", netip.MustParsePrefix(Laptop+"/32"), netip.MustParsePrefix(Laptop2+"/32")),
		inet4.AddPort("azure-lb", netip.MustParsePrefix(VIP+"/32"), netip.MustParsePrefix(VIPLocal+"/32")),
		vnet.AddPort("azure-lb"),
		n.Link(cluster.Port{Device: "laptop", Iface: "eth0"}, cluster.Port{Device: "internet", Iface: "laptop"}),
		n.Link(cluster.Port{Device: "azure-lb", Iface: "frontend"}, cluster.Port{Device: "internet", Iface: "azure-lb"}),
		n.Link(cluster.Port{Device: "azure-lb", Iface: "backend"}, cluster.Port{Device: "vnet", Iface: "azure-lb"}),
		newNode(n, "node", NodeName, NodeIP, yaml, 2),
	} {
		if err != nil {
			return nil, err
		}
	}
	backends := []cluster.Backend{{Name: "node", Addr: netip.MustParseAddr(NodeIP)}}
	if node2 {
		if err := newNode(n, "node2", Node2Name, Node2IP, yaml, 3); err != nil {
			return nil, err
		}
		backends = append(backends, cluster.Backend{Name: "node2", Addr: netip.MustParseAddr(Node2IP)})
		for i, name := range []string{NodeName, Node2Name} {
			if pool == Unprobed {
				break
			}
			hc, err := healthCheck(nodeConfig(name, backends[i].Addr.String()))
			if err != nil {
				return nil, err
			}
			backends[i].Probe = hc
		}
	}
	vips := []string{VIP}
	if node2 {
		vips = []string{VIPLocal}
	}
	for _, vip := range vips {
		// The Azure LB with floating IP forwards the packet unchanged to
		// the node: the destination is still the public VIP.
		if err := lb.AddRule(cluster.LBRule{Frontend: netip.MustParseAddrPort(vip + ":80"), Proto: inet.TCP, Backends: backends, FloatingIP: true, ProbePort: HealthzNP}); err != nil {
			return nil, err
		}
	}
	for i, ip := range pods {
		name := fmt.Sprintf("pod %s", ip)
		port := fmt.Sprintf("azv%d", i)
		// The pods' gateway is the node's address on azure0: their
		// answers go up to the node through the bridge.
		p, err := n.AddPod(name, cluster.Pod{Addr: netip.MustParsePrefix(ip + "/24"), Gateway: netip.MustParseAddr(NodeIP), Host: netfilter.HostConfig{Seed: uint64(10 + i)}})
		if err != nil {
			return nil, err
		}
		p.Tracing = true
		for _, err := range []error{
			n.AddBridgePort("node", "azure0", port),
			n.Link(cluster.Port{Device: "node", Iface: port}, cluster.Port{Device: name, Iface: "eth0"}),
		} {
			if err != nil {
				return nil, err
			}
		}
	}
	return n, nil
}

// connect runs a TCP handshake from the laptop to vip:80 from port
// sport and returns the SYN's hops.
func connect(n *story.Net, w io.Writer, src, vip string, sport int) ([]story.Hop, error) {
	story.Title(w, "%s:%d → %s:80: the SYN", src, sport, vip)
	syn := story.TCP(fmt.Sprintf("%s:%d", src, sport), vip+":80", inet.SYN)
	hops, wk, err := n.Send("laptop", syn)
	if err != nil {
		return hops, err
	}
	if wk.Fate != cluster.Delivered {
		return hops, fmt.Errorf("SYN from %d: %s on %s (%s)", sport, wk.Fate, wk.Last().Device, wk.Reason)
	}
	story.Title(w, "The SYN-ACK back from %s", wk.Last().Device)
	_, back, err := n.Reply(wk, inet.SYN|inet.ACK)
	if err != nil {
		return hops, err
	}
	if l := back.Last(); l.Device != "laptop" || back.Fate != cluster.Delivered {
		return hops, fmt.Errorf("SYN-ACK ended on %s: %s", l.Device, back.Fate)
	}
	story.Title(w, "The ACK")
	if _, _, err := n.Reply(back, inet.ACK); err != nil {
		return hops, err
	}
	return hops, nil
}

// explain prints every way the SYN can take through the whole path with
// its exact probability, and each hop's addresses.
func explain(w io.Writer, n *story.Net, src, vip string) ([]cluster.Outcome, error) {
	syn := story.TCP(src+":51535", vip+":80", inet.SYN)
	outs, err := n.Explain("laptop", syn)
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		fmt.Fprintf(w, "  p=%s  %s on %s\n", o.Probability.RatString(), o.Walk.Fate, o.Walk.Last().Device)
		for _, h := range o.Walk.Hops {
			fmt.Fprintf(w, "      %-16s %s", h.Device, netfiltertest.Addrs(h.Packet))
			if out := h.Result.Packet; netfiltertest.Addrs(out) != netfiltertest.Addrs(h.Packet) && h.Result.Disposition != netfilter.Delivered {
				fmt.Fprintf(w, " -> %s", netfiltertest.Addrs(out))
			}
			if h.Note != "" {
				fmt.Fprintf(w, "  (%s)", h.Note)
			}
			fmt.Fprintln(w)
		}
		if o.Walk.Reason != "" {
			fmt.Fprintf(w, "      %s\n", o.Walk.Reason)
		}
	}
	return outs, nil
}

func run(w io.Writer) error {
	fmt.Fprintln(w, "# Part 1: externalTrafficPolicy Cluster — service default/whereami, VIP 51.144.176.251, pods 10.13.76.26 and 10.13.76.7")
	n, err := newNet(w, clusterYAML, OneNode, "10.13.76.26", "10.13.76.7")
	if err != nil {
		return err
	}
	node := n.Host("node")
	story.Title(w, "Where can the SYN go? (cluster Explain, exact, every hop)")
	if _, err := explain(w, n, Laptop, VIP); err != nil {
		return err
	}
	// The post's two connections, from ports 51535 and 51536.
	for sport := 51535; sport <= 51536; sport++ {
		if _, err := connect(n, w, Laptop, VIP, sport); err != nil {
			return err
		}
	}
	story.Title(w, "The node after the walks")
	for _, c := range []string{"KUBE-SERVICES", FWChain, SvcChain, "KUBE-MARK-MASQ", "POSTROUTING", "KUBE-POSTROUTING"} {
		if err := story.NAT(w, node, c); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	story.Conntrack(w, node, "-d "+VIP, conntrack.Filter{OrigDst: netip.MustParseAddr(VIP)})

	fmt.Fprintln(w, "\n# Part 2: externalTrafficPolicy Local — VIP 13.93.66.174, pods 10.13.76.15 and 10.13.76.30")
	n, err = newNet(w, localYAML, Probed, "10.13.76.15", "10.13.76.30")
	if err != nil {
		return err
	}
	node = n.Host("node")
	story.Title(w, "The Azure LB's probes on the health-check node port %d", HealthzNP)
	answers, err := n.LoadBalancer("azure-lb").Probe(inet.TCP, netip.MustParseAddrPort(VIPLocal+":80"))
	if err != nil {
		return err
	}
	for _, a := range answers {
		fmt.Fprintf(w, "$ curl %s:%d/healthz  # %s\n%s\n(HTTP %d: healthy %v)\n", a.Addr, a.Port, a.Backend, a.Body, a.Status, a.Healthy)
	}
	story.Title(w, "Where can the SYN go? (cluster Explain, exact, every hop)")
	if _, err := explain(w, n, Laptop2, VIPLocal); err != nil {
		return err
	}
	story.Title(w, "Without the probe, node2 would get half the SYNs and lose them")
	un, err := newNet(io.Discard, localYAML, Unprobed, "10.13.76.15", "10.13.76.30")
	if err != nil {
		return err
	}
	if _, err := explain(w, un, Laptop2, VIPLocal); err != nil {
		return err
	}
	for _, sport := range []int{57675, 38332} {
		if _, err := connect(n, w, Laptop2, VIPLocal, sport); err != nil {
			return err
		}
	}
	story.Title(w, "The node after the walks")
	for _, c := range []string{FWChain, XLBChain} {
		if err := story.NAT(w, node, c); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	story.Conntrack(w, node, "-d "+VIPLocal, conntrack.Filter{OrigDst: netip.MustParseAddr(VIPLocal)})

	return nil
}

// healthCheck is the health-check server kube-proxy runs for whereami on
// the node cfg describes.
func healthCheck(cfg kubeproxy.Config) (kubeproxy.HealthCheck, error) {
	objs, err := kubeproxy.Decode(localYAML)
	if err != nil {
		return kubeproxy.HealthCheck{}, err
	}
	hcs, err := kubeproxy.HealthChecks(cfg, objs.Services, objs.EndpointSlices, objs.Nodes)
	if err != nil {
		return kubeproxy.HealthCheck{}, err
	}
	if len(hcs) != 1 {
		return kubeproxy.HealthCheck{}, fmt.Errorf("%d health checks, want 1", len(hcs))
	}
	return hcs[0], nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "day-in-the-life:", err)
		os.Exit(1)
	}
}

// picture is the nat table of the node as Graphviz DOT with the path of
// the first SYN of part 1 highlighted (the README's picture).
func picture() ([]byte, error) {
	n, err := newNet(io.Discard, clusterYAML, OneNode, "10.13.76.26", "10.13.76.7")
	if err != nil {
		return nil, err
	}
	node := n.Host("node")
	syn := story.TCP(Laptop+":51535", VIP+":80", inet.SYN)
	r := node.Receive("azure0", syn)
	return render.DOT(node.Ruleset(netfilter.IPv4), render.Options{
		Table: netfilter.NAT,
		Roots: []string{"PREROUTING", "POSTROUTING"},
		Path:  r.Trace,
		Title: "AKS node, nat table: " + netfiltertest.Addrs(syn) + " → " + netfiltertest.Addrs(r.Packet),
	})
}

// walkPicture is the whole path of the first SYN of part 1 and of its
// SYN-ACK, hop by hop, as Graphviz DOT (the README's second picture).
func walkPicture() (syn, synack []byte, err error) {
	n, err := newNet(io.Discard, clusterYAML, OneNode, "10.13.76.26", "10.13.76.7")
	if err != nil {
		return nil, nil, err
	}
	_, wk, err := n.Send("laptop", story.TCP(Laptop+":51535", VIP+":80", inet.SYN))
	if err != nil {
		return nil, nil, err
	}
	_, back, err := n.Reply(wk, inet.SYN|inet.ACK)
	if err != nil {
		return nil, nil, err
	}
	return render.WalkDOT(wk, render.WalkOptions{Title: "The SYN: laptop → Azure LB (floating IP) → node → pod"}),
		render.WalkDOT(back, render.WalkOptions{Title: "The SYN-ACK: pod → node → Azure LB → laptop"}), nil
}
