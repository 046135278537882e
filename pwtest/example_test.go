package pwtest_test

import (
	"fmt"
	"math/big"
	"net/netip"

	corev1 "k8s.io/api/core/v1"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/probability"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/pwtest"
)

// A kube-proxy service with five endpoints: Explain gives each endpoint's
// exact probability (1/5 up to the 2^-31 quantisation of the cascade's
// 1/5, 1/4, 1/3, 1/2), AssertExact checks it against
// probability.EndpointProbabilities, and 10,000 seeded connections fit it.
func Example() {
	svcs, slices := webService(5)
	doc, err := kubeproxy.Generate(kubeproxy.DefaultConfig("node-a"), svcs, slices, nil)
	if err != nil {
		panic(err)
	}
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 42})
	_ = h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"))
	_ = h.AddInterface("cbr0", netip.MustParsePrefix("10.244.0.1/16"))
	if err := kubeproxy.Install(h, doc); err != nil {
		panic(err)
	}
	newConn := func(i int) netfilter.Packet {
		return netfilter.TCP(netip.AddrPortFrom(netip.MustParseAddr("192.168.10.2"), uint16(1024+i)),
			netip.MustParseAddrPort("10.96.0.10:80"), inet.SYN)
	}
	outs, err := h.Explain("eth0", newConn(0))
	if err != nil {
		panic(err)
	}
	fmt.Print(pwtest.Distribute(outs, pwtest.ByDestination))

	// In a test, t is the *testing.T; here failures print.
	t := printer{}
	ps := probability.EndpointProbabilities(5, probability.FormatCurrent)
	want := map[netip.AddrPort]*big.Rat{}
	for i, p := range ps {
		want[netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 1, byte(i + 2)}), 8080)] = p
	}
	fmt.Println("exact:", pwtest.AssertExact(t, outs, pwtest.ByDestination, want))

	counts, err := pwtest.Sample(h, "eth0", 10_000, newConn, pwtest.ByDestination)
	if err != nil {
		panic(err)
	}
	stat, p, df := pwtest.ChiSquare(counts, outs, pwtest.ByDestination)
	fmt.Printf("chi-square %.2f, %d degrees of freedom, p-value above 1e-3: %v\n", stat, df, p > 1e-3)
	// Output:
	// 10.244.1.2:8080: 214748365/1073741824 (0.2000000002)
	// 10.244.1.3:8080: 858993459/4294967296 (0.2000000000)
	// 10.244.1.4:8080: 1844674407800451891/9223372036854775808 (0.2000000000)
	// 10.244.1.5:8080: 3689348813023923405/18446744073709551616 (0.1999999999)
	// 10.244.1.6:8080: 3689348813023923405/18446744073709551616 (0.1999999999)
	// exact: true
	// chi-square 1.99, 4 degrees of freedom, p-value above 1e-3: true
}

// printer is an assert.TestingT that prints failures, standing in for
// *testing.T in examples.
type printer struct{}

func (printer) Errorf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// Services and EndpointSets draw the objects kube-proxy reads (in a
// property test, with Draw inside rapid.Check); whatever is drawn, a new
// connection's outcomes sum to exactly 1.
func ExampleServices() {
	services := pwtest.Services(pwtest.ServiceOptions{Types: []corev1.ServiceType{corev1.ServiceTypeClusterIP}, Protocols: []corev1.Protocol{corev1.ProtocolTCP}})
	for i := range 3 {
		svc := services.Example(i)
		slices := pwtest.EndpointSets(svc, pwtest.EndpointOptions{Min: 1, AllReady: true}).Example(i)
		doc, err := kubeproxy.Generate(kubeproxy.DefaultConfig("node-a"), []corev1.Service{svc}, slices, nil)
		if err != nil {
			panic(err)
		}
		h := netfilter.NewHost(netfilter.HostConfig{})
		_ = h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"))
		_ = h.AddInterface("cbr0", netip.MustParsePrefix("10.244.0.1/16"))
		if err := kubeproxy.Install(h, doc); err != nil {
			panic(err)
		}
		syn := netfilter.TCP(netip.MustParseAddrPort("192.168.10.2:40000"),
			netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), uint16(svc.Spec.Ports[0].Port)), inet.SYN)
		outs, err := h.Explain("eth0", syn)
		if err != nil {
			panic(err)
		}
		fmt.Println(pwtest.Distribute(outs, pwtest.ByDestination).Total())
	}
	// Output:
	// 1/1
	// 1/1
	// 1/1
}
