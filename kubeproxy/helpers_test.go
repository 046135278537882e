package kubeproxy

import (
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func ptr[T any](v T) *T { return &v }

type svcOpt func(*corev1.Service)

func makeSvc(ns, name, typ, clusterIP string, opts ...svcOpt) corev1.Service {
	s := corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Type:      corev1.ServiceType(typ),
			ClusterIP: clusterIP,
		},
	}
	for _, o := range opts {
		o(&s)
	}
	return s
}

func port(name string, proto corev1.Protocol, p, nodePort int32) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: name, Protocol: proto, Port: p, NodePort: nodePort, TargetPort: intstr.FromInt32(p)})
	}
}

func lbIngress(ips ...string) svcOpt {
	return func(s *corev1.Service) {
		for _, ip := range ips {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
	}
}

func externalIPs(ips ...string) svcOpt {
	return func(s *corev1.Service) { s.Spec.ExternalIPs = ips }
}

func eTPLocal(hc int32) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.HealthCheckNodePort = hc
	}
}

func iTPLocal() svcOpt {
	return func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal) }
}

func affinity(secs int32) svcOpt {
	return func(s *corev1.Service) {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(secs)}}
	}
}

func sourceRanges(r ...string) svcOpt {
	return func(s *corev1.Service) { s.Spec.LoadBalancerSourceRanges = r }
}

type ep struct {
	ip                          string
	node                        string
	ready, serving, terminating *bool
}

func makeSlice(ns, svc, name string, portName string, proto corev1.Protocol, p int32, eps ...ep) discoveryv1.EndpointSlice {
	es := discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr(portName), Protocol: ptr(proto), Port: ptr(p)}},
	}
	if strings.Contains(firstIP(eps), ":") {
		es.AddressType = discoveryv1.AddressTypeIPv6
	}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: []string{e.ip}, Conditions: discoveryv1.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}}
		if e.node != "" {
			x.NodeName = ptr(e.node)
		}
		es.Endpoints = append(es.Endpoints, x)
	}
	return es
}

func firstIP(eps []ep) string {
	if len(eps) == 0 {
		return ""
	}
	return eps[0].ip
}

// tableLines splits an iptables-restore text into table → lines (without the
// table header and COMMIT).
func tableLines(text string) map[string][]string {
	out := map[string][]string{}
	cur := ""
	for _, ln := range strings.Split(text, "\n") {
		switch {
		case ln == "" || strings.HasPrefix(ln, "#"):
		case strings.HasPrefix(ln, "*"):
			cur = ln[1:]
		case ln == "COMMIT":
		default:
			out[cur] = append(out[cur], ln)
		}
	}
	return out
}

func sorted(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

// chainRules returns, per chain, its -A lines in order.
func chainRules(lines []string) map[string][]string {
	out := map[string][]string{}
	for _, ln := range lines {
		if strings.HasPrefix(ln, "-A ") {
			ch := strings.Fields(ln)[1]
			out[ch] = append(out[ch], ln)
		}
	}
	return out
}

func slicesOf(s ...discoveryv1.EndpointSlice) []discoveryv1.EndpointSlice { return s }
