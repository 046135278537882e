package kubeproxy

import (
	"fmt"
	"net/netip"
	"sort"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
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
		makeSvc("default", "itp", "ClusterIP", "10.96.0.70", port("http", tcp, 80, 0), iTPLocal()),
		makeSvc("default", "itpnone", "ClusterIP", "10.96.0.71", port("http", tcp, 80, 0), iTPLocal()),
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
		// iTP Local: the node's own endpoint is p[4]; the others are on node-b.
		makeSlice("default", "itp", "itp-1", "http", tcp, 8080, ep{ip: p[4], node: a}, ep{ip: p[0], node: b}, ep{ip: p[1], node: b}),
		makeSlice("default", "itpnone", "itpnone-1", "http", tcp, 8080, ep{ip: p[2], node: b}),
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
func kernelFate(obs kerneltest.Observation, proto inet.Proto) string {
	for _, c := range obs.Server {
		if inet.Proto(c.Summary.Proto) == proto {
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

// simFates are the fates Explain allows, in kernelFate's words: a locally
// generated packet that leaves the node (Sent) reaches the server as a
// forwarded one does.
func simFates(outs []netfilter.Outcome) []string {
	var fs []string
	for _, o := range outs {
		r := o.Result
		switch r.Disposition {
		case netfilter.Forwarded, netfilter.Sent: // both leave towards the server
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

func labSpec(f flow) kerneltest.FrameSpec {
	spec := kerneltest.FrameSpec{Proto: "tcp", Src: netip.MustParseAddr(f.src), Dst: netip.MustParseAddr(f.dst), SrcPort: f.sport, DstPort: f.dport, TCPFlags: "SYN"}
	if spec.SrcPort == 0 {
		spec.SrcPort = 40000
	}
	if f.proto == inet.UDP {
		spec.Proto, spec.TCPFlags = "udp", ""
	}
	return spec
}

func labFrame(t *testing.T, lab *kerneltest.Lab, f flow) []byte {
	t.Helper()
	fr, err := lab.Frame(labSpec(f))
	require.NoError(t, err)
	return fr
}

// labSend sends f into the node the way f.in says: from the client's wire
// (eth0), from a pod's wire (eth1), or, for "", as a packet a local process
// of the node generated; it returns what the ends saw.
func labSend(t *testing.T, lab *kerneltest.Lab, f flow) kerneltest.Observation {
	t.Helper()
	switch f.in {
	case "eth0":
		obs, err := lab.Exchange(labFrame(t, lab, f))
		require.NoError(t, err)
		return obs
	case "eth1":
		fr, err := lab.FrameFrom(kerneltest.Server, labSpec(f))
		require.NoError(t, err)
		_, err = lab.Settle() // discard stale captures
		require.NoError(t, err)
		require.NoError(t, lab.InjectFrom(kerneltest.Server, fr))
	case "":
		pkt, err := kerneltest.BuildPacket(labSpec(f))
		require.NoError(t, err)
		_, err = lab.Settle()
		require.NoError(t, err)
		require.NoError(t, lab.SendFromNode(pkt))
	default:
		t.Fatalf("labSend: no lab wire for interface %q", f.in)
	}
	obs, err := lab.Settle()
	require.NoError(t, err)
	return obs
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
	legacyCfg := cfg
	legacyCfg.Layout, legacyCfg.LegacyPortNames = LayoutLegacy, true
	legacyDoc, err := Generate(legacyCfg, svcs, slices, nil)
	require.NoError(t, err)
	// A NodePort on 127.0.0.1 is DNATed to a pod: without route_localnet
	// the reroute after nat OUTPUT refuses a 127.0.0.0/8 source off the
	// host and sendto fails with EINVAL (seen on Linux 6.18). The node
	// is set as kube-proxy sets it, which is also the Host's default
	// (HostConfig.NoRouteLocalnet false; netfilter's route_localnet tests
	// cover 0).
	require.NoError(t, lab.Node().Sysctl("net.ipv4.conf.all.route_localnet", "1"))
	client, pod := "192.168.10.2", "10.244.1.99"
	flows := []struct {
		name   string
		f      flow
		legacy bool // v1.18 layout
	}{
		{"ClusterIP", flow{in: "eth0", proto: inet.TCP, src: client, dst: "10.96.0.10", dport: 80}, false},
		{"NodePort", flow{in: "eth0", proto: inet.TCP, src: client, dst: "192.168.10.1", dport: 30020}, false},
		{"NodePort on 127.0.0.1", flow{proto: inet.TCP, src: "127.0.0.1", dst: "127.0.0.1", dport: 30020}, false},
		{"LoadBalancer allowed", flow{in: "eth0", proto: inet.TCP, src: client, dst: "203.0.113.30", dport: 80}, false},
		{"LoadBalancer denied", flow{in: "eth0", proto: inet.TCP, src: client, dst: "203.0.113.31", dport: 80}, false},
		{"externalIP", flow{in: "eth0", proto: inet.TCP, src: client, dst: "198.18.0.40", dport: 80}, false},
		{"eTP Local with local endpoint", flow{in: "eth0", proto: inet.TCP, src: client, dst: "192.168.10.1", dport: 30050}, false},
		{"eTP Local without local endpoints", flow{in: "eth0", proto: inet.TCP, src: client, dst: "192.168.10.1", dport: 30060}, false},
		{"iTP Local from a pod", flow{in: "eth1", proto: inet.TCP, src: pod, dst: "10.96.0.70", dport: 80}, false},
		{"iTP Local without local endpoints", flow{in: "eth1", proto: inet.TCP, src: pod, dst: "10.96.0.71", dport: 80}, false},
		{"no endpoints", flow{in: "eth0", proto: inet.UDP, src: client, dst: "10.96.0.90", dport: 53}, false},
		{"five endpoints", flow{in: "eth0", proto: inet.UDP, src: client, dst: "10.96.0.100", dport: 53}, false},
		{"legacy ClusterIP", flow{in: "eth0", proto: inet.TCP, src: client, dst: "10.96.0.10", dport: 80}, true},
		{"legacy NodePort", flow{in: "eth0", proto: inet.TCP, src: client, dst: "192.168.10.1", dport: 30020}, true},
	}
	// Several rounds, so that the kernel's random choices visit more than
	// one endpoint; each case starts from a fresh ruleset and conntrack.
	for round := range 4 {
		for _, c := range flows {
			c.f.sport = uint16(41000 + round)
			d := doc
			if c.legacy {
				d = legacyDoc
			}
			require.NoError(t, lab.Reset(string(d)))
			obs := labSend(t, lab, c.f)
			outs := explain(t, labSimHost(t, d, 1), c.f)
			got := kernelFate(obs, c.f.packet().Proto)
			assert.Contains(t, simFates(outs), got, "round %d %s: kernel:\n%s", round, c.name, obs)
			if c.f.src == "127.0.0.1" && len(obs.Server) > 0 {
				// A 127.0.0.1 source must not leave the node: KUBE-POSTROUTING
				// masquerades it to eth1's address, in both worlds.
				assert.Equal(t, "10.244.1.1", obs.Server[0].Summary.Src.String(), "round %d %s: kernel source", round, c.name)
				for _, o := range outs {
					assert.Equal(t, "10.244.1.1", o.Result.Packet.Src.String(), "round %d %s: Explain source", round, c.name)
				}
			}
		}
	}
	// ClientIP affinity: the second connection goes where the first went,
	// in the kernel as in Explain.
	require.NoError(t, lab.Reset(string(doc)))
	sim := labSimHost(t, doc, 1)
	first := flow{in: "eth0", proto: inet.TCP, src: client, dst: "10.96.0.80", dport: 80, sport: 42000}
	o1, err := lab.Exchange(labFrame(t, lab, first))
	require.NoError(t, err)
	k1 := kernelFate(o1, inet.TCP)
	assert.Contains(t, simFates(explain(t, sim, first)), k1)
	for i := 1; i <= 3; i++ {
		next := first
		next.sport = uint16(42000 + i)
		o, err := lab.Exchange(labFrame(t, lab, next))
		require.NoError(t, err)
		assert.Equal(t, k1, kernelFate(o, inet.TCP), "connection %d", i+1)
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

	base := flow{in: "eth0", proto: inet.UDP, src: "192.168.10.2", dst: "10.96.0.100", dport: 53}
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
