package netfilter

import (
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStatefulFirewall(t *testing.T) {
	h := testHost(t, `*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -i eth0 -o eth1 -m state --state NEW -j ACCEPT
-A FORWARD -m conntrack --ctstate INVALID -j DROP
COMMIT
`, HostConfig{})
	syn := h.Receive("eth0", tcpPacket("192.168.10.2", "10.244.1.5", 80, inet.SYN))
	assert.Equal(t, Forwarded, syn.Disposition)
	assert.Equal(t, 2, syn.Where.Rule)
	// The reply comes back from the pod side: only ESTABLISHED lets it in.
	synack := tcpPacket("10.244.1.5", "192.168.10.2", 0, inet.SYN|inet.ACK)
	synack.SrcPort, synack.DstPort = 80, 40000
	res := h.Receive("eth1", synack)
	assert.Equal(t, Forwarded, res.Disposition)
	assert.Equal(t, 1, res.Where.Rule)
	// A SYN-ACK nobody asked for is INVALID for conntrack.
	stray := synack
	stray.DstPort = 40001
	res = h.Receive("eth1", stray)
	assert.Equal(t, Dropped, res.Disposition)
	assert.Equal(t, 3, res.Where.Rule)
	require.Equal(t, 1, h.Conntrack().Len())
}

func TestNoConntrackUserMeansNoNAT(t *testing.T) {
	// A nat table with only non-NAT rules is never traversed, because
	// nothing enabled conntrack (docs/kernel-notes.md, "Conntrack is off
	// until a rule needs it").
	h := testHost(t, "*nat\n-A PREROUTING -p tcp -j ACCEPT\nCOMMIT\n", HostConfig{})
	h.Receive("eth0", tcpPacket("192.168.10.2", "10.244.1.5", 80, inet.SYN))
	got := string(h.Ruleset(IPv4).AppendSave(nil, SaveOptions{Counters: true}))
	assert.Contains(t, got, "[0:0] -A PREROUTING -p tcp -j ACCEPT")
	assert.Equal(t, 0, h.Conntrack().Len())
}

func TestConntrackMatchParsePrint(t *testing.T) {
	rs := NewRuleset(IPv4)
	// Inputs and outputs recorded with iptables 1.8.9 (nf_tables).
	rs.MustExec(
		"-A INPUT -m conntrack --ctstate DNAT,INVALID,NEW,UNTRACKED,SNAT,RELATED,ESTABLISHED -j ACCEPT",
		"-A INPUT -m conntrack ! --ctstate NEW --ctproto tcp --ctorigsrc 10.0.0.0/8 ! --ctorigdst 1.2.3.4 --ctreplsrc 5.6.7.8/32 --ctrepldst 9.9.0.0/16 --ctorigsrcport 80 ! --ctorigdstport 1000:2000 --ctreplsrcport 5 --ctrepldstport 6 --ctstatus ASSURED,SEEN_REPLY,CONFIRMED,EXPECTED,NONE --ctexpire 10:20 --ctdir REPLY -j ACCEPT",
		"-A INPUT -m conntrack --ctdir ORIGINAL --ctexpire 5 --ctproto 17 -j ACCEPT",
		"-A INPUT -m state --state NEW,ESTABLISHED,RELATED,INVALID,UNTRACKED -j ACCEPT",
		"-A INPUT -m state ! --state NEW -j ACCEPT",
		"-A INPUT -m connmark --mark 0x1 -j ACCEPT",
		"-A INPUT -m connmark ! --mark 0x1/0xff -j ACCEPT",
	)
	want := `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -m conntrack --ctstate INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT -j ACCEPT
-A INPUT -m conntrack ! --ctstate NEW --ctproto 6 --ctorigsrc 10.0.0.0/8 ! --ctorigdst 1.2.3.4 --ctreplsrc 5.6.7.8 --ctrepldst 9.9.0.0/16 --ctorigsrcport 80 ! --ctorigdstport 1000:2000 --ctreplsrcport 5 --ctrepldstport 6 --ctstatus EXPECTED,SEEN_REPLY,ASSURED,CONFIRMED --ctexpire 10:20 --ctdir REPLY -j ACCEPT
-A INPUT -m conntrack --ctproto 17 --ctexpire 5 --ctdir ORIGINAL -j ACCEPT
-A INPUT -m state --state INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED -j ACCEPT
-A INPUT -m state ! --state NEW -j ACCEPT
-A INPUT -m connmark --mark 0x1 -j ACCEPT
-A INPUT -m connmark ! --mark 0x1/0xff -j ACCEPT
COMMIT
`
	assert.Equal(t, want, rs.String())
	var got []string
	for _, r := range rs.Table(Filter).Chain("INPUT").Rules {
		var b []byte
		for _, m := range r.Matches {
			b = m.appendList(b, true)
		}
		got = append(got, string(b))
	}
	assert.Equal(t, []string{
		" ctstate INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT",
		" ! ctstate NEW ctproto 6 ctorigsrc 10.0.0.0/8 ! ctorigdst 1.2.3.4 ctreplsrc 5.6.7.8 ctrepldst 9.9.0.0/16 ctorigsrcport 80 ! ctorigdstport 1000:2000 ctreplsrcport 5 ctrepldstport 6 ctstatus EXPECTED,SEEN_REPLY,ASSURED,CONFIRMED ctexpire 10:20 ctdir REPLY",
		" ctproto 17 ctexpire 5 ctdir ORIGINAL",
		" state INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED",
		" ! state NEW",
		" connmark match  0x1",
		" connmark match ! 0x1/0xff",
	}, got)
	for _, bad := range []string{"-A INPUT -m conntrack --ctstate FOO", "-A INPUT -m conntrack -j ACCEPT", "-A INPUT -m state -j ACCEPT", "-A INPUT -m conntrack --ctstatus DYING"} {
		assert.Error(t, rs.Exec(bad), bad)
	}
}

// An ICMP port unreachable from a DNATed backend goes back to the client
// with the service address outside and inside (RELATED, un-NATed).
func TestRelatedICMPErrorIsUnNATed(t *testing.T) {
	h := testHost(t, "*nat\n-A PREROUTING -d 10.96.0.53/32 -p udp --dport 53 -j DNAT --to-destination 10.244.1.5:5353\nCOMMIT\n", HostConfig{})
	req := Packet{Proto: inet.UDP, Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("10.96.0.53"), SrcPort: 40000, DstPort: 53, TTL: 64, Length: 40}
	res := h.Receive("eth0", req)
	require.Equal(t, Forwarded, res.Disposition)
	require.Equal(t, netip.MustParseAddr("10.244.1.5"), res.Packet.Dst)
	icmp := Packet{Proto: inet.ICMP, Src: netip.MustParseAddr("10.244.1.5"), Dst: netip.MustParseAddr("192.168.10.2"), ICMPType: 3, ICMPCode: 3, TTL: 64, Length: 68,
		Inner: InnerHeader{Proto: inet.UDP, Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("10.244.1.5"), SrcPort: 40000, DstPort: 5353}}
	res = h.Receive("eth1", icmp)
	require.Equal(t, Forwarded, res.Disposition)
	assert.Equal(t, netip.MustParseAddr("10.96.0.53"), res.Packet.Src)
	assert.Equal(t, netip.MustParseAddr("10.96.0.53"), res.Packet.Inner.Dst)
	assert.Equal(t, uint16(53), res.Packet.Inner.DstPort)
	assert.Equal(t, uint16(0), res.Packet.ICMPID)
}

// Recorded in namespaces: a packet masqueraded out of an interface with no
// address (a Calico cali* veth) takes another interface's address.
func TestMasqueradeOutOfAddresslessInterface(t *testing.T) {
	h := testHost(t, "*nat\n-A POSTROUTING -o cali+ -j MASQUERADE\nCOMMIT\n", HostConfig{})
	require.NoError(t, h.AddInterface("cali1234"))
	require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("10.244.9.7/32"), Iface: "cali1234"}))
	res := h.Receive("eth0", tcpPacket("192.168.10.2", "10.244.9.7", 80, inet.SYN))
	require.Equal(t, Forwarded, res.Disposition)
	assert.Equal(t, netip.MustParseAddr("192.168.10.1"), res.Packet.Src)
}

// Recorded in namespaces (TestKernelTCPInvalidReplyToSNATAddress): after a
// SYN retransmitted 2^30 higher, the SYN/ACK answering the first sequence
// number is ignored and the entry stays SYN_SENT; the server's FIN in that
// state is INVALID, so it is not un-NATed and goes back out of eth1 to the
// SNAT address (where the kernel, with no neighbour for it, loses it).
func TestInvalidReplyKeepsSNATAddress(t *testing.T) {
	h := testHost(t, "*nat\n-A POSTROUTING -o eth1 -j SNAT --to-source 10.244.1.100\nCOMMIT\n", HostConfig{})
	seg := func(src, dst string, sport, dport uint16, flags inet.TCPFlags, seq, ack uint32) Packet {
		p := tcpPacket(src, dst, dport, flags)
		p.SrcPort, p.Seq, p.Ack, p.Window = sport, seq, ack, 64240
		return p
	}
	for _, seq := range []uint32{1000, 1000 + 1<<30} {
		res := h.Receive("eth0", seg("192.168.10.2", "10.244.1.5", 40000, 80, inet.SYN, seq, 0))
		require.Equal(t, Forwarded, res.Disposition)
		require.Equal(t, netip.MustParseAddr("10.244.1.100"), res.Packet.Src)
	}
	res := h.Receive("eth1", seg("10.244.1.5", "10.244.1.100", 80, 40000, inet.SYN|inet.ACK, 5000, 1001))
	require.Equal(t, Forwarded, res.Disposition)
	assert.Equal(t, netip.MustParseAddr("192.168.10.2"), res.Packet.Dst, "ignored, still un-NATed")
	res = h.Receive("eth1", seg("10.244.1.5", "10.244.1.100", 80, 40000, inet.FIN|inet.ACK, 5001, 1001))
	require.Equal(t, Forwarded, res.Disposition)
	assert.Nil(t, res.Conn, "INVALID")
	assert.Equal(t, "eth1", res.Packet.Out)
	assert.Equal(t, netip.MustParseAddr("10.244.1.100"), res.Packet.Dst)
	require.Equal(t, 1, h.Conntrack().Len())
	assert.Equal(t, conntrack.TCPSynSent, h.Conntrack().Entries()[0].TCPState)
}

// Recorded in namespaces (TestKernelRejectInvalidResetTracked): REJECT's
// reset for an INVALID packet is not attached to any connection; it is
// looked up in OUTPUT, found as the connection's reply and closes it.
func TestRejectOfInvalidPacketResetTracked(t *testing.T) {
	h := testHost(t, "*filter\n-A FORWARD -p tcp -m conntrack --ctstate INVALID -j REJECT --reject-with tcp-reset\nCOMMIT\n", HostConfig{})
	seg := func(src, dst string, sport, dport uint16, flags inet.TCPFlags, seq, ack uint32) Packet {
		p := tcpPacket(src, dst, dport, flags)
		p.SrcPort, p.Seq, p.Ack, p.Window, p.Length = sport, seq, ack, 64240, 40
		return p
	}
	require.Equal(t, Forwarded, h.Receive("eth0", seg("192.168.10.2", "10.244.1.5", 40000, 80, inet.SYN, 1000, 0)).Disposition)
	require.Equal(t, Forwarded, h.Receive("eth1", seg("10.244.1.5", "192.168.10.2", 80, 40000, inet.SYN|inet.ACK, 5000, 1001)).Disposition)
	res := h.Receive("eth0", seg("192.168.10.2", "10.244.1.5", 40000, 80, inet.ACK, 1001+1<<30, 5001))
	require.Equal(t, Rejected, res.Disposition)
	require.Len(t, res.Emitted, 1)
	assert.Equal(t, uint32(5001), res.Emitted[0].Seq)
	require.Equal(t, 1, h.Conntrack().Len())
	assert.Equal(t, conntrack.TCPClose, h.Conntrack().Entries()[0].TCPState)
}

// At nf_conntrack_max entries a new connection is dropped by conntrack
// (ReasonConntrackFull, `conntrack -S` drop) unless early drop frees an
// unassured entry in the buckets near its hash; established packets pass
// (docs/kernel-notes.md, "Conntrack table full").
func TestConntrackTableFull(t *testing.T) {
	rules := `*filter
:FORWARD ACCEPT [0:0]
-A FORWARD -m conntrack --ctstate NEW,ESTABLISHED -j ACCEPT
COMMIT
`
	// One bucket: the first connection, never answered, is dropped early.
	h := testHost(t, rules, HostConfig{ConntrackMax: 1, ConntrackBuckets: 1})
	first := h.Receive("eth0", tcpPacket("192.168.10.2", "10.244.1.5", 80, inet.SYN))
	require.Equal(t, Forwarded, first.Disposition)
	second := tcpPacket("192.168.10.2", "10.244.1.5", 80, inet.SYN)
	second.SrcPort = 40001
	require.Equal(t, Forwarded, h.Receive("eth0", second).Disposition)
	assert.Equal(t, conntrack.Stats{EarlyDrop: 1}, h.Conntrack().Stats())
	assert.Equal(t, 1, h.Conntrack().Len())

	// The kernel's 262144 buckets: the lone entry is out of reach.
	h = testHost(t, rules, HostConfig{ConntrackMax: 1})
	require.Equal(t, Forwarded, h.Receive("eth0", tcpPacket("192.168.10.2", "10.244.1.5", 80, inet.SYN)).Disposition)
	res := h.Receive("eth0", second)
	assert.Equal(t, Dropped, res.Disposition)
	assert.Equal(t, VerdictDrop, res.Verdict)
	assert.Equal(t, ReasonConntrackFull, res.Reason)
	assert.Equal(t, "conntrack table full", res.Reason.String())
	assert.Equal(t, conntrack.Stats{Drop: 1}, h.Conntrack().Stats())
	assert.Equal(t, 1, h.Conntrack().Len())
}
