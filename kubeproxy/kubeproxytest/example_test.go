package kubeproxytest_test

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/kubeproxy/kubeproxytest"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// Services and EndpointSets draw the objects kube-proxy reads (in a
// property test, with Draw inside rapid.Check); whatever is drawn, a new
// connection's outcomes sum to exactly 1.
func ExampleServices() {
	services := kubeproxytest.Services(kubeproxytest.ServiceOptions{Types: []corev1.ServiceType{corev1.ServiceTypeClusterIP}, Protocols: []corev1.Protocol{corev1.ProtocolTCP}})
	for i := range 3 {
		svc := services.Example(i)
		slices := kubeproxytest.EndpointSets(svc, kubeproxytest.EndpointOptions{Min: 1, AllReady: true}).Example(i)
		doc, err := kubeproxy.Generate(kubeproxy.DefaultConfig("node-a"), []corev1.Service{svc}, slices, nil)
		if err != nil {
			panic(err)
		}
		h := netfilter.NewHost(netfilter.HostConfig{})
		_ = h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"))
		_ = h.AddInterface("cbr0", netip.MustParsePrefix("10.244.0.1/16"))
		if err := kubeproxy.Install(h, doc); err != nil {
			panic(err)
		}
		syn := netfilter.TCP(netip.MustParseAddrPort("192.168.10.2:40000"),
			netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), uint16(svc.Spec.Ports[0].Port)), inet.SYN)
		outs, err := h.Explain("eth0", syn)
		if err != nil {
			panic(err)
		}
		fmt.Println(netfiltertest.Distribute(outs, netfiltertest.ByDestination).Total())
	}
	// Output:
	// 1/1
	// 1/1
	// 1/1
}
