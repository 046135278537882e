package netfiltertest_test

import (
	"fmt"
	"math/big"
	"net/netip"
	"os"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// A service load-balanced over three backends by "statistic --mode random"
// rules, as kube-proxy writes them: Explain gives each backend's exact
// probability, AssertExact checks it, and 10,000 seeded connections fit it.
func Example() {
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 42})
	_ = h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"))
	_ = h.AddInterface("cbr0", netip.MustParsePrefix("10.244.0.1/16"))
	err := h.Restore(netfilter.IPv4, []byte(`*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:WEB - [0:0]
-A PREROUTING -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j WEB
-A WEB -p tcp -m statistic --mode random --probability 0.3333333333 -j DNAT --to-destination 10.244.1.2:8080
-A WEB -p tcp -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 10.244.1.3:8080
-A WEB -p tcp -j DNAT --to-destination 10.244.1.4:8080
COMMIT
`), netfilter.RestoreOptions{})
	if err != nil {
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
	fmt.Print(netfiltertest.Distribute(outs, netfiltertest.ByDestination))

	// The kernel stores a probability as lround(p·2^31): the first rule
	// matches with probability 715827883/2^31, the others share the rest.
	first := big.NewRat(715827883, 1<<31)
	rest := new(big.Rat).Sub(big.NewRat(1, 1), first)
	rest.Quo(rest, big.NewRat(2, 1))
	want := map[netip.AddrPort]*big.Rat{
		netip.MustParseAddrPort("10.244.1.2:8080"): first,
		netip.MustParseAddrPort("10.244.1.3:8080"): rest,
		netip.MustParseAddrPort("10.244.1.4:8080"): rest,
	}
	// In a test, t is the *testing.T; here failures print.
	t := printer{}
	fmt.Println("exact:", netfiltertest.AssertExact(t, outs, netfiltertest.ByDestination, want))

	counts, err := netfiltertest.Sample(h, "eth0", 10_000, newConn, netfiltertest.ByDestination)
	if err != nil {
		panic(err)
	}
	stat, p, df := netfiltertest.ChiSquare(counts, outs, netfiltertest.ByDestination)
	fmt.Printf("chi-square %.2f, %d degrees of freedom, p-value above 1e-3: %v\n", stat, df, p > 1e-3)
	// Output:
	// 10.244.1.2:8080: 715827883/2147483648 (0.3333333335)
	// 10.244.1.3:8080: 1431655765/4294967296 (0.3333333333)
	// 10.244.1.4:8080: 1431655765/4294967296 (0.3333333333)
	// exact: true
	// chi-square 1.31, 2 degrees of freedom, p-value above 1e-3: true
}

// printer is an assert.TestingT that prints failures, standing in for
// *testing.T in examples.
type printer struct{}

func (printer) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	// testify's message starts with the caller's file and line, which
	// differ from machine to machine: print from the error on, unindented.
	if i := strings.Index(msg, "Error:"); i >= 0 {
		msg = msg[i+len("Error:"):]
	}
	for line := range strings.Lines(msg) {
		fmt.Println(strings.TrimSpace(line))
	}
}

// A tracing host from NewHost, a connection through it and the answer
// Reply builds: Matched tells which rules the packets hit, WriteTrace
// prints their walks.
func ExampleNewHost() {
	h, _ := netfiltertest.NewHost(netfilter.HostConfig{})
	_ = h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24"))
	err := h.Restore(netfilter.IPv4, []byte(`*filter
:INPUT DROP [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT
COMMIT
`), netfilter.RestoreOptions{})
	if err != nil {
		panic(err)
	}
	syn := netfilter.TCP(netip.MustParseAddrPort("10.0.0.2:40000"), netip.MustParseAddrPort("10.0.0.1:22"), inet.SYN)
	r := h.Receive("eth0", syn)
	_ = netfiltertest.WriteTrace(os.Stdout, syn, r)
	fmt.Println("rule 2 (ssh):", netfiltertest.Matched(r, netfilter.Filter, "INPUT", 2))

	// The server's answer leaves through OUTPUT; the client's ACK then
	// belongs to the connection and meets rule 1.
	synAck := netfiltertest.Reply(r.Packet, inet.SYN|inet.ACK)
	_ = netfiltertest.WriteTrace(os.Stdout, synAck, h.Send(synAck))
	ack := netfiltertest.Reply(synAck, inet.ACK)
	r = h.Receive("eth0", ack)
	_ = netfiltertest.WriteTrace(os.Stdout, ack, r)
	fmt.Println("rule 1 (established):", netfiltertest.Matched(r, netfilter.Filter, "INPUT", 1))
	// Output:
	// INPUT       filter INPUT                      #2  ACCEPT (ACCEPT)
	//   => ACCEPT delivered to a local socket as 10.0.0.2:40000 → 10.0.0.1:22
	// rule 2 (ssh): true
	//   => ACCEPT sent out eth0 as 10.0.0.1:22 → 10.0.0.2:40000 mark 0x0
	//   INPUT       filter INPUT                      #1  ACCEPT (ACCEPT)
	//   => ACCEPT delivered to a local socket as 10.0.0.2:40000 → 10.0.0.1:22
	// rule 1 (established): true
}

// Packets draws well-formed packets, here TCP and UDP ones from a /24 to
// two service ports (in a property test, with Draw inside rapid.Check).
func ExamplePackets() {
	g := netfiltertest.Packets(netfiltertest.PacketOptions{
		Src:    []netip.Prefix{netip.MustParsePrefix("10.1.0.0/24")},
		Dst:    []netip.Prefix{netip.MustParsePrefix("10.96.0.10/32")},
		Protos: []inet.Proto{inet.TCP, inet.UDP},
		Ports:  []uint16{53, 80},
	})
	for i := range 3 {
		p := g.Example(i)
		fmt.Println(netfiltertest.Addrs(p), p.Length)
	}
	// Output:
	// 10.1.0.1:1028 → 10.96.0.10:53 147
	// 10.1.0.2:2758 → 10.96.0.10:80 30
	// 10.1.0.4:22443 → 10.96.0.10:53 33
}

// Rulesets draws iptables-restore documents that every host loads.
func ExampleRulesets() {
	doc := netfiltertest.Rulesets(netfiltertest.RulesetOptions{MaxRules: 3}).Example(0)
	h := netfilter.NewHost(netfilter.HostConfig{})
	fmt.Println(h.Restore(netfilter.IPv4, []byte(doc), netfilter.RestoreOptions{}))
	fmt.Println(strings.Count(doc, "COMMIT"))
	// Output:
	// <nil>
	// 2
}

// AssertWithin compares floating-point probabilities; on failure it
// reports both distributions, marking the keys that differ.
func ExampleAssertWithin() {
	h := netfilter.NewHost(netfilter.HostConfig{})
	_ = h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24"))
	err := h.Restore(netfilter.IPv4, []byte(`*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -m statistic --mode random --probability 0.1 -j DROP
COMMIT
`), netfilter.RestoreOptions{})
	if err != nil {
		panic(err)
	}
	outs, err := h.Explain("eth0", netfilter.UDP(netip.MustParseAddrPort("10.0.0.2:5000"), netip.MustParseAddrPort("10.0.0.1:53")))
	if err != nil {
		panic(err)
	}
	t := printer{}
	fmt.Println(netfiltertest.AssertWithin(t, outs, netfiltertest.ByFate, map[string]float64{"dropped": 0.1, "delivered": 0.9}, 1e-9))
	fmt.Println(netfiltertest.AssertWithin(t, outs, netfiltertest.ByFate, map[string]float64{"dropped": 0.2, "delivered": 0.8}, 0.01))
	// Output:
	// true
	// distributions differ by more than 0.01
	// key                      got              want             got-want
	// *delivered               0.899999999907   0.800000000000   +0.1
	// *dropped                 0.100000000093   0.200000000000   -0.1
	// false
}
