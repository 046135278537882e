// Command virtual-node replays the pod-to-pod part of "A Day in the Life
// of a Packet in AKS (part 5): Virtual Node"
// (https://blog.cloudtrooper.net/2019/04/05/a-day-in-the-life-of-a-packet-in-aks-part-5-virtual-node/):
// the nginx ingress controller pod 10.13.76.17 connects to kuard pods on
// VMs and on the virtual node (Azure Container Instances, subnet
// 10.13.100.0/24).
//
// It teaches why the kuard pod on ACI sees the node's address
// (requestAddr 10.13.76.4:…) while the pods on VMs see the ingress pod's
// own address (10.13.76.17:…): ip-masq-agent would leave all of
// 10.13.0.0/16 alone, but Calico's cali-POSTROUTING runs first, and its
// cali-nat-outgoing rule masquerades traffic from a natOutgoing pool to
// any destination outside all pools. cali40all-ipam-pools holds only
// 10.13.76.0/24, so 10.13.100.0/24 counts as "outside the cluster".
//
// The rules (testdata/nat.rules) are the post's `iptables -t nat
// --list-rule` output plus Calico's chains; the sets (testdata/ipsets) its
// `ipset list cali40all-ipam-pools`. The post's conntrack entry shows the
// source port rewritten too (59850 → 10014), which suggests its Calico
// added --random-fully; the rule here, as "AKS Azure CNI Calico IP
// Masquerade" (docs/blog-posts.md) shows it, keeps ports.
//
// walk.svg draws the whole path of the SYN to the kuard pod on ACI, hop
// by hop (render.WalkDOT; redrawn by go test -update).
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
	"github.com/packetwalk/packetwalk/ipset"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

var (
	//go:embed testdata/nat.rules
	natRules []byte
	//go:embed testdata/ipsets
	ipsets []byte
)

// Addresses of the post.
const (
	NodeIP  = "10.13.76.4"
	Ingress = "10.13.76.17" // addon-http-application-routing-nginx-ingress-controller
	VMPod   = "10.13.76.36" // kuard on aks-nodepool1-26711606-1
	ACIPod  = "10.13.100.6" // kuard on virtual-node-aci-linux
	VMPod0  = "10.13.76.11" // kuard on aks-nodepool1-26711606-0 (earlier in the post)
	ACIPod0 = "10.13.100.10"
)

// newNet builds node0 with the ingress pod on its azure0 bridge (whose
// other port, eth0, is the NIC), the VNet, and the kuard pods: on other
// VMs of the VNet's node subnet and in the virtual node's ACI subnet.
func newNet(w io.Writer) (*story.Net, error) {
	node, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 5})
	n := story.NewNet(w, cluster.Config{})
	vnet, err := n.AddRouter("vnet", netip.MustParseAddr("10.13.76.1"), netip.MustParseAddr("10.13.100.1"))
	if err != nil {
		return nil, err
	}
	errs := []error{
		node.AddInterface("azure0", netip.MustParsePrefix(NodeIP+"/24")),
		node.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "azure0", Gateway: netip.MustParseAddr("10.13.76.1")}),
		node.Sets().Restore(ipsets, ipset.RestoreOptions{}),
		node.Restore(netfilter.IPv4, natRules, netfilter.RestoreOptions{}),
		n.AddHost("node0", node),
		n.AddBridge("node0", "azure0", "eth0", "azv0"),
		// The ingress pod's address is a secondary address of node0's
		// NIC: the VNet delivers it there, and the bridge to the pod.
		vnet.AddPort("node0", netip.MustParsePrefix(NodeIP+"/32"), netip.MustParsePrefix(Ingress+"/32")),
		n.Link(cluster.Port{Device: "node0", Iface: "eth0"}, cluster.Port{Device: "vnet", Iface: "node0"}),
	}
	for i, p := range []struct{ name, ip, bits, gw string }{
		{"ingress", Ingress, "/24", "10.13.76.1"},
		{"kuard@vm", VMPod, "/24", "10.13.76.1"},
		{"kuard@vm0", VMPod0, "/24", "10.13.76.1"},
		{"kuard@aci", ACIPod, "/24", "10.13.100.1"},
		{"kuard@aci0", ACIPod0, "/24", "10.13.100.1"},
	} {
		h, err := n.AddPod(p.name, cluster.Pod{Addr: netip.MustParsePrefix(p.ip + p.bits), Gateway: netip.MustParseAddr(p.gw), Host: netfilter.HostConfig{Seed: uint64(6 + i)}})
		if err != nil {
			return nil, err
		}
		h.Tracing = true
		if p.name == "ingress" {
			errs = append(errs, n.Link(cluster.Port{Device: "node0", Iface: "azv0"}, cluster.Port{Device: p.name, Iface: "eth0"}))
			continue
		}
		// The kuard pods' own VMs and ACI's network are not modelled:
		// each is reached on its own port of the VNet.
		errs = append(errs,
			vnet.AddPort(p.name, netip.MustParsePrefix(p.ip+"/32")),
			n.Link(cluster.Port{Device: p.name, Iface: "eth0"}, cluster.Port{Device: "vnet", Iface: p.name}))
	}
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return n, nil
}

// curl connects from the ingress pod to ip:8080 and prints the
// requestAddr kuard reports, which it returns.
func curl(w io.Writer, n *story.Net, ip string, sport int) (netip.AddrPort, error) {
	_, addr, err := walkCurl(w, n, ip, sport)
	return addr, err
}

// walkCurl is curl returning the SYN's walk.
func walkCurl(w io.Writer, n *story.Net, ip string, sport int) (cluster.Walk, netip.AddrPort, error) {
	story.Title(w, "curl -s4 %s:8080 | grep requestAddr", ip)
	_, wk, err := n.Send("ingress", story.TCP(fmt.Sprintf("%s:%d", Ingress, sport), ip+":8080", inet.SYN))
	if err != nil {
		return wk, netip.AddrPort{}, err
	}
	last := wk.Last()
	if wk.Fate != cluster.Delivered {
		return wk, netip.AddrPort{}, fmt.Errorf("curl %s: %s on %s (%s)", ip, wk.Fate, last.Device, wk.Reason)
	}
	_, back, err := n.Reply(wk, inet.SYN|inet.ACK)
	if err != nil {
		return wk, netip.AddrPort{}, err
	}
	if l := back.Last(); l.Device != "ingress" || back.Fate != cluster.Delivered {
		return wk, netip.AddrPort{}, fmt.Errorf("reply from %s: %s on %s", ip, back.Fate, l.Device)
	}
	if _, _, err := n.Reply(back, inet.ACK); err != nil {
		return wk, netip.AddrPort{}, err
	}
	addr := netip.AddrPortFrom(last.Packet.Src, last.Packet.SrcPort)
	fmt.Fprintf(w, "[...]\"requestAddr\":\"%s\"}\n", addr)
	return wk, addr, nil
}

func run(w io.Writer) error {
	fmt.Fprintln(w, "# node0 10.13.76.4 runs the ingress pod 10.13.76.17; kuard pods on VMs (10.13.76.0/24) and on ACI (10.13.100.0/24)")
	n, err := newNet(w)
	if err != nil {
		return err
	}
	node := n.Host("node0")
	for i, ip := range []string{ACIPod0, VMPod0, ACIPod, VMPod} {
		if _, err := curl(w, n, ip, 59850+i); err != nil {
			return err
		}
	}
	story.Title(w, "node0 after the walks")
	story.Conntrack(w, node, "-s "+Ingress, conntrack.Filter{OrigSrc: netip.MustParseAddr(Ingress)})
	fmt.Fprintln(w)
	for _, c := range []string{"POSTROUTING", "cali-nat-outgoing", "IP-MASQ-AGENT"} {
		if err := story.NAT(w, node, c); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	return story.Ipset(w, node, "cali40all-ipam-pools")
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "virtual-node:", err)
		os.Exit(1)
	}
}
