package kubeproxy_test

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/packetwalk/packetwalk/kubeproxy"
	corev1 "k8s.io/api/core/v1"
)

func ExampleServiceChain() {
	name := kubeproxy.PortName("kube-system", "kube-dns", "dns")
	fmt.Println(kubeproxy.ServiceChain(name, corev1.ProtocolUDP))
	fmt.Println(kubeproxy.EndpointChain("ns1/svc1:p80", corev1.ProtocolTCP, netip.MustParseAddrPort("10.180.0.1:80")))
	// Before v1.19 an unnamed port hashed "ns/name:".
	fmt.Println(kubeproxy.ServiceChain(kubeproxy.LegacyPortName("default", "whereami", ""), corev1.ProtocolTCP))
	// Output:
	// KUBE-SVC-TCOU7JCQXEZGVUNU
	// KUBE-SEP-SXIVWICOYRO3J4NJ
	// KUBE-SVC-7G2JV7LNOR6DDNIY
}

const exampleCluster = `
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  clusterIP: 10.96.0.10
  ports: [{name: http, port: 80, protocol: TCP}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-abc
  namespace: default
  labels: {kubernetes.io/service-name: web}
addressType: IPv4
ports: [{name: http, port: 8080, protocol: TCP}]
endpoints:
- addresses: [10.244.1.5]
  nodeName: node-a
- addresses: [10.244.2.7]
  nodeName: node-b
`

func ExampleGenerateFromYAML() {
	cfg := kubeproxy.DefaultConfig("node-a")
	cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectClusterCIDR, CIDR: netip.MustParsePrefix("10.244.0.0/16")}
	cfg.PayloadOnly = true
	doc, err := kubeproxy.GenerateFromYAML(cfg, []byte(exampleCluster))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.HasPrefix(line, "-A KUBE-SVC-") || strings.HasPrefix(line, "-A KUBE-SERVICES -m comment --comment \"default") {
			fmt.Println(line)
		}
	}
	// Output:
	// -A KUBE-SERVICES -m comment --comment "default/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 -j KUBE-SVC-CDGGSHYLG3RE2FKL
	// -A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http cluster IP" -m tcp -p tcp -d 10.96.0.10 --dport 80 ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ
	// -A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.1.5:8080" -m statistic --mode random --probability 0.5000000000 -j KUBE-SEP-AFGSLHOD2HFNCBX4
	// -A KUBE-SVC-CDGGSHYLG3RE2FKL -m comment --comment "default/web:http -> 10.244.2.7:8080" -j KUBE-SEP-2RIJ5GIYXEFH6G4D
}

func ExampleHealthCheck_Response() {
	svc := corev1.Service{}
	svc.Namespace, svc.Name = "ns1", "svc1"
	svc.Spec.Type = corev1.ServiceTypeLoadBalancer
	svc.Spec.ClusterIP = "172.30.0.41"
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.HealthCheckNodePort = 30000
	svc.Spec.Ports = []corev1.ServicePort{{Name: "p80", Port: 80, NodePort: 3001, Protocol: corev1.ProtocolTCP}}
	hcs, err := kubeproxy.HealthChecks(kubeproxy.DefaultConfig("test-node"), []corev1.Service{svc}, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	status, _, body := hcs[0].Response(true)
	fmt.Println(hcs[0].NodePort, status)
	fmt.Println(string(body))
	// Output:
	// 30000 503
	// {
	// 	"service": {
	// 		"namespace": "ns1",
	// 		"name": "svc1"
	// 	},
	// 	"localEndpoints": 0,
	// 	"serviceProxyHealthy": true
	// }
}

func ExampleGenerate() {
	svc := corev1.Service{}
	svc.Namespace, svc.Name = "ns6", "svc6"
	svc.Spec.ClusterIP = "172.30.0.46"
	svc.Spec.Ports = []corev1.ServicePort{{Name: "p80", Port: 80, Protocol: corev1.ProtocolTCP}}
	cfg := kubeproxy.DefaultConfig("test-node")
	cfg.PayloadOnly = true
	doc, err := kubeproxy.Generate(cfg, []corev1.Service{svc}, nil, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	// A service without endpoints only gets a filter REJECT rule.
	for _, line := range strings.Split(string(doc), "\n") {
		if strings.Contains(line, "ns6/svc6") {
			fmt.Println(line)
		}
	}
	// Output:
	// -A KUBE-SERVICES -m comment --comment "ns6/svc6:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.46 --dport 80 -j REJECT
}
