package cluster_test

import (
	"fmt"
	"net/http"
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

// prober answers a health probe with a fixed status.
type prober int

func (p prober) Response(bool) (int, http.Header, []byte) { return int(p), nil, nil }

func ExampleLoadBalancer() {
	n := cluster.New(cluster.Config{})
	lb, _ := n.AddLoadBalancer("lb")
	vnet, _ := n.AddRouter("vnet")
	_ = vnet.AddPort("lb")
	var pool []cluster.Backend
	for i, status := range []int{200, 503, 200} {
		name := fmt.Sprintf("node%d", i+1)
		ip := netip.AddrFrom4([4]byte{10, 0, 0, byte(4 + i)})
		node := netfilter.NewHost(netfilter.HostConfig{})
		_ = node.AddInterface("eth0", netip.PrefixFrom(ip, 24))
		_ = n.AddHost(name, node)
		_ = vnet.AddPort(name, netip.PrefixFrom(ip, 32))
		_ = n.Link(cluster.Port{Device: name, Iface: "eth0"}, cluster.Port{Device: "vnet", Iface: name})
		pool = append(pool, cluster.Backend{Name: name, Addr: ip, Probe: prober(status)})
	}
	err := lb.AddRule(cluster.LBRule{Frontend: netip.MustParseAddrPort("20.1.2.3:80"), Proto: inet.TCP, Backends: pool, BackendPort: 30080})
	if err == nil {
		err = n.Link(cluster.Port{Device: "lb", Iface: "backend"}, cluster.Port{Device: "vnet", Iface: "lb"})
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	answers, _ := lb.Probe(inet.TCP, netip.MustParseAddrPort("20.1.2.3:80"))
	for _, a := range answers {
		fmt.Println(a.Backend, a.Status, a.Healthy)
	}
	syn := netfilter.TCP(netip.MustParseAddrPort("203.0.113.7:50000"), netip.MustParseAddrPort("20.1.2.3:80"), inet.SYN)
	outs, _ := n.ExplainReceive(cluster.Port{Device: "lb", Iface: "frontend"}, syn)
	for _, o := range outs {
		last := o.Walk.Last()
		fmt.Printf("%s %s on %s as %v:%d\n", o.Probability.RatString(), o.Walk.Fate, last.Device, last.Packet.Dst, last.Packet.DstPort)
	}
	// Output:
	// node1 200 true
	// node2 503 false
	// node3 200 true
	// 1/2 delivered on node1 as 10.0.0.4:30080
	// 1/2 delivered on node3 as 10.0.0.6:30080
}
