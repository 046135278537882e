package kubeproxy

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// HealthCheck is one service health-check server kube-proxy runs on
// spec.healthCheckNodePort for a LoadBalancer Service with
// externalTrafficPolicy Local (pkg/proxy/healthcheck).
type HealthCheck struct {
	Namespace, Name string
	// NodePort is the port the server listens on, on every node.
	NodePort int
	// LocalEndpoints counts the distinct IPs of ready endpoints of the
	// Service (all ports together) on this node; terminating ones do not
	// count.
	LocalEndpoints int
	legacy         bool
}

// HealthChecks returns the health-check servers of the node cfg.NodeName,
// ordered by namespace/name, with the same input rules as [Generate].
func HealthChecks(cfg Config, services []corev1.Service, slicesIn []discoveryv1.EndpointSlice, nodes []corev1.Node) ([]HealthCheck, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c, err := buildCluster(&cfg, services, slicesIn, nodes)
	if err != nil {
		return nil, err
	}
	type nsName struct{ ns, name string }
	ports := map[nsName]int{}
	for _, sp := range c.ports {
		if sp.hcNodePort != 0 {
			ports[nsName{sp.key.namespace, sp.key.name}] = sp.hcNodePort
		}
	}
	// Count by IP across every port the slices list, as kube-proxy's
	// LocalReadyEndpoints does.
	ips := map[nsName]map[string]bool{}
	for key, eps := range c.endpoints {
		n := nsName{key.namespace, key.name}
		if _, ok := ports[n]; !ok {
			continue
		}
		for _, ep := range eps {
			if ep.local && ep.ready {
				if ips[n] == nil {
					ips[n] = map[string]bool{}
				}
				ips[n][ep.ipStr] = true
			}
		}
	}
	out := make([]HealthCheck, 0, len(ports))
	for n, p := range ports {
		out = append(out, HealthCheck{Namespace: n.ns, Name: n.name, NodePort: p, LocalEndpoints: len(ips[n]), legacy: cfg.Layout == LayoutLegacy})
	}
	slices.SortFunc(out, func(a, b HealthCheck) int {
		return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
	})
	return out, nil
}

// Response returns what the health-check server answers on any path: 200
// when the node has local endpoints and kube-proxy is healthy, else 503,
// with a tab-indented JSON body without trailing newline, e.g.
//
//	{
//		"service": {
//			"namespace": "ns1",
//			"name": "svc1"
//		},
//		"localEndpoints": 1,
//		"serviceProxyHealthy": true
//	}
//
// In the legacy layout the body has no serviceProxyHealthy field, the
// status ignores proxy health and there is no
// X-Load-Balancing-Endpoint-Weight header.
func (h HealthCheck) Response(proxyHealthy bool) (status int, header http.Header, body []byte) {
	header = http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("X-Content-Type-Options", "nosniff")
	ok := h.LocalEndpoints != 0
	var b strings.Builder
	fmt.Fprintf(&b, "{\n\t\"service\": {\n\t\t\"namespace\": %q,\n\t\t\"name\": %q\n\t},\n\t\"localEndpoints\": %d", h.Namespace, h.Name, h.LocalEndpoints)
	if !h.legacy {
		header.Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(h.LocalEndpoints))
		fmt.Fprintf(&b, ",\n\t\"serviceProxyHealthy\": %v", proxyHealthy)
		ok = ok && proxyHealthy
	}
	b.WriteString("\n}")
	status = http.StatusServiceUnavailable
	if ok {
		status = http.StatusOK
	}
	return status, header, []byte(b.String())
}

// ServeHTTP answers as the health-check server of a healthy kube-proxy.
func (h HealthCheck) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	status, header, body := h.Response(true)
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
