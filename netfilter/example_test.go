package netfilter_test

import (
	"fmt"
	"net/netip"

	"github.com/packetwalk/packetwalk/netfilter"
)

func Example() {
	rs := netfilter.NewRuleset(netfilter.IPv4)
	rs.MustExec(
		"-t filter -N WEB",
		"-t filter -A INPUT -p tcp --dport 80 -j WEB",
		"-t filter -A WEB -s 10.0.0.0/8 -j ACCEPT",
		"-t filter -A WEB -j DROP",
	)
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1})
	if err := h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")); err != nil {
		panic(err)
	}
	if err := h.Load(rs); err != nil {
		panic(err)
	}
	res := h.Receive("eth0", netfilter.Packet{Proto: netfilter.ProtoTCP,
		Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("192.168.10.1"),
		SrcPort: 40000, DstPort: 80, TCPFlags: netfilter.SYN, TTL: 64, Length: 60})
	fmt.Println(res.Verdict, res.Disposition, res.Where.Chain, res.Where.Rule)
	fmt.Print(rs)
	// Output:
	// DROP dropped WEB 2
	// *filter
	// :INPUT ACCEPT [0:0]
	// :FORWARD ACCEPT [0:0]
	// :OUTPUT ACCEPT [0:0]
	// :WEB - [0:0]
	// -A INPUT -p tcp -m tcp --dport 80 -j WEB
	// -A WEB -s 10.0.0.0/8 -j ACCEPT
	// -A WEB -j DROP
	// COMMIT
}

// ReceiveTo reuses one Result for a stream of packets, as a property test
// sending thousands of packets would: the packet is copied in once and
// nothing is copied out.
func ExampleHost_ReceiveTo() {
	rs := netfilter.NewRuleset(netfilter.IPv4)
	rs.MustExec("-t filter -A INPUT -p tcp --dport 22 -j DROP")
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1})
	if err := h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")); err != nil {
		panic(err)
	}
	if err := h.Load(rs); err != nil {
		panic(err)
	}
	p := netfilter.Packet{Proto: netfilter.ProtoTCP,
		Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("192.168.10.1"),
		SrcPort: 40000, TCPFlags: netfilter.SYN, TTL: 64, Length: 60}
	var res netfilter.Result
	for _, port := range []uint16{21, 22, 23} {
		p.DstPort = port
		h.ReceiveTo(&res, "eth0", &p)
		fmt.Println(port, res.Disposition)
	}
	// Output:
	// 21 delivered
	// 22 dropped
	// 23 delivered
}
