// Package localhostnodeport shows why kube-proxy's NodePort rules for
// 127.0.0.1 need net.ipv4.conf.all.route_localnet=1: a connection from the
// node to 127.0.0.1:NodePort is DNATed to a pod on another interface, and
// a packet with a 127.0.0.0/8 source may leave the loopback device only
// when route_localnet is 1 (kube-proxy then masquerades it). With the
// kernel default 0, the reroute after nat OUTPUT drops it and connect()
// fails with EINVAL; netfilter/route_localnet_kernel_test.go checks the
// same packets against the kernel.
package localhostnodeport

import (
	"fmt"
	"net/netip"

	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
)

const cluster = `apiVersion: v1
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

// connect sends the SYN of `curl http://127.0.0.1:30080` on a node whose
// kube-proxy wrote localhost NodePort rules or not, with route_localnet
// on or off.
func connect(localhostNodePorts, routeLocalnet bool) string {
	cfg := kubeproxy.DefaultConfig("node-a")
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr("192.168.10.1")}
	cfg.LocalhostNodePorts = localhostNodePorts
	rules, err := kubeproxy.GenerateFromYAML(cfg, []byte(cluster))
	if err != nil {
		return err.Error()
	}
	h := netfilter.NewHost(netfilter.HostConfig{NoRouteLocalnet: !routeLocalnet})
	_ = h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"))
	_ = h.AddInterface("cni0", netip.MustParsePrefix("10.244.1.1/24"))
	if err := kubeproxy.Install(h, rules); err != nil {
		return err.Error()
	}
	// No source address: the host chooses it, as for an unbound socket.
	syn := netfilter.TCP(netip.AddrPortFrom(netip.Addr{}, 40000), netip.MustParseAddrPort("127.0.0.1:30080"), netfilter.SYN)
	syn.Window = 64240
	res := h.Send(syn)
	out := fmt.Sprintf("%s %s:%d -> %s:%d", res.Disposition, res.Packet.Src, res.Packet.SrcPort, res.Packet.Dst, res.Packet.DstPort)
	if res.Reason != "" {
		out += " (" + res.Reason + " at " + res.Where.Hook.String() + ")"
	}
	return out
}

func Example() {
	fmt.Println("route_localnet=1:", connect(true, true))
	fmt.Println("route_localnet=0:", connect(true, false))
	fmt.Println("--iptables-localhost-nodeports=false:", connect(false, false))
	// Output:
	// route_localnet=1: sent 10.244.1.1:40000 -> 10.244.1.5:8080
	// route_localnet=0: dropped 127.0.0.1:40000 -> 10.244.1.5:8080 (invalid source at OUTPUT)
	// --iptables-localhost-nodeports=false: delivered 127.0.0.1:40000 -> 127.0.0.1:30080
}
