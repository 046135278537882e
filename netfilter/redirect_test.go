package netfilter

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestRedirectAddress pins what TestKernelRedirectAddress recorded:
// REDIRECT goes to the first IPv4 address of the input interface (a
// host-scope 127.0.0.0/8 one before the others), to its newest address of
// the highest IPv6 scope (of the destination's scope when that is
// link-local), to loopback for what the host sends, and drops
// the packet when the interface has no address of the family.
func TestRedirectAddress(t *testing.T) {
	pfx, a := netip.MustParsePrefix, netip.MustParseAddr
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", pfx("192.168.10.1/24"), pfx("fd00:10::1/64")))
	require.NoError(t, h.AddInterface("eth1"))
	for _, p := range []string{"192.168.10.9/24", "172.16.5.1/16", "fd00:99::1/64", "fd00:10::9/64", "fe80::5/64"} {
		require.NoError(t, h.AddAddress("eth0", pfx(p)))
	}
	rules := "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A PREROUTING -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 8080\n" +
		"-A OUTPUT -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 8080\nCOMMIT\n"
	require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
	require.NoError(t, h.Restore(IPv6, []byte(rules), RestoreOptions{}))
	syn := func(src, dst string) Packet {
		return Packet{Proto: inet.TCP, Src: a(src), Dst: a(dst), SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN, TTL: 64, Length: 60}
	}
	for _, tc := range []struct {
		iface, src, dst, want string
	}{
		{"eth0", "192.168.10.2", "172.16.5.1", "192.168.10.1"},
		{"eth0", "192.168.10.2", "192.168.10.9", "192.168.10.1"},
		{"eth0", "192.168.10.2", "10.244.1.5", "192.168.10.1"},
		{"eth0", "fd00:10::2", "fd00:99::1", "fd00:10::9"},
		{"eth0", "fd00:10::2", "fd00:244::5", "fd00:10::9"},
		{"eth0", "fd00:10::2", "fe80::5", "fe80::5"}, // a link-local destination takes a link-local address
		{"", "192.168.10.1", "192.168.10.50", "127.0.0.1"},
		{"", "fd00:10::1", "fd00:10::50", "::1"},
	} {
		var res Result
		if tc.iface == "" {
			res = h.Send(syn(tc.src, tc.dst))
		} else {
			res = h.Receive(tc.iface, syn(tc.src, tc.dst))
		}
		assert.Equal(t, Delivered, res.Disposition, "%s to %s", tc.src, tc.dst)
		assert.Equal(t, a(tc.want), res.Packet.Dst, "%s to %s", tc.src, tc.dst)
		assert.Equal(t, uint16(8080), res.Packet.DstPort)
	}
	require.NoError(t, h.AddAddress("eth0", pfx("127.0.0.5/8")))
	res := h.Receive("eth0", syn("192.168.10.2", "10.244.1.6"))
	assert.Equal(t, a("127.0.0.5"), res.Packet.Dst, "host scope first")

	for _, src := range []string{"10.244.1.5", "fd00:244::5"} {
		dst := "192.168.10.2"
		if a(src).Is6() {
			dst = "fd00:10::2"
		}
		res := h.Receive("eth1", syn(src, dst))
		assert.Equal(t, Dropped, res.Disposition, "no address on eth1")
		assert.Equal(t, VerdictDrop, res.Verdict)
		assert.Equal(t, NAT, res.Where.Table)
		assert.Equal(t, "PREROUTING", res.Where.Chain)
		assert.Equal(t, 1, res.Where.Rule)
	}
}

func TestAddAddress(t *testing.T) {
	pfx := netip.MustParsePrefix
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", pfx("10.1.0.1/24"), pfx("fd00::1/64")))
	for _, tc := range []struct {
		iface, addr string
		ok          bool
	}{
		{"eth0", "10.1.0.1/24", false}, // same address and prefix length
		{"eth0", "10.1.0.1/16", true},  // IPv4 allows another prefix length
		{"eth0", "fd00::1/48", false},  // IPv6 does not
		{"eth9", "10.9.0.1/24", false}, // unknown interface
		{"eth0", "10.2.0.1/24", true},
	} {
		err := h.AddAddress(tc.iface, pfx(tc.addr))
		if tc.ok {
			assert.NoError(t, err, tc.addr)
		} else {
			assert.True(t, errors.Is(err, ErrBadValue), "%s on %s: %v", tc.addr, tc.iface, err)
		}
	}
	assert.Error(t, h.AddAddress("eth0", netip.Prefix{}))
	assert.Equal(t, []netip.Prefix{pfx("10.1.0.1/24"), pfx("fd00::1/64"), pfx("10.1.0.1/16"), pfx("10.2.0.1/24")}, h.Interface("eth0").Addrs)
	// The connected route of the new address is used at once.
	r := h.route(netip.MustParseAddr("10.2.0.7"))
	require.NotNil(t, r)
	assert.Equal(t, "eth0", r.Iface)
}
