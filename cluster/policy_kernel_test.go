package cluster_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
)

// policyRules count on the node where each pod's traffic leaves and
// where the answers come in.
var policyRules = []string{
	`-A FORWARD -i enis -o eth1 -m comment --comment "pod-s out eth1"`,
	`-A FORWARD -i enis -o eth0 -m comment --comment "pod-s out eth0"`,
	`-A FORWARD -i enip -o eth0 -m comment --comment "pod-p out eth0"`,
	`-A FORWARD -i eth1 -o enis -m comment --comment "answer to pod-s in eth1"`,
	`-A FORWARD -i eth0 -o enip -m comment --comment "answer to pod-p in eth0"`,
}

// policyModel is a node as the AWS VPC CNI sets it up, with two uplinks:
// eth0 (10.0.1.10, primary ENI, main's default route via u0 10.0.1.1) and
// eth1 (10.0.2.10, secondary ENI, table 2's default route via u1
// 10.0.2.1). Pod-s (10.9.0.21) has "from 10.9.0.21 lookup 2" (priority
// 1536), pod-p (10.9.0.11) none; both have "to POD lookup main" (512),
// a /32 address and a default route via 169.254.1.1 over an
// address-less veth (enis, enip). Both upstreams own 192.0.2.1, the
// server's address, and route the pods back through the node.
func policyModel(t *testing.T) (*cluster.Network, map[string]string) {
	t.Helper()
	n := cluster.New(cluster.Config{})
	docs := map[string]string{}
	node := netfilter.NewHost(netfilter.HostConfig{})
	node.Tracing = true
	require.NoError(t, node.AddInterface("eth0", mp("10.0.1.10/24")))
	require.NoError(t, node.AddInterface("eth1", mp("10.0.2.10/24")))
	require.NoError(t, node.AddRoute(netfilter.Route{Dst: mp("0.0.0.0/0"), Iface: "eth0", Gateway: ma("10.0.1.1")}))
	require.NoError(t, node.AddRoute(netfilter.Route{Dst: mp("0.0.0.0/0"), Iface: "eth1", Gateway: ma("10.0.2.1"), Table: 2}))
	for _, r := range policyRules {
		require.NoError(t, node.Exec(r))
	}
	var save strings.Builder
	require.NoError(t, node.Ruleset(netfilter.IPv4).Save(&save, netfilter.SaveOptions{}))
	docs["node1"] = save.String()
	require.NoError(t, n.AddHost("node1", node))
	for _, p := range []struct {
		name, addr, veth string
		rule             bool
	}{{"pod-s", "10.9.0.21", "enis", true}, {"pod-p", "10.9.0.11", "enip", false}} {
		_, err := n.AddPod(p.name, cluster.Pod{Addr: mp(p.addr + "/32"), Gateway: ma("169.254.1.1")})
		require.NoError(t, err)
		require.NoError(t, node.AddInterface(p.veth))
		require.NoError(t, node.AddRoute(netfilter.Route{Dst: mp(p.addr + "/32"), Iface: p.veth}))
		require.NoError(t, node.AddRule(netfilter.RouteRule{Family: netfilter.IPv4, Priority: 512, Dst: mp(p.addr + "/32"), Table: netfilter.TableMain}))
		if p.rule {
			require.NoError(t, node.AddRule(netfilter.RouteRule{Family: netfilter.IPv4, Priority: 1536, Src: mp(p.addr + "/32"), Table: 2}))
		}
		require.NoError(t, n.Link(cluster.Port{Device: "node1", Iface: p.veth}, cluster.Port{Device: p.name, Iface: "eth0"}))
	}
	for _, u := range []struct{ name, addr, node, iface string }{{"u0", "10.0.1.1", "10.0.1.10", "eth0"}, {"u1", "10.0.2.1", "10.0.2.10", "eth1"}} {
		h := netfilter.NewHost(netfilter.HostConfig{})
		h.Tracing = true
		require.NoError(t, h.AddInterface("eth0", mp(u.addr+"/24")))
		require.NoError(t, h.AddInterface("lo", mp("192.0.2.1/32")))
		require.NoError(t, h.AddRoute(netfilter.Route{Dst: mp("10.9.0.0/24"), Iface: "eth0", Gateway: ma(u.node)}))
		require.NoError(t, n.AddHost(u.name, h))
		require.NoError(t, n.Link(cluster.Port{Device: "node1", Iface: u.iface}, cluster.Port{Device: u.name, Iface: "eth0"}))
	}
	return n, docs
}

// TestKernelPolicyRouting sends a datagram from each pod to 192.0.2.1 and
// its answer back, in namespaces and in the model: pod-s's leaves by eth1
// to u1 (its "from" rule), pod-p's by eth0 to u0, and each answer comes
// back to its pod through "to POD lookup main". Compared: which upstream
// received each datagram, with what source, port and TTL, what each pod
// received back, and every rule's counters of the node.
func TestKernelPolicyRouting(t *testing.T) {
	kerneltest.Require(t)
	n, docs := policyModel(t)
	l := &lab{ns: map[string]*kerneltest.NS{}}
	for _, name := range []string{"node1", "pod-s", "pod-p", "u0", "u1"} {
		l.ns[name] = kerneltest.NewNS(t, "pw-i17-"+name+"-")
	}
	node := l.ns["node1"]
	ipBatch(t, node,
		"link set lo up",
		"link add eth0 type veth peer name eth0 netns "+l.ns["u0"].Name(),
		"link add eth1 type veth peer name eth0 netns "+l.ns["u1"].Name(),
		"link add enis type veth peer name eth0 netns "+l.ns["pod-s"].Name(),
		"link add enip type veth peer name eth0 netns "+l.ns["pod-p"].Name(),
		"address add 10.0.1.10/24 dev eth0", "address add 10.0.2.10/24 dev eth1",
		"link set eth0 up", "link set eth1 up", "link set enis up", "link set enip up",
		"route add default via 10.0.1.1 dev eth0",
		"route add default via 10.0.2.1 dev eth1 table 2",
		"route add 10.9.0.21/32 dev enis", "route add 10.9.0.11/32 dev enip",
		"rule add to 10.9.0.21/32 lookup main priority 512",
		"rule add to 10.9.0.11/32 lookup main priority 512",
		"rule add from 10.9.0.21/32 lookup 2 priority 1536",
	)
	for _, p := range []struct{ name, addr string }{{"pod-s", "10.9.0.21"}, {"pod-p", "10.9.0.11"}} {
		ipBatch(t, l.ns[p.name], "link set lo up", "address add "+p.addr+"/32 dev eth0", "link set eth0 up",
			"route add 169.254.1.1 dev eth0 scope link", "route add default via 169.254.1.1 dev eth0")
	}
	for _, u := range []struct{ name, addr, node string }{{"u0", "10.0.1.1", "10.0.1.10"}, {"u1", "10.0.2.1", "10.0.2.10"}} {
		ipBatch(t, l.ns[u.name], "link set lo up", "address add "+u.addr+"/24 dev eth0", "link set eth0 up",
			"address add 192.0.2.1/32 dev lo",
			"route add 10.9.0.0/24 via "+u.node+" dev eth0")
	}
	for _, ns := range l.ns {
		require.NoError(t, ns.Sysctl("net.ipv6.conf.all.disable_ipv6", "1"))
	}
	require.NoError(t, node.Sysctl("net.ipv4.ip_forward", "1"))
	// The CNI answers the pods' ARP requests for 169.254.1.1 by proxy.
	require.NoError(t, node.Sysctl("net.ipv4.conf.enis.proxy_arp", "1"))
	require.NoError(t, node.Sysctl("net.ipv4.conf.enip.proxy_arp", "1"))
	require.NoError(t, node.Restore(docs["node1"]))
	time.Sleep(500 * time.Millisecond)
	_, err := node.IPTables("-Z")
	require.NoError(t, err)

	const payload = 10
	for _, c := range []struct{ pod, src, upstream string }{{"pod-s", "10.9.0.21", "u1"}, {"pod-p", "10.9.0.11", "u0"}} {
		p := netfilter.UDP(netip.MustParseAddrPort(c.src+":40000"), netip.MustParseAddrPort("192.0.2.1:5000"))
		p.Length += payload
		w, err := n.Send(c.pod, p)
		require.NoError(t, err)
		require.Equal(t, cluster.Delivered, w.Fate, route(w))
		assert.Equal(t, c.upstream, w.Last().Device, route(w))
		back, err := n.Reply(w, 0)
		require.NoError(t, err)
		require.Equal(t, cluster.Delivered, back.Fate, route(back))
		require.Equal(t, c.pod, back.Last().Device)

		srv, cli := l.exchange(t, c.pod, c.upstream, 40000, "192.0.2.1", 5000, "192.0.2.1", 5000, payload)
		at := w.Last().Packet
		assert.Equal(t, fmt.Sprintf("%s %d %d", at.Src, at.SrcPort, at.TTL), srv, "what %s received from %s", c.upstream, c.pod)
		rb := back.Last().Packet
		assert.Equal(t, fmt.Sprintf("%s %d %d", rb.Src, rb.SrcPort, rb.TTL), cli, "what %s received back", c.pod)
	}
	ks, err := node.Save("-c", "-t", "filter")
	require.NoError(t, err)
	ms := n.Host("node1").Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{Counters: true})
	assert.Equal(t, ks, tableSave(string(ms), netfilter.Filter), "node1: iptables-save -c -t filter")
	for _, r := range []string{
		`[1:38] -A FORWARD -i enis -o eth1 -m comment --comment "pod-s out eth1"`,
		`[0:0] -A FORWARD -i enis -o eth0 -m comment --comment "pod-s out eth0"`,
		`[1:38] -A FORWARD -i enip -o eth0 -m comment --comment "pod-p out eth0"`,
		`[1:38] -A FORWARD -i eth1 -o enis -m comment --comment "answer to pod-s in eth1"`,
		`[1:38] -A FORWARD -i eth0 -o enip -m comment --comment "answer to pod-p in eth0"`,
	} {
		assert.Contains(t, string(ms), r)
	}
}
