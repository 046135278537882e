package netfilter_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
)

// bridgeKernelRules are bridgeRules plus a DNAT that sends a bridged frame
// to another pod of the same bridge (re-bridged, br_nf_pre_routing_finish's
// "bridged dnat") and the rules that count it.
var bridgeKernelRules = strings.Replace(strings.Replace(bridgeRules,
	"-A POSTROUTING -o eth1 -m physdev --physdev-in va",
	"-A FORWARD -i br0 -o br0 -m physdev --physdev-in va --physdev-out vd --physdev-is-bridged -m comment --comment \"fwd bridged va>vd\"\n-A POSTROUTING -o br0 -m physdev --physdev-out vd -m comment --comment \"post br0 physout vd\"\n-A POSTROUTING -o eth1 -m physdev --physdev-in va", 1),
	"-A PREROUTING -p udp --dport 8 -j DNAT --to-destination 10.1.0.1:9",
	"-A PREROUTING -p udp --dport 8 -j DNAT --to-destination 10.1.0.1:9\n-A PREROUTING -p udp --dport 6 -j DNAT --to-destination 10.1.0.4:9", 1)

var ctTimeoutRE = regexp.MustCompile(`^(\S+\s+\d+\s+)\d+ `)

// TestKernelBridge sends, from pod a on the bridge br0, one datagram per
// way a bridged frame can go (bridged to c, up and routed to r, DNATed off
// the bridge to r, DNATed to the node, DNATed to pod d on the same
// bridge) and compares every mangle rule's counters and the node's
// conntrack entries with ReceiveBridged's. The receivers answer nothing (their
// ICMP is dropped), so that only the datagrams cross the node.
func TestKernelBridge(t *testing.T) {
	kerneltest.Require(t)
	ns := map[string]*kerneltest.NS{}
	for _, name := range []string{"node", "a", "c", "d", "r"} {
		ns[name] = kerneltest.NewNS(t, "pw-br-"+name+"-")
	}
	ip := func(n *kerneltest.NS, lines ...string) {
		_, stderr, err := n.Exec(strings.Join(lines, "\n")+"\n", "ip", "-batch", "-")
		require.NoError(t, err, stderr)
	}
	ip(ns["node"], "link set lo up", "link add br0 type bridge mcast_snooping 0", "link set br0 up", "address add 10.1.0.1/24 dev br0",
		"link add va type veth peer name eth0 netns "+ns["a"].Name(),
		"link add vc type veth peer name eth0 netns "+ns["c"].Name(),
		"link add vd type veth peer name eth0 netns "+ns["d"].Name(),
		"link add eth1 type veth peer name eth0 netns "+ns["r"].Name(),
		"link set va master br0", "link set vc master br0", "link set vd master br0",
		"link set va up", "link set vc up", "link set vd up", "address add 10.2.0.1/24 dev eth1", "link set eth1 up")
	for name, addr := range map[string]string{"a": "10.1.0.2/24", "c": "10.1.0.3/24", "d": "10.1.0.4/24"} {
		ip(ns[name], "link set lo up", "address add "+addr+" dev eth0", "link set eth0 up", "route add default via 10.1.0.1")
	}
	ip(ns["r"], "link set lo up", "address add 10.2.0.2/24 dev eth0", "link set eth0 up", "route add default via 10.2.0.1")
	for _, n := range ns {
		require.NoError(t, n.Sysctl("net.ipv6.conf.all.disable_ipv6", "1"))
	}
	for _, name := range []string{"c", "d", "r"} {
		require.NoError(t, ns[name].Restore("*filter\n-A OUTPUT -p icmp -j DROP\nCOMMIT\n"))
	}
	node := ns["node"]
	require.NoError(t, node.Sysctl("net.ipv4.ip_forward", "1"))
	require.NoError(t, node.Sysctl("net.bridge.bridge-nf-call-iptables", "1"))
	require.NoError(t, node.Restore(bridgeKernelRules))
	// A socket on the node's 10.1.0.1:9 so that the datagram DNATed to
	// the node is not answered either.
	require.NoError(t, node.Restore("*filter\n-A OUTPUT -p icmp -j DROP\nCOMMIT\n", "--noflush"))
	time.Sleep(300 * time.Millisecond)
	_, err := node.IPTables("-t", "mangle", "-Z")
	require.NoError(t, err)

	h := bridgeHost(t)
	require.NoError(t, h.Restore(netfilter.IPv4, []byte(bridgeKernelRules), netfilter.RestoreOptions{}))
	ports := func(a netip.Addr) (string, bool) {
		if p, ok := bridgePorts(a); ok {
			return p, true
		}
		return "vd", a.String() == "10.1.0.4"
	}
	const py = `
import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", int(sys.argv[3])))
s.sendto(b"x" * 20, (sys.argv[1], int(sys.argv[2])))
`
	for i, c := range []struct{ dst, next string }{
		{"10.1.0.3:9", "10.1.0.3"}, // bridged to c
		{"10.2.0.2:9", "10.1.0.1"}, // up to the node and routed to r
		{"10.1.0.3:7", "10.1.0.3"}, // DNATed off the bridge to r
		{"10.1.0.3:8", "10.1.0.3"}, // DNATed to the node
		{"10.1.0.3:6", "10.1.0.3"}, // DNATed to d, re-bridged
	} {
		dst := netip.MustParseAddrPort(c.dst)
		sport := 5000 + i
		_, stderr, err := ns["a"].Exec(py, "python3", "-", dst.Addr().String(), fmt.Sprint(dst.Port()), fmt.Sprint(sport))
		require.NoError(t, err, stderr)
		p := udp(fmt.Sprintf("10.1.0.2:%d", sport), c.dst)
		p.Length += 20
		r := h.ReceiveBridged(netfilter.BridgeIn{Bridge: "br0", Port: "va", Next: netip.MustParseAddr(c.next), PortOf: ports}, p)
		require.NoError(t, r.Err)
		t.Logf("%s: %s", c.dst, r)
	}
	time.Sleep(300 * time.Millisecond)
	kern, err := node.Save("-c", "-t", "mangle")
	require.NoError(t, err)
	var kc, mc []string
	for line := range strings.Lines(kern) {
		if strings.HasPrefix(line, "[") {
			kc = append(kc, strings.TrimSpace(line))
		}
	}
	for line := range strings.Lines(string(h.Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{Counters: true}))) {
		if strings.HasPrefix(line, "[") && strings.Contains(line, "--comment") {
			mc = append(mc, strings.TrimSpace(line))
		}
	}
	assert.Equal(t, kc, mc, "mangle rule counters")
	kct, _, err := node.Exec("", "conntrack", "-L")
	require.NoError(t, err)
	var kl, ml []string
	for line := range strings.Lines(kct) {
		kl = append(kl, ctTimeoutRE.ReplaceAllString(strings.TrimSpace(line), "${1}T "))
	}
	for _, e := range h.Conntrack().Entries() {
		ml = append(ml, ctTimeoutRE.ReplaceAllString(string(e.AppendText(nil, h.Clock().Now(), conntrack.Format{})), "${1}T "))
	}
	slices.Sort(kl)
	slices.Sort(ml)
	assert.Equal(t, kl, ml, "conntrack -L")
	assert.Len(t, ml, 5)
	assert.Contains(t, kern, `[1:48] -A FORWARD -i br0 -o br0 -m physdev --physdev-in va --physdev-out vd --physdev-is-bridged -m comment --comment "fwd bridged va>vd"`)
}
