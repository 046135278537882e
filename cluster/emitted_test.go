package cluster_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// pkt shows a packet's addresses, and for an ICMP message its type, code
// and the header it quotes.
func pkt(p netfilter.Packet) string {
	if p.Proto != inet.ICMP {
		s := fmt.Sprintf("%s:%d→%s:%d", p.Src, p.SrcPort, p.Dst, p.DstPort)
		if p.Proto == inet.TCP {
			s += " " + p.TCPFlags.String()
		}
		return s
	}
	s := fmt.Sprintf("%s→%s icmp %d/%d", p.Src, p.Dst, p.ICMPType, p.ICMPCode)
	if in := p.Inner; in.Proto != 0 {
		s += fmt.Sprintf(" [%s %s:%d→%s:%d]", in.Proto, in.Src, in.SrcPort, in.Dst, in.DstPort)
	}
	return s
}

// eroute is route for walks with ICMP errors: each hop's packet as it
// arrived and as it left, quoted headers included.
func eroute(w cluster.Walk) string {
	var b strings.Builder
	for _, h := range w.Hops {
		fmt.Fprintf(&b, "%s[%s>%s] %s => %s %s\n", h.Device, h.In, h.Out, pkt(h.Packet), pkt(h.Result.Packet), h.Result.Disposition)
	}
	fmt.Fprintf(&b, "%s %s", w.Fate, w.Reason)
	return b.String()
}

// A client's SYN through the load balancer (floating IP) to the only
// endpoint, pod B, whose own iptables reject it with a reset: the reset
// walks back through node2 (its conntrack turns the source back into the
// frontend), the VNet (a reply of the load balancer's connection) and the
// load balancer, and leaves the model to the client from the frontend.
func TestEmittedResetThroughLoadBalancer(t *testing.T) {
	f := kubenet(t, true)
	require.NoError(t, f.n.Host("pod-b").Exec("-A INPUT -p tcp --dport 8080 -j REJECT --reject-with tcp-reset"))
	w, err := f.n.Receive(cluster.Port{Device: "internet", Iface: "world"}, tcp(client+":5555", vip+":80", inet.SYN))
	require.NoError(t, err)
	require.Equal(t, cluster.Dropped, w.Fate, route(w))
	assert.Equal(t, "pod-b", w.Last().Device)
	assert.Contains(t, w.Reason, "REJECT")
	require.Len(t, w.Emitted, 1)
	assert.Equal(t, `pod-b[>eth0] 10.244.1.6:8080→203.0.113.7:5555 RST,ACK => 10.244.1.6:8080→203.0.113.7:5555 RST,ACK sent
node2[veth-b>eth0] 10.244.1.6:8080→203.0.113.7:5555 RST,ACK => 20.1.2.3:80→203.0.113.7:5555 RST,ACK forwarded
vnet[node2>lb] 20.1.2.3:80→203.0.113.7:5555 RST,ACK => 20.1.2.3:80→203.0.113.7:5555 RST,ACK forwarded
lb[backend>frontend] 20.1.2.3:80→203.0.113.7:5555 RST,ACK => 20.1.2.3:80→203.0.113.7:5555 RST,ACK forwarded
internet[lb>world] 20.1.2.3:80→203.0.113.7:5555 RST,ACK => 20.1.2.3:80→203.0.113.7:5555 RST,ACK forwarded
left left the model through internet/world`, eroute(w.Emitted[0]))
	assert.Equal(t, "emitted: TCP reset tcp 10.244.1.6:8080 → 203.0.113.7:5555", w.Emitted[0].Hops[0].Note)
	// node2's conntrack saw the reset as the reply of the connection,
	// and deleted the entry, a connection whose only reply is a reset
	// (TestKernelEmitted shows the kernel doing so).
	r := w.Emitted[0].Hops[1].Result
	require.NotNil(t, r.Conn)
	assert.Contains(t, string(r.Conn.AppendText(nil, f.node2.Clock().Now(), conntrack.Format{})), "CLOSE")
	for _, e := range f.node2.Conntrack().Entries() {
		assert.NotContains(t, string(e.AppendText(nil, f.node2.Clock().Now(), conntrack.Format{})), "sport=5555")
	}
}

// The same SYN rejected with an ICMP port unreachable: the error is
// RELATED on node2, whose NAT turns its source and the quoted destination
// back into the frontend; the load balancer recognises the quoted
// connection and passes it back to the client.
func TestEmittedICMPThroughLoadBalancer(t *testing.T) {
	f := kubenet(t, true)
	require.NoError(t, f.n.Host("pod-b").Exec("-A INPUT -p tcp --dport 8080 -j REJECT"))
	require.NoError(t, f.node2.Exec("-I FORWARD "+relatedRule))
	w, err := f.n.Receive(cluster.Port{Device: "internet", Iface: "world"}, tcp(client+":5555", vip+":80", inet.SYN))
	require.NoError(t, err)
	require.Len(t, w.Emitted, 1)
	assert.Equal(t, `pod-b[>eth0] 10.244.1.6→203.0.113.7 icmp 3/3 [tcp 203.0.113.7:5555→10.244.1.6:8080] => 10.244.1.6→203.0.113.7 icmp 3/3 [tcp 203.0.113.7:5555→10.244.1.6:8080] sent
node2[veth-b>eth0] 10.244.1.6→203.0.113.7 icmp 3/3 [tcp 203.0.113.7:5555→10.244.1.6:8080] => 20.1.2.3→203.0.113.7 icmp 3/3 [tcp 203.0.113.7:5555→20.1.2.3:80] forwarded
vnet[node2>lb] 20.1.2.3→203.0.113.7 icmp 3/3 [tcp 203.0.113.7:5555→20.1.2.3:80] => 20.1.2.3→203.0.113.7 icmp 3/3 [tcp 203.0.113.7:5555→20.1.2.3:80] forwarded
lb[backend>frontend] 20.1.2.3→203.0.113.7 icmp 3/3 [tcp 203.0.113.7:5555→20.1.2.3:80] => 20.1.2.3→203.0.113.7 icmp 3/3 [tcp 203.0.113.7:5555→20.1.2.3:80] forwarded
internet[lb>world] 20.1.2.3→203.0.113.7 icmp 3/3 [tcp 203.0.113.7:5555→20.1.2.3:80] => 20.1.2.3→203.0.113.7 icmp 3/3 [tcp 203.0.113.7:5555→20.1.2.3:80] forwarded
left left the model through internet/world`, eroute(w.Emitted[0]))
	assert.True(t, related(w.Emitted[0].Hops[1].Result), "node2: RELATED")
	assert.Equal(t, "emitted: icmp type 3 code 3 10.244.1.6 → 203.0.113.7 quoting tcp 203.0.113.7:5555 → 10.244.1.6:8080", w.Emitted[0].Hops[0].Note)
	assert.Contains(t, w.Emitted[0].Hops[3].Note, "ICMP error from backend node2, quoted destination back to 20.1.2.3:80")
	for _, h := range w.Hops {
		assert.False(t, related(h.Result), "%s: the SYN is no RELATED packet", h.Device)
	}
}

// A UDP datagram from pod A to a server on the Internet that rejects it:
// node1 masquerades it to its own address and the NAT gateway to its
// public one; the ICMP port unreachable comes back through the gateway
// (destination and quoted source back to node1) and node1 (RELATED:
// back to pod A), which receives an error quoting its own datagram.
func TestEmittedICMPThroughGateway(t *testing.T) {
	f := kubenet(t, false)
	require.NoError(t, f.node1.Exec("-I FORWARD "+relatedRule))
	require.NoError(t, f.n.Host("pod-a").Exec("-I INPUT "+relatedRule))
	const server = "198.51.100.9"
	srv, err := f.n.AddPod("server", cluster.Pod{Addr: mp(server + "/24")})
	require.NoError(t, err)
	require.NoError(t, srv.Exec("-A INPUT -p udp --dport 53 -j REJECT"))
	require.NoError(t, f.n.Link(cluster.Port{Device: "internet", Iface: "world"}, cluster.Port{Device: "server", Iface: "eth0"}))
	w, err := f.n.Send("pod-a", netfilter.UDP(netip.MustParseAddrPort(podA+":40000"), netip.MustParseAddrPort(server+":53")))
	require.NoError(t, err)
	require.Equal(t, "server", w.Last().Device, route(w))
	require.Len(t, w.Emitted, 1)
	e := w.Emitted[0]
	require.Equal(t, cluster.Delivered, e.Fate, eroute(e))
	assert.Equal(t, []string{"server", "internet", "nat", "vnet", "node1", "pod-a"}, devices(e))
	assert.Equal(t, "198.51.100.9→20.9.9.9 icmp 3/3 [udp 20.9.9.9:40000→198.51.100.9:53]", pkt(e.Hops[2].Packet))
	assert.Equal(t, "198.51.100.9→10.240.0.4 icmp 3/3 [udp 10.240.0.4:40000→198.51.100.9:53]", pkt(e.Hops[2].Result.Packet))
	assert.Equal(t, "ICMP error: destination back to 10.240.0.4, quoted source back to 10.240.0.4:40000", e.Hops[2].Note)
	assert.Equal(t, "198.51.100.9→10.244.0.5 icmp 3/3 [udp 10.244.0.5:40000→198.51.100.9:53]", pkt(e.Last().Packet))
	assert.True(t, related(e.Hops[4].Result), "node1: RELATED")
	assert.True(t, related(e.Last().Result), "pod A: RELATED")
}

// A reset the sending host's own OUTPUT rejects itself comes back to it
// through lo: a walk of one hop, delivered.
func TestEmittedToSelf(t *testing.T) {
	f := kubenet(t, false)
	require.NoError(t, f.n.Host("pod-a").Exec("-A OUTPUT -p tcp --dport 9 -j REJECT --reject-with tcp-reset"))
	w, err := f.n.Send("pod-a", tcp(podA+":40000", podB+":9", inet.SYN))
	require.NoError(t, err)
	require.Equal(t, cluster.Dropped, w.Fate)
	require.Len(t, w.Emitted, 1)
	assert.Equal(t, `pod-a[lo>] 10.244.1.6:9→10.244.0.5:40000 RST,ACK => 10.244.1.6:9→10.244.0.5:40000 RST,ACK delivered
delivered `, eroute(w.Emitted[0]))
}

func devices(w cluster.Walk) []string {
	var out []string
	for _, h := range w.Hops {
		out = append(out, h.Device)
	}
	return out
}

// relatedRule counts, non-terminating, the packets a host's FORWARD or
// INPUT sees in state RELATED.
const relatedRule = `-m conntrack --ctstate RELATED -m comment --comment related`

// related reports whether the host's walk crossed relatedRule, that is
// whether its conntrack related the packet to a connection.
func related(r netfilter.Result) bool {
	for _, s := range r.Trace {
		if strings.Contains(s.Text, "--comment related") {
			return true
		}
	}
	return false
}
