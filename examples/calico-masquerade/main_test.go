package main

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/examples/internal/story"
	"github.com/packetwalk/packetwalk/examples/internal/storytest"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/ipset"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

func TestOutput(t *testing.T) {
	var b bytes.Buffer
	require.NoError(t, run(&b))
	storytest.Golden(t, "output.golden", b.Bytes())
}

// TestWhoSeesWhat: the source each server sees, and the rule that decided
// it, before and after the IPPool for VNet B.
func TestWhoSeesWhat(t *testing.T) {
	n, err := newNet(io.Discard)
	require.NoError(t, err)
	node := n.Host("node")
	// Each probe is a new connection: a packet of an existing one skips
	// the nat table, and no nat rule could match it.
	sport := 40000
	masq := func(server string) bool {
		sport++
		r := node.Receive("azv46", story.TCP(fmt.Sprintf("%s:%d", PodIP, sport), server+":80", inet.SYN))
		return netfiltertest.Matched(r, netfilter.NAT, "cali-nat-outgoing", 1)
	}
	src, err := curl(io.Discard, n, ServerA, 50001)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr(PodIP), src, "VNet A sees the pod")
	src, err = curl(io.Discard, n, ServerB, 50002)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr(NodeIP), src, "VNet B sees the node")
	assert.True(t, masq(ServerB))
	assert.False(t, masq(ServerA))
	nat := node.Ruleset(netfilter.IPv4).Table(netfilter.NAT)
	assert.Equal(t, uint64(2), nat.Chain("cali-nat-outgoing").Rules[0].Counters.Packets)

	require.NoError(t, node.Sets().Restore(othervnet, ipset.RestoreOptions{}))
	src, err = curl(io.Discard, n, ServerA, 50003)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr(PodIP), src)
	src, err = curl(io.Discard, n, ServerB, 50004)
	require.NoError(t, err)
	assert.Equal(t, netip.MustParseAddr(PodIP), src, "VNet B sees the pod once 172.17.0.0/16 is a pool")
	assert.False(t, masq(ServerB))
	// A destination in no pool is still masqueraded.
	assert.True(t, masq("52.1.2.3"))

	var b bytes.Buffer
	require.NoError(t, node.Sets().List(&b, "cali40all-ipam-pools"))
	// Hash-bucket order for this initval, as the kernel lists it.
	assert.Contains(t, b.String(), "Number of entries: 2\nMembers:\n172.17.0.0/16\n10.240.0.0/16\n")
}

// TestOnlyMasqPoolsAreMasqueraded: the source set matters too — a source
// outside every natOutgoing pool keeps its address.
func TestOnlyMasqPoolsAreMasqueraded(t *testing.T) {
	n, err := newNet(io.Discard)
	require.NoError(t, err)
	r := n.Host("node").Receive("azv46", story.TCP("192.168.7.7:40000", ServerB+":80", inet.SYN))
	require.Equal(t, netfilter.Forwarded, r.Disposition)
	assert.Equal(t, "192.168.7.7", r.Packet.Src.String())
}

// TestAcrossMachines follows the curls across the machines: the address
// at every hop, and that the node (Calico's cali-nat-outgoing), not the
// VNet, translates the source towards VNet B.
func TestAcrossMachines(t *testing.T) {
	n, err := newNet(io.Discard)
	require.NoError(t, err)
	_, wk, err := walkCurl(io.Discard, n, ServerA, 50001)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"pod 10.240.0.46:50001 → 10.240.0.97:80",
		"node 10.240.0.46:50001 → 10.240.0.97:80",
		"vnet A 10.240.0.46:50001 → 10.240.0.97:80",
		"server A 10.240.0.46:50001 → 10.240.0.97:80",
	}, storytest.Addrs(wk))
	_, wk, err = walkCurl(io.Discard, n, ServerB, 50002)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"pod 10.240.0.46:50002 → 172.17.0.4:80",
		"node 10.240.0.46:50002 → 172.17.0.4:80",
		"vnet A 10.240.0.35:50002 → 172.17.0.4:80",
		"vnet B 10.240.0.35:50002 → 172.17.0.4:80",
		"server B 10.240.0.35:50002 → 172.17.0.4:80",
	}, storytest.Addrs(wk))
	assert.True(t, netfiltertest.Matched(wk.Hops[1].Result, netfilter.NAT, "cali-nat-outgoing", 1), "the node masquerades")
	storytest.WalkPicture(t, "walk", wk, "curl 172.17.0.4 from the pod: masqueraded on the node by cali-nat-outgoing")
	require.NoError(t, n.Host("node").Sets().Restore(othervnet, ipset.RestoreOptions{}))
	_, wk, err = walkCurl(io.Discard, n, ServerB, 50004)
	require.NoError(t, err)
	assert.Equal(t, "server B 10.240.0.46:50004 → 172.17.0.4:80", storytest.Addrs(wk)[4], "with the IPPool, VNet B sees the pod")
}
