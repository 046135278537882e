package main

import (
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

func TestOutput(t *testing.T) { storytest.Output(t, run) }

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
