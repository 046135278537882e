package kubeproxy

import (
	"net/netip"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

func whereamiConfig() Config {
	cfg := DefaultConfig("aks-nodepool1-31351229-0")
	cfg.Layout = LayoutLegacy
	cfg.LegacyPortNames = true
	cfg.LegacyProbability = true
	cfg.Detector = LocalDetector{Mode: DetectClusterCIDR, CIDR: netip.MustParsePrefix("10.13.76.0/24")}
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr("10.13.76.4")}
	cfg.PayloadOnly = true
	return cfg
}

func predictedLines(t *testing.T, doc []byte, filter string) []string {
	t.Helper()
	var out []string
	for _, tbl := range predictSaveDoc(string(doc), false) {
		for _, rules := range tbl.rules {
			for _, r := range rules {
				if strings.Contains(r, filter) {
					out = append(out, r)
				}
			}
		}
	}
	sort.Strings(out)
	return out
}

func seedLines(t *testing.T, path string) []string {
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(l, "-A ") {
			out = append(out, l)
		}
	}
	sort.Strings(out)
	return out
}

// TestLegacyWhereamiAKS reproduces, rule for rule, the kube-proxy rules of a
// real AKS node (`iptables-save | grep whereami` in "A Day in the Life of a
// Packet in Azure Kubernetes Service (part 1): Azure CNI", docs/blog-posts.md),
// chain hashes included, from the Service and endpoints the post shows.
func TestLegacyWhereamiAKS(t *testing.T) {
	svc := makeSvc("default", "whereami", "LoadBalancer", "10.0.159.58", port("", tcp, 80, 30064), lbIngress("51.144.176.251"))
	slice := makeSlice("default", "whereami", "whereami-1", "", tcp, 80,
		ep{ip: "10.13.76.26", node: "aks-nodepool1-31351229-0"}, ep{ip: "10.13.76.7", node: "aks-nodepool1-31351229-0"})
	doc, err := Generate(whereamiConfig(), []corev1.Service{svc}, []discoveryv1.EndpointSlice{slice}, nil)
	require.NoError(t, err)
	assert.Equal(t, seedLines(t, "testdata/whereami_aks_cluster.save"), predictedLines(t, doc, "whereami"))

	// externalTrafficPolicy Local: v1.11 had no "LOCAL traffic" XLB rules
	// yet (added later, still in the ≤ v1.23 layout), so check inclusion.
	svc = makeSvc("default", "whereami", "LoadBalancer", "10.0.12.96", port("", tcp, 80, 30064), lbIngress("13.93.66.174"), eTPLocal(31000))
	slice = makeSlice("default", "whereami", "whereami-1", "", tcp, 80,
		ep{ip: "10.13.76.15", node: "aks-nodepool1-31351229-0"}, ep{ip: "10.13.76.30", node: "aks-nodepool1-31351229-0"})
	doc, err = Generate(whereamiConfig(), []corev1.Service{svc}, []discoveryv1.EndpointSlice{slice}, nil)
	require.NoError(t, err)
	got := predictedLines(t, doc, "")
	for _, l := range seedLines(t, "testdata/whereami_aks_local.save") {
		assert.Contains(t, got, l)
	}
	xlb := XLBChain("default/whereami:", tcp)
	assert.Contains(t, got, `-A `+xlb+` -s 10.13.76.0/24 -m comment --comment "Redirect pods trying to reach external loadbalancer VIP to clusterIP" -j KUBE-SVC-7G2JV7LNOR6DDNIY`)
}

// TestLegacyShapes checks the ≤ v1.20 rules of docs/kube-proxy-notes.md
// ("The layout up to v1.20") that the
// AKS dump does not cover.
func TestLegacyShapes(t *testing.T) {
	cfg := whereamiConfig()
	cfg.LegacyProbability = false
	cfg.LegacyPortNames = false
	svc := makeSvc("default", "nginx", "LoadBalancer", "10.98.154.163", port("", tcp, 80, 30938), lbIngress("12.12.12.12"),
		externalIPs("192.168.99.33"), sourceRanges("10.13.0.0/16"), eTPLocal(0))
	slice := makeSlice("default", "nginx", "n", "", tcp, 80, ep{ip: "10.244.3.4", node: "other"})
	doc, err := Generate(cfg, []corev1.Service{svc}, []discoveryv1.EndpointSlice{slice}, nil)
	require.NoError(t, err)
	tl := tableLines(string(doc))
	nat := chainRules(tl["nat"])
	fw, xlb := FirewallChain("default/nginx", tcp), XLBChain("default/nginx", tcp)
	assert.Equal(t, []string{
		`-A ` + fw + ` -m comment --comment "default/nginx loadbalancer IP" -s 10.13.0.0/16 -j ` + xlb,
		`-A ` + fw + ` -m comment --comment "default/nginx loadbalancer IP" -s 12.12.12.12/32 -j ` + xlb,
		`-A ` + fw + ` -m comment --comment "default/nginx loadbalancer IP" -j KUBE-MARK-DROP`,
	}, nat[fw])
	assert.Equal(t, `-A `+xlb+` -m comment --comment "default/nginx has no local endpoints" -j KUBE-MARK-DROP`, nat[xlb][len(nat[xlb])-1])
	assert.Contains(t, nat["KUBE-SERVICES"], `-A KUBE-SERVICES -m comment --comment "default/nginx external IP" -m tcp -p tcp -d 192.168.99.33/32 --dport 80 -m physdev ! --physdev-is-in -m addrtype ! --src-type LOCAL -j `+ServiceChain("default/nginx", tcp))
	assert.Equal(t, []string{
		`-A KUBE-NODEPORTS -m comment --comment default/nginx -m tcp -p tcp --dport 30938 -s 127.0.0.0/8 -j KUBE-MARK-MASQ`,
		`-A KUBE-NODEPORTS -m comment --comment default/nginx -m tcp -p tcp --dport 30938 -j ` + xlb,
	}, nat["KUBE-NODEPORTS"])
	assert.Equal(t, []string{`-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -m mark --mark 0x00004000/0x00004000 -j MASQUERADE`}, nat["KUBE-POSTROUTING"])
	assert.Equal(t, []string{`-A KUBE-MARK-MASQ -j MARK --set-xmark 0x00004000/0x00004000`}, nat["KUBE-MARK-MASQ"])
	filter := chainRules(tl["filter"])
	assert.Len(t, filter["KUBE-FORWARD"], 4)
	assert.NotContains(t, tl["filter"], ":KUBE-PROXY-FIREWALL - [0:0]")
}
