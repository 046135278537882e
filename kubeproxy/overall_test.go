package kubeproxy

import (
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// upstreamTestConfig is NewFakeProxier's environment in kube-proxy's
// proxier_test.go (docs/kube-proxy-notes.md, "The upstream test environment").
func upstreamTestConfig() Config {
	cfg := DefaultConfig("test-node")
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr("192.168.0.2")}
	cfg.Detector = LocalDetector{Mode: DetectClusterCIDR, CIDR: netip.MustParsePrefix("10.0.0.0/8")}
	cfg.NFAcct = true
	cfg.PayloadOnly = true
	return cfg
}

// overallObjects is the cluster of upstream TestOverallIPTablesRules.
func overallObjects() ([]corev1.Service, []discoveryv1.EndpointSlice) {
	tcp := corev1.ProtocolTCP
	svcs := []corev1.Service{
		makeSvc("ns1", "svc1", "ClusterIP", "172.30.0.41", port("p80", tcp, 80, 0)),
		makeSvc("ns2", "svc2", "LoadBalancer", "172.30.0.42", port("p80", tcp, 80, 3001), lbIngress("1.2.3.4"), externalIPs("192.168.99.22"), eTPLocal(30000)),
		makeSvc("ns3", "svc3", "NodePort", "172.30.0.43", port("p80", tcp, 80, 3003)),
		makeSvc("ns4", "svc4", "NodePort", "172.30.0.44", externalIPs("192.168.99.33"), port("p80", tcp, 80, 0)),
		makeSvc("ns5", "svc5", "LoadBalancer", "172.30.0.45", port("p80", tcp, 80, 3002), lbIngress("5.6.7.8"),
			func(s *corev1.Service) { s.Spec.HealthCheckNodePort = 30000 }, sourceRanges(" 203.0.113.0/25"), affinity(10800)),
		makeSvc("ns6", "svc6", "ClusterIP", "172.30.0.46", port("p80", tcp, 80, 0)),
	}
	slices := []discoveryv1.EndpointSlice{
		makeSlice("ns1", "svc1", "svc1-abc", "p80", tcp, 80, ep{ip: "10.180.0.1"}),
		makeSlice("ns2", "svc2", "svc2-abc", "p80", tcp, 80, ep{ip: "10.180.0.2"}),
		makeSlice("ns3", "svc3", "svc3-abc", "p80", tcp, 80, ep{ip: "10.180.0.3"}),
		makeSlice("ns4", "svc4", "svc4-abc", "p80", tcp, 80, ep{ip: "10.180.0.4"}, ep{ip: "10.180.0.5", node: "test-node"}),
		makeSlice("ns5", "svc5", "svc5-abc", "p80", tcp, 80, ep{ip: "10.180.0.3"}),
	}
	return svcs, slices
}

func TestOverallIPTablesRules(t *testing.T) {
	want, err := os.ReadFile("testdata/TestOverallIPTablesRules.expected")
	require.NoError(t, err)
	svcs, slices := overallObjects()
	got, err := Generate(upstreamTestConfig(), svcs, slices, nil)
	require.NoError(t, err)

	// The upstream fake proxier hard-codes masqueradeMark "0x4000"; the real
	// one formats it with %#08x.
	require.Contains(t, string(got), "--or-mark 0x00004000\n")
	gotText := strings.ReplaceAll(string(got), "0x00004000", "0x4000")
	wantT, gotT := tableLines(string(want)), tableLines(gotText)
	require.Equal(t, []string{"filter", "nat"}, keys(gotT))
	for _, table := range []string{"filter", "nat"} {
		// Same lines (the upstream helper sorts them) ...
		assert.Equal(t, sorted(wantT[table]), sorted(gotT[table]), table)
		// ... and the same rule order inside every chain, except the
		// inter-service order of KUBE-SERVICES/KUBE-NODEPORTS, which is
		// random in kube-proxy and sorted in the upstream expectation.
		wc, gc := chainRules(wantT[table]), chainRules(gotT[table])
		for ch, rules := range wc {
			if ch == "KUBE-SERVICES" || ch == "KUBE-NODEPORTS" || ch == "KUBE-EXTERNAL-SERVICES" {
				continue
			}
			assert.Equal(t, rules, gc[ch], "%s %s", table, ch)
		}
	}
	// The nodeports tail rule is the last KUBE-SERVICES rule.
	natSvc := chainRules(gotT["nat"])["KUBE-SERVICES"]
	assert.Contains(t, natSvc[len(natSvc)-1], "--dst-type LOCAL -j KUBE-NODEPORTS")
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return sorted(out)
}

// TestWriteOrder checks the order in which kube-proxy writes chain lines
// (fixed chains first, then per service EXT, FW, SVC, SVL, SEPs) and the
// order of the fixed nat rules.
func TestWriteOrder(t *testing.T) {
	svcs, slices := overallObjects()
	got, err := Generate(upstreamTestConfig(), svcs, slices, nil)
	require.NoError(t, err)
	tl := tableLines(string(got))
	var filterChains, natChains []string
	for _, l := range tl["filter"] {
		if strings.HasPrefix(l, ":") {
			filterChains = append(filterChains, strings.Fields(l)[0][1:])
		}
	}
	for _, l := range tl["nat"] {
		if strings.HasPrefix(l, ":") {
			natChains = append(natChains, strings.Fields(l)[0][1:])
		}
	}
	assert.Equal(t, []string{"KUBE-SERVICES", "KUBE-EXTERNAL-SERVICES", "KUBE-FORWARD", "KUBE-NODEPORTS", "KUBE-PROXY-FIREWALL", "KUBE-FIREWALL"}, filterChains)
	assert.Equal(t, []string{"KUBE-SERVICES", "KUBE-NODEPORTS", "KUBE-POSTROUTING", "KUBE-MARK-MASQ",
		"KUBE-SVC-XPGD46QRK7WJZT7O", "KUBE-SEP-SXIVWICOYRO3J4NJ", // ns1
		"KUBE-EXT-GNZBNJ2PO5MGZ6GT", "KUBE-SVC-GNZBNJ2PO5MGZ6GT", "KUBE-SEP-RS4RBKLTHTF2IUXJ", // ns2
		"KUBE-EXT-X27LE4BHSL4DOUIK", "KUBE-SVC-X27LE4BHSL4DOUIK", "KUBE-SEP-OYPFS5VJICHGATKP", // ns3
		"KUBE-EXT-4SW47YFZTEDKD3PK", "KUBE-SVC-4SW47YFZTEDKD3PK", "KUBE-SEP-UKSFD7AGPMPPLUHC", "KUBE-SEP-C6EBXVWJJZMIWKLZ", // ns4
		"KUBE-EXT-NUKIZ6OKUXPJNT4C", "KUBE-FW-NUKIZ6OKUXPJNT4C", "KUBE-SVC-NUKIZ6OKUXPJNT4C", "KUBE-SEP-I77PXRDZVX7PMWMN", // ns5
	}, natChains)
	firstRules := tl["nat"][len(natChains) : len(natChains)+4]
	assert.Equal(t, []string{
		"-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN",
		"-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000",
		`-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE`,
		"-A KUBE-MARK-MASQ -j MARK --or-mark 0x00004000",
	}, firstRules)
	lastFilter := tl["filter"][len(tl["filter"])-3:]
	assert.Contains(t, lastFilter[0], "-A KUBE-FORWARD -m conntrack --ctstate INVALID")
}
