package cluster_test

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"pgregory.net/rapid"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// Random networks, wired at random (including nonsense), never make a
// walk or Explain panic or hang: each ends, or fails with a topology,
// loop or packet error, and Explain's probabilities sum to 1.
func TestRandomNetworks(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n := cluster.New(cluster.Config{Seed: rapid.Uint64().Draw(rt, "seed"), MaxHops: 16})
		addr := func(label string) netip.Addr {
			return netip.AddrFrom4([4]byte{10, 0, byte(rapid.IntRange(0, 2).Draw(rt, label+" net")), byte(rapid.IntRange(1, 4).Draw(rt, label+" host"))})
		}
		var ports []cluster.Port
		var hosts []string
		for i := range rapid.IntRange(1, 4).Draw(rt, "hosts") {
			name := fmt.Sprintf("h%d", i)
			h := netfilter.NewHost(netfilter.HostConfig{})
			for j := range rapid.IntRange(1, 2).Draw(rt, "ifaces") {
				ifc := fmt.Sprintf("eth%d", j)
				_ = h.AddInterface(ifc, netip.PrefixFrom(addr("if"), 24))
				ports = append(ports, cluster.Port{Device: name, Iface: ifc})
			}
			if rapid.Bool().Draw(rt, "default") {
				_ = h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: addr("gw")})
			}
			if rapid.Bool().Draw(rt, "masq") {
				_ = h.Exec("-t nat -A POSTROUTING -o eth0 -j MASQUERADE")
			}
			_ = n.AddHost(name, h)
			if rapid.Bool().Draw(rt, "bridge") {
				if n.AddBridge(name, "eth1", "p0", "p1") == nil {
					ports = append(ports, cluster.Port{Device: name, Iface: "p0"}, cluster.Port{Device: name, Iface: "p1"})
				}
			}
			if rapid.Bool().Draw(rt, "tunnel") {
				_ = n.AddTunnel(name, "eth1", cluster.Tunnel{Kind: cluster.TunnelKind(rapid.IntRange(1, 2).Draw(rt, "kind")), Local: addr("local")})
			}
			hosts = append(hosts, name)
		}
		for i := range rapid.IntRange(0, 2).Draw(rt, "routers") {
			name := fmt.Sprintf("r%d", i)
			r, err := n.AddRouter(name, addr("router"))
			if err != nil {
				continue
			}
			for j := range rapid.IntRange(1, 3).Draw(rt, "rports") {
				p := fmt.Sprintf("p%d", j)
				_ = r.AddPort(p, netip.PrefixFrom(addr("reach"), rapid.IntRange(16, 32).Draw(rt, "bits")).Masked())
				ports = append(ports, cluster.Port{Device: name, Iface: p})
				if rapid.Bool().Draw(rt, "route") {
					_ = r.AddRoute(cluster.RouterRoute{Dst: netip.MustParsePrefix("0.0.0.0/0"), Port: p})
				} else {
					_ = r.AddRoute(cluster.RouterRoute{Dst: netip.PrefixFrom(addr("dst"), 24).Masked(), NextHop: addr("nh")})
				}
			}
		}
		if rapid.Bool().Draw(rt, "lb") {
			if lb, err := n.AddLoadBalancer("lb"); err == nil {
				_ = lb.AddRule(cluster.LBRule{Frontend: netip.AddrPortFrom(addr("vip"), 80), Proto: inet.TCP,
					Backends: []cluster.Backend{{Name: "b0", Addr: addr("b0")}, {Name: "b1", Addr: addr("b1")}}, FloatingIP: rapid.Bool().Draw(rt, "floating")})
				ports = append(ports, cluster.Port{Device: "lb", Iface: "frontend"}, cluster.Port{Device: "lb", Iface: "backend"})
			}
		}
		if rapid.Bool().Draw(rt, "gateway") {
			if _, err := n.AddGateway("gw", addr("public"), netip.MustParsePrefix("10.0.0.0/8")); err == nil {
				ports = append(ports, cluster.Port{Device: "gw", Iface: "inside"}, cluster.Port{Device: "gw", Iface: "outside"})
			}
		}
		for range rapid.IntRange(0, 6).Draw(rt, "links") {
			a := rapid.SampledFrom(ports).Draw(rt, "a")
			b := rapid.SampledFrom(ports).Draw(rt, "b")
			_ = n.Link(a, b)
		}
		allowed := func(err error) bool {
			return err == nil || errors.Is(err, cluster.ErrTopology) || errors.Is(err, cluster.ErrLoop) ||
				errors.Is(err, netfilter.ErrBadPacket) || errors.Is(err, inet.ErrNotModelled)
		}
		for range 3 {
			from := rapid.SampledFrom(hosts).Draw(rt, "from")
			p := netfilter.TCP(netip.AddrPortFrom(addr("src"), 1000), netip.AddrPortFrom(addr("dst"), 80), inet.SYN)
			w, err := n.Send(from, p)
			assert.True(rt, allowed(err), "%v", err)
			if err == nil && w.Fate == cluster.Delivered {
				_, err := n.Reply(w, inet.SYN|inet.ACK)
				assert.True(rt, allowed(err), "%v", err)
			}
			outs, err := n.Explain(from, p)
			assert.True(rt, allowed(err), "%v", err)
			if err == nil {
				assert.Equal(rt, "1", sum(outs).RatString())
			}
			at := rapid.SampledFrom(ports).Draw(rt, "at")
			_, err = n.Receive(at, p)
			assert.True(rt, allowed(err), "%v", err)
		}
	})
}
