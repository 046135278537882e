package cluster_test

import (
	"fmt"
	"net/netip"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// exampleNetwork is one node with a cbr0 bridge and three pods; the node
// load-balances the "Service" 10.0.0.10:80 over two of them, as
// kube-proxy's rules do.
func exampleNetwork() (*cluster.Network, error) {
	n := cluster.New(cluster.Config{Seed: 1})
	node := netfilter.NewHost(netfilter.HostConfig{})
	node.Tracing = true
	for _, err := range []error{
		node.AddInterface("cbr0", netip.MustParsePrefix("10.244.0.1/24")),
		node.Exec("-t nat -A PREROUTING -d 10.0.0.10/32 -p tcp --dport 80 -m statistic --mode random --probability 0.5 -j DNAT --to-destination 10.244.0.6:8080"),
		node.Exec("-t nat -A PREROUTING -d 10.0.0.10/32 -p tcp --dport 80 -j DNAT --to-destination 10.244.0.7:8080"),
		n.AddHost("node", node),
		n.AddBridge("node", "cbr0", "veth1", "veth2", "veth3"),
	} {
		if err != nil {
			return nil, err
		}
	}
	for i, ip := range []string{"10.244.0.5", "10.244.0.6", "10.244.0.7"} {
		name := fmt.Sprintf("pod%d", i+1)
		if _, err := n.AddPod(name, cluster.Pod{Addr: netip.MustParsePrefix(ip + "/24"), Gateway: netip.MustParseAddr("10.244.0.1")}); err != nil {
			return nil, err
		}
		if err := n.Link(cluster.Port{Device: "node", Iface: fmt.Sprintf("veth%d", i+1)}, cluster.Port{Device: name, Iface: "eth0"}); err != nil {
			return nil, err
		}
	}
	return n, nil
}

func ExampleNetwork_Send() {
	n, err := exampleNetwork()
	if err != nil {
		fmt.Println(err)
		return
	}
	syn := netfilter.TCP(netip.MustParseAddrPort("10.244.0.5:40000"), netip.MustParseAddrPort("10.0.0.10:80"), inet.SYN)
	w, err := n.Send("pod1", syn)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range w.Hops {
		fmt.Printf("%-5s in %-5q out %-6q %v → %v\n", h.Device, h.In, h.Out, h.Packet.Dst, h.Result.Packet.Dst)
	}
	fmt.Println(w.Fate)
	back, err := n.Reply(w, inet.SYN|inet.ACK)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("reply: %s at %s from %v\n", back.Fate, back.Last().Device, back.Last().Packet.Src)
	// Output:
	// pod1  in ""    out "eth0" 10.0.0.10 → 10.0.0.10
	// node  in "veth1" out "veth3" 10.0.0.10 → 10.244.0.7
	// pod3  in "eth0" out ""     10.244.0.7 → 10.244.0.7
	// delivered
	// reply: delivered at pod1 from 10.0.0.10
}

func ExampleNetwork_Explain() {
	n, err := exampleNetwork()
	if err != nil {
		fmt.Println(err)
		return
	}
	syn := netfilter.TCP(netip.MustParseAddrPort("10.244.0.5:40000"), netip.MustParseAddrPort("10.0.0.10:80"), inet.SYN)
	outs, err := n.Explain("pod1", syn)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, o := range outs {
		fmt.Printf("%s %s at %s\n", o.Probability.RatString(), o.Walk.Fate, o.Walk.Last().Device)
	}
	// Output:
	// 1/2 delivered at pod2
	// 1/2 delivered at pod3
}
