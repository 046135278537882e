package netfilter

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNETMAPParse(t *testing.T) {
	for _, tc := range []struct {
		f         Family
		line      string
		save, err string
		sentinel  error
	}{
		{IPv4, "-t nat -A PREROUTING -j NETMAP --to 192.168.1.5/24", "--to 192.168.1.0/24", "", nil},
		{IPv4, "-t nat -A PREROUTING -j NETMAP --to 192.168.1.0", "--to 192.168.1.0/32", "", nil},
		{IPv4, "-t nat -A PREROUTING -j NETMAP --to 192.168.1.0/255.255.240.0", "--to 192.168.0.0/20", "", nil},
		{IPv4, "-t nat -A POSTROUTING -j NETMAP --to 0/0", "--to 0.0.0.0/0", "", nil},
		{IPv6, "-t nat -A POSTROUTING -j NETMAP --to fd00::5/120", "--to fd00::/120", "", nil},
		{IPv4, "-t nat -A PREROUTING -j NETMAP", "", "", ErrMissingArgument},
		{IPv4, "-t nat -A PREROUTING -j NETMAP --to 1.0.0.0/8 --to 2.0.0.0/8", "", "", ErrMultipleFlags},
		{IPv4, "-t nat -A PREROUTING -j NETMAP --to fd00::/64", "", "", ErrBadValue},
		{IPv4, "-t nat -A PREROUTING -j NETMAP --to 1.2.3.4/255.0.255.0", "", "", ErrNotModelled},
		{IPv4, "-t nat -A PREROUTING -j NETMAP --to 1.2.3.4/33", "", "", ErrNotModelled},
		{IPv4, "-t mangle -A PREROUTING -j NETMAP --to 1.2.3.4", "", "", ErrNotAllowed},
	} {
		t.Run(tc.line, func(t *testing.T) {
			rs := NewRuleset(tc.f)
			err := rs.Exec(tc.line)
			if tc.sentinel != nil {
				assert.ErrorIs(t, err, tc.sentinel)
				return
			}
			require.NoError(t, err)
			assert.Contains(t, string(rs.AppendSave(nil, SaveOptions{})), "-j NETMAP "+tc.save+"\n")
		})
	}
}

func TestNETMAPApply(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.Restore(IPv4, []byte("*nat\n"+
		"-A PREROUTING -d 10.96.16.0/20 -j NETMAP --to 10.244.0.0/20\n"+
		"-A POSTROUTING -o eth1 -j NETMAP --to 172.16.10.0/23\nCOMMIT\n"), RestoreOptions{}))
	res := h.Receive("eth0", UDP(netip.MustParseAddrPort("192.168.10.2:5000"), netip.MustParseAddrPort("10.96.17.5:53")))
	require.Equal(t, Forwarded, res.Disposition, res.Reason)
	assert.Equal(t, netip.MustParseAddr("10.244.1.5"), res.Packet.Dst)
	assert.Equal(t, netip.MustParseAddr("172.16.10.2"), res.Packet.Src)
	assert.Equal(t, uint16(5000), res.Packet.SrcPort)
	// The reply follows the connection's bindings back.
	back := h.Receive("eth1", UDP(netip.MustParseAddrPort("10.244.1.5:53"), netip.MustParseAddrPort("172.16.10.2:5000")))
	require.Equal(t, Forwarded, back.Disposition, back.Reason)
	assert.Equal(t, netip.MustParseAddr("10.96.17.5"), back.Packet.Src)
	assert.Equal(t, netip.MustParseAddr("192.168.10.2"), back.Packet.Dst)

	assert.Equal(t, netip.MustParseAddr("fd00:244::1:2"), mapPrefix(netip.MustParseAddr("fd00:96::1:2"), netip.MustParsePrefix("fd00:244::/64")))
	assert.Equal(t, netip.MustParseAddr("10.2.255.7"), mapPrefix(netip.MustParseAddr("1.2.255.7"), netip.MustParsePrefix("10.0.0.0/14")))
}
