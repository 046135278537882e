package pwtest_test

import (
	"fmt"
	"math/big"
	"net/netip"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/probability"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
)

// node returns a host with an uplink (192.168.10.1/24 on eth0) and a pod
// bridge (10.244.0.1/16 on cbr0) and a default route, as a Kubernetes
// node.
func node(t require.TestingT, seed uint64) *netfilter.Host {
	h := netfilter.NewHost(netfilter.HostConfig{Seed: seed})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("cbr0", netip.MustParsePrefix("10.244.0.1/16")))
	// A default route, as on a real node: without it a service with no
	// endpoints would fail routing before kube-proxy's REJECT.
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("192.168.10.254")}))
	return h
}

// install generates kube-proxy's rules for the cluster and loads them.
func install(t require.TestingT, h *netfilter.Host, svcs []corev1.Service, slices []discoveryv1.EndpointSlice) {
	doc, err := kubeproxy.Generate(kubeproxy.DefaultConfig("node-a"), svcs, slices, nil)
	require.NoError(t, err)
	require.NoError(t, kubeproxy.Install(h, doc))
}

// webService is a ClusterIP service 10.96.0.10:80/TCP with n ready
// endpoints 10.244.1.2.. on port 8080.
func webService(n int) ([]corev1.Service, []discoveryv1.EndpointSlice) {
	svc := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10",
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
	name, proto, port := "http", corev1.ProtocolTCP, int32(8080)
	es := discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: &name, Protocol: &proto, Port: &port}},
	}
	for i := range n {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{fmt.Sprintf("10.244.1.%d", i+2)}})
	}
	return []corev1.Service{svc}, []discoveryv1.EndpointSlice{es}
}

// webEndpoints are webService's endpoints in kube-proxy's order (by
// "ip:port" string, which for n ≤ 8 is numeric order).
func webEndpoints(n int) []netip.AddrPort {
	out := make([]netip.AddrPort, n)
	for i := range out {
		out[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 1, byte(i + 2)}), 8080)
	}
	return out
}

// webWant is the exact distribution kube-proxy's cascade gives webService.
func webWant(n int) map[netip.AddrPort]*big.Rat {
	ps := probability.EndpointProbabilities(n, probability.FormatCurrent)
	want := map[netip.AddrPort]*big.Rat{}
	for i, ep := range webEndpoints(n) {
		want[ep] = ps[i]
	}
	return want
}

// client returns the i-th new TCP connection from 192.168.10.2 to the
// service.
func client(i int) netfilter.Packet {
	return netfilter.Packet{Family: netfilter.IPv4, Proto: inet.TCP,
		Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("10.96.0.10"),
		SrcPort: uint16(1024 + i%60000), DstPort: 80, TCPFlags: inet.SYN, TTL: 64, Length: 60}
}

// recorder is an assert.TestingT that keeps the failure messages.
type recorder struct{ msgs []string }

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

// webNode is a node running webService(n).
func webNode(t require.TestingT, seed uint64, n int) *netfilter.Host {
	h := node(t, seed)
	svcs, slices := webService(n)
	install(t, h, svcs, slices)
	return h
}
