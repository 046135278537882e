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

// overlay builds two Calico-style nodes (pods on cali* veths, routes to
// the other node's pod block through the tunnel) in one subnet.
func overlay(t *testing.T, kind cluster.TunnelKind) *cluster.Network {
	t.Helper()
	n := cluster.New(cluster.Config{})
	vnet, err := n.AddRouter("subnet")
	require.NoError(t, err)
	nodes := []struct{ name, ip, block, other, otherBlock, pod, tunIP, otherTunIP string }{
		{"node1", "10.240.0.4", "10.244.0.0/26", "10.240.0.5", "10.244.1.0/26", "10.244.0.5", "10.244.0.0", "10.244.1.0"},
		{"node2", "10.240.0.5", "10.244.1.0/26", "10.240.0.4", "10.244.0.0/26", "10.244.1.5", "10.244.1.0", "10.244.0.0"},
	}
	for _, nd := range nodes {
		h := netfilter.NewHost(netfilter.HostConfig{})
		h.Tracing = true
		tun := "tunl0"
		if kind == cluster.VXLAN {
			tun = "vxlan.calico"
		}
		require.NoError(t, h.AddInterface("eth0", mp(nd.ip+"/24")))
		require.NoError(t, h.AddInterface(tun, netip.PrefixFrom(ma(nd.tunIP), 32)))
		require.NoError(t, h.AddInterface("cali1"))
		require.NoError(t, h.AddRoute(netfilter.Route{Dst: mp(nd.pod + "/32"), Iface: "cali1"}))
		gw := nd.other
		if kind == cluster.VXLAN {
			gw = nd.otherTunIP
		}
		require.NoError(t, h.AddRoute(netfilter.Route{Dst: mp(nd.otherBlock), Iface: tun, Gateway: ma(gw)}))
		proto := "4"
		if kind == cluster.VXLAN {
			proto = "udp --dport 4789"
		}
		require.NoError(t, h.Exec("-A OUTPUT -o eth0 -p "+proto+" -d "+nd.other+" -j ACCEPT"))
		require.NoError(t, h.Exec("-A INPUT -i eth0 -p "+proto+" -s "+nd.other+" -j ACCEPT"))
		require.NoError(t, h.Exec("-A FORWARD -i "+tun+" -o cali1 -j ACCEPT"))
		require.NoError(t, n.AddHost(nd.name, h))
		tt := cluster.Tunnel{Kind: kind, Local: ma(nd.ip)}
		if kind == cluster.VXLAN {
			tt.Remotes = map[netip.Addr]netip.Addr{ma(nd.otherTunIP): ma(nd.other)}
		}
		require.NoError(t, n.AddTunnel(nd.name, tun, tt))
		pod := "pod-" + nd.name
		_, err := n.AddPod(pod, cluster.Pod{Addr: mp(nd.pod + "/32"), Gateway: ma("169.254.1.1")})
		require.NoError(t, err)
		require.NoError(t, n.Link(cluster.Port{Device: nd.name, Iface: "cali1"}, cluster.Port{Device: pod, Iface: "eth0"}))
		require.NoError(t, vnet.AddPort(nd.name, mp(nd.ip+"/32")))
		require.NoError(t, n.Link(cluster.Port{Device: nd.name, Iface: "eth0"}, cluster.Port{Device: "subnet", Iface: nd.name}))
	}
	return n
}

func TestOverlay(t *testing.T) {
	for _, kind := range []cluster.TunnelKind{cluster.IPIP, cluster.VXLAN} {
		t.Run(kind.String(), func(t *testing.T) {
			n := overlay(t, kind)
			w, err := n.Send("pod-node1", tcp("10.244.0.5:40000", "10.244.1.5:80", inet.SYN))
			require.NoError(t, err)
			require.Equal(t, cluster.Delivered, w.Fate, route(w))
			var got []string
			for _, h := range w.Hops {
				got = append(got, fmt.Sprintf("%s[%s>%s] %s %s→%s", h.Device, h.In, h.Out, h.Packet.Proto, h.Packet.Src, h.Packet.Dst))
			}
			tun, outer := "tunl0", "ipencap"
			if kind == cluster.VXLAN {
				tun, outer = "vxlan.calico", "udp"
			}
			assert.Equal(t, []string{
				"pod-node1[>eth0] tcp 10.244.0.5→10.244.1.5",
				"node1[cali1>" + tun + "] tcp 10.244.0.5→10.244.1.5",
				"node1[>eth0] " + outer + " 10.240.0.4→10.240.0.5",
				"subnet[node1>node2] " + outer + " 10.240.0.4→10.240.0.5",
				"node2[eth0>] " + outer + " 10.240.0.4→10.240.0.5",
				"node2[" + tun + ">cali1] tcp 10.244.0.5→10.244.1.5",
				"pod-node2[eth0>] tcp 10.244.0.5→10.244.1.5",
			}, got)
			// The outer packet crossed node1's OUTPUT and node2's INPUT.
			assert.Equal(t, "OUTPUT", w.Hops[2].Result.Where.Chain)
			assert.Equal(t, 1, w.Hops[2].Result.Where.Rule)
			assert.Equal(t, "INPUT", w.Hops[4].Result.Where.Chain)
			assert.Contains(t, w.Hops[2].Note, "encapsulates 10.244.0.5 → 10.244.1.5 in "+kind.String())
			assert.Contains(t, w.Hops[5].Note, "decapsulated from "+kind.String())
			back, err := n.Reply(w, inet.SYN|inet.ACK)
			require.NoError(t, err)
			assert.Equal(t, cluster.Delivered, back.Fate, route(back))
			assert.Equal(t, "pod-node1", back.Last().Device)
			outs, err := n.Explain("pod-node1", tcp("10.244.0.5:40001", "10.244.1.5:80", inet.SYN))
			require.NoError(t, err)
			require.Len(t, outs, 1)
			assert.Equal(t, "1", outs[0].Probability.RatString())
			assert.Len(t, outs[0].Walk.Hops, 7)
		})
	}
}
