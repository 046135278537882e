package netfilter

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A packet on an interface the host does not have is refused by every
// entry point, inspectably, and leaves no trace: no counter, no
// connection.
func TestUnknownInterfaceIsRefused(t *testing.T) {
	rules := "*filter\n-A INPUT -m conntrack --ctstate NEW -j ACCEPT\nCOMMIT\n"
	h := testHost(t, rules, HostConfig{})
	p := tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN)
	check := func(t *testing.T, res Result) {
		t.Helper()
		assert.Equal(t, VerdictRefused, res.Verdict)
		assert.Equal(t, Refused, res.Disposition)
		assert.Equal(t, "REFUSED refused", res.Verdict.String()+" "+res.Disposition.String())
		require.ErrorIs(t, res.Err, ErrUnknownInterface)
		var pe *PacketError
		require.True(t, errors.As(res.Err, &pe))
		assert.Equal(t, "In", pe.Field)
		assert.Equal(t, `packet refused: In: unknown interface "eht0" (the host has lo, eth0, eth1; add it with AddInterface)`, res.Err.Error())
		assert.Equal(t, ReasonRefused, res.Reason)
		assert.Equal(t, Step{}, res.Where)
		assert.Nil(t, res.Conn)
	}
	check(t, h.Receive("eht0", p))
	var res Result
	h.ReceiveTo(&res, "eht0", &p)
	check(t, res)
	_, err := h.Explain("eht0", p)
	assert.ErrorIs(t, err, ErrUnknownInterface)
	_, err = NewFrameHost(h).ReceiveFrame("eht0", mkFrame(t, eth4(), ip4("192.168.10.2", "192.168.10.1", layers.IPProtocolUDP),
		&layers.UDP{SrcPort: 1, DstPort: 53}, gopacket.Payload("q")))
	assert.ErrorIs(t, err, ErrUnknownInterface)
	assert.ErrorIs(t, h.Receive("", p).Err, ErrUnknownInterface)
	assert.Zero(t, h.Conntrack().Len())
	assert.Equal(t, Counters{}, h.Ruleset(IPv4).Table(Filter).Chain("INPUT").Rules[0].Counters)

	// A refused packet does not leave its error in a reused Result.
	h.ReceiveTo(&res, "eth0", &p)
	assert.NoError(t, res.Err)
	assert.Equal(t, Delivered, res.Disposition)
	// lo exists on every host.
	assert.Equal(t, Delivered, h.Receive("lo", tcpPacket("127.0.0.1", "127.0.0.1", 80, inet.SYN)).Disposition)
}

// Fields that contradict each other are refused with the field at fault,
// where the walk used to pick one reading silently.
func TestContradictoryPacketIsRefused(t *testing.T) {
	h := testHost(t, "", HostConfig{})
	a := netip.MustParseAddr
	tcp := tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN)
	for _, tc := range []struct {
		name  string
		edit  func(p *Packet)
		field string
		text  string
	}{
		{"family contradicts addresses", func(p *Packet) { p.Family = IPv6 }, "Family", "ipv6 with ipv4 destination 192.168.10.1"},
		{"unknown family", func(p *Packet) { p.Family = 5 }, "Family", "family(5) is neither IPv4 nor IPv6"},
		{"mixed addresses", func(p *Packet) { p.Src = a("fd00:10::2") }, "Src", "ipv6 source fd00:10::2 with ipv4 destination 192.168.10.1"},
		{"IPv4-mapped source", func(p *Packet) { p.Src = a("::ffff:192.168.10.2") }, "Src", "ipv6 source ::ffff:192.168.10.2 with ipv4 destination 192.168.10.1"},
		{"no destination", func(p *Packet) { p.Dst = netip.Addr{} }, "Dst", "no destination address"},
		{"no source", func(p *Packet) { p.Src = netip.Addr{} }, "Src", "no source address (only Send chooses one)"},
		{"ports on icmp", func(p *Packet) { p.Proto, p.TCPFlags = inet.ICMP, 0 }, "SrcPort", "protocol icmp has no ports"},
		{"ports without a protocol", func(p *Packet) { p.Proto, p.TCPFlags, p.SrcPort = 0, 0, 0 }, "DstPort", "protocol 0 (Proto unset) has no ports"},
		{"tcp flags on udp", func(p *Packet) { p.Proto = inet.UDP }, "TCPFlags", "protocol udp is not tcp"},
		{"icmp type on tcp", func(p *Packet) { p.ICMPType = 8 }, "ICMPType", "protocol tcp is not icmp or ipv6-icmp"},
		{"icmp in IPv6", func(p *Packet) { *p = ICMP(a("fd00:10::2"), a("fd00:10::1"), 128, 0); p.Proto = inet.ICMP }, "Proto", "icmp in an IPv6 packet (ICMPv6 is inet.ICMPv6)"},
		{"icmpv6 in IPv4", func(p *Packet) { *p = ICMP(a("192.168.10.2"), a("192.168.10.1"), 8, 0); p.Proto = inet.ICMPv6 }, "Proto", "ipv6-icmp in an IPv4 packet (ICMP is inet.ICMP)"},
		{"negative length", func(p *Packet) { p.Length = -1 }, "Length", "negative"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tcp
			tc.edit(&p)
			res := h.Receive("eth0", p)
			assert.Equal(t, Refused, res.Disposition)
			require.ErrorIs(t, res.Err, ErrBadPacket)
			var pe *PacketError
			require.True(t, errors.As(res.Err, &pe))
			assert.Equal(t, tc.field, pe.Field)
			assert.Equal(t, tc.text, pe.Text)
			_, err := h.Explain("eth0", p)
			assert.ErrorIs(t, err, ErrBadPacket)
		})
	}
	// Send chooses a missing source, but refuses the other contradictions.
	p := tcp
	p.Src = netip.Addr{}
	assert.Equal(t, Delivered, h.Send(p).Disposition)
	p.Family = IPv6
	assert.ErrorIs(t, h.Send(p).Err, ErrBadPacket)
	var res Result
	h.SendTo(&res, &p)
	assert.ErrorIs(t, res.Err, ErrBadPacket)
	_, err := h.Explain("", p)
	assert.ErrorIs(t, err, ErrBadPacket)
	// An unset Family is the addresses'.
	assert.Equal(t, IPv4, h.Receive("eth0", tcp).Packet.Family)
}

// The constructors give what a Linux socket sends by default: TTL 64
// (net.ipv4.ip_default_ttl, net.ipv6.conf.*.hop_limit) and the headers'
// length.
func TestPacketConstructors(t *testing.T) {
	ap := netip.MustParseAddrPort
	a := netip.MustParseAddr
	assert.Equal(t, Packet{Family: IPv4, Proto: inet.TCP, Src: a("10.0.0.2"), Dst: a("10.0.0.1"), SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN, TTL: 64, Length: 40},
		TCP(ap("10.0.0.2:40000"), ap("10.0.0.1:80"), inet.SYN))
	assert.Equal(t, Packet{Family: IPv6, Proto: inet.TCP, Src: a("fd00::2"), Dst: a("fd00::1"), SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN | inet.ACK, TTL: 64, Length: 60},
		TCP(ap("[fd00::2]:40000"), ap("[fd00::1]:80"), inet.SYN|inet.ACK))
	assert.Equal(t, Packet{Family: IPv4, Proto: inet.UDP, Src: a("10.0.0.2"), Dst: a("10.0.0.1"), SrcPort: 5353, DstPort: 53, TTL: 64, Length: 28},
		UDP(ap("10.0.0.2:5353"), ap("10.0.0.1:53")))
	assert.Equal(t, Packet{Family: IPv6, Proto: inet.UDP, Src: a("fd00::2"), Dst: a("fd00::1"), SrcPort: 5353, DstPort: 53, TTL: 64, Length: 48},
		UDP(ap("[fd00::2]:5353"), ap("[fd00::1]:53")))
	assert.Equal(t, Packet{Family: IPv4, Proto: inet.ICMP, Src: a("10.0.0.2"), Dst: a("10.0.0.1"), ICMPType: 8, TTL: 64, Length: 28},
		ICMP(a("10.0.0.2"), a("10.0.0.1"), 8, 0))
	assert.Equal(t, Packet{Family: IPv6, Proto: inet.ICMPv6, Src: a("fd00::2"), Dst: a("fd00::1"), ICMPType: 128, TTL: 64, Length: 48},
		ICMP(a("fd00::2"), a("fd00::1"), 128, 0))
	// A forwarded constructed packet is not "TTL exceeded", as a zero
	// Packet's TTL 0 is.
	h := testHost(t, "", HostConfig{})
	res := h.Receive("eth0", TCP(ap("192.168.10.2:40000"), ap("10.244.1.5:80"), inet.SYN))
	assert.Equal(t, Forwarded, res.Disposition, res.Reason)
	assert.Equal(t, uint8(63), res.Packet.TTL)
	// Mixed families are refused when the packet enters.
	assert.ErrorIs(t, h.Receive("eth0", UDP(ap("[fd00:10::2]:1"), ap("10.244.1.5:53"))).Err, ErrBadPacket)
	// Send chooses the source of a constructor given no address.
	res = h.Send(UDP(netip.AddrPortFrom(netip.Addr{}, 5353), ap("10.244.1.5:53")))
	assert.Equal(t, Sent, res.Disposition)
	assert.Equal(t, a("10.244.1.1"), res.Packet.Src)
	assert.Equal(t, uint16(5353), res.Packet.SrcPort)
}

// Where names the deciding rule with its text and action without
// tracing, at no allocation once the rule's text is formatted.
func TestWhereWithoutTracing(t *testing.T) {
	h := testHost(t, filterRules(3), HostConfig{})
	res := h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN))
	assert.Equal(t, Step{Hook: Input, Table: Filter, Chain: "INPUT", Rule: 4, Text: "-A INPUT -p tcp -m tcp --dport 80 -j ACCEPT", Action: Action{Kind: ActionAccept}}, res.Where)
	res = h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 81, inet.SYN))
	assert.Equal(t, Step{Hook: Input, Table: Filter, Chain: "INPUT", Action: Action{Kind: ActionPolicyDrop}}, res.Where)
	res = h.Receive("eth0", tcpPacket("10.0.0.1", "192.168.10.1", 2, inet.SYN))
	assert.Equal(t, Step{Hook: Input, Table: Filter, Chain: "INPUT", Rule: 2, Text: "-A INPUT -s 10.0.0.1/32 -p tcp -m tcp --dport 2 -j DROP", Action: Action{Kind: ActionDrop}}, res.Where)
	h2 := testHost(t, "*filter\n-A INPUT -p tcp --dport 22 -j REJECT --reject-with tcp-reset\nCOMMIT\n", HostConfig{})
	res = h2.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN))
	assert.Equal(t, Action{Kind: ActionReject}, res.Where.Action)
	assert.Equal(t, "-A INPUT -p tcp -m tcp --dport 22 -j REJECT --reject-with tcp-reset", res.Where.Text)
	p := tcpPacket("10.0.0.1", "192.168.10.1", 2, inet.SYN)
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.Receive("eth0", p) }))
}

// Host.Ruleset is a copy: editing it changes nothing, not even at a later
// Exec; the host changes only through Exec, Restore and Load. Load keeps
// a copy of its argument too.
func TestRulesetIsACopy(t *testing.T) {
	h := testHost(t, "*filter\n-A INPUT -p tcp --dport 22 -j DROP\nCOMMIT\n", HostConfig{})
	ssh := tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN)
	rs := h.Ruleset(IPv4)
	require.NoError(t, rs.Exec("-I INPUT -p tcp --dport 22 -j ACCEPT"))
	assert.Equal(t, Dropped, h.Receive("eth0", ssh).Disposition)
	require.NoError(t, h.Exec("iptables -A INPUT -p udp -j ACCEPT"))
	assert.Equal(t, Dropped, h.Receive("eth0", ssh).Disposition, "an edited copy does not reach the host at the next Exec")
	assert.Equal(t, "-P INPUT ACCEPT\n-A INPUT -p tcp -m tcp --dport 22 -j DROP\n-A INPUT -p udp -j ACCEPT\n",
		string(must(h.Ruleset(IPv4).AppendRules(nil, Filter, "INPUT", 0, false))))
	// The copy's counters are those of its call.
	assert.Equal(t, uint64(2), h.Ruleset(IPv4).Table(Filter).Chain("INPUT").Rules[0].Counters.Packets)
	assert.Equal(t, uint64(0), rs.Table(Filter).Chain("INPUT").Rules[1].Counters.Packets)

	// Loading the edited copy is how to change the host with it.
	require.NoError(t, h.Load(rs))
	assert.Equal(t, Delivered, h.Receive("eth0", ssh).Disposition)
	require.NoError(t, rs.Exec("-F INPUT"))
	require.NoError(t, rs.Exec("-A INPUT -j DROP"))
	assert.Equal(t, Delivered, h.Receive("eth0", ssh).Disposition, "Load keeps a copy")
	assert.Equal(t, uint64(2), h.Ruleset(IPv4).Table(Filter).Chain("INPUT").Rules[0].Counters.Packets, "the host counts in its copy")
	assert.Zero(t, rs.Table(Filter).Chain("INPUT").Rules[0].Counters.Packets)
}
