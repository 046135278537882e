package kubeproxy

import (
	"fmt"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/internal/kerneltest"
	"github.com/packetwalk/packetwalk/internal/probability"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// labPods are the server namespace's addresses: every endpoint lives
// there. Endpoints "on node-b" are still reached through eth1; only their
// nodeName differs.
var labPods = []string{"10.244.1.5", "10.244.1.6", "10.244.1.7", "10.244.1.8", "10.244.1.9"}

// labCluster is flowCluster moved onto the lab's addresses: node-a is the
// lab node (192.168.10.1), the client 192.168.10.2 is outside.
func labCluster() ([]corev1.Service, []discoveryv1.EndpointSlice) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	a, b := "node-a", "node-b"
	p := labPods
	svcs := []corev1.Service{
		makeSvc("default", "web", "ClusterIP", "10.96.0.10", port("http", tcp, 80, 0)),
		makeSvc("default", "np", "NodePort", "10.96.0.20", port("http", tcp, 80, 30020)),
		makeSvc("default", "lbok", "LoadBalancer", "10.96.0.30", port("http", tcp, 80, 30030), lbIngress("203.0.113.30"), sourceRanges("192.168.10.0/24")),
		makeSvc("default", "lbdeny", "LoadBalancer", "10.96.0.31", port("http", tcp, 80, 30031), lbIngress("203.0.113.31"), sourceRanges("198.51.100.0/24")),
		makeSvc("default", "ext", "ClusterIP", "10.96.0.40", port("http", tcp, 80, 0), externalIPs("198.18.0.40")),
		makeSvc("default", "localhas", "NodePort", "10.96.0.50", port("http", tcp, 80, 30050), eTPLocal(0)),
		makeSvc("default", "localnone", "NodePort", "10.96.0.60", port("http", tcp, 80, 30060), eTPLocal(0)),
		makeSvc("default", "sticky", "ClusterIP", "10.96.0.80", port("http", tcp, 80, 0), affinity(10800)),
		makeSvc("default", "empty", "ClusterIP", "10.96.0.90", port("dns", udp, 53, 0)),
		makeSvc("default", "five", "ClusterIP", "10.96.0.100", port("", udp, 53, 0)),
	}
	two := func(svc string) discoveryv1.EndpointSlice {
		return makeSlice("default", svc, svc+"-1", "http", tcp, 8080, ep{ip: p[0], node: a}, ep{ip: p[1], node: b})
	}
	slices := slicesOf(
		makeSlice("default", "web", "web-1", "http", tcp, 8080, ep{ip: p[0], node: a}, ep{ip: p[1], node: a}, ep{ip: p[2], node: b}),
		two("np"), two("lbok"), two("lbdeny"), two("ext"), two("localhas"),
		makeSlice("default", "localnone", "localnone-1", "http", tcp, 8080, ep{ip: p[3], node: b}),
		makeSlice("default", "sticky", "sticky-1", "http", tcp, 8080, ep{ip: p[0], node: b}, ep{ip: p[1], node: b}, ep{ip: p[2], node: b}),
		makeSlice("default", "five", "five-1", "", udp, 5353, ep{ip: p[0], node: b}, ep{ip: p[1], node: b}, ep{ip: p[2], node: b}, ep{ip: p[3], node: b}, ep{ip: p[4], node: b}),
	)
	return svcs, slices
}

// labRoutes send service, load-balancer and external IPs that are not
// DNATed out of eth1, so that they reach filter FORWARD in both worlds.
var labRoutes = []string{"10.96.0.0/16", "203.0.113.0/24", "198.18.0.0/16"}

func labSimHost(t testing.TB, doc []byte, seed uint64) *netfilter.Host {
	t.Helper()
	h := netfilter.NewHost(netfilter.HostConfig{Seed: seed})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	for _, r := range labRoutes {
		require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix(r), Iface: "eth1"}))
	}
	require.NoError(t, Install(h, doc))
	return h
}

func newFlowLab(t *testing.T) *kerneltest.Lab {
	var servers []netip.Prefix
	for _, a := range labPods {
		servers = append(servers, netip.MustParsePrefix(a+"/24"))
	}
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-kpf", Server: servers})
	for _, r := range labRoutes {
		_, _, err := lab.Node().Exec("", "ip", "route", "add", r, "dev", "eth1")
		require.NoError(t, err)
	}
	return lab
}

// kernelFate summarises what the kernel did with one injected packet: the
// endpoint it reached at the server, or the ICMP error the client got, or
// nothing.
func kernelFate(obs kerneltest.Observation, proto uint8) string {
	for _, c := range obs.Server {
		if c.Summary.Proto == proto {
			return "forwarded " + netip.AddrPortFrom(c.Summary.Dst, c.Summary.DstPort).String()
		}
	}
	for _, c := range obs.Client {
		if c.Summary.Proto == 1 {
			return fmt.Sprintf("rejected icmp %d/%d", c.Summary.ICMPType, c.Summary.ICMPCode)
		}
		if c.Summary.Proto == 6 && c.Summary.TCPFlags != "" {
			return "rejected tcp " + c.Summary.TCPFlags
		}
	}
	return "dropped"
}

// simFates are the fates Explain allows, in kernelFate's words.
func simFates(outs []netfilter.Outcome) []string {
	var fs []string
	for _, o := range outs {
		r := o.Result
		switch r.Disposition {
		case netfilter.Forwarded:
			fs = append(fs, "forwarded "+netip.AddrPortFrom(r.Packet.Dst, r.Packet.DstPort).String())
		case netfilter.Rejected:
			e := r.Emitted[0]
			fs = append(fs, fmt.Sprintf("rejected icmp %d/%d", e.ICMPType, e.ICMPCode))
		default:
			fs = append(fs, r.Disposition.String())
		}
	}
	sort.Strings(fs)
	return fs
}

func labFrame(t *testing.T, lab *kerneltest.Lab, f flow) []byte {
	t.Helper()
	spec := kerneltest.FrameSpec{Proto: "tcp", Src: netip.MustParseAddr(f.src), Dst: netip.MustParseAddr(f.dst), SrcPort: f.sport, DstPort: f.dport, TCPFlags: "SYN"}
	if spec.SrcPort == 0 {
		spec.SrcPort = 40000
	}
	if f.proto == netfilter.ProtoUDP {
		spec.Proto, spec.TCPFlags = "udp", ""
	}
	fr, err := lab.Frame(spec)
	require.NoError(t, err)
	return fr
}

// TestKernelFlowTable injects the flow table's packets into the real
// kernel with the same generated rules and checks that each one goes where
// Explain says it may go.
func TestKernelFlowTable(t *testing.T) {
	kerneltest.Require(t)
	lab := newFlowLab(t)
	svcs, slices := labCluster()
	cfg := DefaultConfig("node-a")
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr("192.168.10.1")}
	cfg.Detector = LocalDetector{Mode: DetectClusterCIDR, CIDR: netip.MustParsePrefix("10.244.0.0/16")}
	doc, err := Generate(cfg, svcs, slices, nil)
	require.NoError(t, err)
	client := "192.168.10.2"
	flows := []struct {
		name string
		f    flow
	}{
		{"ClusterIP", flow{proto: netfilter.ProtoTCP, src: client, dst: "10.96.0.10", dport: 80}},
		{"NodePort", flow{proto: netfilter.ProtoTCP, src: client, dst: "192.168.10.1", dport: 30020}},
		{"LoadBalancer allowed", flow{proto: netfilter.ProtoTCP, src: client, dst: "203.0.113.30", dport: 80}},
		{"LoadBalancer denied", flow{proto: netfilter.ProtoTCP, src: client, dst: "203.0.113.31", dport: 80}},
		{"externalIP", flow{proto: netfilter.ProtoTCP, src: client, dst: "198.18.0.40", dport: 80}},
		{"eTP Local with local endpoint", flow{proto: netfilter.ProtoTCP, src: client, dst: "192.168.10.1", dport: 30050}},
		{"eTP Local without local endpoints", flow{proto: netfilter.ProtoTCP, src: client, dst: "192.168.10.1", dport: 30060}},
		{"no endpoints", flow{proto: netfilter.ProtoUDP, src: client, dst: "10.96.0.90", dport: 53}},
		{"five endpoints", flow{proto: netfilter.ProtoUDP, src: client, dst: "10.96.0.100", dport: 53}},
	}
	// Several rounds, so that the kernel's random choices visit more than
	// one endpoint; each case starts from a fresh ruleset and conntrack.
	for round := range 4 {
		for _, c := range flows {
			c.f.in = "eth0"
			c.f.sport = uint16(41000 + round)
			require.NoError(t, lab.Reset(string(doc)))
			obs, err := lab.Exchange(labFrame(t, lab, c.f))
			require.NoError(t, err)
			outs := explain(t, labSimHost(t, doc, 1), c.f)
			got := kernelFate(obs, c.f.packet().Proto)
			assert.Contains(t, simFates(outs), got, "round %d %s: kernel:\n%s", round, c.name, obs)
		}
	}
	// ClientIP affinity: the second connection goes where the first went,
	// in the kernel as in Explain.
	require.NoError(t, lab.Reset(string(doc)))
	sim := labSimHost(t, doc, 1)
	first := flow{in: "eth0", proto: netfilter.ProtoTCP, src: client, dst: "10.96.0.80", dport: 80, sport: 42000}
	o1, err := lab.Exchange(labFrame(t, lab, first))
	require.NoError(t, err)
	k1 := kernelFate(o1, netfilter.ProtoTCP)
	assert.Contains(t, simFates(explain(t, sim, first)), k1)
	for i := 1; i <= 3; i++ {
		next := first
		next.sport = uint16(42000 + i)
		o, err := lab.Exchange(labFrame(t, lab, next))
		require.NoError(t, err)
		assert.Equal(t, k1, kernelFate(o, netfilter.ProtoTCP), "connection %d", i+1)
	}
	s1 := sim.Receive(first.in, first.packet())
	second := first
	second.sport = 42001
	assert.Equal(t, []string{"forwarded " + netip.AddrPortFrom(s1.Packet.Dst, s1.Packet.DstPort).String()}, simFates(explain(t, sim, second)))
}

// TestKernelFiveEndpointDistribution sends 10,000 new UDP connections
// (distinct source ports) to a 5-endpoint service in the kernel and tests
// the endpoint counts against Explain's exact distribution (chi-square).
func TestKernelFiveEndpointDistribution(t *testing.T) {
	kerneltest.Require(t)
	lab := newFlowLab(t)
	svcs, slices := labCluster()
	cfg := DefaultConfig("node-a")
	cfg.NodeIPs = []netip.Addr{netip.MustParseAddr("192.168.10.1")}
	doc, err := Generate(cfg, svcs, slices, nil)
	require.NoError(t, err)
	require.NoError(t, lab.Reset(string(doc)))

	base := flow{in: "eth0", proto: netfilter.ProtoUDP, src: "192.168.10.2", dst: "10.96.0.100", dport: 53}
	outs := explain(t, labSimHost(t, doc, 1), base)
	require.Len(t, outs, 5)
	index := map[string]int{}
	expected := make([]float64, len(outs))
	for i, o := range outs {
		index[netip.AddrPortFrom(o.Result.Packet.Dst, o.Result.Packet.DstPort).String()] = i
		expected[i] = o.Probability.Float64()
	}

	const total, batch = 10000, 250
	counts := make([]int, len(outs))
	start := time.Now()
	seen := 0
	for sent := 0; sent < total; sent += batch {
		frames := make([][]byte, batch)
		for i := range frames {
			f := base
			f.sport = uint16(10000 + sent + i)
			frames[i] = labFrame(t, lab, f)
		}
		obs, err := lab.Exchange(frames...)
		require.NoError(t, err)
		for _, c := range obs.Server {
			if c.Summary.Proto != 17 {
				continue
			}
			i, ok := index[netip.AddrPortFrom(c.Summary.Dst, c.Summary.DstPort).String()]
			require.True(t, ok, "kernel sent a connection to %s, not an endpoint", c.Summary)
			counts[i]++
			seen++
		}
		if (sent/batch)%8 == 7 {
			require.NoError(t, lab.FlushConntrack())
		}
	}
	require.Equal(t, total, seen, "every connection reached an endpoint")
	stat, p, err := probability.ChiSquare(counts, expected)
	require.NoError(t, err)
	t.Logf("kernel: %d connections in %v, counts %v, expected %v each; chi-square %.3f (4 df), p-value %.4f",
		total, time.Since(start).Round(time.Millisecond), counts, expected, stat, p)
	assert.GreaterOrEqual(t, p, 1e-4)
}
