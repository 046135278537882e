package netfilter

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// localnetHost is the kernel lab's node (eth0 192.168.10.1/24, eth1
// 10.244.1.1/24) with localnetRules.
func localnetHost(t testing.TB, noLocalnet bool) *Host {
	t.Helper()
	h := NewHost(HostConfig{NoRouteLocalnet: noLocalnet})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.Restore(IPv4, []byte(localnetRules), RestoreOptions{}))
	return h
}

func TestRouteLocalnet(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name       string
		noLocalnet bool
		in         string // "" = Send
		src, dst   string
		dport      uint16
		disp       Disposition
		reason     string
		where      Step
		outSrc     string // the source as the packet leaves or is dropped
	}{
		{"dst 127.0.0.1 on eth0", true, "eth0", "192.168.10.2", "127.0.0.1", 80, Dropped, "martian destination",
			Step{Hook: Prerouting, Action: Action{Kind: ActionRoute}}, "192.168.10.2"},
		{"dst 127.0.0.1 on eth0, localnet", false, "eth0", "192.168.10.2", "127.0.0.1", 80, Dropped, "",
			Step{Hook: Input, Table: Filter, Chain: "INPUT", Rule: 2, Text: "-A INPUT -p tcp -j DROP", Action: Action{Kind: ActionDrop}}, "192.168.10.2"},
		{"src 127.0.0.5 on eth0", true, "eth0", "127.0.0.5", "10.244.1.5", 80, Dropped, "martian source",
			Step{Hook: Prerouting, Action: Action{Kind: ActionRoute}}, "127.0.0.5"},
		{"src 127.0.0.5 on eth0, localnet", false, "eth0", "127.0.0.5", "10.244.1.5", 80, Forwarded, "",
			Step{Hook: Postrouting, Table: NAT, Chain: "POSTROUTING", Rule: 2, Text: "-A POSTROUTING -s 127.0.0.0/8 -o eth1 -j MASQUERADE", Action: Action{Kind: ActionAccept}}, "10.244.1.1"},
		{"martian destination wins over source", true, "eth0", "127.0.0.5", "127.0.0.1", 80, Dropped, "martian destination",
			Step{Hook: Prerouting, Action: Action{Kind: ActionRoute}}, "127.0.0.5"},
		{"DNAT to 127.0.0.1", true, "eth0", "192.168.10.2", "192.168.10.1", 30020, Dropped, "martian destination",
			Step{Hook: Prerouting, Action: Action{Kind: ActionRoute}}, "192.168.10.2"},
		{"loopback is not martian", true, "lo", "127.0.0.1", "127.0.0.1", 80, Dropped, "",
			Step{Hook: Input, Table: Filter, Chain: "INPUT", Rule: 2, Text: "-A INPUT -p tcp -j DROP", Action: Action{Kind: ActionDrop}}, "127.0.0.1"},
		{"localhost NodePort", true, "", "127.0.0.1", "127.0.0.1", 30020, Dropped, "invalid source",
			Step{Hook: Output, Table: NAT, Action: Action{Kind: ActionRoute}}, "127.0.0.1"},
		{"localhost NodePort, localnet", false, "", "127.0.0.1", "127.0.0.1", 30020, Sent, "",
			Step{Hook: Postrouting, Table: NAT, Chain: "POSTROUTING", Rule: 2, Text: "-A POSTROUTING -s 127.0.0.0/8 -o eth1 -j MASQUERADE", Action: Action{Kind: ActionAccept}}, "10.244.1.1"},
		{"socket bound to 127.0.0.1", true, "", "127.0.0.1", "10.244.1.5", 80, Dropped, "invalid source",
			Step{Hook: Output, Action: Action{Kind: ActionRoute}}, "127.0.0.1"},
		{"unbound socket to 127.0.0.1", true, "", "", "127.0.0.1", 80, Dropped, "",
			Step{Hook: Input, Table: Filter, Chain: "INPUT", Rule: 2, Text: "-A INPUT -p tcp -j DROP", Action: Action{Kind: ActionDrop}}, "127.0.0.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := localnetHost(t, tc.noLocalnet)
			p := Packet{Proto: inet.TCP, Dst: a(tc.dst), SrcPort: 40000, DstPort: tc.dport, TCPFlags: inet.SYN, TTL: 64, Length: 40}
			if tc.src != "" {
				p.Src = a(tc.src)
			}
			var res Result
			if tc.in == "" {
				res = h.Send(p)
			} else {
				res = h.Receive(tc.in, p)
			}
			assert.Equal(t, tc.disp, res.Disposition)
			assert.Equal(t, tc.reason, res.Reason.String())
			assert.Equal(t, tc.where, res.Where)
			assert.Equal(t, a(tc.outSrc), res.Packet.Src)
		})
	}
}

// TestRouteLocalnetCounters checks that the localhost NodePort dropped by
// the reroute after nat OUTPUT is counted up to nat OUTPUT and no further,
// as in the kernel (TestKernelRouteLocalnet).
func TestRouteLocalnetCounters(t *testing.T) {
	h := localnetHost(t, true)
	res := h.Send(Packet{Proto: inet.TCP, Src: netip.MustParseAddr("127.0.0.1"), Dst: netip.MustParseAddr("127.0.0.1"),
		SrcPort: 40000, DstPort: 30020, TCPFlags: inet.SYN, TTL: 64, Length: 40})
	require.Equal(t, ReasonInvalidSource, res.Reason)
	// The DNAT happened before the drop.
	assert.Equal(t, netip.MustParseAddr("10.244.1.5"), res.Packet.Dst)
	var hit []string
	for _, tbl := range h.Ruleset(IPv4).Tables() {
		for _, ch := range tbl.Chains() {
			for n, r := range ch.Rules {
				if r.Counters.Packets != 0 {
					hit = append(hit, fmt.Sprintf("%s/%s#%d", tbl.ID(), ch.Name, n+1))
				}
			}
		}
	}
	assert.ElementsMatch(t, []string{"raw/OUTPUT#1", "mangle/OUTPUT#1", "nat/OUTPUT#1", "nat/OUTPUT#2"}, hit)
}

// The localhost NodePort rules kube-proxy writes (and kubelet's
// KUBE-FIREWALL guard) exist because of route_localnet: a connection to
// 127.0.0.1:NodePort DNATed to a pod must leave the node with a
// 127.0.0.1 source, which only route_localnet=1 allows (and which
// kube-proxy then masquerades).
func ExampleHostConfig_routeLocalnet() {
	const rules = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A OUTPUT -d 127.0.0.1/32 -p tcp -m tcp --dport 30020 -j DNAT --to-destination 10.244.1.5:80
-A POSTROUTING -s 127.0.0.0/8 -o eth1 -j MASQUERADE
COMMIT
`
	for _, off := range []bool{true, false} {
		h := NewHost(HostConfig{NoRouteLocalnet: off})
		_ = h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24"))
		if err := h.Restore(IPv4, []byte(rules), RestoreOptions{}); err != nil {
			fmt.Println(err)
			return
		}
		res := h.Send(Packet{Proto: inet.TCP, Dst: netip.MustParseAddr("127.0.0.1"), SrcPort: 40000, DstPort: 30020, TCPFlags: inet.SYN, TTL: 64})
		localnet := 1
		if off {
			localnet = 0
		}
		fmt.Printf("route_localnet=%d: %s %s (%s) %s -> %s\n", localnet, res.Disposition, res.Reason, res.Where.Hook,
			res.Packet.Src, netip.AddrPortFrom(res.Packet.Dst, res.Packet.DstPort))
	}
	// Output:
	// route_localnet=0: dropped invalid source (OUTPUT) 127.0.0.1 -> 10.244.1.5:80
	// route_localnet=1: sent  (POSTROUTING) 10.244.1.1 -> 10.244.1.5:80
}
