package netfilter

import (
	"net/netip"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestConntrackTimeoutsExpireOnHostClock: HostConfig.ConntrackTimeouts
// plays the namespace's nf_conntrack_*_timeout sysctls; once the host's
// clock passes the timeout the next packet is a new connection, walks the
// nat table again and may get another NAT choice (internal/harness/difftest
// TestKernelNATExpiry checks the same against the kernel).
func TestConntrackTimeoutsExpireOnHostClock(t *testing.T) {
	clk := NewManualClock(time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC))
	h := testHost(t, "*nat\n-A POSTROUTING -o eth1 -j SNAT --to-source 10.244.1.1\nCOMMIT\n",
		HostConfig{Clock: clk, ConntrackTimeouts: conntrack.Timeouts{UDP: 3 * time.Second}})
	udp := func(src string) Packet {
		return Packet{Proto: inet.UDP, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr("10.244.1.5"), SrcPort: 40000, DstPort: 53, TTL: 64, Length: 38}
	}
	a := h.Receive("eth0", udp("192.168.10.2"))
	require.Equal(t, Forwarded, a.Disposition)
	assert.Equal(t, uint16(40000), a.Packet.SrcPort)
	b := h.Receive("eth0", udp("192.168.10.3"))
	require.Equal(t, Forwarded, b.Disposition)
	assert.NotEqual(t, uint16(40000), b.Packet.SrcPort, "clashes with a: moved")
	assert.GreaterOrEqual(t, b.Packet.SrcPort, uint16(1024))

	clk.Advance(3*time.Second - time.Nanosecond)
	assert.Len(t, h.Conntrack().Entries(), 2, "not yet")
	clk.Advance(time.Nanosecond)
	assert.Empty(t, h.Conntrack().Entries(), "the 3 s UDP timeout")
	b = h.Receive("eth0", udp("192.168.10.3"))
	require.Equal(t, Forwarded, b.Disposition)
	assert.Equal(t, uint16(40000), b.Packet.SrcPort, "a new connection, no clash now")
	rules := string(h.Ruleset(IPv4).AppendSave(nil, SaveOptions{Counters: true}))
	assert.Contains(t, rules, "[3:114] -A POSTROUTING -o eth1 -j SNAT --to-source 10.244.1.1", "the nat table ran for each new connection")
	// Unset timeouts keep the kernel defaults.
	assert.Equal(t, 120*time.Second, h.cfg.ConntrackTimeouts.WithDefaults().TCPTimeWait)
}

// TestMasqueradeLoopbackIPv6: a locally generated IPv6 packet to one of the
// host's addresses, masqueraded on lo, takes the destination as its source
// (the kernel's IPv6 source selection prefers the same address); IPv4
// takes the first universe-scope address of another device.
func TestMasqueradeLoopbackIPv6(t *testing.T) {
	h := testHost(t, "", HostConfig{})
	const rules = "*nat\n-A POSTROUTING -o lo -j MASQUERADE\nCOMMIT\n"
	require.NoError(t, h.Restore(IPv6, []byte(rules), RestoreOptions{}))
	require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
	for _, tc := range []struct{ src, dst, want string }{
		{"fd00:10::1", "fd00:244::1", "fd00:244::1"},
		{"10.244.1.1", "192.168.10.1", "192.168.10.1"},
	} {
		p := Packet{Proto: inet.UDP, Src: netip.MustParseAddr(tc.src), Dst: netip.MustParseAddr(tc.dst), SrcPort: 40000, DstPort: 53, TTL: 64, Length: 60}
		res := h.Send(p)
		require.Equal(t, Delivered, res.Disposition, tc.dst)
		assert.Equal(t, netip.MustParseAddr(tc.want), res.Packet.Src, tc.dst)
	}
}

// TestSNATBasePortSavedAsZero: SNAT takes "/BASE" but the kernel keeps only
// the offset flag, so iptables-save prints "/0"; DNAT keeps its base.
func TestSNATBasePortSavedAsZero(t *testing.T) {
	rs := NewRuleset(IPv4)
	require.NoError(t, rs.Exec("-t nat -A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.1:1000-1998/40000"))
	require.NoError(t, rs.Exec("-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.0.0.1:8000-8010/80"))
	save := string(rs.AppendSave(nil, SaveOptions{}))
	assert.Contains(t, save, "-A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.1:1000-1998/0\n")
	assert.Contains(t, save, "-A PREROUTING -p tcp -j DNAT --to-destination 10.0.0.1:8000-8010/80\n")
}
