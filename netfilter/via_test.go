package netfilter

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
)

// Result.Via is the gateway of the route the packet left by, as the
// routing decision chose it (ip rules included); invalid on link and for
// packets that did not leave. LookupLocal routes as the host's own
// packets are routed: with their source.
func TestResultVia(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.1.10/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.0.2.10/24")))
	require.NoError(t, h.AddInterface("veth", netip.MustParsePrefix("10.9.0.1/24")))
	require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("10.0.1.1")}))
	require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth1", Gateway: netip.MustParseAddr("10.0.2.1"), Table: 2}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 100, Src: netip.MustParsePrefix("10.9.0.5/32"), Table: 2}))
	tcp := func(src, dst string) Packet {
		return TCP(netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst), inet.SYN)
	}

	r := h.Send(tcp("10.0.1.10:1000", "8.8.8.8:53"))
	assert.Equal(t, Sent, r.Disposition)
	assert.Equal(t, "10.0.1.1", r.Via.String())
	r = h.Send(tcp("10.0.1.10:1000", "10.0.1.7:53"))
	assert.Equal(t, Sent, r.Disposition)
	assert.False(t, r.Via.IsValid(), "on link")
	r = h.Receive("veth", tcp("10.9.0.5:1000", "8.8.8.8:53"))
	assert.Equal(t, Forwarded, r.Disposition)
	assert.Equal(t, "eth1", r.Packet.Out)
	assert.Equal(t, "10.0.2.1", r.Via.String(), "the rule's table")
	r = h.Receive("veth", tcp("10.9.0.6:1000", "8.8.8.8:53"))
	assert.Equal(t, "10.0.1.1", r.Via.String(), "main")
	r = h.Receive("eth0", tcp("8.8.8.8:53", "10.0.1.10:1000"))
	assert.Equal(t, Delivered, r.Disposition)
	assert.False(t, r.Via.IsValid(), "delivered")
	require.NoError(t, h.Exec("-A FORWARD -j DROP"))
	r = h.Receive("veth", tcp("10.9.0.5:1000", "8.8.8.8:53"))
	assert.Equal(t, Dropped, r.Disposition)
	assert.False(t, r.Via.IsValid(), "dropped")

	rt, ok := h.LookupLocal(tcp("10.9.0.5:1000", "8.8.8.8:53"))
	require.True(t, ok)
	assert.Equal(t, "eth1", rt.Iface)
	assert.Equal(t, "10.0.2.1", rt.Gateway.String())
	rt, ok = h.LookupLocal(Packet{Family: IPv4, Proto: inet.UDP, Dst: netip.MustParseAddr("8.8.8.8")})
	require.True(t, ok)
	assert.Equal(t, "eth0", rt.Iface, "no source: main")
	rt, ok = h.LookupLocal(Packet{Family: IPv4, Proto: inet.UDP, Dst: netip.MustParseAddr("10.0.1.10")})
	require.True(t, ok)
	assert.Equal(t, "lo", rt.Iface)
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 50, Dst: netip.MustParsePrefix("192.0.2.0/24"), Action: RuleBlackhole}))
	_, ok = h.LookupLocal(Packet{Family: IPv4, Proto: inet.UDP, Dst: netip.MustParseAddr("192.0.2.1")})
	assert.False(t, ok, "blackhole rule")
}
