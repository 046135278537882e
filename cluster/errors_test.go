package cluster_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

func TestTopologyErrors(t *testing.T) {
	n := cluster.New(cluster.Config{})
	h := netfilter.NewHost(netfilter.HostConfig{})
	require.NoError(t, h.AddInterface("eth0", mp("10.0.0.1/24")))
	require.NoError(t, h.AddInterface("eth1", mp("10.0.1.1/24")))
	require.NoError(t, n.AddHost("a", h))
	r, err := n.AddRouter("r")
	require.NoError(t, err)
	require.NoError(t, r.AddPort("p1", mp("10.0.0.0/24")))
	for _, c := range []struct {
		name string
		err  error
		text string
	}{
		{"duplicate", n.AddHost("a", h), `cluster: bad topology: device "a" already exists (a host)`},
		{"nil host", n.AddHost("b", nil), `cluster: bad topology: host "b" is nil`},
		{"unknown device", n.Link(cluster.Port{Device: "a", Iface: "eth0"}, cluster.Port{Device: "x", Iface: "eth0"}), `cluster: bad topology: link a/eth0 — x/eth0: no device "x"`},
		{"unknown port", n.Link(cluster.Port{Device: "a", Iface: "eth9"}, cluster.Port{Device: "r", Iface: "p1"}), `cluster: bad topology: link a/eth9 — r/p1: host "a" has no port "eth9"`},
		{"no bridge iface", n.AddBridge("a", "br0"), `cluster: bad topology: host "a" has no interface "br0" for the bridge (add it with AddInterface)`},
		{"bridge of router", n.AddBridge("r", "br0"), `cluster: bad topology: "r" is a router, not a host`},
		{"no such bridge", n.AddBridgePort("a", "eth0", "v1"), `cluster: bad topology: host "a" has no bridge "eth0" (declare it with AddBridge)`},
		{"route without hop", r.AddRoute(cluster.RouterRoute{Dst: mp("0.0.0.0/0")}), `cluster: bad topology: router "r": route to 0.0.0.0/0 needs a next hop or a port (one of them)`},
		{"tunnel kind", n.AddTunnel("a", "eth1", cluster.Tunnel{Local: ma("10.0.0.1")}), `cluster: bad topology: tunnel a/eth1: unknown kind TunnelKind(0) (ipip or vxlan)`},
	} {
		assert.EqualError(t, c.err, c.text, c.name)
		assert.ErrorIs(t, c.err, cluster.ErrTopology, c.name)
	}
	require.NoError(t, n.Link(cluster.Port{Device: "a", Iface: "eth0"}, cluster.Port{Device: "r", Iface: "p1"}))
	assert.ErrorIs(t, n.Link(cluster.Port{Device: "a", Iface: "eth0"}, cluster.Port{Device: "r", Iface: "p1"}), cluster.ErrTopology)

	_, err = n.Send("nobody", tcp("10.0.0.1:1", "10.0.0.2:2", inet.SYN))
	assert.EqualError(t, err, `cluster: bad topology: no device "nobody"`)
	// eth1 leads nowhere: a clear error, no panic.
	_, err = n.Send("a", tcp("10.0.1.1:1", "10.0.1.2:2", inet.SYN))
	assert.EqualError(t, err, `cluster: bad topology: host a sent tcp 10.0.1.1:1 → 10.0.1.2:2 out eth1, which is linked to nothing`)
	// A bad packet is the host's error.
	_, err = n.Send("a", netfilter.Packet{})
	assert.ErrorIs(t, err, netfilter.ErrBadPacket)
	// A router without a route drops; with the destination on an
	// unlinked port the packet leaves the model.
	w, err := n.Send("a", tcp("10.0.0.1:1", "10.0.0.2:2", inet.SYN))
	require.NoError(t, err)
	assert.Equal(t, cluster.Dropped, w.Fate)
	assert.Equal(t, "router r: no neighbour 10.0.0.2 on port p1", w.Reason)
	w, err = n.Send("a", tcp("10.0.0.1:1", "10.0.2.2:2", inet.SYN))
	require.NoError(t, err)
	assert.Equal(t, cluster.Dropped, w.Fate)
	_, err = n.Reply(w, inet.ACK)
	assert.ErrorIs(t, err, cluster.ErrNotDelivered)
}

// Two routers sending a prefix to each other loop: the walk stops with
// ErrLoop after MaxHops instead of running forever, and so does Explain.
func TestLoop(t *testing.T) {
	n := cluster.New(cluster.Config{MaxHops: 10})
	h := netfilter.NewHost(netfilter.HostConfig{})
	require.NoError(t, h.AddInterface("eth0", mp("10.0.0.1/24")))
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: mp("0.0.0.0/0"), Iface: "eth0", Gateway: ma("10.0.0.254")}))
	require.NoError(t, n.AddHost("a", h))
	r1, _ := n.AddRouter("r1", ma("10.0.0.254"))
	r2, _ := n.AddRouter("r2")
	require.NoError(t, r1.AddPort("a", mp("10.0.0.0/24")))
	require.NoError(t, r1.AddPort("r2"))
	require.NoError(t, r2.AddPort("r1"))
	require.NoError(t, r1.AddRoute(cluster.RouterRoute{Dst: mp("0.0.0.0/0"), Port: "r2"}))
	require.NoError(t, r2.AddRoute(cluster.RouterRoute{Dst: mp("0.0.0.0/0"), Port: "r1"}))
	require.NoError(t, n.Link(cluster.Port{Device: "a", Iface: "eth0"}, cluster.Port{Device: "r1", Iface: "a"}))
	require.NoError(t, n.Link(cluster.Port{Device: "r1", Iface: "r2"}, cluster.Port{Device: "r2", Iface: "r1"}))
	_, err := n.Send("a", tcp("10.0.0.1:1", "8.8.8.8:53", inet.SYN))
	assert.ErrorIs(t, err, cluster.ErrLoop)
	assert.EqualError(t, err, "cluster: forwarding loop: more than 10 hops (last at r2/r1)")
	_, err = n.Explain("a", tcp("10.0.0.1:1", "8.8.8.8:53", inet.SYN))
	assert.ErrorIs(t, err, cluster.ErrLoop)
}

func TestNames(t *testing.T) {
	for _, c := range []struct {
		v    interface{ MarshalText() ([]byte, error) }
		want string
	}{
		{cluster.Delivered, "delivered"}, {cluster.Dropped, "dropped"}, {cluster.Left, "left"}, {cluster.Fate(9), "Fate(9)"},
		{cluster.KindHost, "host"}, {cluster.KindRouter, "router"}, {cluster.KindLoadBalancer, "load balancer"}, {cluster.KindGateway, "gateway"}, {cluster.Kind(0), "Kind(0)"},
		{cluster.IPIP, "ipip"}, {cluster.VXLAN, "vxlan"},
	} {
		b, err := c.v.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, c.want, string(b))
	}
	n := cluster.New(cluster.Config{})
	_, err := n.AddGateway("gw", ma("20.0.0.1"))
	require.NoError(t, err)
	assert.NotNil(t, n.Gateway("gw"))
	assert.Nil(t, n.Gateway("nope"))
	assert.Nil(t, n.Router("gw"))
	assert.Nil(t, n.LoadBalancer("gw"))
	assert.Nil(t, n.Host("gw"))
	assert.Equal(t, cluster.KindGateway, n.Kind("gw"))
	assert.Equal(t, []string{"gw"}, n.Devices())
}
