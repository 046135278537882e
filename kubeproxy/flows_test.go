package kubeproxy

import (
	"fmt"
	"net/netip"
	"sort"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/probability"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// flowCluster is one service per flow kind of the flow table, on node-a
// (192.168.0.2, pods in 10.244.1.0/24 behind cbr0; other nodes' pods are
// reached through eth0).
func flowCluster() ([]corev1.Service, []discoveryv1.EndpointSlice) {
	tcp := corev1.ProtocolTCP
	a, b := "node-a", "node-b"
	svcs := []corev1.Service{
		makeSvc("default", "web", "ClusterIP", "10.96.0.10", port("http", tcp, 80, 0)),
		makeSvc("default", "np", "NodePort", "10.96.0.20", port("http", tcp, 80, 30020)),
		makeSvc("default", "lb", "LoadBalancer", "10.96.0.30", port("http", tcp, 80, 30030), lbIngress("203.0.113.30"), sourceRanges("198.51.100.0/24")),
		makeSvc("default", "ext", "ClusterIP", "10.96.0.40", port("http", tcp, 80, 0), externalIPs("198.18.0.40")),
		makeSvc("default", "localhas", "NodePort", "10.96.0.50", port("http", tcp, 80, 30050), eTPLocal(0)),
		makeSvc("default", "localnone", "NodePort", "10.96.0.60", port("http", tcp, 80, 30060), eTPLocal(0)),
		makeSvc("default", "itp", "ClusterIP", "10.96.0.70", port("http", tcp, 80, 0), iTPLocal()),
		makeSvc("default", "sticky", "ClusterIP", "10.96.0.80", port("http", tcp, 80, 0), affinity(10800)),
		makeSvc("default", "empty", "ClusterIP", "10.96.0.90", port("dns", corev1.ProtocolUDP, 53, 0)),
		makeSvc("default", "five", "ClusterIP", "10.96.0.100", port("", corev1.ProtocolUDP, 53, 0)),
	}
	slices := slicesOf(
		makeSlice("default", "web", "web-1", "http", tcp, 8080, ep{ip: "10.244.1.10", node: a}, ep{ip: "10.244.1.11", node: a}, ep{ip: "10.244.2.10", node: b}),
		makeSlice("default", "np", "np-1", "http", tcp, 8080, ep{ip: "10.244.1.20", node: a}, ep{ip: "10.244.2.20", node: b}),
		makeSlice("default", "lb", "lb-1", "http", tcp, 8080, ep{ip: "10.244.1.30", node: a}, ep{ip: "10.244.2.30", node: b}),
		makeSlice("default", "ext", "ext-1", "http", tcp, 8080, ep{ip: "10.244.1.40", node: a}, ep{ip: "10.244.2.40", node: b}),
		makeSlice("default", "localhas", "localhas-1", "http", tcp, 8080, ep{ip: "10.244.1.50", node: a}, ep{ip: "10.244.2.50", node: b}),
		makeSlice("default", "localnone", "localnone-1", "http", tcp, 8080, ep{ip: "10.244.2.60", node: b}),
		makeSlice("default", "itp", "itp-1", "http", tcp, 8080, ep{ip: "10.244.1.70", node: a}, ep{ip: "10.244.2.70", node: b}),
		makeSlice("default", "sticky", "sticky-1", "http", tcp, 8080, ep{ip: "10.244.1.80", node: a}, ep{ip: "10.244.2.80", node: b}, ep{ip: "10.244.2.81", node: b}),
		makeSlice("default", "five", "five-1", "", corev1.ProtocolUDP, 5353,
			ep{ip: "10.244.2.100", node: b}, ep{ip: "10.244.2.101", node: b}, ep{ip: "10.244.2.102", node: b}, ep{ip: "10.244.2.103", node: b}, ep{ip: "10.244.2.104", node: b}),
	)
	return svcs, slices
}

func flowConfig(layout Layout, localhostNodePorts bool) Config {
	cfg := DefaultConfig("node-a")
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr("192.168.0.2")}
	cfg.Detector = LocalDetector{Mode: DetectClusterCIDR, CIDR: netip.MustParsePrefix("10.244.0.0/16")}
	cfg.Layout = layout
	cfg.LegacyPortNames = layout == LayoutLegacy
	cfg.LocalhostNodePorts = localhostNodePorts
	return cfg
}

// flowHost is node-a with the generated rules installed.
func flowHost(t testing.TB, doc []byte, seed uint64) *netfilter.Host {
	t.Helper()
	h := netfilter.NewHost(netfilter.HostConfig{Seed: seed})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.0.2/16")))
	require.NoError(t, h.AddInterface("cbr0", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("192.168.0.1")}))
	require.NoError(t, Install(h, doc))
	return h
}

// flow is one packet of the flow table.
type flow struct {
	in           string // "" = sent by a local process
	proto        inet.Proto
	src, dst     string
	sport, dport uint16
}

func (f flow) packet() netfilter.Packet {
	p := netfilter.Packet{Family: netfilter.IPv4, Proto: f.proto, Src: netip.MustParseAddr(f.src), Dst: netip.MustParseAddr(f.dst),
		SrcPort: f.sport, DstPort: f.dport, TTL: 64, Length: 40}
	if p.Proto == 0 {
		p.Proto = inet.TCP
	}
	if p.Proto == inet.TCP {
		p.TCPFlags = inet.SYN
	} else {
		p.Length = 28
	}
	if p.SrcPort == 0 {
		p.SrcPort = 40000
	}
	return p
}

// expectation is an outcome set: either DNAT to one of the endpoints (with
// kube-proxy's cascade probabilities, exactly), or a single fate.
type expectation struct {
	endpoints   []string // "10.244.1.10:8080"; the packet leaves towards one of them
	disposition netfilter.Disposition
	where       string // the deciding chain, for a single fate
	icmp        string // "type/code" of the emitted error, for REJECT
}

func explain(t *testing.T, h *netfilter.Host, f flow) []netfilter.Outcome {
	t.Helper()
	outs, err := h.Explain(f.in, f.packet())
	require.NoError(t, err)
	return outs
}

// assertOutcomes checks Explain's outcomes against e: the endpoints, each
// with the probability kube-proxy's cascade gives its position (compared
// as multisets, so the assertion does not depend on kube-proxy's endpoint
// order), or the single fate.
func assertOutcomes(t *testing.T, name string, outs []netfilter.Outcome, e expectation, format string) {
	t.Helper()
	if e.endpoints != nil {
		var got, probs []string
		for _, o := range outs {
			r := o.Result
			assert.Contains(t, []netfilter.Disposition{netfilter.Forwarded, netfilter.Sent, netfilter.Delivered}, r.Disposition, "%s: %s", name, r.Disposition)
			got = append(got, netip.AddrPortFrom(r.Packet.Dst, r.Packet.DstPort).String())
			probs = append(probs, o.Probability.Rat().String())
		}
		var want []string
		for _, p := range probability.EndpointProbabilities(len(e.endpoints), format) {
			want = append(want, p.String())
		}
		sort.Strings(got)
		sort.Strings(probs)
		sort.Strings(want)
		assert.Equal(t, sorted(e.endpoints), got, "%s: endpoints", name)
		assert.Equal(t, want, probs, "%s: probabilities", name)
		return
	}
	require.Len(t, outs, 1, "%s", name)
	r := outs[0].Result
	assert.Equal(t, "1/1", outs[0].Probability.String(), name)
	assert.Equal(t, e.disposition, r.Disposition, "%s: %s", name, r.Reason)
	if e.where != "" {
		assert.Equal(t, e.where, r.Where.Table.String()+" "+r.Where.Chain, name)
	}
	if e.icmp != "" {
		require.Len(t, r.Emitted, 1, name)
		assert.Equal(t, e.icmp, fmt.Sprintf("%d/%d", r.Emitted[0].ICMPType, r.Emitted[0].ICMPCode), name)
	}
}

func eps(s ...string) []string { return s }

// TestFlowTable walks one packet per kind of flow through node-a's
// generated rules and checks the whole outcome set Explain gives.
func TestFlowTable(t *testing.T) {
	svcs, slices := flowCluster()
	out, drop := "192.168.5.5", "203.0.113.99"
	for _, layout := range []Layout{LayoutCurrent, LayoutLegacy} {
		t.Run(layout.String(), func(t *testing.T) {
			doc, err := Generate(flowConfig(layout, true), svcs, slices, nil)
			require.NoError(t, err)
			h := flowHost(t, doc, 1)
			// As on GCE, the load-balancer IP is local to the node: v1.18
			// only drops denied traffic in INPUT (KUBE-FIREWALL).
			require.NoError(t, h.AddInterface("lb0", netip.MustParsePrefix("203.0.113.30/32")))
			itp := eps("10.244.1.70:8080")
			if layout == LayoutLegacy {
				itp = eps("10.244.1.70:8080", "10.244.2.70:8080") // no internalTrafficPolicy before v1.21
			}
			fwDrop := "filter KUBE-PROXY-FIREWALL"
			localNoneDrop := "filter KUBE-EXTERNAL-SERVICES"
			if layout == LayoutLegacy {
				fwDrop, localNoneDrop = "filter KUBE-FIREWALL", "filter KUBE-FIREWALL"
			}
			web := eps("10.244.1.10:8080", "10.244.1.11:8080", "10.244.2.10:8080")
			cases := []struct {
				name string
				f    flow
				want expectation
			}{
				{"ClusterIP from a pod", flow{in: "cbr0", src: "10.244.1.99", dst: "10.96.0.10", dport: 80}, expectation{endpoints: web}},
				{"ClusterIP from outside", flow{in: "eth0", src: out, dst: "10.96.0.10", dport: 80}, expectation{endpoints: web}},
				{"ClusterIP from the node", flow{src: "192.168.0.2", dst: "10.96.0.10", dport: 80}, expectation{endpoints: web}},
				{"NodePort on the node IP", flow{in: "eth0", src: out, dst: "192.168.0.2", dport: 30020}, expectation{endpoints: eps("10.244.1.20:8080", "10.244.2.20:8080")}},
				{"NodePort on 127.0.0.1", flow{src: "127.0.0.1", dst: "127.0.0.1", dport: 30020}, expectation{endpoints: eps("10.244.1.20:8080", "10.244.2.20:8080")}},
				{"LoadBalancer IP, allowed source", flow{in: "eth0", src: "198.51.100.7", dst: "203.0.113.30", dport: 80}, expectation{endpoints: eps("10.244.1.30:8080", "10.244.2.30:8080")}},
				{"LoadBalancer IP, denied source", flow{in: "eth0", src: drop, dst: "203.0.113.30", dport: 80}, expectation{disposition: netfilter.Dropped, where: fwDrop}},
				{"LoadBalancer NodePort", flow{in: "eth0", src: drop, dst: "192.168.0.2", dport: 30030}, expectation{endpoints: eps("10.244.1.30:8080", "10.244.2.30:8080")}},
				{"externalIP", flow{in: "eth0", src: out, dst: "198.18.0.40", dport: 80}, expectation{endpoints: eps("10.244.1.40:8080", "10.244.2.40:8080")}},
				{"eTP Local with a local endpoint", flow{in: "eth0", src: out, dst: "192.168.0.2", dport: 30050}, expectation{endpoints: eps("10.244.1.50:8080")}},
				{"eTP Local, its ClusterIP uses all", flow{in: "cbr0", src: "10.244.1.99", dst: "10.96.0.50", dport: 80}, expectation{endpoints: eps("10.244.1.50:8080", "10.244.2.50:8080")}},
				{"eTP Local without local endpoints", flow{in: "eth0", src: out, dst: "192.168.0.2", dport: 30060}, expectation{disposition: netfilter.Dropped, where: localNoneDrop}},
				{"iTP Local", flow{in: "cbr0", src: "10.244.1.99", dst: "10.96.0.70", dport: 80}, expectation{endpoints: itp}},
				{"no endpoints: REJECT", flow{in: "eth0", proto: inet.UDP, src: out, dst: "10.96.0.90", dport: 53}, expectation{disposition: netfilter.Rejected, where: "filter KUBE-SERVICES", icmp: "3/3"}},
				{"five endpoints", flow{in: "eth0", proto: inet.UDP, src: out, dst: "10.96.0.100", dport: 53}, expectation{endpoints: eps("10.244.2.100:5353", "10.244.2.101:5353", "10.244.2.102:5353", "10.244.2.103:5353", "10.244.2.104:5353")}},
			}
			for _, c := range cases {
				assertOutcomes(t, c.name, explain(t, h, c.f), c.want, probability.FormatCurrent)
			}
		})
	}
}

// In the v1.18 layout KUBE-FW only marks denied load-balancer traffic
// (0x8000) and kubelet's KUBE-FIREWALL drops it in INPUT and OUTPUT: when
// the load-balancer IP is not local to the node, the packet is forwarded
// with the mark, unchanged.
func TestFlowLegacyDeniedLoadBalancerNotLocal(t *testing.T) {
	svcs, slices := flowCluster()
	doc, err := Generate(flowConfig(LayoutLegacy, true), svcs, slices, nil)
	require.NoError(t, err)
	outs := explain(t, flowHost(t, doc, 1), flow{in: "eth0", src: "203.0.113.99", dst: "203.0.113.30", dport: 80})
	require.Len(t, outs, 1)
	r := outs[0].Result
	assert.Equal(t, netfilter.Forwarded, r.Disposition)
	assert.Equal(t, "203.0.113.30", r.Packet.Dst.String())
	assert.Equal(t, uint32(0x8000), r.Packet.Mark&0x8000)
}

// With --iptables-localhost-nodeports=false a NodePort on 127.0.0.1 is not
// DNATed: the packet is delivered to the node itself.
func TestFlowLocalhostNodePortsOff(t *testing.T) {
	svcs, slices := flowCluster()
	doc, err := Generate(flowConfig(LayoutCurrent, false), svcs, slices, nil)
	require.NoError(t, err)
	h := flowHost(t, doc, 1)
	outs := explain(t, h, flow{src: "127.0.0.1", dst: "127.0.0.1", dport: 30020})
	require.Len(t, outs, 1)
	assert.Equal(t, netfilter.Delivered, outs[0].Result.Disposition)
	assert.Equal(t, "127.0.0.1", outs[0].Result.Packet.Dst.String())
}

// ClientIP affinity: the first connection may go to any endpoint; once it
// went, every new connection from the same client goes to the same one
// (one outcome, probability 1), and another client still has the choice.
func TestFlowClientIPAffinity(t *testing.T) {
	svcs, slices := flowCluster()
	for _, layout := range []Layout{LayoutCurrent, LayoutLegacy} {
		doc, err := Generate(flowConfig(layout, true), svcs, slices, nil)
		require.NoError(t, err)
		for seed := range uint64(6) {
			h := flowHost(t, doc, seed)
			first := flow{in: "eth0", src: "192.168.5.5", dst: "10.96.0.80", dport: 80, sport: 40000}
			all := eps("10.244.1.80:8080", "10.244.2.80:8080", "10.244.2.81:8080")
			assertOutcomes(t, "first connection", explain(t, h, first), expectation{endpoints: all}, probability.FormatCurrent)
			res := h.Receive(first.in, first.packet())
			require.Equal(t, netfilter.Forwarded, res.Disposition)
			chosen := netip.AddrPortFrom(res.Packet.Dst, res.Packet.DstPort).String()
			assert.Contains(t, all, chosen)
			second := first
			second.sport = 40001
			outs := explain(t, h, second)
			require.Len(t, outs, 1, "layout %s seed %d", layout, seed)
			assert.Equal(t, "1/1", outs[0].Probability.String())
			assert.Equal(t, chosen, netip.AddrPortFrom(outs[0].Result.Packet.Dst, outs[0].Result.Packet.DstPort).String())
			// The real second connection follows the explanation.
			res2 := h.Receive(second.in, second.packet())
			assert.Equal(t, chosen, netip.AddrPortFrom(res2.Packet.Dst, res2.Packet.DstPort).String())
			other := first
			other.src = "192.168.5.6"
			assert.Len(t, explain(t, h, other), 3)
		}
	}
}

// Every ClusterIP of every generated cluster (current layout, IPv4,
// internalTrafficPolicy Cluster) explains as a DNAT to endpoints of its
// slices with exactly kube-proxy's cascade probabilities, or as a REJECT
// when it has none.
func TestFlowGeneratedClusterIPs(t *testing.T) {
	checked := 0
	for seed := range uint64(100) {
		cfg, doc := generatedCluster(t, seed, false, LayoutCurrent, false)
		h := flowHost(t, doc, seed)
		r := newClusterFromSeed(seed)
		for _, s := range r.svcs {
			if s.Spec.InternalTrafficPolicy != nil && *s.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal {
				continue
			}
			for _, sp := range s.Spec.Ports {
				proto := map[corev1.Protocol]inet.Proto{corev1.ProtocolTCP: inet.TCP, corev1.ProtocolUDP: inet.UDP, corev1.ProtocolSCTP: 132}[sp.Protocol]
				f := flow{in: "eth0", proto: proto, src: "172.16.0.9", dst: s.Spec.ClusterIP, dport: uint16(sp.Port)}
				outs := explain(t, h, f)
				ips := map[string]bool{}
				for _, sl := range r.slices {
					if sl.Labels[discoveryv1.LabelServiceName] == s.Name && sl.Namespace == s.Namespace && *sl.Ports[0].Name == sp.Name {
						for _, e := range sl.Endpoints {
							ips[netip.AddrPortFrom(netip.MustParseAddr(e.Addresses[0]), uint16(*sl.Ports[0].Port)).String()] = true
						}
					}
				}
				name := fmt.Sprintf("seed %d %s/%s:%s", seed, s.Namespace, s.Name, sp.Name)
				if outs[0].Result.Disposition == netfilter.Rejected {
					require.Len(t, outs, 1, name)
					continue
				}
				var got []string
				for _, o := range outs {
					ap := netip.AddrPortFrom(o.Result.Packet.Dst, o.Result.Packet.DstPort).String()
					assert.True(t, ips[ap], "%s: %s is not an endpoint", name, ap)
					got = append(got, ap)
				}
				assertOutcomes(t, name, outs, expectation{endpoints: got}, probability.FormatCurrent)
				checked++
			}
		}
		_ = cfg
	}
	t.Logf("%d service ports with endpoints checked", checked)
	assert.Greater(t, checked, 300)
}

type seededCluster struct {
	svcs   []corev1.Service
	slices []discoveryv1.EndpointSlice
}

func newClusterFromSeed(seed uint64) seededCluster {
	_, svcs, slices := randomCluster(randFor(seed), false)
	return seededCluster{svcs, slices}
}
