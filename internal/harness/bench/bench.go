// Package bench measures packetwalk on kube-proxy rulesets of a given
// number of services (5 endpoints each): load time, memory per rule,
// new-connection and established-flow packet rates and Explain time. The
// benchmarks of this package and the benchtable command share it.
package bench

import (
	"bytes"
	"fmt"
	"net/netip"
	"runtime"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Endpoints is the number of ready endpoints of every service.
const Endpoints = 5

// Addresses of the benchmark node, the same as the kernel lab's
// (internal/harness/kerneltest): the client 192.168.10.2 reaches the node's eth0;
// endpoints (172.16.0.0/12) are routed through the server side.
var (
	Client    = netip.MustParseAddr("192.168.10.2")
	NodeEth0  = netip.MustParsePrefix("192.168.10.1/24")
	NodeEth1  = netip.MustParsePrefix("10.244.1.1/24")
	Gateway   = netip.MustParseAddr("10.244.1.5")
	PodsCIDR  = netip.MustParsePrefix("172.16.0.0/12")
	firstVIP  = netip.MustParseAddr("10.96.0.0")
	firstPod  = netip.MustParseAddr("172.16.0.0")
	servePort = uint16(80)
)

// ServiceIP is the cluster IP of service i (10.96.0.1 upwards).
func ServiceIP(i int) netip.Addr { return addrAdd(firstVIP, uint32(i+1)) }

func endpointIP(k int) netip.Addr { return addrAdd(firstPod, uint32(k+1)) }

func addrAdd(a netip.Addr, n uint32) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + n
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// Cluster returns n ClusterIP services (every fourth a NodePort) with
// Endpoints ready endpoints each, spread over 7 nodes.
func Cluster(n int) ([]corev1.Service, []discoveryv1.EndpointSlice) {
	svcs := make([]corev1.Service, 0, n)
	slices := make([]discoveryv1.EndpointSlice, 0, n)
	tcp := corev1.ProtocolTCP
	for i := range n {
		ns, name := fmt.Sprintf("ns%d", i%50), fmt.Sprintf("svc%d", i)
		typ, np := corev1.ServiceTypeClusterIP, int32(0)
		if i%4 == 0 {
			typ, np = corev1.ServiceTypeNodePort, int32(30000+i%2000)
		}
		svcs = append(svcs, corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Type: typ, ClusterIP: ServiceIP(i).String(), Ports: []corev1.ServicePort{
				{Name: "http", Protocol: tcp, Port: int32(servePort), NodePort: np, TargetPort: intstr.FromInt32(8080)}}},
		})
		pname, pport, ready := "http", int32(8080), true
		es := discoveryv1.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name + "-x", Labels: map[string]string{discoveryv1.LabelServiceName: name}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Ports:       []discoveryv1.EndpointPort{{Name: &pname, Protocol: &tcp, Port: &pport}},
		}
		for e := range Endpoints {
			k := i*Endpoints + e
			node := fmt.Sprintf("node-%d", k%7)
			es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{
				Addresses:  []string{endpointIP(k).String()},
				Conditions: discoveryv1.EndpointConditions{Ready: &ready},
				NodeName:   &node,
			})
		}
		slices = append(slices, es)
	}
	return svcs, slices
}

// Config is the kube-proxy configuration of the benchmark node.
func Config() kubeproxy.Config {
	cfg := kubeproxy.DefaultConfig("node-1")
	cfg.NodeIPs = []netip.Addr{NodeEth0.Addr()}
	cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectClusterCIDR, CIDR: PodsCIDR}
	return cfg
}

// Dump returns the iptables-restore document kube-proxy writes for a
// cluster of n services, and its number of rules.
func Dump(n int) ([]byte, int, error) {
	svcs, slices := Cluster(n)
	doc, err := kubeproxy.Generate(Config(), svcs, slices, nil)
	if err != nil {
		return nil, 0, err
	}
	return doc, countRules(doc), nil
}

func countRules(doc []byte) int {
	n := 0
	for line := range bytes.Lines(doc) {
		if bytes.HasPrefix(line, []byte("-A ")) {
			n++
		}
	}
	return n
}

// NewHost returns the benchmark node without rules.
func NewHost(seed uint64) (*netfilter.Host, error) {
	h := netfilter.NewHost(netfilter.HostConfig{Seed: seed})
	if err := h.AddInterface("eth0", NodeEth0); err != nil {
		return nil, err
	}
	if err := h.AddInterface("eth1", NodeEth1); err != nil {
		return nil, err
	}
	if err := h.AddRoute(netfilter.Route{Dst: PodsCIDR, Iface: "eth1", Gateway: Gateway}); err != nil {
		return nil, err
	}
	return h, nil
}

// Setup is a node with the rules of n services loaded.
type Setup struct {
	Services int
	Doc      []byte
	Rules    int
	Host     *netfilter.Host
}

// New generates the rules of n services and installs them on a new host.
func New(n int) (*Setup, error) {
	doc, rules, err := Dump(n)
	if err != nil {
		return nil, err
	}
	h, err := NewHost(1)
	if err != nil {
		return nil, err
	}
	if err := kubeproxy.Install(h, doc); err != nil {
		return nil, err
	}
	return &Setup{Services: n, Doc: doc, Rules: rules, Host: h}, nil
}

// SYN is a new connection from the client to service svc.
func SYN(svc int, sport uint16) netfilter.Packet {
	return netfilter.Packet{Family: netfilter.IPv4, Proto: inet.TCP, Src: Client, Dst: ServiceIP(svc),
		SrcPort: sport, DstPort: servePort, TCPFlags: inet.SYN, TTL: 64, Length: 60, Window: 64240}
}

// LoadBench measures installing (parsing and compiling) the rules of s on
// a fresh host; it reports ns/rule and B/rule allocated.
func LoadBench(b *testing.B, s *Setup) {
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	for b.Loop() {
		h, err := NewHost(1)
		if err != nil {
			b.Fatal(err)
		}
		if err := kubeproxy.Install(h, s.Doc); err != nil {
			b.Fatal(err)
		}
	}
	runtime.ReadMemStats(&after)
	ops := float64(b.N) * float64(s.Rules)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/ops, "ns/rule")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/ops, "B/rule")
}

// RetainedPerRule returns the heap bytes a loaded host keeps per rule.
func RetainedPerRule(s *Setup) (float64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	h, err := NewHost(1)
	if err != nil {
		return 0, err
	}
	if err := kubeproxy.Install(h, s.Doc); err != nil {
		return 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(h)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(s.Rules), nil
}

// NewConnBench sends new connections (SYN, a new source port each time)
// to service svc and checks each is DNATed to an endpoint. The connection
// is removed after each packet, so the conntrack table stays small.
func NewConnBench(b *testing.B, s *Setup, svc int) {
	h := s.Host
	sport := uint16(1024)
	b.ReportAllocs()
	for b.Loop() {
		sport++
		if sport == 0 {
			sport = 1024
		}
		res := h.Receive("eth0", SYN(svc, sport))
		if res.Disposition != netfilter.Forwarded || res.Conn == nil {
			b.Fatalf("service %d: %v (%s)", svc, res.Disposition, res.Reason)
		}
		h.Conntrack().Remove(res.Conn)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkt/s")
}

// Establish opens a connection from the client to the last service (SYN,
// then the endpoint's SYN-ACK to the masqueraded source) and returns the
// client's next packet, an ACK of the established flow.
func Establish(s *Setup, sport uint16) (netfilter.Packet, error) {
	h := s.Host
	syn := SYN(s.Services-1, sport)
	res := h.Receive("eth0", syn)
	if res.Disposition != netfilter.Forwarded {
		return syn, fmt.Errorf("SYN: %v (%s)", res.Disposition, res.Reason)
	}
	out := res.Packet
	reply := netfilter.Packet{Family: netfilter.IPv4, Proto: inet.TCP, Src: out.Dst, Dst: out.Src,
		SrcPort: out.DstPort, DstPort: out.SrcPort, TCPFlags: inet.SYN | inet.ACK, TTL: 64, Length: 60, Window: 64240}
	if r := h.Receive("eth1", reply); r.Disposition != netfilter.Forwarded {
		return syn, fmt.Errorf("SYN-ACK: %v (%s)", r.Disposition, r.Reason)
	}
	ack := syn
	ack.TCPFlags = inet.ACK
	return ack, nil
}

// EstablishedBench sends the ACKs of an established connection to the
// last service: conntrack finds it, nat does not run again.
func EstablishedBench(b *testing.B, s *Setup) {
	h := s.Host
	ack, err := Establish(s, 33333)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if r := h.Receive("eth0", ack); r.Disposition != netfilter.Forwarded {
			b.Fatalf("ACK: %v (%s)", r.Disposition, r.Reason)
		}
	}
	b.StopTimer()
	if r := h.Receive("eth0", ack); r.Conn != nil {
		h.Conntrack().Remove(r.Conn)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkt/s")
}

// EstablishedToBench is EstablishedBench through Host.ReceiveTo, which
// reuses one Result instead of copying the packet in and the result out.
func EstablishedToBench(b *testing.B, s *Setup) {
	h := s.Host
	ack, err := Establish(s, 33334)
	if err != nil {
		b.Fatal(err)
	}
	var r netfilter.Result
	b.ReportAllocs()
	for b.Loop() {
		if h.ReceiveTo(&r, "eth0", &ack); r.Disposition != netfilter.Forwarded {
			b.Fatalf("ACK: %v (%s)", r.Disposition, r.Reason)
		}
	}
	b.StopTimer()
	if h.ReceiveTo(&r, "eth0", &ack); r.Conn != nil {
		h.Conntrack().Remove(r.Conn)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pkt/s")
}

// ExplainBench explains a new connection to the last service: Endpoints
// outcomes.
func ExplainBench(b *testing.B, s *Setup) {
	b.ReportAllocs()
	for b.Loop() {
		out, err := s.Host.Explain("eth0", SYN(s.Services-1, 44444))
		if err != nil {
			b.Fatal(err)
		}
		if len(out) != Endpoints {
			b.Fatalf("%d outcomes, want %d", len(out), Endpoints)
		}
	}
}
