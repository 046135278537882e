package cluster_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
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
