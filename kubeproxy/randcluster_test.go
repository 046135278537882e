package kubeproxy

import (
	"fmt"
	"math/rand/v2"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// randomCluster builds a small cluster exercising every service type and
// policy, affinity, source ranges and endpoint conditions, plus a matching
// config, from a seeded generator.
func randomCluster(r *rand.Rand, v6 bool) (Config, []corev1.Service, []discoveryv1.EndpointSlice) {
	ip := func(prefix string, n int) string {
		if v6 {
			return fmt.Sprintf("fd00:%s::%x", prefix, n)
		}
		return fmt.Sprintf("10.%s.%d.%d", prefix, n/250, n%250+1)
	}
	cfg := DefaultConfig("node-a")
	nodeIP := "192.168.0.2"
	if v6 {
		cfg.Family = corev1.IPv6Protocol
		nodeIP = "2001:db8::2"
	}
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr(nodeIP)}
	cfg.RandomFully = r.IntN(2) == 0
	cfg.MasqueradeAll = r.IntN(4) == 0
	cfg.LocalhostNodePorts = r.IntN(3) != 0
	cfg.ConntrackTCPLiberal = r.IntN(4) == 0
	cfg.MasqueradeBit = []int{14, 0, 31, 5}[r.IntN(4)]
	podCIDR := "10.0.0.0/8"
	if v6 {
		podCIDR = "fd00:10::/64"
	}
	switch r.IntN(5) {
	case 0:
	case 1, 2:
		cfg.Detector = LocalDetector{Mode: DetectClusterCIDR, CIDR: netip.MustParsePrefix(podCIDR)}
	case 3:
		cfg.Detector = LocalDetector{Mode: DetectBridgeInterface, Interface: "cbr0"}
	case 4:
		cfg.Detector = LocalDetector{Mode: DetectInterfaceNamePrefix, Interface: "veth"}
	}
	if r.IntN(4) == 0 {
		bits := 16
		if v6 {
			bits = 32
		}
		cfg.NodePortAddresses = []netip.Prefix{netip.PrefixFrom(netip.MustParseAddr(nodeIP), bits).Masked()}
	}
	protos := []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	var svcs []corev1.Service
	var slices []discoveryv1.EndpointSlice
	nSvc := 4 + r.IntN(8)
	for i := range nSvc {
		ns, name := fmt.Sprintf("ns%d", i%3), fmt.Sprintf("svc%d", i)
		typ := []string{"ClusterIP", "NodePort", "LoadBalancer"}[r.IntN(3)]
		s := makeSvc(ns, name, typ, ip("30", i))
		nPorts := 1 + r.IntN(2)
		for p := range nPorts {
			pn := ""
			if nPorts > 1 || r.IntN(2) == 0 {
				pn = fmt.Sprintf("p%d", p)
			}
			np := int32(0)
			if typ != "ClusterIP" {
				np = int32(30000 + i*2 + p)
			}
			port(pn, protos[r.IntN(3)], int32(80+p), np)(&s)
		}
		if r.IntN(3) == 0 {
			externalIPs(ip("99", i))(&s)
		}
		if typ != "ClusterIP" && r.IntN(2) == 0 {
			eTPLocal(0)(&s)
			if typ == "LoadBalancer" {
				s.Spec.HealthCheckNodePort = int32(32000 + i)
			}
		}
		if r.IntN(4) == 0 {
			iTPLocal()(&s)
		}
		if r.IntN(3) == 0 {
			affinity(int32(1 + r.IntN(10800)))(&s)
		}
		if typ == "LoadBalancer" {
			lbIngress(ip("200", i))(&s)
			if r.IntN(3) == 0 {
				lbIngress(ip("201", i))(&s)
			}
			if r.IntN(2) == 0 {
				if v6 {
					sourceRanges("2001:db8:99::/48", "2001:db8::/64")(&s)
				} else {
					sourceRanges("203.0.113.0/25", []string{"192.168.0.0/16", "198.51.100.0/24"}[r.IntN(2)])(&s)
				}
			}
		}
		svcs = append(svcs, s)
		for _, sp := range s.Spec.Ports {
			var eps []ep
			nEps := r.IntN(5)
			if r.IntN(6) == 0 {
				nEps = 5 + r.IntN(8) // exercise more probabilities
			}
			for e := range nEps {
				x := ep{ip: ip("180", i*20+e)}
				if r.IntN(2) == 0 {
					x.node = "node-a"
				}
				switch r.IntN(5) {
				case 0:
					x.ready, x.serving, x.terminating = no, yes, yes
				case 1:
					x.ready, x.serving, x.terminating = no, no, yes
				case 2:
					x.ready = no
				}
				eps = append(eps, x)
			}
			slices = append(slices, makeSlice(ns, name, fmt.Sprintf("%s-%s", name, sp.Name), sp.Name, sp.Protocol, 8000+sp.Port, eps...))
		}
	}
	return cfg, svcs, slices
}
