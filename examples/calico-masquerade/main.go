// Command calico-masquerade replays "AKS Azure CNI Calico IP Masquerade"
// (https://www.stevegriffith.nyc/posts/aks-cni-calico-ipmasq/): a pod
// curls a server in its own VNet and one in a peered VNet, before and
// after an IPPool for the peered VNet is created.
//
// It teaches that on an Azure CNI cluster with Calico network policy the
// source NAT of pod traffic is decided by Calico, not by ip-masq-agent:
// nat POSTROUTING → cali-POSTROUTING → cali-nat-outgoing, whose one rule
// masquerades packets whose source is in the ipset cali40masq-ipam-pools
// and whose destination is NOT in cali40all-ipam-pools. The sets hold the
// CIDRs of Calico's IPPools, so
//   - the VNet-A server 10.240.0.97 (inside the 10.240.0.0/16 pool) sees
//     the pod IP 10.240.0.46;
//   - the VNet-B server 172.17.0.4 sees the node IP 10.240.0.35;
//   - once an IPPool for 172.17.0.0/16 exists, Felix adds it to both sets
//     and VNet B sees the pod IP too.
//
// The rules (testdata/nat.rules) are the post's listings in
// iptables-restore form; the sets (testdata/ipsets) are its `ipset list`.
//
// walk.svg draws the whole path of the curl to VNet B, hop by hop
// (render.WalkDOT; redrawn by go test -update).
package main

import (
	_ "embed"
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/examples/internal/story"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/ipset"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

var (
	//go:embed testdata/nat.rules
	natRules []byte
	//go:embed testdata/ipsets
	ipsets []byte
	//go:embed testdata/ippool-othervnet.ipsets
	othervnet []byte
)

// Addresses of the post.
const (
	PodIP   = "10.240.0.46"
	NodeIP  = "10.240.0.35"
	ServerA = "10.240.0.97" // VNet A, the cluster's VNet
	ServerB = "172.17.0.4"  // VNet B, peered
)

// newNet wires the pod, its node and the two servers. The node reaches
// VNet B through the VNet's gateway (the peering).
func newNet(w io.Writer) (*story.Net, error) {
	node, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 1})
	pod, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 2})
	a, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 3})
	b, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 4})
	for _, err := range []error{
		node.AddInterface("eth0", netip.MustParsePrefix(NodeIP+"/16")),
		// Azure CNI in transparent mode (with Calico): one veth per pod,
		// without an address, and a host route to the pod.
		node.AddInterface("azv46"),
		node.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix(PodIP + "/32"), Iface: "azv46"}),
		node.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("10.240.0.1")}),
		node.Sets().Restore(ipsets, ipset.RestoreOptions{}),
		node.Restore(netfilter.IPv4, natRules, netfilter.RestoreOptions{}),
		pod.AddInterface("eth0", netip.MustParsePrefix(PodIP+"/16")),
		pod.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("10.240.0.1")}),
		a.AddInterface("eth0", netip.MustParsePrefix(ServerA+"/16")),
		a.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("10.240.0.1")}),
		b.AddInterface("eth0", netip.MustParsePrefix(ServerB+"/16")),
		b.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("172.17.0.1")}),
	} {
		if err != nil {
			return nil, err
		}
	}
	n := story.NewNet(w, cluster.Config{})
	for _, err := range []error{
		n.AddHost("pod", pod),
		n.AddHost("node", node),
		n.AddHost("server A", a),
		n.AddHost("server B", b),
		// The pod's veth pair: its eth0 and the node's azv46.
		n.Link(cluster.Port{Device: "pod", Iface: "eth0"}, cluster.Port{Device: "node", Iface: "azv46"}),
	} {
		if err != nil {
			return nil, err
		}
	}
	// VNet A (the cluster's) and VNet B, peered. The pod's address is a
	// secondary address of the node's NIC: VNet A delivers it to the node.
	vnetA, err := n.AddRouter("vnet A", netip.MustParseAddr("10.240.0.1"))
	if err != nil {
		return nil, err
	}
	vnetB, err := n.AddRouter("vnet B", netip.MustParseAddr("172.17.0.1"))
	if err != nil {
		return nil, err
	}
	for _, err := range []error{
		vnetA.AddPort("node", netip.MustParsePrefix(NodeIP+"/32")),
		vnetA.AddPort("server A", netip.MustParsePrefix(ServerA+"/32")),
		vnetA.AddPort("peering"),
		vnetA.AddRoute(cluster.RouterRoute{Dst: netip.MustParsePrefix(PodIP + "/32"), NextHop: netip.MustParseAddr(NodeIP)}),
		vnetA.AddRoute(cluster.RouterRoute{Dst: netip.MustParsePrefix("172.17.0.0/16"), Port: "peering"}),
		vnetB.AddPort("server B", netip.MustParsePrefix(ServerB+"/32")),
		vnetB.AddPort("peering"),
		vnetB.AddRoute(cluster.RouterRoute{Dst: netip.MustParsePrefix("10.240.0.0/16"), Port: "peering"}),
		n.Link(cluster.Port{Device: "node", Iface: "eth0"}, cluster.Port{Device: "vnet A", Iface: "node"}),
		n.Link(cluster.Port{Device: "server A", Iface: "eth0"}, cluster.Port{Device: "vnet A", Iface: "server A"}),
		n.Link(cluster.Port{Device: "server B", Iface: "eth0"}, cluster.Port{Device: "vnet B", Iface: "server B"}),
		n.Link(cluster.Port{Device: "vnet A", Iface: "peering"}, cluster.Port{Device: "vnet B", Iface: "peering"}),
	} {
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

// curl sends a SYN from the pod to server:80 and prints the source the
// server's nginx would log; it returns that source and the SYN's walk.
func curl(w io.Writer, n *story.Net, server string, sport int) (netip.Addr, error) {
	_, wk, err := walkCurl(w, n, server, sport)
	if err != nil {
		return netip.Addr{}, err
	}
	return wk.Last().Packet.Src, nil
}

func walkCurl(w io.Writer, n *story.Net, server string, sport int) ([]story.Hop, cluster.Walk, error) {
	hops, wk, err := n.Send("pod", story.TCP(fmt.Sprintf("%s:%d", PodIP, sport), server+":80", inet.SYN))
	if err != nil {
		return nil, wk, err
	}
	last := wk.Last()
	if wk.Fate != cluster.Delivered {
		return nil, wk, fmt.Errorf("curl %s: %s on %s (%s)", server, wk.Fate, last.Device, wk.Reason)
	}
	fmt.Fprintf(w, "%s docker logs: %s - - \"GET / HTTP/1.1\" 200 612 \"-\" \"curl/7.68.0\" \"-\"\n", last.Device, last.Packet.Src)
	_, back, err := n.Reply(wk, inet.SYN|inet.ACK)
	if err != nil {
		return nil, wk, err
	}
	if l := back.Last(); l.Device != "pod" || back.Fate != cluster.Delivered {
		return nil, wk, fmt.Errorf("reply from %s: %s on %s", server, back.Fate, l.Device)
	}
	return hops, wk, nil
}

func run(w io.Writer) error {
	fmt.Fprintln(w, "# Pod 10.240.0.46 on node 10.240.0.35; server A 10.240.0.97 (VNet A), server B 172.17.0.4 (peered VNet B)")
	n, err := newNet(w)
	if err != nil {
		return err
	}
	node := n.Host("node")
	for _, c := range []string{"POSTROUTING", "cali-POSTROUTING", "cali-nat-outgoing"} {
		if err := story.NAT(w, node, c); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	if err := story.Ipset(w, node, "cali40masq-ipam-pools"); err != nil {
		return err
	}
	story.Title(w, "curl 10.240.0.97 (VNet A)")
	if _, err := curl(w, n, ServerA, 50001); err != nil {
		return err
	}
	story.Title(w, "curl 172.17.0.4 (VNet B)")
	if _, err := curl(w, n, ServerB, 50002); err != nil {
		return err
	}
	story.Title(w, "kubectl apply IPPool othervnet (172.17.0.0/16, natOutgoing, disabled): Felix updates the sets")
	if err := node.Sets().Restore(othervnet, ipset.RestoreOptions{}); err != nil {
		return err
	}
	if err := story.Ipset(w, node, "cali40masq-ipam-pools"); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if err := story.Ipset(w, node, "cali40all-ipam-pools"); err != nil {
		return err
	}
	story.Title(w, "curl 10.240.0.97 (VNet A) again")
	if _, err := curl(w, n, ServerA, 50003); err != nil {
		return err
	}
	story.Title(w, "curl 172.17.0.4 (VNet B) again")
	if _, err := curl(w, n, ServerB, 50004); err != nil {
		return err
	}
	story.Title(w, "The node after the walks")
	return story.NAT(w, node, "cali-nat-outgoing")
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "calico-masquerade:", err)
		os.Exit(1)
	}
}
