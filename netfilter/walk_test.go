package netfilter

import (
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// rejectWalkRules reject SSH on INPUT with a reset, which walks OUTPUT as
// RELATED to the rejected connection.
const rejectWalkRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp -m tcp --dport 22 -j REJECT --reject-with tcp-reset
-A INPUT -p udp -m udp --dport 53 -j REJECT
-A OUTPUT -m conntrack --ctstate RELATED -j ACCEPT
COMMIT
`

// TestRejectReplyWalksApart: the reply walks in a walk of its own, so the
// rejected packet's result keeps its own deciding rule and trace (the
// reply's steps are not traced, as the kernel does not trace generated
// packets), while the reply is counted in OUTPUT as RELATED and emitted.
func TestRejectReplyWalksApart(t *testing.T) {
	h := testHost(t, rejectWalkRules, HostConfig{})
	h.Tracing = true
	res := h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN))
	assert.Equal(t, VerdictReject, res.Verdict)
	assert.Equal(t, Rejected, res.Disposition)
	assert.Equal(t, "INPUT", res.Where.Chain)
	assert.Equal(t, 1, res.Where.Rule)
	assert.Equal(t, Action{Kind: ActionReject}, res.Where.Action)
	require.NotEmpty(t, res.Trace)
	assert.Equal(t, Action{Kind: ActionReject}, res.Trace[len(res.Trace)-1].Action)
	for _, s := range res.Trace {
		assert.NotEqual(t, Output, s.Hook, "a step of the reply: %+v", s)
	}
	assert.Nil(t, res.Conn, "the rejected connection is never confirmed")
	require.Len(t, res.Emitted, 1)
	rst := res.Emitted[0]
	assert.Equal(t, netip.MustParseAddr("192.168.10.1"), rst.Src)
	assert.Equal(t, netip.MustParseAddr("192.168.10.2"), rst.Dst)
	assert.Equal(t, uint16(22), rst.SrcPort)
	assert.Equal(t, uint16(40000), rst.DstPort)
	assert.Equal(t, inet.RST|inet.ACK, rst.TCPFlags)
	assert.Equal(t, "eth0", rst.Out)
	out := h.Ruleset(IPv4).Table(Filter).Chain("OUTPUT").Rules[0].Counters
	assert.Equal(t, uint64(1), out.Packets, "the reply crosses OUTPUT as RELATED")
	assert.Zero(t, h.depth, "every walk ended")

	// The next packet walks from a clean state.
	res = h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN))
	assert.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, Action{Kind: ActionPolicyAccept}, res.Where.Action)
	assert.Empty(t, res.Emitted)
}

// TestRejectReplyOfReplyNests: a reset rejected in OUTPUT makes a third
// walk (the ICMP error about the reset) inside the second; the first
// packet's result is still its own, with no emitted packet since its
// reply was rejected.
func TestRejectReplyOfReplyNests(t *testing.T) {
	rules := `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp -m tcp --dport 22 -j REJECT --reject-with tcp-reset
-A OUTPUT -p tcp -j REJECT
COMMIT
`
	h := testHost(t, rules, HostConfig{})
	res := h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN))
	assert.Equal(t, Rejected, res.Disposition)
	assert.Equal(t, "INPUT", res.Where.Chain)
	assert.Equal(t, 1, res.Where.Rule)
	assert.Nil(t, res.Emitted, "the reset was rejected in OUTPUT")
	out := h.Ruleset(IPv4).Table(Filter).Chain("OUTPUT").Rules[0].Counters
	assert.Equal(t, uint64(1), out.Packets)
	assert.Len(t, h.walks, 3, "the packet, its reset, the error about the reset")
	assert.Zero(t, h.depth)
}

// TestRejectDoesNotAllocate: a rejected packet and its reply walk in the
// host's reused walks, so with ReceiveTo reusing its Result (and the
// storage of Emitted) a rejection allocates nothing while no rule needs
// conntrack (a new connection's entry is conntrack's allocation).
func TestRejectDoesNotAllocate(t *testing.T) {
	rules := `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp -m tcp --dport 22 -j REJECT --reject-with tcp-reset
-A INPUT -p udp -m udp --dport 53 -j REJECT
-A OUTPUT -p icmp -j ACCEPT
COMMIT
`
	h := testHost(t, rules, HostConfig{})
	udp := Packet{Proto: inet.UDP, Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("192.168.10.1"),
		SrcPort: 5000, DstPort: 53, TTL: 64, Length: 40}
	for _, p := range []Packet{tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN), udp} {
		var res Result
		h.ReceiveTo(&res, "eth0", &p)
		require.Equal(t, Rejected, res.Disposition)
		require.Len(t, res.Emitted, 1)
		allocs := testing.AllocsPerRun(100, func() { h.ReceiveTo(&res, "eth0", &p) })
		assert.Zero(t, allocs, "proto %d", p.Proto)
		assert.Len(t, res.Emitted, 1)
	}
}
