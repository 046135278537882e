package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/examples/internal/storytest"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

func TestOutput(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, run(&b))
	storytest.Golden(t, "output.golden", b.Bytes())
}

// TestRouteLocalnetOn: the SYN is DNATed to the pod by the localhost
// NodePort rule and masqueraded to cni0's address on its way out.
func TestRouteLocalnetOn(t *testing.T) {
	r, err := Walk(io.Discard, Cases[0])
	require.NoError(t, err)
	assert.Equal(t, netfilter.Sent, r.Disposition)
	assert.Equal(t, "cni0", r.Packet.Out)
	assert.Equal(t, Bridge, r.Packet.Src.String())
	assert.Equal(t, Pod, r.Packet.Dst.String())
	assert.Equal(t, uint16(8080), r.Packet.DstPort)
	assert.True(t, netfiltertest.Matched(r, netfilter.NAT, "KUBE-POSTROUTING", 3), "masqueraded by KUBE-POSTROUTING")
	require.NotNil(t, r.Conn)
}

// TestRouteLocalnetOff: the same rules with route_localnet=0 drop the
// packet at the reroute after nat OUTPUT, before filter OUTPUT sees it,
// and no connection is left behind.
func TestRouteLocalnetOff(t *testing.T) {
	r, err := Walk(io.Discard, Cases[1])
	require.NoError(t, err)
	assert.Equal(t, netfilter.Dropped, r.Disposition)
	assert.Equal(t, netfilter.ReasonInvalidSource, r.Reason)
	assert.Equal(t, netfilter.Output, r.Where.Hook)
	assert.Equal(t, netfilter.NAT, r.Where.Table)
	assert.Equal(t, "127.0.0.1", r.Packet.Src.String())
	assert.Equal(t, Pod, r.Packet.Dst.String())
	for _, s := range r.Trace {
		assert.NotEqual(t, netfilter.Filter, s.Table, "filter OUTPUT must not see the packet: %+v", s)
	}
	assert.Nil(t, r.Conn)
}

// TestNoLocalhostNodePorts: without the 127.0.0.1 rule the SYN stays on
// the node.
func TestNoLocalhostNodePorts(t *testing.T) {
	r, err := Walk(io.Discard, Cases[2])
	require.NoError(t, err)
	assert.Equal(t, netfilter.Delivered, r.Disposition)
	assert.Equal(t, "127.0.0.1", r.Packet.Dst.String())
	assert.Equal(t, uint16(NodePort), r.Packet.DstPort)
	assert.Empty(t, r.Reason)
}

// TestAcrossMachines follows the SYN past the node: with route_localnet=1
// the pod receives it from cni0's address, and its answer comes back
// through the node's conntrack to the curl process as 127.0.0.1:30080.
func TestAcrossMachines(t *testing.T) {
	n, wk, err := walkNet(io.Discard, Cases[0])
	require.NoError(t, err)
	assert.Equal(t, cluster.Delivered, wk.Fate)
	assert.Equal(t, []string{
		"node-a 127.0.0.1:40000 → 127.0.0.1:30080",
		"pod 10.244.1.1:40000 → 10.244.1.5:8080",
	}, storytest.Addrs(wk))
	_, back, err := n.Reply(wk, inet.SYN|inet.ACK)
	require.NoError(t, err)
	assert.Equal(t, cluster.Delivered, back.Fate, back.Reason)
	assert.Equal(t, "node-a", back.Last().Device)
	assert.Equal(t, "127.0.0.1:30080 → 127.0.0.1:40000", netfiltertest.Addrs(back.Last().Result.Packet))
	assert.Equal(t, "cni0", back.Last().Result.Packet.In, "up from the bridge")
	storytest.WalkPicture(t, "walk", wk, "curl http://127.0.0.1:30080 on node-a, route_localnet=1")

	wk, err = WalkCluster(io.Discard, Cases[1])
	require.NoError(t, err)
	assert.Equal(t, cluster.Dropped, wk.Fate)
	assert.Len(t, wk.Hops, 1, "the SYN never leaves node-a")
}
