package netfilter

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestLocalRejectReplyComesBackThroughLo pins what TestKernelLocalReject
// recorded: the REJECT reply to a packet the host sent itself walks OUTPUT
// and POSTROUTING, then raw and mangle PREROUTING and mangle and filter
// INPUT on lo as RELATED (nat INPUT never sees it), and the offending
// connection, never confirmed, leaves no entry. The reply about a DNATed
// packet is un-DNATed on the way, an ICMP error's outer source included.
func TestLocalRejectReplyComesBackThroughLo(t *testing.T) {
	rules := `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -i lo -m conntrack --ctstate RELATED
COMMIT
*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -i lo -m conntrack --ctstate RELATED
-A INPUT -i lo -m conntrack --ctstate RELATED
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A INPUT -i lo
-A OUTPUT -d 10.244.1.99/32 -p tcp -m tcp --dport 81 -j DNAT --to-destination 10.244.1.5:80
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -s 10.244.1.5/32 -i lo -m conntrack --ctstate RELATED
-A INPUT -s 10.244.1.99/32 -i lo -m conntrack --ctstate RELATED
-A INPUT -s 192.168.10.1/32 -i lo -m conntrack --ctstate RELATED
-A OUTPUT -p tcp -m tcp --dport 80 -j REJECT --reject-with REJECT_WITH
COMMIT
`
	a := netip.MustParseAddr
	for _, tc := range []struct {
		with   string
		dst    string
		dport  uint16
		source int // which filter INPUT rule counts the reply's source
		from   string
	}{
		{"tcp-reset", "10.244.1.5", 80, 1, "10.244.1.5"},
		{"tcp-reset", "10.244.1.99", 81, 2, "10.244.1.99"},
		{"icmp-port-unreachable", "10.244.1.5", 80, 3, "192.168.10.1"},
		{"icmp-port-unreachable", "10.244.1.99", 81, 2, "10.244.1.99"}, // the outer source is un-DNATed too
	} {
		t.Run(tc.with+"/"+tc.dst, func(t *testing.T) {
			h := NewHost(HostConfig{})
			require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
			require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
			require.NoError(t, h.Restore(IPv4, []byte(strings.ReplaceAll(rules, "REJECT_WITH", tc.with)), RestoreOptions{}))
			res := h.Send(Packet{Proto: inet.TCP, Src: a("192.168.10.1"), Dst: a(tc.dst), SrcPort: 40000, DstPort: tc.dport,
				TCPFlags: inet.SYN, Seq: 1, TTL: 64, Length: 40})
			assert.Equal(t, Rejected, res.Disposition)
			assert.Equal(t, VerdictReject, res.Verdict)
			require.Len(t, res.Emitted, 1)
			e := res.Emitted[0]
			assert.Equal(t, "lo", e.In)
			assert.Equal(t, "", e.Out)
			assert.Equal(t, a(tc.from), e.Src)
			assert.Equal(t, a("192.168.10.1"), e.Dst)
			assert.Equal(t, []uint64{1}, ruleHits(t, h, IPv4, Raw, "PREROUTING"))
			assert.Equal(t, []uint64{1}, ruleHits(t, h, IPv4, Mangle, "PREROUTING"))
			assert.Equal(t, []uint64{1}, ruleHits(t, h, IPv4, Mangle, "INPUT"))
			assert.Equal(t, []uint64{0}, ruleHits(t, h, IPv4, NAT, "INPUT"))
			want := []uint64{0, 0, 0}
			want[tc.source-1] = 1
			assert.Equal(t, want, ruleHits(t, h, IPv4, Filter, "INPUT"))
			assert.Zero(t, h.Conntrack().Len())
		})
	}
}

// invalidLoopRules drops the node's SYN to itself in raw PREROUTING (after
// POSTROUTING confirmed its connection, so the stack does not answer),
// REJECTs an INVALID TCP packet in filter INPUT with an ICMP error, and
// counts the error's conntrack state where it goes.
func invalidLoopRules(f Family) string {
	icmp, with := "icmp", "icmp-port-unreachable"
	if f == IPv6 {
		icmp, with = "ipv6-icmp", "icmp6-port-unreachable"
	}
	return fmt.Sprintf(`*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -p tcp -m tcp --tcp-flags SYN,FIN SYN -j DROP
-A PREROUTING -p %[1]s -m conntrack --ctstate RELATED
-A PREROUTING -p %[1]s -m conntrack --ctstate INVALID
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p %[1]s -m conntrack --ctstate RELATED
-A INPUT -p %[1]s -m conntrack --ctstate INVALID
-A INPUT -p tcp -m conntrack --ctstate INVALID -j REJECT --reject-with %[2]s
-A OUTPUT -p %[1]s -m conntrack --ctstate RELATED
-A OUTPUT -p %[1]s -m conntrack --ctstate INVALID
-A OUTPUT -p tcp -m conntrack --ctstate INVALID
COMMIT
`, icmp, with)
}

// TestRejectOfInvalidLoopedPacketIsTracked pins what
// TestKernelLocalRejectInvalidLooped recorded: the ICMP error answering an
// INVALID packet the host sent itself (a SYN|FIN on the tuple of its own
// SYN_SENT connection) is attached to no connection, so conntrack looks it
// up in OUTPUT, although the packet it answers came in through lo, and
// finds it RELATED.
func TestRejectOfInvalidLoopedPacketIsTracked(t *testing.T) {
	for _, f := range []Family{IPv4, IPv6} {
		lo := netip.MustParseAddr("127.0.0.1")
		if f == IPv6 {
			lo = netip.IPv6Loopback()
		}
		h := NewHost(HostConfig{})
		require.NoError(t, h.Restore(f, []byte(invalidLoopRules(f)), RestoreOptions{}))
		syn := Packet{Proto: inet.TCP, Src: lo, Dst: lo, SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN, Seq: 1, TTL: 64, Length: 60}
		assert.Equal(t, Dropped, h.Send(syn).Disposition)
		synFin := syn
		synFin.TCPFlags |= inet.FIN
		res := h.Send(synFin)
		assert.Equal(t, Rejected, res.Disposition)
		require.Len(t, res.Emitted, 1)
		assert.Equal(t, "lo", res.Emitted[0].In)
		// DROP, RELATED, INVALID; RELATED, INVALID, REJECT; RELATED,
		// INVALID, tcp INVALID.
		assert.Equal(t, []uint64{1, 1, 0}, ruleHits(t, h, f, Raw, "PREROUTING"), "%s", f)
		assert.Equal(t, []uint64{1, 0, 1}, ruleHits(t, h, f, Filter, "INPUT"), "%s", f)
		assert.Equal(t, []uint64{1, 0, 1}, ruleHits(t, h, f, Filter, "OUTPUT"), "%s", f)
		assert.Equal(t, 1, h.Conntrack().Len(), "the SYN_SENT entry stays")
	}
}
