// Package kubeproxytest generates the Kubernetes objects kube-proxy reads,
// for property tests of the rules kubeproxy.Generate writes: [Services]
// draws valid Services and [EndpointSets] the EndpointSlices of one, as
// pgregory.net/rapid generators. The engine's helpers (probability
// assertions, packet and ruleset generators, trace printing) are in
// [netfiltertest], which does not depend on the Kubernetes API.
package kubeproxytest

import (
	"fmt"
	"net/netip"

	"pgregory.net/rapid"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// ServiceOptions configures [Services]. The zero value draws IPv4
// ClusterIP, NodePort and LoadBalancer services in namespace "default"
// with one to three ports and default policies.
type ServiceOptions struct {
	// Namespace of the services; empty means "default".
	Namespace string
	// ClusterIPs is where cluster IPs are drawn from; its family is the
	// service's. The zero value means 10.96.0.0/16.
	ClusterIPs netip.Prefix
	// LoadBalancerIPs is where load-balancer ingress IPs are drawn from;
	// the zero value means 203.0.113.0/24 (or 2001:db8:ff::/64 for IPv6).
	LoadBalancerIPs netip.Prefix
	// Types are drawn from; empty means ClusterIP, NodePort and
	// LoadBalancer.
	Types []corev1.ServiceType
	// Protocols are drawn from; empty means TCP, UDP and SCTP.
	Protocols []corev1.Protocol
	// MaxPorts bounds the number of ports (default 3).
	MaxPorts int
	// Policies draws externalTrafficPolicy and internalTrafficPolicy Local
	// and ClientIP session affinity as well as the defaults.
	Policies bool
}

// Services returns a generator of valid corev1.Service objects as
// kube-proxy reads them: a name, a cluster IP, distinct ports (named when
// there are several) with node ports for NodePort and LoadBalancer
// services, and a load-balancer ingress IP for LoadBalancer ones. Target
// ports are numeric.
func Services(opts ServiceOptions) *rapid.Generator[corev1.Service] {
	ns := opts.Namespace
	if ns == "" {
		ns = "default"
	}
	cips := opts.ClusterIPs
	if !cips.IsValid() {
		cips = netip.MustParsePrefix("10.96.0.0/16")
	}
	lbs := opts.LoadBalancerIPs
	if !lbs.IsValid() {
		lbs = netip.MustParsePrefix("203.0.113.0/24")
		if cips.Addr().Is6() {
			lbs = netip.MustParsePrefix("2001:db8:ff::/64")
		}
	}
	types := opts.Types
	if len(types) == 0 {
		types = []corev1.ServiceType{corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer}
	}
	protos := opts.Protocols
	if len(protos) == 0 {
		protos = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}
	}
	maxPorts := opts.MaxPorts
	if maxPorts <= 0 {
		maxPorts = 3
	}
	return rapid.Custom(func(t *rapid.T) corev1.Service {
		typ := rapid.SampledFrom(types).Draw(t, "type")
		s := corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: rapid.StringMatching(`svc-[a-z][a-z0-9]{0,6}`).Draw(t, "name")},
			Spec: corev1.ServiceSpec{
				Type:      typ,
				ClusterIP: netfiltertest.AddrIn(cips, rapid.Uint64().Draw(t, "clusterIP")).String(),
			},
		}
		s.Spec.ClusterIPs = []string{s.Spec.ClusterIP}
		ports := rapid.SliceOfNDistinct(rapid.Uint16Range(1, 65535), 1, maxPorts, func(p uint16) uint16 { return p }).Draw(t, "ports")
		nodePorts := rapid.SliceOfNDistinct(rapid.Int32Range(30000, 32767), len(ports), len(ports), func(p int32) int32 { return p }).Draw(t, "nodePorts")
		for i, p := range ports {
			sp := corev1.ServicePort{
				Protocol:   rapid.SampledFrom(protos).Draw(t, "protocol"),
				Port:       int32(p),
				TargetPort: intstr.FromInt32(int32(rapid.IntRange(1, 65535).Draw(t, "targetPort"))),
			}
			if len(ports) > 1 {
				sp.Name = fmt.Sprintf("p%d", i)
			}
			if typ != corev1.ServiceTypeClusterIP {
				sp.NodePort = nodePorts[i]
			}
			s.Spec.Ports = append(s.Spec.Ports, sp)
		}
		if typ == corev1.ServiceTypeLoadBalancer {
			ip := netfiltertest.AddrIn(lbs, rapid.Uint64().Draw(t, "lbIP")).String()
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		}
		if opts.Policies {
			if typ != corev1.ServiceTypeClusterIP && rapid.Bool().Draw(t, "eTPLocal") {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.HealthCheckNodePort = rapid.Int32Range(32000, 32767).Draw(t, "healthCheckNodePort")
			}
			if rapid.Bool().Draw(t, "iTPLocal") {
				local := corev1.ServiceInternalTrafficPolicyLocal
				s.Spec.InternalTrafficPolicy = &local
			}
			if rapid.Bool().Draw(t, "affinity") {
				secs := rapid.Int32Range(1, 10800).Draw(t, "affinitySeconds")
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: &secs}}
			}
		}
		return s
	})
}

// EndpointOptions configures [EndpointSets]. The zero value draws zero to
// eight endpoints in 10.244.0.0/16 (fd00:10:244::/64 for an IPv6
// service) on nodes "node-a" and "node-b", with mixed conditions.
type EndpointOptions struct {
	// Prefix is where endpoint addresses are drawn from.
	Prefix netip.Prefix
	// Min and Max bound the number of endpoints (Max defaults to 8).
	Min, Max int
	// Nodes are the node names endpoints are placed on; empty means
	// "node-a" and "node-b".
	Nodes []string
	// AllReady makes every endpoint ready; otherwise endpoints are drawn
	// ready, not ready, serving and terminating, or terminating only.
	AllReady bool
}

// EndpointSets returns a generator of the EndpointSlices of svc: distinct
// endpoint addresses spread over one or two slices, each slice carrying
// every port of svc (named as the service port, numbered as its target
// port), with nodes and conditions drawn as opts says.
func EndpointSets(svc corev1.Service, opts EndpointOptions) *rapid.Generator[[]discoveryv1.EndpointSlice] {
	v6 := false
	if a, err := netip.ParseAddr(svc.Spec.ClusterIP); err == nil {
		v6 = a.Is6()
	}
	prefix := opts.Prefix
	if !prefix.IsValid() {
		prefix = netip.MustParsePrefix("10.244.0.0/16")
		if v6 {
			prefix = netip.MustParsePrefix("fd00:10:244::/64")
		}
	}
	maxEps := opts.Max
	if maxEps <= 0 {
		maxEps = 8
	}
	minEps := min(max(opts.Min, 0), maxEps)
	nodes := opts.Nodes
	if len(nodes) == 0 {
		nodes = []string{"node-a", "node-b"}
	}
	// Host numbers from 2 keep clear of the network and gateway
	// addresses; the range is capped so that they stay distinct.
	hosts := uint64(1) << min(prefix.Addr().BitLen()-prefix.Bits(), 32)
	hostGen := rapid.Uint64Range(2, max(hosts-2, 2))
	addrType := discoveryv1.AddressTypeIPv4
	if prefix.Addr().Is6() {
		addrType = discoveryv1.AddressTypeIPv6
	}
	return rapid.Custom(func(t *rapid.T) []discoveryv1.EndpointSlice {
		hs := rapid.SliceOfNDistinct(hostGen, minEps, maxEps, func(h uint64) uint64 { return h }).Draw(t, "hosts")
		var ports []discoveryv1.EndpointPort
		for _, sp := range svc.Spec.Ports {
			name, proto := sp.Name, sp.Protocol
			num := sp.TargetPort.IntVal
			if sp.TargetPort.Type != intstr.Int || num == 0 {
				num = sp.Port
			}
			ports = append(ports, discoveryv1.EndpointPort{Name: &name, Protocol: &proto, Port: &num})
		}
		nSlices := 1
		if len(hs) > 1 && rapid.Bool().Draw(t, "split") {
			nSlices = 2
		}
		out := make([]discoveryv1.EndpointSlice, nSlices)
		for i := range out {
			out[i] = discoveryv1.EndpointSlice{
				ObjectMeta: metav1.ObjectMeta{
					Namespace: svc.Namespace, Name: fmt.Sprintf("%s-%d", svc.Name, i),
					Labels: map[string]string{discoveryv1.LabelServiceName: svc.Name},
				},
				AddressType: addrType,
				Ports:       ports,
			}
		}
		for i, h := range hs {
			node := rapid.SampledFrom(nodes).Draw(t, "node")
			e := discoveryv1.Endpoint{Addresses: []string{netfiltertest.AddrIn(prefix, h).String()}, NodeName: &node}
			if !opts.AllReady {
				e.Conditions = conditions(rapid.IntRange(0, 4).Draw(t, "conditions"))
			}
			out[i%nSlices].Endpoints = append(out[i%nSlices].Endpoints, e)
		}
		return out
	})
}

// conditions returns the endpoint conditions kube-proxy tells apart, by
// kind: unset (ready), ready, not ready, serving and terminating, and
// terminating without serving. Fresh pointers each time keep the slices
// independent of one another.
func conditions(kind int) discoveryv1.EndpointConditions {
	b := func(v bool) *bool { return &v }
	switch kind {
	case 1:
		return discoveryv1.EndpointConditions{Ready: b(true), Serving: b(true), Terminating: b(false)}
	case 2:
		return discoveryv1.EndpointConditions{Ready: b(false), Serving: b(false), Terminating: b(false)}
	case 3:
		return discoveryv1.EndpointConditions{Ready: b(false), Serving: b(true), Terminating: b(true)}
	case 4:
		return discoveryv1.EndpointConditions{Ready: b(false), Serving: b(false), Terminating: b(true)}
	}
	return discoveryv1.EndpointConditions{}
}
