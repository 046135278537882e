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
package main

import (
	_ "embed"
	"fmt"
	"io"
	"net/netip"
	"os"

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

func proxyConfig() kubeproxy.Config {
	cfg := kubeproxy.DefaultConfig(NodeName)
	cfg.Layout = kubeproxy.LayoutLegacy
	cfg.LegacyPortNames = true
	cfg.LegacyProbability = true
	cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectClusterCIDR, CIDR: netip.MustParsePrefix("10.13.76.0/24")}
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr(NodeIP)}
	return cfg
}

// newNet builds the node from the Service objects in yaml, the pods, and
// the Internet between the laptops and the Azure LB.
func newNet(w io.Writer, yaml []byte, pods ...string) (*story.Net, error) {
	doc, err := kubeproxy.GenerateFromYAML(proxyConfig(), yaml)
	if err != nil {
		return nil, err
	}
	node, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 2})
	// The node's address lives on the azure0 bridge, with the pods' veths
	// and eth0 as its ports.
	if err := node.AddInterface("azure0", netip.MustParsePrefix(NodeIP+"/24")); err != nil {
		return nil, err
	}
	if err := node.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "azure0", Gateway: netip.MustParseAddr("10.13.76.1")}); err != nil {
		return nil, err
	}
	if err := kubeproxy.Install(node, doc); err != nil {
		return nil, err
	}
	for _, r := range aksPostrouting {
		if err := node.Exec(r); err != nil {
			return nil, err
		}
	}
	n := story.NewNet(w)
	n.Add("node", node)
	internet, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 1})
	if err := internet.AddInterface("eth0", netip.MustParsePrefix(Laptop+"/32"), netip.MustParsePrefix(Laptop2+"/32")); err != nil {
		return nil, err
	}
	if err := internet.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0"}); err != nil {
		return nil, err
	}
	n.Add("laptop", internet)
	// The Azure LB with floating IP forwards the packet unchanged to the
	// node: the destination is still the public VIP.
	n.Link("laptop", "0.0.0.0/0", "node", "azure0")
	n.Link("node", "0.0.0.0/0", "laptop", "eth0")
	for i, ip := range pods {
		name := fmt.Sprintf("pod %s", ip)
		p, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: uint64(10 + i)})
		if err := p.AddInterface("eth0", netip.MustParsePrefix(ip+"/24")); err != nil {
			return nil, err
		}
		if err := p.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr(NodeIP)}); err != nil {
			return nil, err
		}
		n.Add(name, p)
		n.Link("node", ip+"/32", name, "eth0")
		// Replies cross the azure0 bridge, whose netfilter hooks are the
		// node's (br_netfilter).
		n.Link(name, "0.0.0.0/0", "node", "azure0")
	}
	return n, nil
}

// connect runs a TCP handshake from the laptop to vip:80 from port
// sport and returns the SYN's hops.
func connect(n *story.Net, w io.Writer, src, vip string, sport int) ([]story.Hop, error) {
	story.Title(w, "%s:%d → %s:80: the SYN", src, sport, vip)
	syn := story.TCP(fmt.Sprintf("%s:%d", src, sport), vip+":80", inet.SYN)
	hops := n.Send("laptop", syn)
	last := story.Last(hops)
	if last.Result.Disposition != netfilter.Delivered {
		return hops, fmt.Errorf("SYN from %d: %s on %s", sport, last.Result.Disposition, last.Host)
	}
	story.Title(w, "The SYN-ACK back from %s", last.Host)
	back := n.Send(last.Host, netfiltertest.Reply(last.Result.Packet, inet.SYN|inet.ACK))
	l := story.Last(back)
	if l.Host != "laptop" || l.Result.Disposition != netfilter.Delivered {
		return hops, fmt.Errorf("SYN-ACK ended on %s: %s", l.Host, l.Result.Disposition)
	}
	story.Title(w, "The ACK")
	n.Send("laptop", netfiltertest.Reply(l.Result.Packet, inet.ACK))
	return hops, nil
}

func run(w io.Writer) error {
	fmt.Fprintln(w, "# Part 1: externalTrafficPolicy Cluster — service default/whereami, VIP 51.144.176.251, pods 10.13.76.26 and 10.13.76.7")
	n, err := newNet(w, clusterYAML, "10.13.76.26", "10.13.76.7")
	if err != nil {
		return err
	}
	node := n.Host("node")
	story.Title(w, "Where can the SYN go? (Host.Explain, exact)")
	syn := story.TCP(Laptop+":51535", VIP+":80", inet.SYN)
	outs, err := node.Explain("azure0", syn)
	if err != nil {
		return err
	}
	for _, o := range outs {
		fmt.Fprintf(w, "  p=%s  %s -> %s mark %#x\n", o.Probability, netfiltertest.Addrs(syn), netfiltertest.Addrs(o.Result.Packet), o.Result.Packet.Mark)
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
	n, err = newNet(w, localYAML, "10.13.76.15", "10.13.76.30")
	if err != nil {
		return err
	}
	node = n.Host("node")
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

	story.Title(w, "The mysterious probe: kube-proxy's health-check node port")
	hc, err := healthCheck()
	if err != nil {
		return err
	}
	status, _, body := hc.Response(true)
	fmt.Fprintf(w, "$ curl localhost:%d/healthz\n%s\n(HTTP %d)\n", hc.NodePort, body, status)
	return nil
}

// healthCheck is the health-check server kube-proxy runs for whereami.
func healthCheck() (kubeproxy.HealthCheck, error) {
	objs, err := kubeproxy.Decode(localYAML)
	if err != nil {
		return kubeproxy.HealthCheck{}, err
	}
	hcs, err := kubeproxy.HealthChecks(proxyConfig(), objs.Services, objs.EndpointSlices, objs.Nodes)
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
	n, err := newNet(io.Discard, clusterYAML, "10.13.76.26", "10.13.76.7")
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
