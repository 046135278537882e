package cluster_test

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// Pod to pod across nodes: out through node1's bridge (up to the host:
// the frame is addressed to the gateway 10.244.0.1), the route table's
// pod CIDR route to node2, node2's bridge to the pod. No address changes.
func TestPodToPodAcrossNodes(t *testing.T) {
	f := kubenet(t, false)
	w, err := f.n.Send("pod-a", tcp(podA+":40000", podB+":8080", inet.SYN))
	require.NoError(t, err)
	assert.Equal(t, `pod-a[>eth0] 10.244.0.5:40000→10.244.1.6:8080 => 10.244.0.5:40000→10.244.1.6:8080 sent
node1[veth-a>eth0] 10.244.0.5:40000→10.244.1.6:8080 => 10.244.0.5:40000→10.244.1.6:8080 forwarded
vnet[node1>node2] 10.244.0.5:40000→10.244.1.6:8080 => 10.244.0.5:40000→10.244.1.6:8080 forwarded
node2[eth0>veth-b] 10.244.0.5:40000→10.244.1.6:8080 => 10.244.0.5:40000→10.244.1.6:8080 forwarded
pod-b[eth0>] 10.244.0.5:40000→10.244.1.6:8080 => 10.244.0.5:40000→10.244.1.6:8080 delivered
delivered `, route(w))
	// node1 saw the frame from its bridge port: -i cbr0, physdev-in
	// veth-a, and routed it (TTL 64 → 63); node2 routed it out cbr0.
	in := w.Hops[1].Result.Packet
	assert.Equal(t, "cbr0", in.In)
	assert.Equal(t, "veth-a", in.PhysIn)
	assert.True(t, in.Bridged)
	assert.Equal(t, "", in.PhysOut)
	assert.Equal(t, uint8(63), in.TTL)
	assert.Equal(t, "cbr0", w.Hops[3].Result.Packet.Out)
	assert.Equal(t, uint8(62), w.Hops[4].Packet.TTL)

	back, err := f.n.Reply(w, inet.SYN|inet.ACK)
	require.NoError(t, err)
	assert.Equal(t, `pod-b[>eth0] 10.244.1.6:8080→10.244.0.5:40000 => 10.244.1.6:8080→10.244.0.5:40000 sent
node2[veth-b>eth0] 10.244.1.6:8080→10.244.0.5:40000 => 10.244.1.6:8080→10.244.0.5:40000 forwarded
vnet[node2>node1] 10.244.1.6:8080→10.244.0.5:40000 => 10.244.1.6:8080→10.244.0.5:40000 forwarded
node1[eth0>veth-a] 10.244.1.6:8080→10.244.0.5:40000 => 10.244.1.6:8080→10.244.0.5:40000 forwarded
pod-a[eth0>] 10.244.1.6:8080→10.244.0.5:40000 => 10.244.1.6:8080→10.244.0.5:40000 delivered
delivered `, route(back))
}

// Two pods on one bridge talk directly: the frame is bridged, crossing
// node1's PREROUTING, FORWARD (-i and -o cbr0) and POSTROUTING with both
// bridge ports, without a routing decision.
func TestBridgedSameNode(t *testing.T) {
	f := kubenet(t, false)
	w, err := f.n.Send("pod-a", tcp(podA+":40001", podC+":8080", inet.SYN))
	require.NoError(t, err)
	require.Equal(t, `pod-a[>eth0] 10.244.0.5:40001→10.244.0.7:8080 => 10.244.0.5:40001→10.244.0.7:8080 sent
node1[veth-a>veth-c] 10.244.0.5:40001→10.244.0.7:8080 => 10.244.0.5:40001→10.244.0.7:8080 forwarded
pod-c[eth0>] 10.244.0.5:40001→10.244.0.7:8080 => 10.244.0.5:40001→10.244.0.7:8080 delivered
delivered `, route(w))
	p := w.Hops[1].Result.Packet
	assert.Equal(t, [4]any{"cbr0", "cbr0", "veth-a", "veth-c"}, [4]any{p.In, p.Out, p.PhysIn, p.PhysOut})
	assert.Equal(t, uint8(64), p.TTL, "bridging does not decrement the TTL")
	var hooks []string
	for _, s := range w.Hops[1].Result.Trace {
		if s.Rule == 0 && s.Chain == s.Hook.String() {
			hooks = append(hooks, s.Hook.String()+"/"+s.Table.String())
		}
	}
	assert.Contains(t, hooks, "FORWARD/filter")
	assert.Contains(t, hooks, "POSTROUTING/nat")
}

// A client's connection through the load balancer (floating IP) to node2
// and the answer back: node2 un-DNATs it to the VIP, the VNet recognises
// the load balancer's connection, the load balancer sends it to the
// Internet, where it leaves the model.
func TestLoadBalancerRoundTrip(t *testing.T) {
	f := kubenet(t, true)
	world := cluster.Port{Device: "internet", Iface: "world"}
	w, err := f.n.Receive(world, tcp(client+":50000", vip+":80", inet.SYN))
	require.NoError(t, err)
	require.Equal(t, cluster.Delivered, w.Fate, route(w))
	assert.Equal(t, "backend node2 (10.240.0.5, 1 healthy of 2)", w.Hops[1].Note)
	back, err := f.n.Reply(w, inet.SYN|inet.ACK)
	require.NoError(t, err)
	assert.Equal(t, `pod-b[>eth0] 10.244.1.6:8080→203.0.113.7:50000 => 10.244.1.6:8080→203.0.113.7:50000 sent
node2[veth-b>eth0] 10.244.1.6:8080→203.0.113.7:50000 => 20.1.2.3:80→203.0.113.7:50000 forwarded
vnet[node2>lb] 20.1.2.3:80→203.0.113.7:50000 => 20.1.2.3:80→203.0.113.7:50000 forwarded
lb[backend>frontend] 20.1.2.3:80→203.0.113.7:50000 => 20.1.2.3:80→203.0.113.7:50000 forwarded
internet[lb>world] 20.1.2.3:80→203.0.113.7:50000 => 20.1.2.3:80→203.0.113.7:50000 forwarded
left left the model through internet/world`, route(back))
	// The ACK follows the SYN to node2, whatever the random source says.
	for i := range 5 {
		w, err := f.n.Receive(world, tcp(client+":50000", vip+":80", inet.ACK))
		require.NoError(t, err)
		assert.Equal(t, "pod-b", w.Last().Device, "packet %d", i)
	}
}

// Without probes, the walk's choice of node comes from the seed: the same
// seed gives the same nodes.
func TestLoadBalancerSeeded(t *testing.T) {
	pick := func() string {
		f := kubenet(t, false)
		var s string
		for port := 50000; port < 50010; port++ {
			w, err := f.n.Receive(cluster.Port{Device: "internet", Iface: "world"}, tcp(fmt.Sprintf("%s:%d", client, port), vip+":80", inet.SYN))
			require.NoError(t, err)
			s += w.Last().Device + " "
		}
		return s
	}
	a := pick()
	assert.Equal(t, a, pick())
	assert.Contains(t, a, "node1", "some connections go to node1 and are dropped there")
	assert.Contains(t, a, "pod-b")
}

// A pod's connection to the Internet: node1 masquerades it to its own
// address (ip-masq-agent's rule), the NAT gateway to its public address;
// the answer comes back through both translations.
func TestGatewaySNAT(t *testing.T) {
	f := kubenet(t, false)
	w, err := f.n.Send("pod-a", tcp(podA+":40000", "93.184.216.34:443", inet.SYN))
	require.NoError(t, err)
	assert.Equal(t, `pod-a[>eth0] 10.244.0.5:40000→93.184.216.34:443 => 10.244.0.5:40000→93.184.216.34:443 sent
node1[veth-a>eth0] 10.244.0.5:40000→93.184.216.34:443 => 10.240.0.4:40000→93.184.216.34:443 forwarded
vnet[node1>nat] 10.240.0.4:40000→93.184.216.34:443 => 10.240.0.4:40000→93.184.216.34:443 forwarded
nat[inside>outside] 10.240.0.4:40000→93.184.216.34:443 => 20.9.9.9:40000→93.184.216.34:443 forwarded
internet[nat>world] 20.9.9.9:40000→93.184.216.34:443 => 20.9.9.9:40000→93.184.216.34:443 forwarded
left left the model through internet/world`, route(w))
	back, err := f.n.Receive(cluster.Port{Device: "internet", Iface: "world"}, cluster.ReplyTo(w.Last().Result.Packet, inet.SYN|inet.ACK))
	require.NoError(t, err)
	assert.Equal(t, `internet[world>nat] 93.184.216.34:443→20.9.9.9:40000 => 93.184.216.34:443→20.9.9.9:40000 forwarded
nat[outside>inside] 93.184.216.34:443→20.9.9.9:40000 => 93.184.216.34:443→10.240.0.4:40000 forwarded
vnet[nat>node1] 93.184.216.34:443→10.240.0.4:40000 => 93.184.216.34:443→10.240.0.4:40000 forwarded
node1[eth0>veth-a] 93.184.216.34:443→10.240.0.4:40000 => 93.184.216.34:443→10.244.0.5:40000 forwarded
pod-a[eth0>] 93.184.216.34:443→10.244.0.5:40000 => 93.184.216.34:443→10.244.0.5:40000 delivered
delivered `, route(back))
	// Unsolicited traffic to the gateway's address is dropped there.
	w, err = f.n.Receive(cluster.Port{Device: "internet", Iface: "world"}, tcp("93.184.216.34:443", natIP+":40001", inet.SYN))
	require.NoError(t, err)
	assert.Equal(t, cluster.Dropped, w.Fate)
	assert.Equal(t, "gateway nat: tcp 93.184.216.34:443 → 20.9.9.9:40001 belongs to no connection", w.Reason)
}

// constSource is a random source that always returns v.
type constSource uint64

func (c constSource) Uint64() uint64 { return uint64(c) }

// An injected random source decides the load balancer's choices.
func TestInjectedSource(t *testing.T) {
	pick := func(src constSource) string {
		n := cluster.New(cluster.Config{Source: src})
		lb, err := n.AddLoadBalancer("lb")
		require.NoError(t, err)
		r, err := n.AddRouter("r")
		require.NoError(t, err)
		require.NoError(t, r.AddPort("lb"))
		var backends []cluster.Backend
		for i, ip := range []string{"10.0.0.1", "10.0.0.2"} {
			h := netfilter.NewHost(netfilter.HostConfig{})
			require.NoError(t, h.AddInterface("eth0", mp(ip+"/24")))
			name := fmt.Sprintf("b%d", i)
			require.NoError(t, n.AddHost(name, h))
			require.NoError(t, r.AddPort(name, mp(ip+"/32")))
			require.NoError(t, n.Link(cluster.Port{Device: name, Iface: "eth0"}, cluster.Port{Device: "r", Iface: name}))
			backends = append(backends, cluster.Backend{Name: name, Addr: ma(ip)})
		}
		require.NoError(t, lb.AddRule(cluster.LBRule{Frontend: netip.MustParseAddrPort("1.2.3.4:80"), Proto: inet.TCP, Backends: backends, BackendPort: 8080}))
		require.NoError(t, n.Link(cluster.Port{Device: "lb", Iface: "backend"}, cluster.Port{Device: "r", Iface: "lb"}))
		w, err := n.Receive(cluster.Port{Device: "lb", Iface: "frontend"}, tcp("5.6.7.8:1000", "1.2.3.4:80", inet.SYN))
		require.NoError(t, err)
		require.Equal(t, cluster.Delivered, w.Fate, route(w))
		assert.Equal(t, w.Last().Packet.Dst, backends[map[string]int{"b0": 0, "b1": 1}[w.Last().Device]].Addr, "not floating: DNAT to the backend")
		return w.Last().Device
	}
	assert.Equal(t, "b0", pick(0))
	assert.Equal(t, "b1", pick(^constSource(0)))
}

// A ping from a pod to the Internet: the gateway translates the address
// and the echo reply finds its way back.
func TestGatewayICMP(t *testing.T) {
	f := kubenet(t, false)
	ping := netfilter.ICMP(ma(podA), ma("93.184.216.34"), 8, 0)
	ping.ICMPID = 7
	w, err := f.n.Send("pod-a", ping)
	require.NoError(t, err)
	require.Equal(t, cluster.Left, w.Fate, route(w))
	out := w.Last().Packet
	assert.Equal(t, natIP, out.Src.String())
	back, err := f.n.Receive(cluster.Port{Device: "internet", Iface: "world"}, cluster.ReplyTo(out, 0))
	require.NoError(t, err)
	assert.Equal(t, cluster.Delivered, back.Fate, route(back))
	assert.Equal(t, "pod-a", back.Last().Device)
	assert.Equal(t, uint8(0), back.Last().Packet.ICMPType)
}
