package netfiltertest_test

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"

	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/probability"
	"github.com/packetwalk/packetwalk/netfilter"
)

// node returns a host with an uplink (192.168.10.1/24 on eth0), a pod
// bridge (10.244.0.1/16 on cbr0) and a default route, as a Kubernetes
// node.
func node(t require.TestingT, seed uint64) *netfilter.Host {
	h := netfilter.NewHost(netfilter.HostConfig{Seed: seed})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("cbr0", netip.MustParsePrefix("10.244.0.1/16")))
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("192.168.10.254")}))
	return h
}

// webRules is the nat table of a load-balanced service 10.96.0.10:80/TCP
// with n endpoints 10.244.1.2.. on port 8080, written as kube-proxy
// writes its cascade: endpoint i of n is chosen with probability
// 1/(n−i) printed with %0.10f, the last one takes the rest.
func webRules(n int) string {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:WEB - [0:0]\n")
	b.WriteString("-A PREROUTING -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j WEB\n")
	args := probability.KubeProxyArgs(n, probability.FormatCurrent)
	for i, ep := range webEndpoints(n) {
		stat := ""
		if i < len(args) {
			stat = " -m statistic --mode random --probability " + args[i]
		}
		fmt.Fprintf(&b, "-A WEB%s -p tcp -j DNAT --to-destination %s\n", stat, ep)
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// webEndpoints are the endpoints of webRules(n), in cascade order.
func webEndpoints(n int) []netip.AddrPort {
	out := make([]netip.AddrPort, n)
	for i := range out {
		out[i] = netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 244, 1, byte(i + 2)}), 8080)
	}
	return out
}

// webWant is the exact distribution of webRules(n)'s cascade.
func webWant(n int) map[netip.AddrPort]*big.Rat {
	ps := probability.EndpointProbabilities(n, probability.FormatCurrent)
	want := map[netip.AddrPort]*big.Rat{}
	for i, ep := range webEndpoints(n) {
		want[ep] = ps[i]
	}
	return want
}

// client returns the i-th new TCP connection from 192.168.10.2 to the
// service.
func client(i int) netfilter.Packet {
	return netfilter.TCP(netip.AddrPortFrom(netip.MustParseAddr("192.168.10.2"), uint16(1024+i%60000)),
		netip.MustParseAddrPort("10.96.0.10:80"), inet.SYN)
}

// recorder is an assert.TestingT that keeps the failure messages.
type recorder struct{ msgs []string }

func (r *recorder) Errorf(format string, args ...any) {
	r.msgs = append(r.msgs, fmt.Sprintf(format, args...))
}

// webNode is a node running webRules(n).
func webNode(t require.TestingT, seed uint64, n int) *netfilter.Host {
	h := node(t, seed)
	require.NoError(t, h.Restore(netfilter.IPv4, []byte(webRules(n)), netfilter.RestoreOptions{}))
	return h
}
