package cluster_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
)

var (
	mp = netip.MustParsePrefix
	ma = netip.MustParseAddr
)

// Addresses of the kubenet fixture: two nodes in an Azure VNet, each with
// a cbr0 bridge for its pod CIDR, the route table sending each pod CIDR to
// its node, a load balancer and a NAT gateway.
const (
	node1IP, node2IP = "10.240.0.4", "10.240.0.5"
	podA, podC       = "10.244.0.5", "10.244.0.7" // on node1
	podB             = "10.244.1.6"               // on node2
	clusterIP        = "10.0.0.10"
	vip              = "20.1.2.3"
	natIP            = "20.9.9.9"
	client           = "203.0.113.7"
	nodePort         = 30080
	hcPort           = 32000
)

// services is a ClusterIP Service "web" with endpoints podB (node2) and
// podC (node1), and a LoadBalancer Service "lb" with
// externalTrafficPolicy Local whose only endpoint is podB on node2.
var services = fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: ClusterIP
  clusterIP: %[1]s
  ports:
  - {protocol: TCP, port: 80, targetPort: 8080}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-1
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports:
- {name: "", protocol: TCP, port: 8080}
endpoints:
- addresses: [%[2]s]
  nodeName: node2
  conditions: {ready: true}
- addresses: [%[3]s]
  nodeName: node1
  conditions: {ready: true}
---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 10.0.0.20
  externalTrafficPolicy: Local
  healthCheckNodePort: %[5]d
  ports:
  - {protocol: TCP, port: 80, targetPort: 8080, nodePort: %[6]d}
status:
  loadBalancer:
    ingress:
    - ip: %[4]s
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: lb-1
  namespace: default
  labels: {kubernetes.io/service-name: lb}
addressType: IPv4
ports:
- {name: "", protocol: TCP, port: 8080}
endpoints:
- addresses: [%[2]s]
  nodeName: node2
  conditions: {ready: true}
`, clusterIP, podB, podC, vip, hcPort, nodePort)

func proxyConfig(node string) kubeproxy.Config {
	cfg := kubeproxy.DefaultConfig(node)
	cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectClusterCIDR, CIDR: mp("10.244.0.0/16")}
	return cfg
}

type fixture struct {
	n            *cluster.Network
	lb           *cluster.LoadBalancer
	node1, node2 *netfilter.Host
}

// kubenet builds the fixture. With probes the load balancer asks each
// node's kube-proxy health check; without, every node is healthy.
func kubenet(t tb, probes bool) fixture {
	t.Helper()
	return kubenetWith(t, services, probes, nil)
}

// endpoint is an extra pod: its address, node and bridge port.
type endpoint struct{ addr, node string }

// kubenetWith builds the fixture with the Services of yaml and extra pods.
func kubenetWith(t tb, services string, probes bool, extra []endpoint) fixture {
	t.Helper()
	n := cluster.New(cluster.Config{Seed: 1})
	f := fixture{n: n}
	var hcs [2]cluster.Prober
	for i, nd := range []struct{ name, ip, cidr, bridgeIP string }{
		{"node1", node1IP, "10.244.0.0/24", "10.244.0.1"},
		{"node2", node2IP, "10.244.1.0/24", "10.244.1.1"},
	} {
		h := netfilter.NewHost(netfilter.HostConfig{Seed: uint64(i + 1)})
		h.Tracing = true
		require.NoError(t, h.AddInterface("eth0", mp(nd.ip+"/16")))
		require.NoError(t, h.AddInterface("cbr0", netip.PrefixFrom(ma(nd.bridgeIP), 24)))
		require.NoError(t, h.AddRoute(netfilter.Route{Dst: mp("0.0.0.0/0"), Iface: "eth0", Gateway: ma("10.240.0.1")}))
		doc, err := kubeproxy.GenerateFromYAML(proxyConfig(nd.name), []byte(services))
		require.NoError(t, err)
		require.NoError(t, kubeproxy.Install(h, doc))
		// What kubenet's ip-masq-agent does for traffic leaving the VNet.
		require.NoError(t, h.Exec("-t nat -A POSTROUTING ! -d 10.0.0.0/8 -m addrtype ! --dst-type LOCAL -j MASQUERADE"))
		require.NoError(t, n.AddHost(nd.name, h))
		require.NoError(t, n.AddBridge(nd.name, "cbr0"))
		objs, err := kubeproxy.Decode([]byte(services))
		require.NoError(t, err)
		hc, err := kubeproxy.HealthChecks(proxyConfig(nd.name), objs.Services, objs.EndpointSlices, objs.Nodes)
		require.NoError(t, err)
		if len(hc) == 1 {
			hcs[i] = hc[0]
		}
	}
	f.node1, f.node2 = n.Host("node1"), n.Host("node2")
	pods := []struct{ name, node, port, addr, gw string }{
		{"pod-a", "node1", "veth-a", podA, "10.244.0.1"},
		{"pod-c", "node1", "veth-c", podC, "10.244.0.1"},
		{"pod-b", "node2", "veth-b", podB, "10.244.1.1"},
	}
	for i, e := range extra {
		gw := "10.244.0.1"
		if e.node == "node2" {
			gw = "10.244.1.1"
		}
		pods = append(pods, struct{ name, node, port, addr, gw string }{fmt.Sprintf("pod-%d", i), e.node, fmt.Sprintf("veth-%d", i), e.addr, gw})
	}
	for _, p := range pods {
		_, err := n.AddPod(p.name, cluster.Pod{Addr: netip.PrefixFrom(ma(p.addr), 24), Gateway: ma(p.gw)})
		require.NoError(t, err)
		require.NoError(t, n.AddBridgePort(p.node, "cbr0", p.port))
		require.NoError(t, n.Link(cluster.Port{Device: p.node, Iface: p.port}, cluster.Port{Device: p.name, Iface: "eth0"}))
	}
	vnet, err := n.AddRouter("vnet", ma("10.240.0.1"))
	require.NoError(t, err)
	require.NoError(t, vnet.AddPort("node1", mp(node1IP+"/32")))
	require.NoError(t, vnet.AddPort("node2", mp(node2IP+"/32")))
	require.NoError(t, vnet.AddPort("lb"))
	require.NoError(t, vnet.AddPort("nat"))
	require.NoError(t, vnet.AddRoute(cluster.RouterRoute{Dst: mp("10.244.0.0/24"), NextHop: ma(node1IP)}))
	require.NoError(t, vnet.AddRoute(cluster.RouterRoute{Dst: mp("10.244.1.0/24"), NextHop: ma(node2IP)}))
	require.NoError(t, vnet.AddRoute(cluster.RouterRoute{Dst: mp("0.0.0.0/0"), Port: "nat"}))
	require.NoError(t, n.Link(cluster.Port{Device: "node1", Iface: "eth0"}, cluster.Port{Device: "vnet", Iface: "node1"}))
	require.NoError(t, n.Link(cluster.Port{Device: "node2", Iface: "eth0"}, cluster.Port{Device: "vnet", Iface: "node2"}))

	internet, err := n.AddRouter("internet")
	require.NoError(t, err)
	require.NoError(t, internet.AddPort("lb", mp(vip+"/32")))
	require.NoError(t, internet.AddPort("nat", mp(natIP+"/32")))
	require.NoError(t, internet.AddPort("world", mp("0.0.0.0/0")))

	lb, err := n.AddLoadBalancer("lb")
	require.NoError(t, err)
	backends := []cluster.Backend{{Name: "node1", Addr: ma(node1IP)}, {Name: "node2", Addr: ma(node2IP)}}
	if probes {
		backends[0].Probe, backends[1].Probe = hcs[0], hcs[1]
	}
	require.NoError(t, lb.AddRule(cluster.LBRule{Frontend: netip.AddrPortFrom(ma(vip), 80), Proto: inet.TCP, Backends: backends, FloatingIP: true, ProbePort: hcPort}))
	require.NoError(t, n.Link(cluster.Port{Device: "lb", Iface: "backend"}, cluster.Port{Device: "vnet", Iface: "lb"}))
	require.NoError(t, n.Link(cluster.Port{Device: "lb", Iface: "frontend"}, cluster.Port{Device: "internet", Iface: "lb"}))
	_, err = n.AddGateway("nat", ma(natIP), mp("10.0.0.0/8"))
	require.NoError(t, err)
	require.NoError(t, n.Link(cluster.Port{Device: "nat", Iface: "inside"}, cluster.Port{Device: "vnet", Iface: "nat"}))
	require.NoError(t, n.Link(cluster.Port{Device: "nat", Iface: "outside"}, cluster.Port{Device: "internet", Iface: "nat"}))
	f.lb = lb
	return f
}

func tcp(src, dst string, flags inet.TCPFlags) netfilter.Packet {
	return netfilter.TCP(netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst), flags)
}

// route summarises a walk: each hop's device, ports and the packet's
// addresses as it arrived → as it left.
func route(w cluster.Walk) string {
	var b strings.Builder
	for _, h := range w.Hops {
		fmt.Fprintf(&b, "%s[%s>%s] %s:%d→%s:%d => %s:%d→%s:%d %s\n", h.Device, h.In, h.Out,
			h.Packet.Src, h.Packet.SrcPort, h.Packet.Dst, h.Packet.DstPort,
			h.Result.Packet.Src, h.Result.Packet.SrcPort, h.Result.Packet.Dst, h.Result.Packet.DstPort, h.Result.Disposition)
	}
	fmt.Fprintf(&b, "%s %s", w.Fate, w.Reason)
	return b.String()
}

// tb is what the fixtures need of *testing.T and *rapid.T.
type tb interface {
	require.TestingT
	Helper()
}

var _ tb = (*testing.T)(nil)
