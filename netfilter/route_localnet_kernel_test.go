package netfilter

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// localnetRules counts every packet in every chain it crosses, DNATs a
// NodePort on the node's address to 127.0.0.1 (what route_localnet must
// allow) and a NodePort on 127.0.0.1 to a pod (kube-proxy's localhost
// NodePorts), masquerading a 127.0.0.0/8 source leaving on eth1. filter
// INPUT drops what it counted, so the node's own stack does not answer
// (packetwalk does not model its RST).
const localnetRules = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -p tcp
-A OUTPUT -p tcp
COMMIT
*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -p tcp
-A INPUT -p tcp
-A FORWARD -p tcp
-A OUTPUT -p tcp
-A POSTROUTING -p tcp
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -p tcp
-A PREROUTING -d 192.168.10.1/32 -p tcp -m tcp --dport 30020 -j DNAT --to-destination 127.0.0.1:8080
-A OUTPUT -p tcp
-A OUTPUT -d 127.0.0.1/32 -p tcp -m tcp --dport 30020 -j DNAT --to-destination 10.244.1.5:80
-A POSTROUTING -p tcp
-A POSTROUTING -s 127.0.0.0/8 -o eth1 -j MASQUERADE
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp
-A INPUT -p tcp -j DROP
-A FORWARD -p tcp
-A OUTPUT -p tcp
COMMIT
`

// localnetCase is one packet of the route_localnet experiment.
type localnetCase struct {
	name  string
	local bool // sent by the node (raw socket) rather than received on eth0
	src   string
	dst   string
	dport uint16
}

var localnetCases = []localnetCase{
	{name: "dst 127.0.0.1 on eth0", src: "192.168.10.2", dst: "127.0.0.1", dport: 80},
	{name: "src 127.0.0.5 on eth0", src: "127.0.0.5", dst: "10.244.1.5", dport: 80},
	{name: "DNAT to 127.0.0.1", src: "192.168.10.2", dst: "192.168.10.1", dport: 30020},
	{name: "localhost NodePort", local: true, src: "127.0.0.1", dst: "127.0.0.1", dport: 30020},
}

// TestKernelRouteLocalnet sends the same packets through the kernel lab's
// node and through a Host, with net.ipv4.conf.all.route_localnet 0 and 1,
// and compares every rule counter and whether a frame reached the server.
// With 0, a packet received on eth0 with a 127.0.0.0/8 destination (after
// PREROUTING's DNAT) or source is a martian dropped by the routing
// decision, and the localhost NodePort is dropped by the reroute after nat
// OUTPUT (the raw socket's sendto fails with EINVAL), so filter OUTPUT
// never sees it.
func TestKernelRouteLocalnet(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-rl"})
	cfg := lab.Config()
	for _, localnet := range []string{"0", "1"} {
		require.NoError(t, lab.Node().Sysctl("net.ipv4.conf.all.route_localnet", localnet))
		for _, tc := range localnetCases {
			t.Run("route_localnet="+localnet+"/"+tc.name, func(t *testing.T) {
				require.NoError(t, lab.Reset(localnetRules))
				spec := kerneltest.FrameSpec{Proto: "tcp", Src: netip.MustParseAddr(tc.src), Dst: netip.MustParseAddr(tc.dst),
					SrcPort: 40000, DstPort: tc.dport, TCPFlags: "SYN", Seq: 1}
				var obs kerneltest.Observation
				var sendErr error
				if tc.local {
					pkt, err := kerneltest.BuildPacket(spec)
					require.NoError(t, err)
					sendErr = lab.SendFromNode(pkt)
					obs, err = lab.Settle()
					require.NoError(t, err)
				} else {
					f, err := lab.Frame(spec)
					require.NoError(t, err)
					obs, err = lab.Exchange(f)
					require.NoError(t, err)
				}
				kc, err := lab.Counters()
				require.NoError(t, err)

				h := NewHost(HostConfig{NoRouteLocalnet: localnet == "0"})
				require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0))
				require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1))
				require.NoError(t, h.Restore(IPv4, []byte(localnetRules), RestoreOptions{}))
				p := Packet{Proto: inet.TCP, Src: spec.Src, Dst: spec.Dst, SrcPort: 40000, DstPort: tc.dport, TCPFlags: inet.SYN, TTL: 64, Length: 40}
				var res Result
				if tc.local {
					res = h.Send(p)
				} else {
					res = h.Receive("eth0", p)
				}
				t.Logf("kernel: sendto %v, counters %s, frames:\n%s", sendErr, strings.Join(kc.NonZero(), ", "), obs)
				t.Logf("packetwalk: %s %s %q", res.Disposition, res.Verdict, res.Reason)
				assert.Equal(t, len(obs.Server) > 0, res.Disposition == Forwarded || res.Disposition == Sent, "reached the server")
				if len(obs.Server) > 0 {
					assert.Equal(t, obs.Server[0].Summary.Src, res.Packet.Src, "source on the wire")
				}
				assert.Equal(t, sendErr != nil, res.Disposition == Dropped && res.Reason != NoReason && tc.local, "sendto error")
				assertSameRuleCounters(t, h, IPv4, kc, false)
			})
		}
	}
	// The output route lookup itself refuses a 127.0.0.0/8 source off the
	// loopback device while route_localnet is 0.
	for _, localnet := range []string{"0", "1"} {
		require.NoError(t, lab.Node().Sysctl("net.ipv4.conf.all.route_localnet", localnet))
		out, _, err := lab.Node().Exec("", "ip", "route", "get", "10.244.1.5", "from", "127.0.0.1")
		t.Logf("route_localnet=%s: ip route get 10.244.1.5 from 127.0.0.1: %q %v", localnet, out, err)
		assert.Equal(t, localnet == "0", err != nil, "route_localnet=%s: output route from 127.0.0.1 refused", localnet)
	}
}
