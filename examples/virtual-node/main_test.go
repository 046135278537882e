package main

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/examples/internal/story"
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

// TestRequestAddr: kuard on ACI sees the node, kuard on a VM sees the
// ingress pod; cali-nat-outgoing is the rule that makes the difference.
func TestRequestAddr(t *testing.T) {
	n, err := newNet(io.Discard)
	require.NoError(t, err)
	for _, tc := range []struct {
		dst, seen string
		calico    bool
	}{
		{ACIPod0, NodeIP, true},
		{ACIPod, NodeIP, true},
		{VMPod0, Ingress, false},
		{VMPod, Ingress, false},
	} {
		r := n.Host("node0").Receive("azure0", story.TCP(Ingress+":30000", tc.dst+":8080", inet.SYN))
		require.Equal(t, netfilter.Forwarded, r.Disposition)
		assert.Equal(t, tc.seen, r.Packet.Src.String(), tc.dst)
		assert.Equal(t, tc.calico, netfiltertest.Matched(r, netfilter.NAT, "cali-nat-outgoing", 1), tc.dst)
		// ip-masq-agent would have spared every one of them.
		assert.Equal(t, !tc.calico, netfiltertest.Matched(r, netfilter.NAT, "IP-MASQ-AGENT", 1), tc.dst)
	}
	addr, err := curl(io.Discard, n, ACIPod, 59852)
	require.NoError(t, err)
	assert.Equal(t, NodeIP+":59852", addr.String())
	addr, err = curl(io.Discard, n, VMPod, 59853)
	require.NoError(t, err)
	assert.Equal(t, Ingress+":59853", addr.String())
	e := n.Host("node0").Conntrack().Entries()
	require.Len(t, e, 6, "4 unreplied SYNs and the 2 connections")
}

// TestAddVirtualNodePool: with 10.13.100.0/24 in cali40all-ipam-pools the
// ACI pod is no longer "outside", and ip-masq-agent's 10.13.0.0/16 RETURN
// lets the ingress pod's address through.
func TestAddVirtualNodePool(t *testing.T) {
	n, err := newNet(io.Discard)
	require.NoError(t, err)
	node := n.Host("node0")
	require.NoError(t, node.Sets().Add("cali40all-ipam-pools", "10.13.100.0/24", false))
	r := node.Receive("azure0", story.TCP(Ingress+":30000", ACIPod+":8080", inet.SYN))
	require.Equal(t, netfilter.Forwarded, r.Disposition)
	assert.Equal(t, Ingress, r.Packet.Src.String())
	assert.True(t, netfiltertest.Matched(r, netfilter.NAT, "IP-MASQ-AGENT", 1))
}

// TestAcrossMachines follows the SYNs from the ingress pod across the
// machines: to the pod on another VM the frame is bridged through node0's
// azure0 (its FORWARD sees both bridge ports, the TTL stays) and keeps
// the ingress pod's address; to the ACI pod it goes through the VNet
// gateway, and node0's POSTROUTING (cali-nat-outgoing) gives it the
// node's address before it reaches the VNet.
func TestAcrossMachines(t *testing.T) {
	n, err := newNet(io.Discard)
	require.NoError(t, err)
	vm, _, err := walkCurl(io.Discard, n, VMPod, 59853)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"ingress 10.13.76.17:59853 → 10.13.76.36:8080",
		"node0 10.13.76.17:59853 → 10.13.76.36:8080",
		"vnet 10.13.76.17:59853 → 10.13.76.36:8080",
		"kuard@vm 10.13.76.17:59853 → 10.13.76.36:8080",
	}, storytest.Addrs(vm))
	p := vm.Hops[1].Result.Packet
	assert.Equal(t, [5]any{"azure0", "azure0", "azv0", "eth0", uint8(64)}, [5]any{p.In, p.Out, p.PhysIn, p.PhysOut, p.TTL}, "bridged")
	aci, _, err := walkCurl(io.Discard, n, ACIPod, 59852)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"ingress 10.13.76.17:59852 → 10.13.100.6:8080",
		"node0 10.13.76.17:59852 → 10.13.100.6:8080",
		"vnet 10.13.76.4:59852 → 10.13.100.6:8080",
		"kuard@aci 10.13.76.4:59852 → 10.13.100.6:8080",
	}, storytest.Addrs(aci))
	assert.True(t, netfiltertest.Matched(aci.Hops[1].Result, netfilter.NAT, "cali-nat-outgoing", 1))
	storytest.WalkPicture(t, "walk", aci, "ingress → kuard on ACI: masqueraded on node0 by cali-nat-outgoing")
}
