package agents

import (
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/netfilter"
)

func stripComments(b []byte) string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestDockerBridgeMatchesGolden(t *testing.T) {
	golden, err := os.ReadFile("../netfilter/testdata/golden/docker.rules")
	require.NoError(t, err)
	d, err := NewDockerBridge(DefaultDockerBridgeConfig())
	require.NoError(t, err)
	require.NoError(t, d.PublishPort(DockerPort{HostPort: 8080, ContainerIP: netip.MustParseAddr("172.17.0.2"), ContainerPort: 80}))
	assert.Equal(t, stripComments(golden), string(d.Rules()))
}

func TestDockerBridgeVariants(t *testing.T) {
	cfg := DefaultDockerBridgeConfig()
	cfg.ICC, cfg.UserlandProxy = false, false
	d, err := NewDockerBridge(cfg)
	require.NoError(t, err)
	require.NoError(t, d.PublishPort(DockerPort{Proto: "udp", HostIP: netip.MustParseAddr("192.0.2.10"), HostPort: 5353, ContainerIP: netip.MustParseAddr("172.17.0.3"), ContainerPort: 53}))
	rules := d.Rules()
	_, err = netfilter.ParseRestore(netfilter.IPv4, rules)
	require.NoError(t, err)
	for _, want := range []string{
		"-A OUTPUT -m addrtype --dst-type LOCAL -j DOCKER\n",
		"-A POSTROUTING -o docker0 -m addrtype --src-type LOCAL -j MASQUERADE\n",
		"-A POSTROUTING -s 172.17.0.3/32 -d 172.17.0.3/32 -p udp -m udp --dport 53 -j MASQUERADE\n",
		"-A DOCKER -d 192.0.2.10/32 -p udp -m udp --dport 5353 -j DNAT --to-destination 172.17.0.3:53\n",
		"-A FORWARD -i docker0 -o docker0 -j DROP\n",
		"-A DOCKER -d 172.17.0.3/32 ! -i docker0 -o docker0 -p udp -m udp --dport 53 -j ACCEPT\n",
	} {
		assert.Contains(t, string(rules), want)
	}
	assert.NotContains(t, string(rules), "-A DOCKER -i docker0 -j RETURN")
}

func TestDockerBridgeErrors(t *testing.T) {
	bad := DefaultDockerBridgeConfig()
	bad.Subnet = netip.MustParsePrefix("172.17.0.1/16")
	_, err := NewDockerBridge(bad)
	assert.ErrorIs(t, err, ErrBadCIDR)
	bad = DefaultDockerBridgeConfig()
	bad.Subnet = netip.MustParsePrefix("fd00::/64")
	_, err = NewDockerBridge(bad)
	assert.ErrorIs(t, err, ErrNotModelled)
	bad = DefaultDockerBridgeConfig()
	bad.Bridge = "a-very-long-bridge-name"
	_, err = NewDockerBridge(bad)
	assert.ErrorIs(t, err, ErrBadValue)

	d, err := NewDockerBridge(DefaultDockerBridgeConfig())
	require.NoError(t, err)
	c := netip.MustParseAddr("172.17.0.2")
	for _, p := range []DockerPort{
		{Proto: "icmp", HostPort: 1, ContainerIP: c, ContainerPort: 1},
		{HostPort: 1, ContainerIP: netip.MustParseAddr("10.0.0.2"), ContainerPort: 1},
		{HostPort: 0, ContainerIP: c, ContainerPort: 80},
		{HostIP: netip.MustParseAddr("::1"), HostPort: 80, ContainerIP: c, ContainerPort: 80},
	} {
		err := d.PublishPort(p)
		var ce *ConfigError
		assert.ErrorAs(t, err, &ce, "%+v", p)
	}
}

func TestDockerPackets(t *testing.T) {
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1, Clock: netfilter.NewManualClock(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.0.2.10/24")))
	require.NoError(t, h.AddInterface("docker0", netip.MustParsePrefix("172.17.0.1/16")))
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("192.0.2.1")}))
	d, err := NewDockerBridge(DefaultDockerBridgeConfig())
	require.NoError(t, err)
	require.NoError(t, d.PublishPort(DockerPort{HostPort: 8080, ContainerIP: netip.MustParseAddr("172.17.0.2"), ContainerPort: 80}))
	require.NoError(t, h.Restore(netfilter.IPv4, d.Rules(), netfilter.RestoreOptions{}))

	// A client on the LAN reaches the published port: DNAT to the
	// container, accepted by filter DOCKER.
	r := h.Receive("eth0", tcpSYN("192.0.2.50:40000", "192.0.2.10:8080"))
	require.Equal(t, netfilter.Forwarded, r.Disposition)
	assert.Equal(t, "docker0", r.Packet.Out)
	assert.Equal(t, netip.MustParseAddrPort("172.17.0.2:80"), netip.AddrPortFrom(r.Packet.Dst, r.Packet.DstPort))
	assert.Equal(t, "192.0.2.50", r.Packet.Src.String())

	// An unpublished port is not forwarded into the bridge (FORWARD policy
	// DROP after DOCKER finds no ACCEPT).
	r = h.Receive("eth0", tcpSYN("192.0.2.50:40001", "172.17.0.2:22"))
	assert.NotEqual(t, netfilter.Forwarded, r.Disposition)

	// A container going out is masqueraded to the host's address.
	r = h.Receive("docker0", tcpSYN("172.17.0.2:33000", "93.184.216.34:443"))
	require.Equal(t, netfilter.Forwarded, r.Disposition)
	assert.Equal(t, "192.0.2.10", r.Packet.Src.String())

	// Container to container on the bridge (ICC) keeps its addresses.
	r = h.Receive("docker0", tcpSYN("172.17.0.3:33000", "172.17.0.2:80"))
	require.Equal(t, netfilter.Forwarded, r.Disposition)
	assert.Equal(t, "172.17.0.3", r.Packet.Src.String())
}
