package kubeproxy_test

import (
	"fmt"
	"net/netip"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
)

// Install loads what Generate wrote into a simulated node; Explain then
// gives every endpoint a new connection may reach, with its exact
// probability.
func ExampleInstall() {
	cluster := []byte(`
apiVersion: v1
kind: Service
metadata: {namespace: default, name: web}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, protocol: TCP, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata: {namespace: default, name: web-1, labels: {kubernetes.io/service-name: web}}
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 8080}]
endpoints:
- {addresses: [10.244.1.5], conditions: {ready: true}}
- {addresses: [10.244.1.6], conditions: {ready: true}}
- {addresses: [10.244.1.7], conditions: {ready: true}}
`)
	doc, err := kubeproxy.GenerateFromYAML(kubeproxy.DefaultConfig("node-a"), cluster)
	if err != nil {
		panic(err)
	}
	h := netfilter.NewHost(netfilter.HostConfig{})
	_ = h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"))
	_ = h.AddInterface("cbr0", netip.MustParsePrefix("10.244.1.1/24"))
	if err := kubeproxy.Install(h, doc); err != nil {
		panic(err)
	}
	outs, err := h.Explain("eth0", netfilter.TCP(netip.MustParseAddrPort("192.168.10.2:40000"),
		netip.MustParseAddrPort("10.96.0.10:80"), inet.SYN))
	if err != nil {
		panic(err)
	}
	for _, o := range outs {
		fmt.Println(o.Result.Packet.Dst, o.Probability)
	}
	// Output:
	// 10.244.1.5 715827883/2147483648
	// 10.244.1.6 1431655765/4294967296
	// 10.244.1.7 1431655765/4294967296
}
