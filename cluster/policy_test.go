package cluster_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// awsVPC is two nodes in a VPC as the AWS VPC CNI wires them: node1 has
// its primary ENI eth0 (10.0.1.10) and a secondary ENI eth1 (10.0.1.20);
// pod-p has a secondary address of eth0 (10.0.1.11), pod-s one of eth1
// (10.0.1.21). Each pod reaches its node through a veth without
// addresses (default route via 169.254.1.1), and node1 has the CNI's
// policy routing: "to POD lookup main" at priority 512 for each pod, and
// "from 10.0.1.21 lookup 2" at 1536, table 2 leading out eth1, so that a
// pod's traffic leaves by the ENI its address belongs to. The VPC routes
// each pod address to its ENI; node2 (10.0.1.30) has pod-r (10.0.1.31) on
// its primary ENI.
func awsVPC(t *testing.T) *cluster.Network {
	t.Helper()
	n := cluster.New(cluster.Config{})
	node1 := netfilter.NewHost(netfilter.HostConfig{})
	node1.Tracing = true
	require.NoError(t, node1.AddInterface("eth0", mp("10.0.1.10/24")))
	require.NoError(t, node1.AddInterface("eth1", mp("10.0.1.20/24")))
	require.NoError(t, node1.AddRoute(netfilter.Route{Dst: mp("0.0.0.0/0"), Iface: "eth0", Gateway: ma("10.0.1.1")}))
	require.NoError(t, node1.AddRoute(netfilter.Route{Dst: mp("0.0.0.0/0"), Iface: "eth1", Gateway: ma("10.0.1.1"), Table: 2}))
	require.NoError(t, node1.AddRoute(netfilter.Route{Dst: mp("10.0.1.1/32"), Iface: "eth1", Table: 2}))
	node2 := netfilter.NewHost(netfilter.HostConfig{})
	node2.Tracing = true
	require.NoError(t, node2.AddInterface("eth0", mp("10.0.1.30/24")))
	require.NoError(t, node2.AddRoute(netfilter.Route{Dst: mp("0.0.0.0/0"), Iface: "eth0", Gateway: ma("10.0.1.1")}))
	require.NoError(t, n.AddHost("node1", node1))
	require.NoError(t, n.AddHost("node2", node2))
	for _, p := range []struct {
		name, addr, node, veth string
		table                  uint32 // the pod's "from" rule's table, 0 for none (primary ENI)
	}{
		{"pod-p", "10.0.1.11", "node1", "enip", 0},
		{"pod-s", "10.0.1.21", "node1", "enis", 2},
		{"pod-r", "10.0.1.31", "node2", "enir", 0},
	} {
		_, err := n.AddPod(p.name, cluster.Pod{Addr: mp(p.addr + "/32"), Gateway: ma("169.254.1.1")})
		require.NoError(t, err)
		h := n.Host(p.node)
		require.NoError(t, h.AddInterface(p.veth))
		require.NoError(t, h.AddRoute(netfilter.Route{Dst: mp(p.addr + "/32"), Iface: p.veth}))
		require.NoError(t, h.AddRule(netfilter.RouteRule{Family: netfilter.IPv4, Priority: 512, Dst: mp(p.addr + "/32"), Table: netfilter.TableMain}))
		if p.table != 0 {
			require.NoError(t, h.AddRule(netfilter.RouteRule{Family: netfilter.IPv4, Priority: 1536, Src: mp(p.addr + "/32"), Table: p.table}))
		}
		require.NoError(t, n.Link(cluster.Port{Device: p.node, Iface: p.veth}, cluster.Port{Device: p.name, Iface: "eth0"}))
	}
	vpc, err := n.AddRouter("vpc", ma("10.0.1.1"))
	require.NoError(t, err)
	for _, p := range []struct{ port, addr, node, iface string }{
		{"node1-eth0", "10.0.1.10", "node1", "eth0"},
		{"node1-eth1", "10.0.1.20", "node1", "eth1"},
		{"node2-eth0", "10.0.1.30", "node2", "eth0"},
	} {
		require.NoError(t, vpc.AddPort(p.port, mp(p.addr+"/32")))
		require.NoError(t, n.Link(cluster.Port{Device: "vpc", Iface: p.port}, cluster.Port{Device: p.node, Iface: p.iface}))
	}
	// A pod's address is a secondary address of its ENI: the VPC sends
	// it to that ENI.
	for pod, eni := range map[string]string{"10.0.1.11": "10.0.1.10", "10.0.1.21": "10.0.1.20", "10.0.1.31": "10.0.1.30"} {
		require.NoError(t, vpc.AddRoute(cluster.RouterRoute{Dst: mp(pod + "/32"), NextHop: ma(eni)}))
	}
	return n
}

// ports lists a walk's hops as device[in>out].
func ports(w cluster.Walk) []string {
	var out []string
	for _, h := range w.Hops {
		out = append(out, fmt.Sprintf("%s[%s>%s]", h.Device, h.In, h.Out))
	}
	return out
}

// Policy routing across the cluster: pod-s's traffic leaves node1 by the
// secondary ENI eth1 (its "from" rule, table 2, gateway 10.0.1.1), pod-p's
// by eth0 (main's connected route, on link); the replies come in by each pod's own ENI and reach the
// pod through the "to POD lookup main" rule.
func TestPolicyRoutingSecondaryENI(t *testing.T) {
	n := awsVPC(t)
	for _, c := range []struct {
		pod, src string
		there    []string
		back     []string
	}{
		{"pod-s", "10.0.1.21",
			[]string{"pod-s[>eth0]", "node1[enis>eth1]", "vpc[node1-eth1>node2-eth0]", "node2[eth0>enir]", "pod-r[eth0>]"},
			[]string{"pod-r[>eth0]", "node2[enir>eth0]", "vpc[node2-eth0>node1-eth1]", "node1[eth1>enis]", "pod-s[eth0>]"}},
		{"pod-p", "10.0.1.11",
			[]string{"pod-p[>eth0]", "node1[enip>eth0]", "vpc[node1-eth0>node2-eth0]", "node2[eth0>enir]", "pod-r[eth0>]"},
			[]string{"pod-r[>eth0]", "node2[enir>eth0]", "vpc[node2-eth0>node1-eth0]", "node1[eth0>enip]", "pod-p[eth0>]"}},
	} {
		t.Run(c.pod, func(t *testing.T) {
			w, err := n.Send(c.pod, tcp(c.src+":40000", "10.0.1.31:8080", inet.SYN))
			require.NoError(t, err)
			require.Equal(t, cluster.Delivered, w.Fate, route(w))
			assert.Equal(t, c.there, ports(w))
			// The routing decision node1 made, and the rule that made it.
			rc := w.Hops[1].Result.Routes
			require.NotEmpty(t, rc)
			if c.pod == "pod-s" {
				assert.Equal(t, 1536, rc[0].Rule)
				assert.Equal(t, uint32(2), rc[0].Table)
				assert.Equal(t, ma("10.0.1.1"), w.Hops[1].Result.Via, "table 2's default route")
			} else {
				assert.Equal(t, 32766, rc[0].Rule)
				assert.Equal(t, uint32(netfilter.TableMain), rc[0].Table)
				assert.False(t, w.Hops[1].Result.Via.IsValid(), "main's connected route 10.0.1.0/24 dev eth0: on link")
			}
			back, err := n.Reply(w, inet.SYN|inet.ACK)
			require.NoError(t, err)
			require.Equal(t, cluster.Delivered, back.Fate, route(back))
			assert.Equal(t, c.back, ports(back))
			assert.Equal(t, 512, back.Hops[3].Result.Routes[0].Rule, "to POD lookup main")
		})
	}
}

// A rule's gateway is the neighbour the frame goes to: with "from
// 10.0.1.21 lookup 3" (priority 1000) and table 3's default route via a
// firewall appliance 10.0.1.50 in the VPC, pod-s's packet goes from node1
// to the appliance (a Linux host: its FORWARD counts it, TTL 63 → 62),
// which routes it on to node2; pod-p's still goes straight.
func TestPolicyRoutingGateway(t *testing.T) {
	n := awsVPC(t)
	node1 := n.Host("node1")
	require.NoError(t, node1.AddRoute(netfilter.Route{Dst: mp("0.0.0.0/0"), Iface: "eth1", Gateway: ma("10.0.1.50"), Table: 3}))
	require.NoError(t, node1.AddRule(netfilter.RouteRule{Family: netfilter.IPv4, Priority: 1000, Src: mp("10.0.1.21/32"), Table: 3}))
	fw := netfilter.NewHost(netfilter.HostConfig{})
	fw.Tracing = true
	require.NoError(t, fw.AddInterface("eth0", mp("10.0.1.50/24")))
	require.NoError(t, fw.AddRoute(netfilter.Route{Dst: mp("0.0.0.0/0"), Iface: "eth0", Gateway: ma("10.0.1.1")}))
	require.NoError(t, fw.Exec(`-A FORWARD -m comment --comment inspected`))
	require.NoError(t, n.AddHost("fw", fw))
	vpc := n.Router("vpc")
	require.NoError(t, vpc.AddPort("fw", mp("10.0.1.50/32")))
	require.NoError(t, n.Link(cluster.Port{Device: "vpc", Iface: "fw"}, cluster.Port{Device: "fw", Iface: "eth0"}))

	w, err := n.Send("pod-s", tcp("10.0.1.21:40000", "10.0.1.31:8080", inet.SYN))
	require.NoError(t, err)
	require.Equal(t, cluster.Delivered, w.Fate, route(w))
	assert.Equal(t, []string{"pod-s[>eth0]", "node1[enis>eth1]", "vpc[node1-eth1>fw]", "fw[eth0>eth0]", "vpc[fw>node2-eth0]", "node2[eth0>enir]", "pod-r[eth0>]"}, ports(w))
	assert.Equal(t, ma("10.0.1.50"), w.Hops[1].Result.Via)
	assert.Equal(t, uint8(62), w.Hops[3].Result.Packet.TTL)
	save := string(fw.Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{Counters: true}))
	assert.Contains(t, save, `[1:40] -A FORWARD -m comment --comment inspected`)

	w, err = n.Send("pod-p", tcp("10.0.1.11:40000", "10.0.1.31:8080", inet.SYN))
	require.NoError(t, err)
	assert.Equal(t, []string{"pod-p[>eth0]", "node1[enip>eth0]", "vpc[node1-eth0>node2-eth0]", "node2[eth0>enir]", "pod-r[eth0>]"}, ports(w))
}
