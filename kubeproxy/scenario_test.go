package kubeproxy

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

var (
	tcp = corev1.ProtocolTCP
	udp = corev1.ProtocolUDP
	yes = ptr(true)
	no  = ptr(false)
)

func gen(t *testing.T, cfg Config, svcs []corev1.Service, slices ...discoveryv1.EndpointSlice) (filter, nat []string) {
	t.Helper()
	cfg.PayloadOnly = true
	out, err := Generate(cfg, svcs, slices, nil)
	require.NoError(t, err)
	tl := tableLines(string(out))
	return tl["filter"], tl["nat"]
}

func TestInternalTrafficPolicyLocal(t *testing.T) {
	cfg := upstreamTestConfig()
	svc := makeSvc("ns1", "svc1", "ClusterIP", "172.30.0.41", port("p80", tcp, 80, 0), iTPLocal())
	svcChain, svlChain := ServiceChain("ns1/svc1:p80", tcp), LocalChain("ns1/svc1:p80", tcp)

	// No local endpoint: DROP in filter, nothing in nat.
	filter, nat := gen(t, cfg, []corev1.Service{svc}, makeSlice("ns1", "svc1", "s", "p80", tcp, 80, ep{ip: "10.180.0.1", node: "other"}))
	assert.Contains(t, filter, `-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 has no local endpoints" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j DROP`)
	assert.NotContains(t, strings.Join(nat, "\n"), svlChain)

	// A local endpoint: the cluster IP goes to KUBE-SVL, which holds only it;
	// no KUBE-SVC chain (not externally accessible).
	filter, nat = gen(t, cfg, []corev1.Service{svc}, makeSlice("ns1", "svc1", "s", "p80", tcp, 80,
		ep{ip: "10.180.0.1", node: "other"}, ep{ip: "10.180.0.2", node: "test-node"}))
	sep := EndpointChain("ns1/svc1:p80", tcp, netip.MustParseAddrPort("10.180.0.2:80"))
	assert.Equal(t, []string{
		`-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j ` + svlChain,
		`-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS`,
	}, chainRules(nat)["KUBE-SERVICES"])
	assert.Equal(t, []string{
		`-A ` + svlChain + ` -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ`,
		`-A ` + svlChain + ` -m comment --comment "ns1/svc1:p80 -> 10.180.0.2:80" -j ` + sep,
	}, chainRules(nat)[svlChain])
	assert.NotContains(t, nat, ":"+svcChain+" - [0:0]")
	assert.Len(t, chainRules(filter)["KUBE-SERVICES"], 0)
}

func TestTerminatingFallback(t *testing.T) {
	cfg := upstreamTestConfig()
	svc := makeSvc("ns1", "svc1", "ClusterIP", "172.30.0.41", port("p80", tcp, 80, 0))
	svcChain := ServiceChain("ns1/svc1:p80", tcp)
	// No ready endpoint: serving+terminating ones are used, non-serving never.
	_, nat := gen(t, cfg, []corev1.Service{svc}, makeSlice("ns1", "svc1", "s", "p80", tcp, 80,
		ep{ip: "10.0.1.1", ready: no, serving: yes, terminating: yes},
		ep{ip: "10.0.1.2", ready: no, serving: no, terminating: yes},
		ep{ip: "10.0.1.3", ready: no, serving: yes, terminating: yes}))
	rules := chainRules(nat)[svcChain]
	require.Len(t, rules, 3)
	assert.Contains(t, rules[1], `"ns1/svc1:p80 -> 10.0.1.1:80" -m statistic --mode random --probability 0.5000000000`)
	assert.Contains(t, rules[2], `"ns1/svc1:p80 -> 10.0.1.3:80" -j KUBE-SEP-`)

	// A ready endpoint wins over terminating ones.
	_, nat = gen(t, cfg, []corev1.Service{svc}, makeSlice("ns1", "svc1", "s", "p80", tcp, 80,
		ep{ip: "10.0.1.1", ready: no, serving: yes, terminating: yes}, ep{ip: "10.0.1.4"}))
	assert.Len(t, chainRules(nat)[svcChain], 2)

	// Only non-serving endpoints: REJECT.
	filter, _ := gen(t, cfg, []corev1.Service{svc}, makeSlice("ns1", "svc1", "s", "p80", tcp, 80,
		ep{ip: "10.0.1.1", ready: no, serving: no, terminating: yes}))
	assert.Contains(t, filter, `-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j REJECT`)
}

func TestExternalTrafficPolicyLocalWithLocalEndpoint(t *testing.T) {
	cfg := upstreamTestConfig()
	svc := makeSvc("ns2", "svc2", "LoadBalancer", "172.30.0.42", port("p80", tcp, 80, 3001), lbIngress("1.2.3.4"), eTPLocal(30000))
	name := "ns2/svc2:p80"
	ext, svcC, svl := ExternalChain(name, tcp), ServiceChain(name, tcp), LocalChain(name, tcp)
	filter, nat := gen(t, cfg, []corev1.Service{svc}, makeSlice("ns2", "svc2", "s", "p80", tcp, 80,
		ep{ip: "10.180.0.2"}, ep{ip: "10.180.2.1", node: "test-node"}))
	assert.Equal(t, []string{
		`-A ` + ext + ` -m comment --comment "pod traffic for ns2/svc2:p80 external destinations" -s 10.0.0.0/8 -j ` + svcC,
		`-A ` + ext + ` -m comment --comment "masquerade LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j KUBE-MARK-MASQ`,
		`-A ` + ext + ` -m comment --comment "route LOCAL traffic for ns2/svc2:p80 external destinations" -m addrtype --src-type LOCAL -j ` + svcC,
		`-A ` + ext + ` -j ` + svl,
	}, chainRules(nat)[ext])
	assert.Len(t, chainRules(nat)[svcC], 3) // masq + 2 endpoints
	assert.Len(t, chainRules(nat)[svl], 1)
	// Health check accept only; no DROP rules.
	assert.Equal(t, []string{`-A KUBE-NODEPORTS -m comment --comment "ns2/svc2:p80 health check node port" -m tcp -p tcp --dport 30000 -j ACCEPT`}, chainRules(filter)["KUBE-NODEPORTS"])
	assert.Empty(t, chainRules(filter)["KUBE-EXTERNAL-SERVICES"])
	// Chain declaration order as kube-proxy writes it: EXT, SVC, SVL, SEPs.
	var decl []string
	for _, l := range nat {
		if strings.HasPrefix(l, ":KUBE-") && strings.Contains(l, "-") && (strings.Contains(l, "EXT-") || strings.Contains(l, "SVC-") || strings.Contains(l, "SVL-") || strings.Contains(l, "SEP-")) {
			decl = append(decl, strings.Fields(l)[0][1:])
		}
	}
	require.Len(t, decl, 5)
	assert.Equal(t, []string{ext, svcC, svl}, decl[:3])
}

func TestSourceRangeContainingNodeIP(t *testing.T) {
	cfg := upstreamTestConfig()
	svc := makeSvc("ns5", "svc5", "LoadBalancer", "172.30.0.45", port("p80", tcp, 80, 3002), lbIngress("5.6.7.8"),
		sourceRanges("192.168.0.0/16", "203.0.113.0/25"))
	fw := FirewallChain("ns5/svc5:p80", tcp)
	ext := ExternalChain("ns5/svc5:p80", tcp)
	_, nat := gen(t, cfg, []corev1.Service{svc}, makeSlice("ns5", "svc5", "s", "p80", tcp, 80, ep{ip: "10.180.0.3"}))
	assert.Equal(t, []string{
		`-A ` + fw + ` -m comment --comment "ns5/svc5:p80 loadbalancer IP" -s 192.168.0.0/16 -j ` + ext,
		`-A ` + fw + ` -m comment --comment "ns5/svc5:p80 loadbalancer IP" -s 203.0.113.0/25 -j ` + ext,
		`-A ` + fw + ` -m comment --comment "ns5/svc5:p80 loadbalancer IP" -s 5.6.7.8 -j ` + ext,
		`-A ` + fw + ` -m comment --comment "other traffic to ns5/svc5:p80 will be dropped by KUBE-PROXY-FIREWALL"`,
	}, chainRules(nat)[fw])
}

func TestEndpointOrderAndProbabilities(t *testing.T) {
	cfg := upstreamTestConfig()
	cfg.NFAcct = false
	svc := makeSvc("ns1", "svc1", "ClusterIP", "172.30.0.41", port("", udp, 53, 0))
	_, nat := gen(t, cfg, []corev1.Service{svc}, makeSlice("ns1", "svc1", "s", "", udp, 11,
		ep{ip: "10.1.1.1"}, ep{ip: "10.1.1.2"}, ep{ip: "10.1.1.11"}))
	rules := chainRules(nat)[ServiceChain("ns1/svc1", udp)]
	require.Len(t, rules, 4)
	assert.Contains(t, rules[1], `--comment "ns1/svc1 -> 10.1.1.11:11" -m statistic --mode random --probability 0.3333333333 -j `)
	assert.Contains(t, rules[2], `--comment "ns1/svc1 -> 10.1.1.1:11" -m statistic --mode random --probability 0.5000000000 -j `)
	assert.Contains(t, rules[3], `--comment "ns1/svc1 -> 10.1.1.2:11" -j `)
	sep := EndpointChain("ns1/svc1", udp, netip.MustParseAddrPort("10.1.1.11:11"))
	assert.Equal(t, []string{
		`-A ` + sep + ` -m comment --comment ns1/svc1 -s 10.1.1.11 -j KUBE-MARK-MASQ`,
		`-A ` + sep + ` -m comment --comment ns1/svc1 -m udp -p udp -j DNAT --to-destination 10.1.1.11:11`,
	}, chainRules(nat)[sep])
}

func TestProbabilityStrings(t *testing.T) {
	var g Generator
	for n, want := range map[int]string{0: "<bad value>", 1: "1.0000000000", 2: "0.5000000000", 3: "0.3333333333", 10: "0.1000000000",
		100: "0.0100000000", 1000: "0.0010000000", 10000: "0.0001000000", 100000: "0.0000100000", 100001: "0.0000099999"} {
		assert.Equal(t, want, g.probability(n), "n=%d", n)
	}
	g = Generator{probsLegacy: true}
	assert.Equal(t, "0.33333", g.probability(3))
}

func TestLargeClusterDropsComments(t *testing.T) {
	cfg := upstreamTestConfig()
	var eps []ep
	for i := range 1001 {
		eps = append(eps, ep{ip: fmt.Sprintf("10.%d.%d.%d", 1+i/65536, i/256%256, i%256)})
	}
	svc := makeSvc("ns3", "svc3", "ClusterIP", "172.30.0.43", port("p8081", tcp, 8081, 0))
	_, nat := gen(t, cfg, []corev1.Service{svc}, makeSlice("ns3", "svc3", "s", "p8081", tcp, 8081, eps...))
	svcC := ServiceChain("ns3/svc3:p8081", tcp)
	rules := chainRules(nat)[svcC]
	require.Len(t, rules, 1002)
	assert.Contains(t, rules[0], `--comment "ns3/svc3:p8081 cluster IP"`) // other comments stay
	assert.Regexp(t, `^-A KUBE-SVC-\w+ -m statistic --mode random --probability 0.0009990010 -j KUBE-SEP-\w+$`, rules[1])
	sep := EndpointChain("ns3/svc3:p8081", tcp, netip.MustParseAddrPort("10.1.0.0:8081"))
	assert.Equal(t, []string{
		`-A ` + sep + ` -s 10.1.0.0 -j KUBE-MARK-MASQ`,
		`-A ` + sep + ` -m tcp -p tcp -j DNAT --to-destination 10.1.0.0:8081`,
	}, chainRules(nat)[sep])

	// 1000 endpoints is not large.
	_, nat = gen(t, cfg, []corev1.Service{svc}, makeSlice("ns3", "svc3", "s", "p8081", tcp, 8081, eps[:1000]...))
	assert.Contains(t, chainRules(nat)[svcC][1], "-m comment")
}

func TestConfigVariants(t *testing.T) {
	svc := makeSvc("ns3", "svc3", "NodePort", "172.30.0.43", port("p80", tcp, 80, 3003))
	slice := makeSlice("ns3", "svc3", "s", "p80", tcp, 80, ep{ip: "10.180.0.3"})
	svcC := ServiceChain("ns3/svc3:p80", tcp)

	cfg := DefaultConfig("test-node")
	cfg.MasqueradeAll, cfg.RandomFully, cfg.MasqueradeBit = true, true, 0
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr("192.168.0.2"), netip.MustParseAddr("10.9.9.9")}
	cfg.NodePortAddresses = []netip.Prefix{netip.MustParsePrefix("192.168.0.0/16")}
	filter, nat := gen(t, cfg, []corev1.Service{svc}, slice)
	assert.Contains(t, nat, `-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully`)
	assert.Contains(t, nat, `-A KUBE-MARK-MASQ -j MARK --or-mark 0x00000001`)
	assert.Contains(t, nat, `-A `+svcC+` -m comment --comment "ns3/svc3:p80 cluster IP" -m tcp -p tcp -d 172.30.0.43 --dport 80 -j KUBE-MARK-MASQ`)
	assert.Contains(t, nat, `-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -d 192.168.0.2 -j KUBE-NODEPORTS`)
	assert.NotContains(t, strings.Join(nat, "\n"), "10.9.9.9")
	assert.Contains(t, filter, `-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x00000001/0x00000001 -j ACCEPT`)

	// No detector, no masquerade-all: no ClusterIP masquerade rule.
	cfg = DefaultConfig("test-node")
	cfg.LocalhostNodePorts = false
	cfg.ConntrackTCPLiberal = true
	filter, nat = gen(t, cfg, []corev1.Service{svc}, slice)
	assert.Len(t, chainRules(nat)[svcC], 1)
	assert.Contains(t, nat, `-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d 127.0.0.0/8 -j KUBE-NODEPORTS`)
	assert.NotContains(t, filter, ":KUBE-FIREWALL - [0:0]")
	assert.NotContains(t, strings.Join(filter, "\n"), "INVALID")

	for _, c := range []struct {
		d    LocalDetector
		frag string
	}{
		{LocalDetector{Mode: DetectBridgeInterface, Interface: "cbr0"}, "! -i cbr0 -j KUBE-MARK-MASQ"},
		{LocalDetector{Mode: DetectInterfaceNamePrefix, Interface: "veth"}, "! -i veth+ -j KUBE-MARK-MASQ"},
		{LocalDetector{Mode: DetectNodeCIDR, CIDR: netip.MustParsePrefix("10.244.1.0/24")}, "! -s 10.244.1.0/24 -j KUBE-MARK-MASQ"},
	} {
		cfg = DefaultConfig("test-node")
		cfg.Detector = c.d
		_, nat = gen(t, cfg, []corev1.Service{svc}, slice)
		assert.Contains(t, chainRules(nat)[svcC][0], c.frag)
	}
}

func TestNodeCIDRFromNode(t *testing.T) {
	cfg := DefaultConfig("test-node")
	cfg.Detector.Mode = DetectNodeCIDR
	cfg.PayloadOnly = true
	svc := makeSvc("ns3", "svc3", "ClusterIP", "172.30.0.43", port("p80", tcp, 80, 0))
	node := corev1.Node{}
	node.Name = "test-node"
	node.Spec.PodCIDRs = []string{"fd00:1::/64", "10.244.7.0/24"}
	out, err := Generate(cfg, []corev1.Service{svc}, []discoveryv1.EndpointSlice{makeSlice("ns3", "svc3", "s", "p80", tcp, 80, ep{ip: "10.180.0.3"})}, []corev1.Node{node})
	require.NoError(t, err)
	assert.Contains(t, string(out), "! -s 10.244.7.0/24 -j KUBE-MARK-MASQ")
}

func TestIPv6(t *testing.T) {
	cfg := DefaultConfig("test-node")
	cfg.Family = corev1.IPv6Protocol
	cfg.Detector = LocalDetector{Mode: DetectClusterCIDR, CIDR: netip.MustParsePrefix("fd00:10::/64")}
	cfg.NFAcct = true
	svc := makeSvc("ns1", "svc1", "NodePort", "fd00:30::41", port("p80", tcp, 80, 3001), externalIPs("192.168.1.1", "2001:db8::99"))
	svc.Spec.ClusterIPs = []string{"172.30.0.41", "fd00:30::41"}
	filter, nat := gen(t, cfg, []corev1.Service{svc}, makeSlice("ns1", "svc1", "s", "p80", tcp, 80, ep{ip: "fd00:10::5"}))
	name := "ns1/svc1:p80"
	sep := EndpointChain(name, tcp, netip.MustParseAddrPort("[fd00:10::5]:80"))
	assert.Contains(t, nat, `-A `+sep+` -m comment --comment ns1/svc1:p80 -m tcp -p tcp -j DNAT --to-destination [fd00:10::5]:80`)
	assert.Contains(t, nat, `-A `+sep+` -m comment --comment ns1/svc1:p80 -s fd00:10::5 -j KUBE-MARK-MASQ`)
	assert.Contains(t, nat, `-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d fd00:30::41 --dport 80 -j `+ServiceChain(name, tcp))
	assert.Contains(t, nat, `-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 external IP" -m tcp -p tcp -d 2001:db8::99 --dport 80 -j `+ExternalChain(name, tcp))
	assert.NotContains(t, strings.Join(nat, "\n"), "192.168.1.1")
	assert.NotContains(t, strings.Join(nat, "\n"), "127.0.0.0/8") // no localhost nodeports on IPv6
	assert.Contains(t, nat, `-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL ! -d ::1/128 -j KUBE-NODEPORTS`)
	assert.NotContains(t, filter, ":KUBE-FIREWALL - [0:0]")
}

func TestCompleteDocument(t *testing.T) {
	cfg := upstreamTestConfig()
	cfg.PayloadOnly = false
	svcs, slices := overallObjects()
	out, err := Generate(cfg, svcs, slices, nil)
	require.NoError(t, err)
	tl := tableLines(string(out))
	assert.Equal(t, []string{":PREROUTING ACCEPT [0:0]", ":INPUT ACCEPT [0:0]", ":FORWARD ACCEPT [0:0]", ":OUTPUT ACCEPT [0:0]", ":POSTROUTING ACCEPT [0:0]",
		":KUBE-IPTABLES-HINT - [0:0]", ":KUBE-KUBELET-CANARY - [0:0]", ":KUBE-PROXY-CANARY - [0:0]"}, tl["mangle"])
	fr := chainRules(tl["filter"])
	assert.Equal(t, []string{
		`-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes load balancer firewall" -j KUBE-PROXY-FIREWALL`,
		`-A INPUT -m comment --comment "kubernetes health check service ports" -j KUBE-NODEPORTS`,
		`-A INPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes externally-visible service portals" -j KUBE-EXTERNAL-SERVICES`,
		`-A INPUT -j KUBE-FIREWALL`,
	}, fr["INPUT"])
	assert.Len(t, fr["FORWARD"], 4)
	assert.Len(t, fr["OUTPUT"], 3)
	nr := chainRules(tl["nat"])
	assert.Equal(t, []string{`-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING`}, nr["POSTROUTING"])
	// Every chain is declared once per table.
	for table, lines := range tl {
		seen := map[string]bool{}
		for _, l := range lines {
			if strings.HasPrefix(l, ":") {
				assert.False(t, seen[l], "%s: %s declared twice", table, l)
				seen[l] = true
			}
		}
	}
}

func TestLoadBalancerIngressFiltering(t *testing.T) {
	cfg := upstreamTestConfig()
	svc := makeSvc("ns5", "svc5", "LoadBalancer", "172.30.0.45", port("p80", tcp, 80, 3002))
	proxy := corev1.LoadBalancerIPModeProxy
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{
		{IP: "5.6.7.8"}, {IP: "5.6.7.9", IPMode: &proxy}, {Hostname: "lb.example.com"}, {IP: "2001:db8::5"}, {IP: "5.6.7.010"},
	}
	_, nat := gen(t, cfg, []corev1.Service{svc}, makeSlice("ns5", "svc5", "s", "p80", tcp, 80, ep{ip: "10.180.0.3"}))
	var lb []string
	for _, r := range chainRules(nat)["KUBE-SERVICES"] {
		if strings.Contains(r, "loadbalancer IP") {
			lb = append(lb, strings.Fields(r)[13])
		}
	}
	// Proxy-mode, hostname-only and other-family ingresses are ignored; a
	// sloppy IP is written canonically.
	assert.Equal(t, []string{"5.6.7.8", "5.6.7.10"}, lb)
}

func TestNoEndpointsRejectsEverywhere(t *testing.T) {
	cfg := upstreamTestConfig()
	svc := makeSvc("ns1", "svc1", "LoadBalancer", "172.30.0.41", port("p80", tcp, 80, 3001), lbIngress("1.2.3.4"), externalIPs("192.168.99.1"), sourceRanges("10.0.0.0/8"))
	filter, nat := gen(t, cfg, []corev1.Service{svc})
	assert.Equal(t, []string{
		`-A KUBE-EXTERNAL-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp -p tcp -d 192.168.99.1 --dport 80 -j REJECT`,
		`-A KUBE-EXTERNAL-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp -p tcp -d 1.2.3.4 --dport 80 -j REJECT`,
		`-A KUBE-EXTERNAL-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" -m addrtype --dst-type LOCAL -m tcp -p tcp --dport 3001 -j REJECT`,
	}, chainRules(filter)["KUBE-EXTERNAL-SERVICES"])
	assert.Contains(t, filter, `-A KUBE-SERVICES -m comment --comment "ns1/svc1:p80 has no endpoints" -m tcp -p tcp -d 172.30.0.41 --dport 80 -j REJECT`)
	assert.Empty(t, chainRules(filter)["KUBE-PROXY-FIREWALL"]) // no FW chain without endpoints
	assert.NotContains(t, strings.Join(nat, "\n"), "ns1/svc1")
}

func TestLocalTerminatingFallback(t *testing.T) {
	cfg := upstreamTestConfig()
	name := "ns1/svc1:p80"
	svc := makeSvc("ns1", "svc1", "LoadBalancer", "172.30.0.41", port("p80", tcp, 80, 3001), lbIngress("1.2.3.4"), eTPLocal(30000))
	// Remote ready endpoint + local serving-terminating one: the cluster
	// chain uses the ready one only, the local chain the terminating one,
	// and both SEP chains exist.
	_, nat := gen(t, cfg, []corev1.Service{svc}, makeSlice("ns1", "svc1", "s", "p80", tcp, 80,
		ep{ip: "10.0.1.1", node: "other"},
		ep{ip: "10.0.1.2", node: "test-node", ready: no, serving: yes, terminating: yes}))
	rules := chainRules(nat)
	assert.Len(t, rules[ServiceChain(name, tcp)], 2)
	require.Len(t, rules[LocalChain(name, tcp)], 1)
	assert.Contains(t, rules[LocalChain(name, tcp)][0], `"ns1/svc1:p80 -> 10.0.1.2:80"`)
	assert.Len(t, rules[EndpointChain(name, tcp, netip.MustParseAddrPort("10.0.1.1:80"))], 2)
	assert.Len(t, rules[EndpointChain(name, tcp, netip.MustParseAddrPort("10.0.1.2:80"))], 2)
	assert.Equal(t, `-A `+ExternalChain(name, tcp)+` -j `+LocalChain(name, tcp), rules[ExternalChain(name, tcp)][3])
}
