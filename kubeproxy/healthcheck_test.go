package kubeproxy

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestHealthChecks(t *testing.T) {
	svcs := []corev1.Service{
		makeSvc("ns1", "svc1", "LoadBalancer", "172.30.0.41", port("p80", tcp, 80, 3001), port("p443", tcp, 443, 3002), eTPLocal(30000)),
		makeSvc("ns2", "svc2", "LoadBalancer", "172.30.0.42", port("p80", tcp, 80, 3003), eTPLocal(30001)),
		makeSvc("ns3", "svc3", "LoadBalancer", "172.30.0.43", port("p80", tcp, 80, 3004), func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 30002 }),
	}
	eps := []discoveryv1.EndpointSlice{
		// One local pod serving two ports counts once.
		makeSlice("ns1", "svc1", "a", "p80", tcp, 80, ep{ip: "10.0.0.1", node: "test-node"}, ep{ip: "10.0.0.2", node: "other"},
			ep{ip: "10.0.0.3", node: "test-node", ready: no, serving: yes, terminating: yes}),
		makeSlice("ns1", "svc1", "b", "p443", tcp, 443, ep{ip: "10.0.0.1", node: "test-node"}),
		makeSlice("ns2", "svc2", "a", "p80", tcp, 80, ep{ip: "10.0.0.9", node: "test-node", ready: no, serving: yes, terminating: yes}),
	}
	hcs, err := HealthChecks(DefaultConfig("test-node"), svcs, eps, nil)
	require.NoError(t, err)
	require.Len(t, hcs, 2) // eTP=Cluster has no health check
	assert.Equal(t, "ns1", hcs[0].Namespace)
	assert.Equal(t, 30000, hcs[0].NodePort)
	assert.Equal(t, 1, hcs[0].LocalEndpoints)
	assert.Equal(t, 0, hcs[1].LocalEndpoints) // terminating only

	status, hdr, body := hcs[0].Response(true)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "{\n\t\"service\": {\n\t\t\"namespace\": \"ns1\",\n\t\t\"name\": \"svc1\"\n\t},\n\t\"localEndpoints\": 1,\n\t\"serviceProxyHealthy\": true\n}", string(body))
	assert.Equal(t, "1", hdr.Get("X-Load-Balancing-Endpoint-Weight"))
	assert.Equal(t, "application/json", hdr.Get("Content-Type"))
	assert.Equal(t, "nosniff", hdr.Get("X-Content-Type-Options"))
	status, _, body = hcs[0].Response(false)
	assert.Equal(t, http.StatusServiceUnavailable, status)
	assert.Contains(t, string(body), `"serviceProxyHealthy": false`)
	status, _, _ = hcs[1].Response(true)
	assert.Equal(t, http.StatusServiceUnavailable, status)

	rec := httptest.NewRecorder()
	hcs[0].ServeHTTP(rec, httptest.NewRequest("GET", "/anything", nil))
	assert.Equal(t, 200, rec.Code)
	assert.Equal(t, "1", rec.Header().Get("X-Load-Balancing-Endpoint-Weight"))

	cfg := DefaultConfig("test-node")
	cfg.Layout = LayoutLegacy
	hcs, err = HealthChecks(cfg, svcs, eps, nil)
	require.NoError(t, err)
	status, hdr, body = hcs[0].Response(false)
	assert.Equal(t, http.StatusOK, status)
	assert.Equal(t, "{\n\t\"service\": {\n\t\t\"namespace\": \"ns1\",\n\t\t\"name\": \"svc1\"\n\t},\n\t\"localEndpoints\": 1\n}", string(body))
	assert.Empty(t, hdr.Get("X-Load-Balancing-Endpoint-Weight"))
}
