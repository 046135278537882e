package netfilter_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/netfilter"
)

// bridgeRules count what each hook sees of bridged and routed frames; the
// expected counts are the kernel's (docs/kernel-notes.md, "Bridges and
// br_netfilter").
const bridgeRules = `*mangle
-A PREROUTING -i br0 -m physdev --physdev-in va -m comment --comment "pre br0 physin va"
-A PREROUTING -i eth1 -m physdev --physdev-is-in -m comment --comment "pre eth1 is-in"
-A PREROUTING -m ttl --ttl-eq 64 -m comment --comment "pre ttl64"
-A INPUT -i br0 -m physdev --physdev-in va -m comment --comment "input br0 physin va"
-A FORWARD -i br0 -o br0 -m physdev --physdev-in va --physdev-out vc --physdev-is-bridged -m comment --comment "fwd bridged va>vc"
-A FORWARD -i br0 -o eth1 -m physdev --physdev-in va -m comment --comment "fwd routed br0>eth1 physin va"
-A FORWARD -i br0 -o eth1 -m physdev ! --physdev-is-bridged -m comment --comment "fwd routed not-is-bridged"
-A FORWARD -i eth1 -o br0 -m physdev --physdev-is-out -m comment --comment "fwd eth1>br0 is-out"
-A FORWARD -m ttl --ttl-eq 64 -m comment --comment "fwd ttl64"
-A FORWARD -m ttl --ttl-eq 63 -m comment --comment "fwd ttl63"
-A POSTROUTING -o br0 -m physdev --physdev-out vc -m comment --comment "post br0 physout vc"
-A POSTROUTING -o br0 -m physdev --physdev-out va -m comment --comment "post br0 physout va"
-A POSTROUTING -o eth1 -m physdev --physdev-in va -m comment --comment "post eth1 physin va"
COMMIT
*nat
-A PREROUTING -p udp --dport 7 -j DNAT --to-destination 10.2.0.2:9
-A PREROUTING -p udp --dport 8 -j DNAT --to-destination 10.1.0.1:9
COMMIT
`

func bridgeHost(t *testing.T) *netfilter.Host {
	t.Helper()
	h := netfilter.NewHost(netfilter.HostConfig{})
	require.NoError(t, h.AddInterface("br0", netip.MustParsePrefix("10.1.0.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.2.0.1/24")))
	require.NoError(t, h.Restore(netfilter.IPv4, []byte(bridgeRules), netfilter.RestoreOptions{}))
	return h
}

var bridgePorts = func(a netip.Addr) (string, bool) {
	switch a.String() {
	case "10.1.0.2":
		return "va", true
	case "10.1.0.3":
		return "vc", true
	}
	return "", false
}

// matched returns the comments of the mangle rules with packets.
func matched(t *testing.T, h *netfilter.Host) []string {
	t.Helper()
	var out []string
	for _, c := range h.Ruleset(netfilter.IPv4).Table(netfilter.Mangle).Chains() {
		for _, r := range c.Rules {
			if r.Counters.Packets > 0 {
				i := strings.Index(r.String(), "--comment ")
				out = append(out, strings.Trim(r.String()[i+len("--comment "):], `"`))
			}
		}
	}
	return out
}

func udp(src, dst string) netfilter.Packet {
	return netfilter.UDP(netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst))
}

func TestReceiveBridged(t *testing.T) {
	in := netfilter.BridgeIn{Bridge: "br0", Port: "va", PortOf: bridgePorts}
	t.Run("bridged between two ports", func(t *testing.T) {
		h := bridgeHost(t)
		in := in
		in.Next = netip.MustParseAddr("10.1.0.3")
		r := h.ReceiveBridged(in, udp("10.1.0.2:5000", "10.1.0.3:9"))
		require.NoError(t, r.Err)
		assert.Equal(t, netfilter.Forwarded, r.Disposition)
		assert.Equal(t, [5]any{"br0", "br0", "va", "vc", uint8(64)}, [5]any{r.Packet.In, r.Packet.Out, r.Packet.PhysIn, r.Packet.PhysOut, r.Packet.TTL})
		assert.Equal(t, []string{"pre br0 physin va", "pre ttl64", "fwd bridged va>vc", "fwd ttl64", "post br0 physout vc"}, matched(t, h))
	})
	t.Run("up to the host and routed", func(t *testing.T) {
		h := bridgeHost(t)
		in := in
		in.Next = netip.MustParseAddr("10.1.0.1")
		r := h.ReceiveBridged(in, udp("10.1.0.2:5000", "10.2.0.2:9"))
		assert.Equal(t, netfilter.Forwarded, r.Disposition)
		assert.Equal(t, [4]any{"eth1", "va", "", uint8(63)}, [4]any{r.Packet.Out, r.Packet.PhysIn, r.Packet.PhysOut, r.Packet.TTL})
		assert.Equal(t, []string{"pre br0 physin va", "pre ttl64", "fwd routed br0>eth1 physin va", "fwd routed not-is-bridged", "fwd ttl63", "post eth1 physin va"}, matched(t, h))
		// The answer routed back out the bridge shows no bridge port.
		h2 := bridgeHost(t)
		r = h2.Receive("eth1", udp("10.2.0.2:9", "10.1.0.2:5000"))
		assert.Equal(t, [3]any{netfilter.Forwarded, "br0", ""}, [3]any{r.Disposition, r.Packet.Out, r.Packet.PhysOut})
		assert.Equal(t, []string{"pre ttl64", "fwd ttl63"}, matched(t, h2))
	})
	t.Run("bridged frame DNATed off the bridge", func(t *testing.T) {
		h := bridgeHost(t)
		in := in
		in.Next = netip.MustParseAddr("10.1.0.3")
		r := h.ReceiveBridged(in, udp("10.1.0.2:5000", "10.1.0.3:7"))
		assert.Equal(t, netfilter.Forwarded, r.Disposition)
		assert.Equal(t, [4]any{"10.2.0.2:9", "eth1", "", uint8(63)}, [4]any{netip.AddrPortFrom(r.Packet.Dst, r.Packet.DstPort).String(), r.Packet.Out, r.Packet.PhysOut, r.Packet.TTL})
		assert.Equal(t, []string{"pre br0 physin va", "pre ttl64", "fwd routed br0>eth1 physin va", "fwd routed not-is-bridged", "fwd ttl63", "post eth1 physin va"}, matched(t, h))
	})
	t.Run("bridged frame DNATed to the host", func(t *testing.T) {
		h := bridgeHost(t)
		in := in
		in.Next = netip.MustParseAddr("10.1.0.3")
		r := h.ReceiveBridged(in, udp("10.1.0.2:5000", "10.1.0.3:8"))
		assert.Equal(t, netfilter.Delivered, r.Disposition)
		assert.Equal(t, []string{"pre br0 physin va", "pre ttl64", "input br0 physin va"}, matched(t, h))
	})
	t.Run("bridged frame DNATed to another port", func(t *testing.T) {
		h := bridgeHost(t)
		require.NoError(t, h.Restore(netfilter.IPv4, []byte(bridgeKernelRules), netfilter.RestoreOptions{}))
		in := in
		in.Next = netip.MustParseAddr("10.1.0.3")
		in.PortOf = func(a netip.Addr) (string, bool) { return "vd", a.String() == "10.1.0.4" }
		r := h.ReceiveBridged(in, udp("10.1.0.2:5000", "10.1.0.3:6"))
		assert.Equal(t, netfilter.Forwarded, r.Disposition)
		assert.Equal(t, [4]any{"10.1.0.4:9", "vd", "br0", uint8(64)}, [4]any{netip.AddrPortFrom(r.Packet.Dst, r.Packet.DstPort).String(), r.Packet.PhysOut, r.Packet.Out, r.Packet.TTL})
		assert.Equal(t, []string{"pre br0 physin va", "pre ttl64", "fwd ttl64", "fwd bridged va>vd", "post br0 physout vd"}, matched(t, h))
	})
	t.Run("no port for the neighbour", func(t *testing.T) {
		h := bridgeHost(t)
		in := in
		in.Next = netip.MustParseAddr("10.1.0.77")
		r := h.ReceiveBridged(in, udp("10.1.0.2:5000", "10.1.0.77:9"))
		assert.Equal(t, [2]any{netfilter.Dropped, netfilter.ReasonNoBridgePort}, [2]any{r.Disposition, r.Reason})
		assert.Equal(t, "no bridge port", r.Reason.String())
	})
	t.Run("refused", func(t *testing.T) {
		h := bridgeHost(t)
		r := h.ReceiveBridged(netfilter.BridgeIn{Bridge: "br9", Port: "va"}, udp("10.1.0.2:5000", "10.1.0.3:9"))
		assert.ErrorIs(t, r.Err, netfilter.ErrUnknownInterface)
		r = h.ReceiveBridged(netfilter.BridgeIn{Bridge: "br0"}, udp("10.1.0.2:5000", "10.1.0.3:9"))
		assert.ErrorIs(t, r.Err, netfilter.ErrBadPacket)
		_, err := h.ExplainBridged(netfilter.BridgeIn{Bridge: "br0"}, udp("10.1.0.2:5000", "10.1.0.3:9"))
		assert.ErrorIs(t, err, netfilter.ErrBadPacket)
	})
	t.Run("explain", func(t *testing.T) {
		h := bridgeHost(t)
		in := in
		in.Next = netip.MustParseAddr("10.1.0.3")
		outs, err := h.ExplainBridged(in, udp("10.1.0.2:5000", "10.1.0.3:9"))
		require.NoError(t, err)
		require.Len(t, outs, 1)
		assert.Equal(t, "1/1", outs[0].Probability.String())
		assert.Equal(t, "vc", outs[0].Result.Packet.PhysOut)
		assert.Empty(t, matched(t, h), "Explain changes no counter")
	})
}

func TestLookup(t *testing.T) {
	h := bridgeHost(t)
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth1", Gateway: netip.MustParseAddr("10.2.0.254")}))
	r, ok := h.Lookup(netip.MustParseAddr("8.8.8.8"))
	assert.True(t, ok)
	assert.Equal(t, "10.2.0.254", r.Gateway.String())
	r, ok = h.Lookup(netip.MustParseAddr("10.1.0.1"))
	assert.True(t, ok)
	assert.Equal(t, [2]any{netfilter.RouteLocal, "lo"}, [2]any{r.Type, r.Iface})
	_, ok = bridgeHost(t).Lookup(netip.MustParseAddr("8.8.8.8"))
	assert.False(t, ok)
}
