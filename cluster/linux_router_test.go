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

// routerChain is a client, two Linux routers and a server in a row, each
// link its own /24, built with AddHost and Link only:
//
//	client 10.1.0.2 — 10.1.0.1 r1 10.2.0.1 — 10.2.0.2 r2 10.3.0.1 — 10.3.0.2 server
//
// r1 masquerades what it sends out eth1 (the client's network is hidden
// behind it); each router forwards with its kernel's checks (TTL).
func routerChain() (*cluster.Network, error) {
	n := cluster.New(cluster.Config{})
	type iface struct{ name, addr string }
	type route struct{ dst, gw, dev string }
	for _, h := range []struct {
		name   string
		ifaces []iface
		routes []route
		rules  []string
	}{
		{"client", []iface{{"eth0", "10.1.0.2/24"}}, []route{{"0.0.0.0/0", "10.1.0.1", "eth0"}}, nil},
		{"r1", []iface{{"eth0", "10.1.0.1/24"}, {"eth1", "10.2.0.1/24"}}, []route{{"10.3.0.0/24", "10.2.0.2", "eth1"}},
			[]string{"-t nat -A POSTROUTING -o eth1 -j MASQUERADE"}},
		{"r2", []iface{{"eth0", "10.2.0.2/24"}, {"eth1", "10.3.0.1/24"}}, nil, nil},
		{"server", []iface{{"eth0", "10.3.0.2/24"}}, []route{{"0.0.0.0/0", "10.3.0.1", "eth0"}}, nil},
	} {
		host := netfilter.NewHost(netfilter.HostConfig{})
		host.Tracing = true
		for _, i := range h.ifaces {
			if err := host.AddInterface(i.name, netip.MustParsePrefix(i.addr)); err != nil {
				return nil, err
			}
		}
		for _, r := range h.routes {
			if err := host.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix(r.dst), Gateway: netip.MustParseAddr(r.gw), Iface: r.dev}); err != nil {
				return nil, err
			}
		}
		for _, r := range h.rules {
			if err := host.Exec(r); err != nil {
				return nil, err
			}
		}
		if err := n.AddHost(h.name, host); err != nil {
			return nil, err
		}
	}
	for _, l := range [][2]cluster.Port{
		{{Device: "client", Iface: "eth0"}, {Device: "r1", Iface: "eth0"}},
		{{Device: "r1", Iface: "eth1"}, {Device: "r2", Iface: "eth0"}},
		{{Device: "r2", Iface: "eth1"}, {Device: "server", Iface: "eth0"}},
	} {
		if err := n.Link(l[0], l[1]); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// Routers that are Linux hosts: each decrements the TTL and crosses its
// own iptables (r1's MASQUERADE), and the reply comes back through r1's
// conntrack to the client.
func TestLinuxRouters(t *testing.T) {
	n, err := routerChain()
	require.NoError(t, err)
	w, err := n.Send("client", tcp("10.1.0.2:40000", "10.3.0.2:80", inet.SYN))
	require.NoError(t, err)
	assert.Equal(t, `client[>eth0] 10.1.0.2:40000→10.3.0.2:80 => 10.1.0.2:40000→10.3.0.2:80 sent
r1[eth0>eth1] 10.1.0.2:40000→10.3.0.2:80 => 10.2.0.1:40000→10.3.0.2:80 forwarded
r2[eth0>eth1] 10.2.0.1:40000→10.3.0.2:80 => 10.2.0.1:40000→10.3.0.2:80 forwarded
server[eth0>] 10.2.0.1:40000→10.3.0.2:80 => 10.2.0.1:40000→10.3.0.2:80 delivered
delivered `, route(w))
	var ttls []uint8
	for _, h := range w.Hops {
		ttls = append(ttls, h.Packet.TTL)
	}
	assert.Equal(t, []uint8{64, 64, 63, 62}, ttls)
	back, err := n.Reply(w, inet.SYN|inet.ACK)
	require.NoError(t, err)
	require.Equal(t, cluster.Delivered, back.Fate, route(back))
	assert.Equal(t, "10.3.0.2:80→10.1.0.2:40000 SYN,ACK ttl 62", fmt.Sprintf("%s ttl %d", pkt(back.Last().Packet), back.Last().Packet.TTL))
}

// Traceroute through the chain: a datagram whose TTL runs out at r1 or r2
// is answered with an ICMP time exceeded from that router, which walks
// back to the client (through r1's conntrack: RELATED, the quoted source
// back to the client's); with TTL 3 it reaches the server.
func TestLinuxRoutersTimeExceeded(t *testing.T) {
	n, err := routerChain()
	require.NoError(t, err)
	require.NoError(t, n.Host("r1").Exec("-I FORWARD "+relatedRule))
	require.NoError(t, n.Host("client").Exec("-I INPUT "+relatedRule))
	var got []string
	for ttl := uint8(1); ttl <= 3; ttl++ {
		p := netfilter.UDP(netip.MustParseAddrPort(fmt.Sprintf("10.1.0.2:%d", 33433+int(ttl))), netip.MustParseAddrPort("10.3.0.2:33434"))
		p.TTL = ttl
		w, err := n.Send("client", p)
		require.NoError(t, err)
		if w.Fate == cluster.Delivered {
			got = append(got, fmt.Sprintf("ttl %d: delivered at %s", ttl, w.Last().Device))
			continue
		}
		require.Len(t, w.Emitted, 1, route(w))
		e := w.Emitted[0]
		require.Equal(t, cluster.Delivered, e.Fate, eroute(e))
		require.Equal(t, "client", e.Last().Device)
		got = append(got, fmt.Sprintf("ttl %d: %s dropped (%s), client got %s", ttl, w.Last().Device, w.Last().Result.Reason, pkt(e.Last().Packet)))
		assert.True(t, related(e.Last().Result), "the client relates the error to its datagram")
		if w.Last().Device == "r2" {
			assert.True(t, related(e.Hops[1].Result), "r1 relates the error to the masqueraded datagram")
		}
	}
	assert.Equal(t, []string{
		"ttl 1: r1 dropped (TTL exceeded), client got 10.1.0.1→10.1.0.2 icmp 11/0 [udp 10.1.0.2:33434→10.3.0.2:33434]",
		"ttl 2: r2 dropped (TTL exceeded), client got 10.2.0.2→10.1.0.2 icmp 11/0 [udp 10.1.0.2:33435→10.3.0.2:33434]",
		"ttl 3: delivered at server",
	}, got)
}

// A chain of Linux hosts as routers: AddHost with two interfaces each,
// linked interface to interface. Each router decrements the TTL and runs
// its own iptables; a datagram whose TTL runs out is answered by the
// router with an ICMP time exceeded, which Walk.Emitted follows back.
func ExampleNetwork_linuxRouters() {
	n, err := routerChain()
	if err != nil {
		fmt.Println(err)
		return
	}
	p := netfilter.UDP(netip.MustParseAddrPort("10.1.0.2:33434"), netip.MustParseAddrPort("10.3.0.2:33434"))
	p.TTL = 2
	w, err := n.Send("client", p)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, h := range w.Hops {
		fmt.Printf("%-6s %s → %s ttl %d\n", h.Device, h.Packet.Src, h.Packet.Dst, h.Packet.TTL)
	}
	fmt.Println(w.Fate, w.Last().Result.Reason)
	for _, e := range w.Emitted {
		for _, h := range e.Hops {
			fmt.Printf("%-6s %s → %s icmp %d/%d\n", h.Device, h.Packet.Src, h.Packet.Dst, h.Packet.ICMPType, h.Packet.ICMPCode)
		}
		fmt.Println(e.Fate)
	}
	// Output:
	// client 10.1.0.2 → 10.3.0.2 ttl 2
	// r1     10.1.0.2 → 10.3.0.2 ttl 2
	// r2     10.2.0.1 → 10.3.0.2 ttl 1
	// dropped TTL exceeded
	// r2     10.2.0.2 → 10.2.0.1 icmp 11/0
	// r1     10.2.0.2 → 10.2.0.1 icmp 11/0
	// client 10.2.0.2 → 10.1.0.2 icmp 11/0
	// delivered
}
