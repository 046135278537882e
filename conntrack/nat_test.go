package conntrack

import (
	"math/rand/v2"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func masqNode(tb *Table, flags NATFlags) *node {
	return &node{tb: tb, masq: ip("10.244.1.1"), random: flags, dnat: func(tp Tuple) (NATRange, bool) {
		if tp.Dst == ip("10.96.0.10") && tp.DstPort == 80 {
			return NATRange{MinAddr: ip("10.244.1.5"), MinPort: 8080}, true
		}
		return NATRange{}, false
	}}
}

func TestNATDNATAndMasquerade(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	n := masqNode(tb, 0)
	out, info, ok := n.forward(t, tcpFacts("192.168.10.2:41001", "10.96.0.10:80", syn))
	require.True(t, ok)
	e := info.Entry
	assert.Equal(t, TupleFrom(inet.TCP, ap("10.244.1.1:41001"), ap("10.244.1.5:8080")), out.Tuple)
	assert.Equal(t, TupleFrom(inet.TCP, ap("10.244.1.5:8080"), ap("10.244.1.1:41001")), e.Reply())
	assert.Equal(t, StatusSrcNAT|StatusDstNAT|StatusSrcNATDone|StatusDstNATDone, e.Status&(StatusNATMask|StatusSrcNATDone|StatusDstNATDone))

	// The reply is un-NATed: de-SNAT at PREROUTING, de-DNAT at POSTROUTING.
	back, info, ok := n.forward(t, tcpFacts("10.244.1.5:8080", "10.244.1.1:41001", synack))
	require.True(t, ok)
	assert.Equal(t, Reply, info.Dir)
	assert.Equal(t, TupleFrom(inet.TCP, ap("10.96.0.10:80"), ap("192.168.10.2:41001")), back.Tuple)

	// Later original packets are translated from the entry, no rule needed.
	n.dnat = func(Tuple) (NATRange, bool) {
		t.Fatal("nat consulted for an established flow")
		return NATRange{}, false
	}
	out, _, ok = n.forward(t, tcpFacts("192.168.10.2:41001", "10.96.0.10:80", ack))
	require.True(t, ok)
	assert.Equal(t, TupleFrom(inet.TCP, ap("10.244.1.1:41001"), ap("10.244.1.5:8080")), out.Tuple)
}

func TestNATNullBindingKeepsTuple(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	n := &node{tb: tb, dnat: func(Tuple) (NATRange, bool) { return NATRange{}, false }}
	f := udpFacts("10.0.0.2:5000", "10.0.0.1:53")
	out, info, ok := n.forward(t, f)
	require.True(t, ok)
	assert.Equal(t, f.Tuple, out.Tuple)
	assert.Equal(t, f.Reverse(), info.Entry.Reply())
	assert.Zero(t, info.Entry.Status&StatusNATMask)
	assert.True(t, info.Entry.NATDone(SNAT) && info.Entry.NATDone(DNAT))
}

func TestNATSourcePortClash(t *testing.T) {
	// Two clients with the same source port masqueraded to one address:
	// the first keeps its port, the second gets a free one chosen from the
	// seeded source, the same for the same seed.
	pick := func(seed uint64) uint16 {
		tb, _ := newTestTable(t, Config{Seed: seed})
		n := masqNode(tb, 0)
		out1, _, ok := n.forward(t, tcpFacts("192.168.10.2:41001", "10.96.0.10:80", syn))
		require.True(t, ok)
		assert.Equal(t, uint16(41001), out1.SrcPort)
		out2, info, ok := n.forward(t, tcpFacts("192.168.10.3:41001", "10.96.0.10:80", syn))
		require.True(t, ok)
		assert.NotEqual(t, uint16(41001), out2.SrcPort)
		assert.GreaterOrEqual(t, out2.SrcPort, uint16(1024), "port class of the original port")
		assert.Equal(t, out2.SrcPort, info.Entry.Reply().DstPort)
		assert.Equal(t, 2, tb.Len())
		return out2.SrcPort
	}
	assert.Equal(t, pick(1), pick(1))
	assert.NotEqual(t, pick(1), pick(2))

	// Privileged ports stay privileged.
	tb, _ := newTestTable(t, Config{})
	n := masqNode(tb, 0)
	_, _, ok := n.forward(t, tcpFacts("192.168.10.2:700", "10.96.0.10:80", syn))
	require.True(t, ok)
	out, _, ok := n.forward(t, tcpFacts("192.168.10.3:700", "10.96.0.10:80", syn))
	require.True(t, ok)
	assert.True(t, out.SrcPort >= 600 && out.SrcPort <= 1023, "got %d", out.SrcPort)
}

func TestNATRandomFullyAndRanges(t *testing.T) {
	tb, _ := newTestTable(t, Config{Rand: rand.New(rand.NewPCG(7, 7))})
	n := masqNode(tb, NATRandomFully)
	out, _, ok := n.forward(t, tcpFacts("192.168.10.2:41001", "10.96.0.10:80", syn))
	require.True(t, ok)
	assert.NotEqual(t, uint16(41001), out.SrcPort, "random-fully picks a port even without a clash")

	// SNAT to a port range: a port outside it is moved into it.
	e := track(t, tb, udpFacts("10.0.0.2:5000", "10.0.0.1:53")).Entry
	require.NoError(t, tb.SetupNAT(e, SNAT, NATRange{MinAddr: ip("1.2.3.4"), MinPort: 2000, MaxPort: 2001}))
	assert.Equal(t, ip("1.2.3.4"), e.Reply().Dst)
	assert.Contains(t, []uint16{2000, 2001}, e.Reply().DstPort)
	require.ErrorIs(t, tb.SetupNAT(e, SNAT, NATRange{}), ErrNATDone)
	require.NoError(t, tb.Confirm(e))
	require.ErrorIs(t, tb.SetupNAT(e, DNAT, NATRange{}), ErrConfirmed)

	// DNAT to an address range: deterministic per client, inside the range.
	e = track(t, tb, udpFacts("10.0.0.2:5001", "10.0.0.1:53")).Entry
	require.NoError(t, tb.SetupNAT(e, DNAT, NATRange{MinAddr: ip("10.1.0.1"), MaxAddr: ip("10.1.0.4"), Flags: NATPersistent}))
	got := e.Reply().Src
	assert.True(t, got.Compare(ip("10.1.0.1")) >= 0 && got.Compare(ip("10.1.0.4")) <= 0, "got %v", got)
	assert.Equal(t, uint16(53), e.Reply().SrcPort, "DNAT without ports keeps the port")
	e2 := track(t, tb, udpFacts("10.0.0.2:5002", "10.0.0.9:53")).Entry
	require.NoError(t, tb.SetupNAT(e2, DNAT, NATRange{MinAddr: ip("10.1.0.1"), MaxAddr: ip("10.1.0.4"), Flags: NATPersistent}))
	assert.Equal(t, got, e2.Reply().Src, "persistent: same client, same address")

	// Bad ranges.
	e3 := track(t, tb, udpFacts("10.0.0.2:5003", "10.0.0.1:53")).Entry
	require.ErrorIs(t, tb.SetupNAT(e3, DNAT, NATRange{MinAddr: ip("10.1.0.9"), MaxAddr: ip("10.1.0.1")}), ErrBadRange)
	require.ErrorIs(t, tb.SetupNAT(e3, DNAT, NATRange{MinAddr: ip("fd00::1")}), ErrBadRange)
}

func TestNATICMPEchoAndRelatedError(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	n := &node{tb: tb, masq: ip("10.244.1.1"), dnat: func(tp Tuple) (NATRange, bool) {
		if tp.Dst == ip("10.96.0.53") {
			return NATRange{MinAddr: ip("10.244.1.5"), MinPort: 5999}, true
		}
		if tp.Dst == ip("10.96.0.20") {
			return NATRange{MinAddr: ip("10.244.1.5")}, true
		}
		return NATRange{}, false
	}}
	out, info, ok := n.forward(t, Facts{Tuple: ICMPTuple(ip("192.168.10.2"), ip("10.96.0.20"), 8, 0, 4242)})
	require.True(t, ok)
	assert.Equal(t, ICMPTuple(ip("10.244.1.1"), ip("10.244.1.5"), 8, 0, 4242), out.Tuple)
	assert.Equal(t, ICMPTuple(ip("10.244.1.5"), ip("10.244.1.1"), 0, 0, 4242), info.Entry.Reply())
	back, _, ok := n.forward(t, Facts{Tuple: ICMPTuple(ip("10.244.1.5"), ip("10.244.1.1"), 0, 0, 4242)})
	require.True(t, ok)
	assert.Equal(t, ICMPTuple(ip("10.96.0.20"), ip("192.168.10.2"), 0, 0, 4242), back.Tuple)

	// A UDP datagram DNATed to a closed port; the server's port-unreachable
	// reaches the client with both headers un-NATed.
	q := udpFacts("192.168.10.2:40003", "10.96.0.53:53")
	sent, _, ok := n.forward(t, q)
	require.True(t, ok)
	icmpErr := Facts{Tuple: ICMPTuple(ip("10.244.1.5"), ip("10.244.1.1"), 3, 3, 0), Inner: sent.Tuple}
	got, info, ok := n.forward(t, icmpErr)
	require.True(t, ok)
	assert.Equal(t, StateRelated, info.State)
	assert.Equal(t, ip("10.96.0.53"), got.Src)
	assert.Equal(t, ip("192.168.10.2"), got.Dst)
	assert.Equal(t, q.Tuple, got.Inner)
}

// A pod reaching itself through its service: DNAT to itself plus SNAT to
// the node keeps the two directions distinct and the reply returns
// through the node.
func TestNATHairpin(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	pod := "10.244.1.5"
	n := &node{tb: tb, dnat: func(tp Tuple) (NATRange, bool) {
		return NATRange{MinAddr: ip(pod), MinPort: 8080}, true
	}}
	n.masq = ip("10.244.1.1") // kube-proxy masquerades hairpin traffic
	out, info, ok := n.forward(t, tcpFacts(pod+":40000", "10.96.0.10:80", syn))
	require.True(t, ok)
	assert.Equal(t, TupleFrom(inet.TCP, ap("10.244.1.1:40000"), ap(pod+":8080")), out.Tuple)
	e := info.Entry
	assert.NotEqual(t, e.Original(), e.Reply())
	// The pod answers the node, which turns it back into the service.
	back, info, ok := n.forward(t, tcpFacts(pod+":8080", "10.244.1.1:40000", synack))
	require.True(t, ok)
	assert.Same(t, e, info.Entry)
	assert.Equal(t, Reply, info.Dir)
	assert.Equal(t, TupleFrom(inet.TCP, ap("10.96.0.10:80"), ap(pod+":40000")), back.Tuple)
	_, info, ok = n.forward(t, tcpFacts(pod+":40000", "10.96.0.10:80", ack))
	require.True(t, ok)
	assert.Equal(t, StateEstablished, info.State)
	assert.NotZero(t, e.Status&StatusAssured)
}

// A source already mapped by an earlier connection keeps its mapping for
// new destinations (kernel find_appropriate_src), so a client behind SNAT
// to a range appears with one address and port.
func TestNATReusesSourceMapping(t *testing.T) {
	tb, _ := newTestTable(t, Config{Seed: 3})
	r := NATRange{MinAddr: ip("1.2.3.4"), MaxAddr: ip("1.2.3.10"), MinPort: 2000, MaxPort: 3000}
	e1 := track(t, tb, udpFacts("10.0.0.2:5000", "8.8.8.8:53")).Entry
	require.NoError(t, tb.SetupNAT(e1, SNAT, r))
	require.NoError(t, tb.Confirm(e1))
	e2 := track(t, tb, udpFacts("10.0.0.2:5000", "9.9.9.9:53")).Entry
	require.NoError(t, tb.SetupNAT(e2, SNAT, r))
	require.NoError(t, tb.Confirm(e2))
	assert.Equal(t, e1.Reply().DstAddrPort(), e2.Reply().DstAddrPort())
	assert.True(t, e1.Reply().DstPort >= 2000 && e1.Reply().DstPort <= 3000)
}

func TestNATIPv6Range(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	e := track(t, tb, Facts{Tuple: TupleFrom(inet.TCP, ap("[fd00::2]:5000"), ap("[fd00:96::10]:80")), TCPFlags: inet.SYN}).Entry
	require.NoError(t, tb.SetupNAT(e, DNAT, NATRange{MinAddr: ip("fd00:1::1"), MaxAddr: ip("fd00:1::4"), MinPort: 8080}))
	got := e.Reply().Src
	assert.True(t, got.Compare(ip("fd00:1::1")) >= 0 && got.Compare(ip("fd00:1::4")) <= 0, "got %v", got)
	assert.Equal(t, uint16(8080), e.Reply().SrcPort)
	e = track(t, tb, Facts{Tuple: TupleFrom(inet.TCP, ap("[fd00::2]:5001"), ap("[fd00:96::10]:80")), TCPFlags: inet.SYN}).Entry
	require.ErrorIs(t, tb.SetupNAT(e, DNAT, NATRange{MinAddr: ip("fd00:1::1"), MaxAddr: ip("fd00:2::1")}), ErrBadRange)
}
