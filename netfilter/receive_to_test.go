package netfilter

import (
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/require"
)

// ReceiveTo and SendTo, reusing one Result, give what Receive and Send
// give: verdicts, rewritten packets, emitted replies, connections and
// counters, packet after packet.
func TestReceiveToMatchesReceive(t *testing.T) {
	rules := `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -d 192.168.10.1 -p tcp --dport 80 -j DNAT --to-destination 10.244.1.9:8080
-A OUTPUT -d 192.168.10.1 -p tcp --dport 80 -j DNAT --to-destination 10.244.1.9:8080
-A POSTROUTING -o eth1 -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp --dport 22 -j REJECT --reject-with tcp-reset
-A FORWARD -p tcp --dport 81 -j REJECT
-A FORWARD -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A FORWARD -p udp -j DROP
COMMIT
`
	syn := tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN)
	synAck := tcpPacket("10.244.1.9", "10.244.1.1", 0, inet.SYN|inet.ACK)
	synAck.SrcPort, synAck.DstPort = 8080, 40000
	ack := syn
	ack.TCPFlags = inet.ACK
	udp := Packet{Proto: inet.UDP, Src: syn.Src, Dst: synAck.Src, SrcPort: 5, DstPort: 53, TTL: 64, Length: 40}
	type send struct {
		in  string // "" for a local process
		pkt Packet
	}
	sends := []send{
		{"eth0", syn},
		{"eth1", synAck},
		{"eth0", ack},
		{"eth0", tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN)},
		{"eth0", tcpPacket("192.168.10.2", "10.244.1.9", 81, inet.SYN)},
		{"eth0", udp},
		{"eth0", tcpPacket("192.168.10.2", "10.244.1.9", 81, inet.SYN)},
		{"", tcpPacket("10.244.1.1", "192.168.10.1", 80, inet.SYN)},
		{"eth0", ack},
	}
	dispositions := []Disposition{Forwarded, Forwarded, Forwarded, Rejected, Rejected, Dropped, Rejected, Sent, Forwarded}
	byValue, byPointer := testHost(t, rules, HostConfig{Seed: 3}), testHost(t, rules, HostConfig{Seed: 3})
	var res Result
	for i, s := range sends {
		var want Result
		if s.in == "" {
			want = byValue.Send(s.pkt)
			byPointer.SendTo(&res, &s.pkt)
		} else {
			want = byValue.Receive(s.in, s.pkt)
			byPointer.ReceiveTo(&res, s.in, &s.pkt)
		}
		require.Equal(t, want.Disposition, res.Disposition, "packet %d", i)
		require.Equal(t, dispositions[i], res.Disposition, "packet %d", i)
		if want.Conn != nil {
			require.NotNil(t, res.Conn, "packet %d", i)
			require.Equal(t, *want.Conn, *res.Conn, "packet %d", i)
		}
		got := res
		want.Conn, got.Conn = nil, nil
		require.Equal(t, want, got, "packet %d", i)
	}
	require.Equal(t, byValue.Ruleset(IPv4).AppendSave(nil, SaveOptions{Counters: true}), byPointer.Ruleset(IPv4).AppendSave(nil, SaveOptions{Counters: true}))
}
