package kubeproxy

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// bigCluster has n ClusterIP/NodePort services with 5 ready endpoints each.
func bigCluster(n int) ([]corev1.Service, []discoveryv1.EndpointSlice) {
	svcs := make([]corev1.Service, 0, n)
	slices := make([]discoveryv1.EndpointSlice, 0, n)
	for i := range n {
		ns, name := fmt.Sprintf("ns%d", i%50), fmt.Sprintf("svc%d", i)
		typ, np := "ClusterIP", int32(0)
		if i%4 == 0 {
			typ, np = "NodePort", int32(30000+i%2000)
		}
		svcs = append(svcs, makeSvc(ns, name, typ, fmt.Sprintf("172.%d.%d.%d", 16+i/65536, i/256%256, i%256), port("http", tcp, 80, np)))
		var eps []ep
		for e := range 5 {
			k := i*5 + e
			eps = append(eps, ep{ip: fmt.Sprintf("10.%d.%d.%d", 1+k/65536, k/256%256, k%256), node: fmt.Sprintf("node-%d", k%7)})
		}
		slices = append(slices, makeSlice(ns, name, name+"-x", "http", tcp, 8080, eps...))
	}
	return svcs, slices
}

func BenchmarkGenerate10kServices5Endpoints(b *testing.B) {
	svcs, slices := bigCluster(10000)
	cfg := DefaultConfig("node-1")
	cfg.Detector = LocalDetector{Mode: DetectClusterCIDR, CIDR: netip.MustParsePrefix("10.0.0.0/8")}
	var g Generator
	b.ReportAllocs()
	var size int
	for b.Loop() {
		out, err := g.Generate(cfg, svcs, slices, nil)
		if err != nil {
			b.Fatal(err)
		}
		size = len(out)
	}
	b.ReportMetric(float64(size), "bytes/doc")
}
