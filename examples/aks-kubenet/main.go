// Command aks-kubenet replays "Aks Networking Iptables in AKS"
// (https://blog.stevegriffith.nyc/posts/aks-networking-iptables)
// on a kubenet node and an Azure CNI node.
//
// It teaches:
//   - KUBE-SERVICES → KUBE-SVC → KUBE-SEP: a ClusterIP connection from a
//     pod matches the Service's rule in KUBE-SERVICES (no KUBE-MARK-MASQ,
//     the source is inside the pod CIDR), KUBE-SVC picks an endpoint with
//     "statistic mode random" rules and KUBE-SEP DNATs to the pod.
//   - The probabilities 0.33333333349, 0.50000000000 and "the rest" give
//     each of three pods a third of the connections — not exactly: the
//     kernel stores lround(p·2^31), so Host.Explain reports
//     715827883/2^31 for the first pod and 1431655765/2^32 for the others.
//     After scaling to two pods the chain is rewritten to 0.5 / the rest:
//     exactly 1/2 each.
//   - On Azure CNI the ip-masq-agent builds the IP-MASQ-AGENT chain from
//     its ConfigMap's nonMasqueradeCIDRs: traffic to those ranges leaves
//     with the pod's IP, everything else is masqueraded to the node's IP.
//     Adding 10.1.0.0/16 to the ConfigMap adds a RETURN rule, and traffic
//     to 10.1.0.0/16 keeps the pod IP.
//   - Across the kubenet cluster (package cluster): the VNet's route
//     table sends each node's pod CIDR to that node, so a pod reaches
//     pods on other nodes with its own address; its traffic to the
//     Internet is masqueraded twice, to the node's address by
//     ip-masq-agent and to the public address by the outbound SNAT.
//
// The kube-proxy rules are kube-proxy's legacy layout with pre-v1.19 port
// names (the chain names are the post's: KUBE-SVC-4N57TFCL4MD7ZTDA,
// KUBE-SEP-66QNMC7FITAI6UHV, ...); the third nginx pod, which the post does
// not list, is 10.100.1.2 on kubenet and the CNI pods are 10.220.2.28,
// .41 and .76 — the addresses whose hashes are the post's chain names.
// Unlike the post's listing, the rules carry kube-proxy's comments.
//
// walk-pod.svg and walk-internet.svg draw the whole path of a pod's
// connection to a pod on another node and to the Internet, hop by hop
// (render.WalkDOT; redrawn by go test -update).
package main

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/examples/internal/story"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// Names and addresses of the scenario.
const (
	SvcChain    = "KUBE-SVC-4N57TFCL4MD7ZTDA"
	SEP1        = "KUBE-SEP-66QNMC7FITAI6UHV" // 10.100.0.9
	SEP2        = "KUBE-SEP-D27HGEPMBQMIMSQA" // 10.100.1.2
	SEP3        = "KUBE-SEP-CP6YF2KE7E2OKMTG" // 10.100.2.2
	KubenetIP   = "10.200.184.192"
	ClientPod   = "10.100.0.10"
	CNINodeIP   = "10.220.2.4"
	CNIPod      = "10.220.2.28"
	OtherVNet   = "10.1.0.4" // a server in 10.1.0.0/16
	MasqChain   = "IP-MASQ-AGENT"
	CNIClusterP = "10.200.211.157"
)

// configMap is the post's azure-ip-masq-agent-config data.
const configMap = `nonMasqueradeCIDRs:
  - 10.220.0.0/16
  - 10.220.2.0/24
  - 10.200.0.0/16
masqLinkLocal: true
resyncInterval: 60s
`

// editedConfigMap is the ConfigMap after the post's kubectl edit.
var editedConfigMap = strings.Replace(configMap, "masqLinkLocal", "  - 10.1.0.0/16\nmasqLinkLocal", 1)

// nginx returns the Service and EndpointSlice YAML of default/nginx with
// one endpoint per (ip, node) pair.
func nginx(clusterIP string, eps ...[2]string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata: {name: nginx, namespace: default}
spec:
  type: ClusterIP
  clusterIP: %s
  ports:
  - {protocol: TCP, port: 80, targetPort: 80}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: nginx-1
  namespace: default
  labels: {kubernetes.io/service-name: nginx}
addressType: IPv4
ports:
- {name: "", protocol: TCP, port: 80}
endpoints:
`, clusterIP)
	for _, e := range eps {
		fmt.Fprintf(&b, "- addresses: [%s]\n  nodeName: %s\n  conditions: {ready: true}\n", e[0], e[1])
	}
	return []byte(b.String())
}

// Kubenet nodes and their nginx pods.
var (
	threePods = [][2]string{{"10.100.0.9", "aks-nodepool1-27511634-vmss000000"}, {"10.100.1.2", "aks-nodepool1-27511634-vmss000002"}, {"10.100.2.2", "aks-nodepool1-27511634-vmss000001"}}
	twoPods   = [][2]string{threePods[0], threePods[2]}
)

func proxy(node, podCIDR string, yaml []byte) ([]byte, error) {
	cfg := kubeproxy.DefaultConfig(node)
	cfg.Layout = kubeproxy.LayoutLegacy
	cfg.LegacyPortNames = true
	cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectClusterCIDR, CIDR: netip.MustParsePrefix(podCIDR)}
	return kubeproxy.GenerateFromYAML(cfg, yaml)
}

// kubenetNode is vmss000000: eth0 in the VNet, the pods behind cbr0.
func kubenetNode() (*netfilter.Host, error) {
	h, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 7})
	for _, err := range []error{
		h.AddInterface("eth0", netip.MustParsePrefix("10.240.0.4/16")),
		h.AddInterface("cbr0", netip.MustParsePrefix("10.100.0.1/24")),
		h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("10.240.0.1")}),
	} {
		if err != nil {
			return nil, err
		}
	}
	return h, loadProxy(h, "aks-nodepool1-27511634-vmss000000", "10.100.0.0/16", nginx(KubenetIP, threePods...))
}

func loadProxy(h *netfilter.Host, node, podCIDR string, yaml []byte) error {
	doc, err := proxy(node, podCIDR, yaml)
	if err != nil {
		return err
	}
	return kubeproxy.Install(h, doc)
}

// masqAgentConfig is the ip-masq-agent ConfigMap's data.
type masqAgentConfig struct {
	NonMasqueradeCIDRs []string `json:"nonMasqueradeCIDRs"`
	MasqLinkLocal      bool     `json:"masqLinkLocal"`
	ResyncInterval     string   `json:"resyncInterval"`
}

// syncMasqAgent does what ip-masq-agent does on each resync: rewrite the
// IP-MASQ-AGENT chain from the ConfigMap with `iptables-restore --noflush`
// (declaring the chain flushes it).
func syncMasqAgent(h *netfilter.Host, data string) error {
	rules, err := masqAgentRules(data)
	if err != nil {
		return err
	}
	return h.Restore(netfilter.IPv4, rules, netfilter.RestoreOptions{NoFlush: true})
}

// masqAgentRules is the iptables-restore input ip-masq-agent writes for
// the ConfigMap data.
func masqAgentRules(data string) ([]byte, error) {
	var cfg masqAgentConfig
	if err := yaml.UnmarshalStrict([]byte(data), &cfg); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("*nat\n:IP-MASQ-AGENT - [0:0]\n")
	if !cfg.MasqLinkLocal {
		b.WriteString(`-A IP-MASQ-AGENT -d 169.254.0.0/16 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN` + "\n")
	}
	for _, c := range cfg.NonMasqueradeCIDRs {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return nil, fmt.Errorf("nonMasqueradeCIDRs: %w", err)
		}
		fmt.Fprintf(&b, "-A IP-MASQ-AGENT -d %s -m comment --comment \"ip-masq-agent: local traffic is not subject to MASQUERADE\" -j RETURN\n", p)
	}
	b.WriteString(`-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE` + "\nCOMMIT\n")
	return b.Bytes(), nil
}

// cniNode is vmss000000 of the Azure CNI cluster: the pods share the
// node's subnet on the azure0 bridge.
func cniNode() (*netfilter.Host, error) {
	h, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 8})
	for _, err := range []error{
		h.AddInterface("azure0", netip.MustParsePrefix(CNINodeIP+"/24")),
		h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "azure0", Gateway: netip.MustParseAddr("10.220.2.1")}),
		loadProxy(h, "aks-nodepool1-44430483-vmss000000", "10.220.2.0/24", nginx(CNIClusterP,
			[2]string{CNIPod, "aks-nodepool1-44430483-vmss000000"}, [2]string{"10.220.2.41", "aks-nodepool1-44430483-vmss000001"}, [2]string{"10.220.2.76", "aks-nodepool1-44430483-vmss000002"})),
		h.Exec("-t nat -A POSTROUTING -s 172.17.0.0/16 ! -o docker0 -j MASQUERADE"),
		h.Exec("-t nat -N IP-MASQ-AGENT"),
		h.Exec(`-t nat -A POSTROUTING -m comment --comment "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom IP-MASQ-AGENT chain" -m addrtype ! --dst-type LOCAL -j IP-MASQ-AGENT`),
		syncMasqAgent(h, configMap),
	} {
		if err != nil {
			return nil, err
		}
	}
	return h, nil
}

// kubenetMasqConfig is the kubenet cluster's ip-masq-agent ConfigMap:
// the pod CIDR and the VNet keep their addresses.
const kubenetMasqConfig = `nonMasqueradeCIDRs:
  - 10.100.0.0/16
  - 10.240.0.0/16
masqLinkLocal: false
`

// The kubenet cluster's nodes: name, eth0 address, pod CIDR (on cbr0).
var kubenetNodes = []struct{ name, host, ip, cidr, bridge string }{
	{"aks-nodepool1-27511634-vmss000000", "vmss000000", "10.240.0.4", "10.100.0.0/24", "10.100.0.1/24"},
	{"aks-nodepool1-27511634-vmss000002", "vmss000002", "10.240.0.6", "10.100.1.0/24", "10.100.1.1/24"},
	{"aks-nodepool1-27511634-vmss000001", "vmss000001", "10.240.0.5", "10.100.2.0/24", "10.100.2.1/24"},
}

// Outbound is the public address of the cluster's outbound SNAT (the
// load balancer's outbound rule, here a NAT gateway).
const Outbound = "20.50.60.70"

// kubenetCluster is the whole kubenet cluster: three nodes, each with
// kube-proxy's rules for the three nginx pods, ip-masq-agent and its pods
// on cbr0; the VNet whose route table sends each pod CIDR to its node
// (the route table AKS manages for kubenet); the outbound SNAT to the
// Internet.
func kubenetCluster(w io.Writer) (*story.Net, error) {
	n := story.NewNet(w, cluster.Config{Seed: 1})
	vnet, err := n.AddRouter("vnet", netip.MustParseAddr("10.240.0.1"))
	if err != nil {
		return nil, err
	}
	inet4, err := n.AddRouter("internet")
	if err != nil {
		return nil, err
	}
	if _, err := n.AddGateway("outbound", netip.MustParseAddr(Outbound), netip.MustParsePrefix("10.240.0.0/16")); err != nil {
		return nil, err
	}
	errs := []error{
		vnet.AddPort("outbound"),
		vnet.AddRoute(cluster.RouterRoute{Dst: netip.MustParsePrefix("0.0.0.0/0"), Port: "outbound"}),
		inet4.AddPort("outbound", netip.MustParsePrefix(Outbound+"/32")),
		inet4.AddPort("world", netip.MustParsePrefix("0.0.0.0/0")),
		n.Link(cluster.Port{Device: "outbound", Iface: "inside"}, cluster.Port{Device: "vnet", Iface: "outbound"}),
		n.Link(cluster.Port{Device: "outbound", Iface: "outside"}, cluster.Port{Device: "internet", Iface: "outbound"}),
	}
	for i, nd := range kubenetNodes {
		h, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: uint64(20 + i)})
		errs = append(errs,
			h.AddInterface("eth0", netip.MustParsePrefix(nd.ip+"/16")),
			h.AddInterface("cbr0", netip.MustParsePrefix(nd.bridge)),
			h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("10.240.0.1")}),
			loadProxy(h, nd.name, "10.100.0.0/16", nginx(KubenetIP, threePods...)),
			h.Exec("-t nat -N IP-MASQ-AGENT"),
			h.Exec(`-t nat -A POSTROUTING -m comment --comment "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom IP-MASQ-AGENT chain" -m addrtype ! --dst-type LOCAL -j IP-MASQ-AGENT`),
			syncMasqAgent(h, kubenetMasqConfig),
			n.AddHost(nd.host, h),
			n.AddBridge(nd.host, "cbr0"),
			vnet.AddPort(nd.host, netip.MustParsePrefix(nd.ip+"/32")),
			vnet.AddRoute(cluster.RouterRoute{Dst: netip.MustParsePrefix(nd.cidr), NextHop: netip.MustParseAddr(nd.ip)}),
			n.Link(cluster.Port{Device: nd.host, Iface: "eth0"}, cluster.Port{Device: "vnet", Iface: nd.host}),
		)
	}
	pods := []struct{ name, host, ip, gw string }{{"client pod", "vmss000000", ClientPod, "10.100.0.1"}}
	for _, p := range threePods {
		for _, nd := range kubenetNodes {
			if nd.name == p[1] {
				pods = append(pods, struct{ name, host, ip, gw string }{"nginx " + p[0], nd.host, p[0], strings.TrimSuffix(nd.bridge, "/24")})
			}
		}
	}
	for i, p := range pods {
		h, err := n.AddPod(p.name, cluster.Pod{Addr: netip.MustParsePrefix(p.ip + "/24"), Gateway: netip.MustParseAddr(p.gw), Host: netfilter.HostConfig{Seed: uint64(30 + i)}})
		if err != nil {
			return nil, err
		}
		h.Tracing = true
		port := fmt.Sprintf("veth%d", i)
		errs = append(errs, n.AddBridgePort(p.host, "cbr0", port),
			n.Link(cluster.Port{Device: p.host, Iface: port}, cluster.Port{Device: p.name, Iface: "eth0"}))
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

// explainCluster prints every walk of p from host across the cluster with
// its exact probability and each hop's addresses.
func explainCluster(w io.Writer, n *story.Net, host string, p netfilter.Packet) ([]cluster.Outcome, error) {
	outs, err := n.Explain(host, p)
	if err != nil {
		return nil, err
	}
	for _, o := range outs {
		fmt.Fprintf(w, "  p=%-24s %s on %s\n", o.Probability.RatString(), o.Walk.Fate, o.Walk.Last().Device)
		for _, h := range o.Walk.Hops {
			fmt.Fprintf(w, "      %-18s %s\n", h.Device, netfiltertest.Addrs(h.Packet))
		}
	}
	return outs, nil
}

func fromPod(src, dst string, sport int) netfilter.Packet {
	return story.TCP(fmt.Sprintf("%s:%d", src, sport), dst, inet.SYN)
}

func explain(w io.Writer, h *netfilter.Host, iface string, p netfilter.Packet) error {
	outs, err := h.Explain(iface, p)
	if err != nil {
		return err
	}
	for _, o := range outs {
		fmt.Fprintf(w, "  p=%-24s (%.11f)  → %s\n", o.Probability, o.Probability.Float64(), netfiltertest.Addrs(o.Result.Packet))
	}
	return nil
}

func run(w io.Writer) error {
	fmt.Fprintln(w, "# kubenet: node vmss000000 (eth0 10.240.0.4, pods on cbr0 10.100.0.0/24), service default/nginx 10.200.184.192:80")
	node, err := kubenetNode()
	if err != nil {
		return err
	}
	story.Title(w, "Three nginx pods: where does a pod's connection to the ClusterIP go? (Host.Explain, exact)")
	if err := explain(w, node, "cbr0", fromPod(ClientPod, KubenetIP+":80", 33000)); err != nil {
		return err
	}
	story.Title(w, "Three connections from pod %s", ClientPod)
	for sport := 33000; sport < 33003; sport++ {
		story.Receive(w, "node", node, "cbr0", fromPod(ClientPod, KubenetIP+":80", sport))
	}
	story.Title(w, "The chains after the walks")
	for _, c := range []string{"KUBE-SERVICES", SvcChain, SEP1} {
		if err := story.NAT(w, node, c); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}

	story.Title(w, "kubectl scale deployment nginx --replicas=2: kube-proxy rewrites the chains")
	if err := loadProxy(node, "aks-nodepool1-27511634-vmss000000", "10.100.0.0/16", nginx(KubenetIP, twoPods...)); err != nil {
		return err
	}
	if err := story.NAT(w, node, SvcChain); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := explain(w, node, "cbr0", fromPod(ClientPod, KubenetIP+":80", 33010)); err != nil {
		return err
	}

	fmt.Fprintln(w, "\n# Azure CNI: node vmss000000 10.220.2.4 on azure0, pod 10.220.2.28, ip-masq-agent")
	cni, err := cniNode()
	if err != nil {
		return err
	}
	story.Title(w, "The ip-masq-agent ConfigMap and the chain it writes")
	fmt.Fprintf(w, "nonMasqueradeCIDRs from azure-ip-masq-agent-config:\n%s\n", configMap)
	if err := story.NAT(w, cni, "POSTROUTING"); err != nil {
		return err
	}
	fmt.Fprintln(w)
	story.Title(w, "Pod %s → a VNet address and → %s", CNIPod, OtherVNet)
	story.Receive(w, "node", cni, "azure0", fromPod(CNIPod, "10.220.0.10:443", 41000))
	story.Receive(w, "node", cni, "azure0", fromPod(CNIPod, OtherVNet+":443", 41001))
	if err := story.NAT(w, cni, MasqChain); err != nil {
		return err
	}

	story.Title(w, "kubectl edit configmap: add 10.1.0.0/16 to nonMasqueradeCIDRs; the agent resyncs")
	if err := syncMasqAgent(cni, editedConfigMap); err != nil {
		return err
	}
	story.Receive(w, "node", cni, "azure0", fromPod(CNIPod, OtherVNet+":443", 41002))
	if err := story.NAT(w, cni, MasqChain); err != nil {
		return err
	}

	fmt.Fprintln(w, "\n# The kubenet cluster: three nodes, the VNet's route table (10.100.N.0/24 → node N), outbound SNAT "+Outbound)
	kn, err := kubenetCluster(w)
	if err != nil {
		return err
	}
	story.Title(w, "The client pod's connection to the ClusterIP, across the nodes (cluster Explain, exact)")
	if _, err := explainCluster(w, kn, "client pod", fromPod(ClientPod, KubenetIP+":80", 34000)); err != nil {
		return err
	}
	story.Title(w, "Pod %s → nginx 10.100.1.2 on vmss000002, through the route table", ClientPod)
	if _, _, err := kn.Send("client pod", fromPod(ClientPod, "10.100.1.2:80", 34001)); err != nil {
		return err
	}
	story.Title(w, "Pod %s → the Internet: ip-masq-agent on the node, then the outbound SNAT", ClientPod)
	_, _, err = kn.Send("client pod", fromPod(ClientPod, "93.184.216.34:443", 34002))
	return err
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "aks-kubenet:", err)
		os.Exit(1)
	}
}
