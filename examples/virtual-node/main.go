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

func newNet(w io.Writer) (*story.Net, error) {
	node, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 5})
	errs := []error{
		node.AddInterface("azure0", netip.MustParsePrefix(NodeIP+"/24")),
		node.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "azure0", Gateway: netip.MustParseAddr("10.13.76.1")}),
		node.Sets().Restore(ipsets, ipset.RestoreOptions{}),
		node.Restore(netfilter.IPv4, natRules, netfilter.RestoreOptions{}),
	}
	n := story.NewNet(w)
	n.Add("node0", node)
	for _, p := range []struct{ name, ip, bits, gw string }{
		{"ingress", Ingress, "/24", "10.13.76.1"},
		{"kuard@vm", VMPod, "/24", "10.13.76.1"},
		{"kuard@vm0", VMPod0, "/24", "10.13.76.1"},
		{"kuard@aci", ACIPod, "/24", "10.13.100.1"},
		{"kuard@aci0", ACIPod0, "/24", "10.13.100.1"},
	} {
		h, _ := netfiltertest.NewHost(netfilter.HostConfig{Seed: 6})
		errs = append(errs,
			h.AddInterface("eth0", netip.MustParsePrefix(p.ip+p.bits)),
			h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr(p.gw)}))
		n.Add(p.name, h)
		n.Link("node0", p.ip+"/32", p.name, "eth0")
		// Every reply to the ingress pod or to the node crosses node0's
		// azure0 bridge (and its netfilter hooks).
		n.Link(p.name, "0.0.0.0/0", "node0", "azure0")
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
	story.Title(w, "curl -s4 %s:8080 | grep requestAddr", ip)
	hops := n.Send("ingress", story.TCP(fmt.Sprintf("%s:%d", Ingress, sport), ip+":8080", inet.SYN))
	last := story.Last(hops)
	if last.Result.Disposition != netfilter.Delivered {
		return netip.AddrPort{}, fmt.Errorf("curl %s: %s on %s", ip, last.Result.Disposition, last.Host)
	}
	back := n.Send(last.Host, netfiltertest.Reply(last.Result.Packet, inet.SYN|inet.ACK))
	if l := story.Last(back); l.Host != "ingress" || l.Result.Disposition != netfilter.Delivered {
		return netip.AddrPort{}, fmt.Errorf("reply from %s: %s on %s", ip, l.Result.Disposition, l.Host)
	}
	n.Send("ingress", netfiltertest.Reply(story.Last(back).Result.Packet, inet.ACK))
	addr := netip.AddrPortFrom(last.In.Src, last.In.SrcPort)
	fmt.Fprintf(w, "[...]\"requestAddr\":\"%s\"}\n", addr)
	return addr, nil
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
