package agents

import (
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/ipset"
	"github.com/packetwalk/packetwalk/netfilter"
)

// seed001Before and seed001After are the IPPools of "AKS Azure CNI Calico
// IP Masquerade" (https://www.stevegriffith.nyc/posts/aks-cni-calico-ipmasq/):
// default-ipv4-ippool, and after the post's edit also the disabled
// natOutgoing pool othervnet.
var (
	seed001Before = CalicoNATConfig{Pools: []CalicoPool{{CIDR: netip.MustParsePrefix("10.240.0.0/16"), NATOutgoing: true}}}
	seed001After  = CalicoNATConfig{Pools: append(append([]CalicoPool{}, seed001Before.Pools...),
		CalicoPool{CIDR: netip.MustParsePrefix("172.17.0.0/16"), NATOutgoing: true, Disabled: true})}
)

func TestCalicoSeed001(t *testing.T) {
	sets, err := CalicoIPSets(seed001After, netfilter.IPv4)
	require.NoError(t, err)
	assert.Equal(t, `create cali40masq-ipam-pools hash:net family inet hashsize 1024 maxelem 1048576
add cali40masq-ipam-pools 10.240.0.0/16
add cali40masq-ipam-pools 172.17.0.0/16
create cali40all-ipam-pools hash:net family inet hashsize 1024 maxelem 1048576
add cali40all-ipam-pools 10.240.0.0/16
add cali40all-ipam-pools 172.17.0.0/16
`, string(sets))
	rules, err := CalicoNATRules(seed001Before, netfilter.IPv4)
	require.NoError(t, err)
	// The seed's cali-POSTROUTING / cali-nat-outgoing listings, -S form.
	assert.Equal(t, []string{
		`-A POSTROUTING -m comment --comment "cali:O3lYWMrLQYEMJtB5" -j cali-POSTROUTING`,
		`-A cali-POSTROUTING -m comment --comment "cali:Z-c7XtVd2Bq7s_hA" -j cali-fip-snat`,
		`-A cali-POSTROUTING -m comment --comment "cali:nYKhEzDlr11Jccal" -j cali-nat-outgoing`,
		`-A cali-nat-outgoing -m comment --comment "cali:flqWnvo8yq4ULQLa" -m set --match-set cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst -j MASQUERADE`,
	}, savedLines(t, rules, "-A "))
}

func TestCalicoSetsAndRules(t *testing.T) {
	cfg := CalicoNATConfig{Pools: []CalicoPool{
		{CIDR: netip.MustParsePrefix("10.244.0.0/16")},
		{CIDR: netip.MustParsePrefix("fd00:10::/64"), NATOutgoing: true},
		{CIDR: netip.MustParsePrefix("10.244.0.0/16")},
	}}
	sets, err := CalicoIPSets(cfg, netfilter.IPv4)
	require.NoError(t, err)
	assert.Equal(t, "create cali40masq-ipam-pools hash:net family inet hashsize 1024 maxelem 1048576\ncreate cali40all-ipam-pools hash:net family inet hashsize 1024 maxelem 1048576\nadd cali40all-ipam-pools 10.244.0.0/16\n", string(sets))
	rules, err := CalicoNATRules(cfg, netfilter.IPv4)
	require.NoError(t, err)
	assert.NotContains(t, string(rules), "MASQUERADE", "no natOutgoing pool: cali-nat-outgoing is empty")
	sets6, err := CalicoIPSets(cfg, netfilter.IPv6)
	require.NoError(t, err)
	assert.Equal(t, "create cali60masq-ipam-pools hash:net family inet6 hashsize 1024 maxelem 1048576\nadd cali60masq-ipam-pools fd00:10::/64\ncreate cali60all-ipam-pools hash:net family inet6 hashsize 1024 maxelem 1048576\nadd cali60all-ipam-pools fd00:10::/64\n", string(sets6))
	rules6, err := CalicoNATRules(cfg, netfilter.IPv6)
	require.NoError(t, err)
	assert.Contains(t, string(rules6), "--match-set cali60masq-ipam-pools src -m set ! --match-set cali60all-ipam-pools dst -j MASQUERADE")

	_, err = CalicoIPSets(CalicoNATConfig{Pools: []CalicoPool{{CIDR: netip.MustParsePrefix("10.1.2.3/16")}}}, netfilter.IPv4)
	assert.ErrorIs(t, err, ErrBadCIDR)
	var ce *ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "pools[0].cidr", ce.Key)
	_, err = CalicoNATRules(CalicoNATConfig{Pools: []CalicoPool{{}}}, netfilter.IPv4)
	assert.ErrorIs(t, err, ErrBadCIDR)
}

// calicoNode is the node 10.240.0.35 of "AKS Azure CNI Calico IP Masquerade"
// (docs/blog-posts.md) with the pod 10.240.0.46 behind
// azv46, Felix's sets and chains loaded.
func calicoNode(t *testing.T, cfg CalicoNATConfig) *netfilter.Host {
	t.Helper()
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1, Clock: netfilter.NewManualClock(time.Date(2020, 11, 6, 0, 0, 0, 0, time.UTC))})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.240.0.35/16")))
	require.NoError(t, h.AddInterface("azv46"))
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("10.240.0.46/32"), Iface: "azv46"}))
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("10.240.0.1")}))
	sets, err := CalicoIPSets(cfg, netfilter.IPv4)
	require.NoError(t, err)
	require.NoError(t, h.Sets().Restore(sets, ipset.RestoreOptions{}))
	rules, err := CalicoNATRules(cfg, netfilter.IPv4)
	require.NoError(t, err)
	require.NoError(t, h.Restore(netfilter.IPv4, rules, netfilter.RestoreOptions{NoFlush: true}))
	return h
}

func TestCalicoPackets(t *testing.T) {
	tests := []struct {
		name    string
		cfg     CalicoNATConfig
		dst     string
		wantSrc string
	}{
		{"pool to pool keeps the pod IP", seed001Before, "10.240.0.97:80", "10.240.0.46"},
		{"pool to outside is masqueraded", seed001Before, "172.17.0.4:80", "10.240.0.35"},
		{"pool to the Internet is masqueraded", seed001Before, "93.184.216.34:80", "10.240.0.35"},
		{"a disabled pool for VNet B exempts it", seed001After, "172.17.0.4:80", "10.240.0.46"},
		{"no natOutgoing: nothing masqueraded", CalicoNATConfig{Pools: []CalicoPool{{CIDR: netip.MustParsePrefix("10.240.0.0/16")}}}, "93.184.216.34:80", "10.240.0.46"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := calicoNode(t, tt.cfg)
			r := h.Receive("azv46", tcpSYN("10.240.0.46:50001", tt.dst))
			require.Equal(t, netfilter.Forwarded, r.Disposition)
			assert.Equal(t, tt.wantSrc, r.Packet.Src.String())
		})
	}
}
