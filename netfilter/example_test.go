package netfilter_test

import (
	"errors"
	"fmt"
	"net/netip"

	"github.com/packetwalk/packetwalk/inet"
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
	syn := netfilter.TCP(netip.MustParseAddrPort("192.168.10.2:40000"), netip.MustParseAddrPort("192.168.10.1:80"), inet.SYN)
	res := h.Receive("eth0", syn)
	if res.Err != nil {
		panic(res.Err)
	}
	fmt.Println(res.Verdict, res.Disposition, res.Where.Chain, res.Where.Rule)
	fmt.Println(res.Where.Action, res.Where.Text)
	fmt.Printf("%s", h.Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{Counters: true}))
	// Output:
	// DROP dropped WEB 2
	// DROP -A WEB -j DROP
	// *filter
	// :INPUT ACCEPT [0:0]
	// :FORWARD ACCEPT [0:0]
	// :OUTPUT ACCEPT [0:0]
	// :WEB - [0:0]
	// [1:40] -A INPUT -p tcp -m tcp --dport 80 -j WEB
	// [0:0] -A WEB -s 10.0.0.0/8 -j ACCEPT
	// [1:40] -A WEB -j DROP
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
	p := netfilter.TCP(netip.MustParseAddrPort("192.168.10.2:40000"), netip.MustParseAddrPort("192.168.10.1:0"), inet.SYN)
	var res netfilter.Result
	for _, port := range []uint16{21, 22, 23} {
		p.DstPort = port
		h.ReceiveTo(&res, "eth0", &p)
		fmt.Println(port, res.Disposition, res.Where.Action)
	}
	// Output:
	// 21 delivered POLICY:ACCEPT
	// 22 dropped DROP
	// 23 delivered POLICY:ACCEPT
}

// A packet the host cannot walk as given is refused, not walked one way
// or another: Result.Err says why, and errors.Is and errors.As inspect it.
func ExampleHost_Receive_refused() {
	h := netfilter.NewHost(netfilter.HostConfig{})
	if err := h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")); err != nil {
		panic(err)
	}
	syn := netfilter.TCP(netip.MustParseAddrPort("192.168.10.2:40000"), netip.MustParseAddrPort("192.168.10.1:80"), inet.SYN)
	res := h.Receive("eht0", syn)
	fmt.Println(res.Verdict, res.Disposition, errors.Is(res.Err, netfilter.ErrUnknownInterface))
	fmt.Println(res.Err)

	syn.Family = netfilter.IPv6
	res = h.Receive("eth0", syn)
	var pe *netfilter.PacketError
	if errors.As(res.Err, &pe) {
		fmt.Println(errors.Is(res.Err, netfilter.ErrBadPacket), pe.Field)
	}
	// Output:
	// REFUSED refused true
	// packet refused: In: unknown interface "eht0" (the host has lo, eth0; add it with AddInterface)
	// true Family
}

// TCP, UDP and ICMP build packets as a Linux socket sends them: the family
// from the addresses, TTL 64 and the headers' length. A zero Packet's TTL
// 0 would be dropped as "TTL exceeded" when forwarded.
func ExampleTCP() {
	p := netfilter.TCP(netip.MustParseAddrPort("[fd00::2]:40000"), netip.MustParseAddrPort("[fd00::1]:443"), inet.SYN)
	p.Length += 32 // a payload, or options
	fmt.Println(p.Family, p.TTL, p.Length, p.TCPFlags)
	ping := netfilter.ICMP(netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1"), 8, 0)
	ping.ICMPID = 7
	fmt.Println(ping.Family, ping.Proto, ping.Length)
	// Output:
	// ipv6 64 92 SYN
	// ipv4 icmp 28
}

// Ruleset returns a copy: reading counters from it is safe, and editing it
// changes the host only once the copy is loaded.
func ExampleHost_Ruleset() {
	h := netfilter.NewHost(netfilter.HostConfig{})
	if err := h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")); err != nil {
		panic(err)
	}
	if err := h.Exec("iptables -A INPUT -p tcp --dport 22 -j DROP"); err != nil {
		panic(err)
	}
	ssh := netfilter.TCP(netip.MustParseAddrPort("192.168.10.2:40000"), netip.MustParseAddrPort("192.168.10.1:22"), inet.SYN)
	rs := h.Ruleset(netfilter.IPv4)
	rs.MustExec("-F INPUT")
	fmt.Println(h.Receive("eth0", ssh).Disposition)
	if err := h.Load(rs); err != nil {
		panic(err)
	}
	fmt.Println(h.Receive("eth0", ssh).Disposition)
	// Output:
	// dropped
	// delivered
}
