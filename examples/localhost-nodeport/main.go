// Command localhost-nodeport shows why kube-proxy's NodePort rules for
// 127.0.0.1 need net.ipv4.conf.all.route_localnet=1: `curl
// http://127.0.0.1:30080` on a node is DNATed by nat OUTPUT to a pod
// behind another interface, and a packet with a 127.0.0.0/8 source may
// leave the loopback device only when route_localnet is 1.
//
// It teaches:
//   - With route_localnet=1 (what kube-proxy sets when it writes localhost
//     NodePort rules) the SYN is DNATed to the pod 10.244.1.5:8080 and
//     KUBE-POSTROUTING masquerades it, so it leaves cni0 from 10.244.1.1.
//   - With the kernel default 0 the same rules are written, but the
//     reroute after nat OUTPUT (ip_route_me_harder) refuses the 127.0.0.1
//     source on cni0: the packet is dropped at OUTPUT, before filter, and
//     connect() fails with EINVAL ("invalid source").
//   - With --iptables-localhost-nodeports=false kube-proxy writes no rule
//     for 127.0.0.1, so the SYN stays on lo and reaches whatever listens
//     on 127.0.0.1:30080 on the node (nothing, on a real node).
//
// kernel_test.go sends the same SYN from the kernel lab's node, with the
// same rules and setting, and checks the same outcomes and nat counters;
// netfilter/route_localnet_kernel_test.go covers route_localnet's other
// cases (martian sources and destinations received off lo).
//
// walk.svg draws the whole path of the SYN with route_localnet=1, node
// to pod (render.WalkDOT; redrawn by go test -update).
package main

import (
	"fmt"
	"io"
	"net/netip"
	"os"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/examples/internal/story"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// services is one NodePort Service with one endpoint on this node.
const services = `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  clusterIP: 10.96.0.20
  ports: [{protocol: TCP, port: 80, targetPort: 8080, nodePort: 30080}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abcde
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: "", protocol: TCP, port: 8080}]
endpoints:
- addresses: [10.244.1.5]
  nodeName: node-a
  conditions: {ready: true}
`

// Addresses of the scenario.
const (
	NodeIP   = "192.168.10.1"
	Bridge   = "10.244.1.1" // cni0, the node's address in its pod block
	Pod      = "10.244.1.5"
	NodePort = 30080
)

// node returns node-a with kube-proxy's rules loaded: localhostNodePorts
// is kube-proxy's --iptables-localhost-nodeports, routeLocalnet the
// sysctl.
func node(localhostNodePorts, routeLocalnet bool) (*netfilter.Host, error) {
	rules, err := kubeProxyRules(localhostNodePorts)
	if err != nil {
		return nil, err
	}
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1, Clock: netfilter.NewManualClock(netfiltertest.Epoch()), NoRouteLocalnet: !routeLocalnet})
	h.Tracing = true
	if err := h.AddInterface("eth0", netip.MustParsePrefix(NodeIP+"/24")); err != nil {
		return nil, err
	}
	if err := h.AddInterface("cni0", netip.MustParsePrefix(Bridge+"/24")); err != nil {
		return nil, err
	}
	if err := kubeproxy.Install(h, rules); err != nil {
		return nil, err
	}
	return h, nil
}

// kubeProxyRules is what kube-proxy writes on node-a, as iptables-restore
// input.
func kubeProxyRules(localhostNodePorts bool) ([]byte, error) {
	cfg := kubeproxy.DefaultConfig("node-a")
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr(NodeIP)}
	cfg.LocalhostNodePorts = localhostNodePorts
	return kubeproxy.GenerateFromYAML(cfg, []byte(services))
}

// curl is the SYN of `curl http://127.0.0.1:30080` on the node: the
// kernel picks the source 127.0.0.1, the address of lo, the route's
// device.
func curl() netfilter.Packet {
	return netfilter.Packet{Proto: inet.TCP, Src: netip.MustParseAddr("127.0.0.1"), Dst: netip.MustParseAddr("127.0.0.1"),
		SrcPort: 40000, DstPort: NodePort, TCPFlags: inet.SYN, TTL: 64, Window: 64240}
}

// Case is one configuration of the node.
type Case struct {
	Title                             string
	LocalhostNodePorts, RouteLocalnet bool
}

// Cases are the three configurations the example walks.
var Cases = []Case{
	{"kube-proxy with localhost NodePorts, route_localnet=1", true, true},
	{"the same rules, route_localnet=0 (the kernel default)", true, false},
	{"kube-proxy --iptables-localhost-nodeports=false, route_localnet=0", false, false},
}

// Walk sends the SYN from a process of a node configured as c, follows
// it across the node's cni0 bridge to the pod, printing the walk to w,
// and returns what the node did with it.
func Walk(w io.Writer, c Case) (netfilter.Result, error) {
	wk, err := WalkCluster(w, c)
	if err != nil {
		return netfilter.Result{}, err
	}
	return wk.Hops[0].Result, nil
}

// WalkCluster is Walk returning the whole walk: node-a, and the pod when
// the SYN reaches it.
func WalkCluster(w io.Writer, c Case) (cluster.Walk, error) {
	_, wk, err := walkNet(w, c)
	return wk, err
}

// walkNet is WalkCluster returning the network too, for the reply.
func walkNet(w io.Writer, c Case) (*story.Net, cluster.Walk, error) {
	h, err := node(c.LocalhostNodePorts, c.RouteLocalnet)
	if err != nil {
		return nil, cluster.Walk{}, err
	}
	n := story.NewNet(w, cluster.Config{})
	for _, err := range []error{
		n.AddHost("node-a", h),
		n.AddBridge("node-a", "cni0", "veth1"),
	} {
		if err != nil {
			return nil, cluster.Walk{}, err
		}
	}
	_, err = n.AddPod("pod", cluster.Pod{Addr: netip.MustParsePrefix(Pod + "/24"), Gateway: netip.MustParseAddr(Bridge)})
	if err != nil {
		return nil, cluster.Walk{}, err
	}
	if err := n.Link(cluster.Port{Device: "node-a", Iface: "veth1"}, cluster.Port{Device: "pod", Iface: "eth0"}); err != nil {
		return nil, cluster.Walk{}, err
	}
	story.Title(w, "%s", c.Title)
	_, wk, err := n.Send("node-a", curl())
	if err != nil {
		return n, wk, err
	}
	if r := wk.Hops[0].Result; r.Reason != netfilter.NoReason {
		fmt.Fprintf(w, "  reason: %s (at %s)\n", r.Reason, r.Where.Hook)
	}
	return n, wk, nil
}

func run(w io.Writer) error {
	fmt.Fprintln(w, "# curl http://127.0.0.1:30080 on node-a — a NodePort Service whose pod 10.244.1.5 is behind cni0")
	for _, c := range Cases {
		if _, err := Walk(w, c); err != nil {
			return err
		}
	}
	return nil
}

func main() {
	if err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "localhost-nodeport:", err)
		os.Exit(1)
	}
}
