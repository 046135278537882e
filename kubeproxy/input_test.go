package kubeproxy

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func TestObjectErrors(t *testing.T) {
	tcp := corev1.ProtocolTCP
	cases := []struct {
		name string
		svc  corev1.Service
		msg  string
	}{
		{"unknown protocol", makeSvc("default", "web", "ClusterIP", "10.0.0.1", port("http", "FOO", 80, 0)),
			`service default/web: port "http": unknown protocol "FOO": want TCP, UDP or SCTP`},
		{"no cluster IP", makeSvc("default", "web", "ClusterIP", "", port("http", tcp, 80, 0)),
			`service default/web: no cluster IP: want spec.clusterIP set to an IP or "None"`},
		{"port zero", makeSvc("default", "web", "ClusterIP", "10.0.0.1", port("", tcp, 0, 0)),
			`service default/web: port "": port 0: want 1..65535`},
		{"nodeport range", makeSvc("default", "web", "NodePort", "10.0.0.1", port("a", tcp, 80, 70000)),
			`service default/web: port "a": nodePort 70000: want 0..65535`},
		{"bad cluster IP", makeSvc("default", "web", "ClusterIP", "10.0.0.300", port("a", tcp, 80, 0)),
			`service default/web: cluster IP "10.0.0.300" is not an IP address`},
		{"bad external IP", makeSvc("default", "web", "ClusterIP", "10.0.0.1", port("a", tcp, 80, 0), externalIPs("x")),
			`service default/web: external IP "x" is not an IP address`},
		{"bad source range", makeSvc("default", "web", "LoadBalancer", "10.0.0.1", port("a", tcp, 80, 0), sourceRanges("1.2.3.4")),
			`service default/web: loadBalancerSourceRange "1.2.3.4" is not a CIDR`},
		{"duplicate port", makeSvc("default", "web", "ClusterIP", "10.0.0.1", port("a", tcp, 80, 0), port("a", tcp, 81, 0)),
			`service default/web: port "a": duplicate port name for protocol TCP`},
		{"bad type", makeSvc("default", "web", "Weird", "10.0.0.1", port("a", tcp, 80, 0)),
			`service default/web: unknown type "Weird"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Generate(DefaultConfig("n"), []corev1.Service{c.svc}, nil, nil)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.msg)
			assert.True(t, errors.Is(err, ErrInvalidObject))
			var oe *ObjectError
			require.ErrorAs(t, err, &oe)
			assert.Equal(t, "web", oe.Name)
		})
	}
}

func TestSliceErrors(t *testing.T) {
	es := makeSlice("default", "web", "web-1", "http", corev1.ProtocolTCP, 80, ep{ip: "10.1.1.300"})
	_, err := Generate(DefaultConfig("n"), nil, []discoveryv1.EndpointSlice{es}, nil)
	require.ErrorIs(t, err, ErrInvalidObject)
	assert.EqualError(t, err, `endpointslice default/web-1: endpoint 0: address "10.1.1.300" is not an IP address`)

	es = makeSlice("default", "web", "web-1", "http", corev1.ProtocolTCP, 80, ep{ip: "10.1.1.3"})
	delete(es.Labels, discoveryv1.LabelServiceName)
	_, err = Generate(DefaultConfig("n"), nil, []discoveryv1.EndpointSlice{es}, nil)
	assert.ErrorContains(t, err, "endpointslice default/web-1: no kubernetes.io/service-name label")
}

func TestConfigErrors(t *testing.T) {
	cfg := DefaultConfig("n")
	cfg.MasqueradeBit = 32
	_, err := Generate(cfg, nil, nil, nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	cfg = DefaultConfig("n")
	cfg.Family = "IPv5"
	_, err = Generate(cfg, nil, nil, nil)
	assert.ErrorIs(t, err, ErrInvalidConfig)
	cfg = DefaultConfig("n")
	cfg.Detector.Mode = DetectNodeCIDR
	_, err = Generate(cfg, nil, nil, nil)
	assert.ErrorContains(t, err, `detector NodeCIDR: node "n" has no IPv4 spec.podCIDRs entry`)
}

func TestSkippedServices(t *testing.T) {
	tcp := corev1.ProtocolTCP
	svcs := []corev1.Service{
		makeSvc("a", "headless", "ClusterIP", "None", port("p", tcp, 80, 0)),
		makeSvc("a", "ext", "ExternalName", "", port("p", tcp, 80, 0)),
		makeSvc("a", "v6only", "ClusterIP", "fd00::1", port("p", tcp, 80, 0)),
	}
	cfg := DefaultConfig("n")
	cfg.PayloadOnly = true
	out, err := Generate(cfg, svcs, nil, nil)
	require.NoError(t, err)
	assert.NotContains(t, string(out), "a/")
}

func TestParseSloppy(t *testing.T) {
	a, ok := parseIPSloppy("172.30.0.041")
	require.True(t, ok)
	assert.Equal(t, "172.30.0.41", a.String())
	_, ok = parseIPSloppy("1.2.3.256")
	assert.False(t, ok)
	p, ok := parseCIDRSloppy("203.0.113.7/25")
	require.True(t, ok)
	assert.Equal(t, "203.0.113.0/25", p.String())
	a, ok = parseIPSloppy("::ffff:1.2.3.4")
	require.True(t, ok)
	assert.True(t, a.Is4())
}

func TestSortDedupEndpoints(t *testing.T) {
	mk := func(str string, local bool, ready bool) endpoint {
		return endpoint{str: str, local: local, ready: ready}
	}
	got := sortDedupEndpoints([]endpoint{
		mk("10.1.1.1:11", false, false), mk("10.1.1.11:11", false, true), mk("10.1.1.1:11", false, true),
		mk("10.1.1.2:11", false, false), mk("10.1.1.2:11", true, true),
	})
	require.Len(t, got, 3)
	assert.Equal(t, "10.1.1.11:11", got[0].str)
	assert.False(t, got[1].ready, "first non-local copy wins")
	assert.True(t, got[2].local, "a local copy wins")
}

func TestTopologyRefused(t *testing.T) {
	svc := makeSvc("default", "web", "ClusterIP", "10.0.0.1", port("http", tcp, 80, 0))
	svc.Spec.TrafficDistribution = ptr("PreferClose")
	es := makeSlice("default", "web", "web-1", "http", tcp, 80, ep{ip: "10.1.1.1"})
	// Without hints kube-proxy ignores topology: generated normally.
	_, err := Generate(DefaultConfig("n"), []corev1.Service{svc}, []discoveryv1.EndpointSlice{es}, nil)
	require.NoError(t, err)
	es.Endpoints[0].Hints = &discoveryv1.EndpointHints{ForZones: []discoveryv1.ForZone{{Name: "a"}}}
	_, err = Generate(DefaultConfig("n"), []corev1.Service{svc}, []discoveryv1.EndpointSlice{es}, nil)
	require.ErrorIs(t, err, ErrNotModelled)
	assert.EqualError(t, err, "service default/web: topology-aware routing (endpoint hints with topology-mode or trafficDistribution) is not modelled")
}
