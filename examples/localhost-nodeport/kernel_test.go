package main

import (
	"io"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
)

// TestKernel sends the example's SYN from a raw socket on the kernel lab's
// node, whose addresses are the example's (eth0 192.168.10.1, eth1 playing
// cni0 with 10.244.1.1, the server playing the pod 10.244.1.5), with the
// same kube-proxy rules and route_localnet setting, and compares: whether
// sendto failed (EINVAL where packetwalk reports "invalid source"),
// whether the SYN reached the pod and from which address, and the packet
// counters of every nat rule.
func TestKernel(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-lnp"})
	cfg := lab.Config()
	require.Equal(t, NodeIP, cfg.NodeEth0.Addr().String())
	require.Equal(t, Bridge, cfg.NodeEth1.Addr().String())
	require.Equal(t, Pod, cfg.Server[0].Addr().String())
	for _, c := range Cases {
		t.Run(c.Title, func(t *testing.T) {
			localnet := "0"
			if c.RouteLocalnet {
				localnet = "1"
			}
			require.NoError(t, lab.Node().Sysctl("net.ipv4.conf.all.route_localnet", localnet))
			rules, err := kubeProxyRules(c.LocalhostNodePorts)
			require.NoError(t, err)
			require.NoError(t, lab.Reset(string(rules)))
			p := curl()
			pkt, err := kerneltest.BuildPacket(kerneltest.FrameSpec{Proto: "tcp", Src: p.Src, Dst: p.Dst,
				SrcPort: p.SrcPort, DstPort: p.DstPort, TCPFlags: "SYN", Seq: 1})
			require.NoError(t, err)
			sendErr := lab.SendFromNode(pkt)
			obs, err := lab.Settle()
			require.NoError(t, err)
			kc, err := lab.Counters()
			require.NoError(t, err)

			h, err := node(c.LocalhostNodePorts, c.RouteLocalnet)
			require.NoError(t, err)
			res, err := Walk(io.Discard, c)
			require.NoError(t, err)
			t.Logf("kernel: sendto %v, frames:\n%s", sendErr, obs)
			t.Logf("packetwalk: %s %s %q", res.Disposition, res.Verdict, res.Reason)

			assert.Equal(t, sendErr != nil, res.Reason == netfilter.ReasonInvalidSource, "sendto fails exactly when packetwalk drops for an invalid source")
			assert.Equal(t, len(obs.Server) > 0, res.Disposition == netfilter.Sent, "the SYN reached the pod")
			if len(obs.Server) > 0 {
				assert.Equal(t, netip.MustParseAddr(Bridge), obs.Server[0].Summary.Src, "source on the pod's wire")
				assert.Equal(t, res.Packet.Src, obs.Server[0].Summary.Src)
			}
			// The same walk in a fresh host, to read its nat counters.
			_ = h.Send(curl())
			nat := h.Ruleset(netfilter.IPv4).Table(netfilter.NAT)
			for _, ch := range nat.Chains() {
				for n, r := range ch.Rules {
					want, ok := kc.Rule("nat", ch.Name, n+1)
					require.True(t, ok, "nat %s rule %d", ch.Name, n+1)
					assert.Equal(t, want.Packets, r.Counters.Packets, "nat %s rule %d: kernel (want) vs packetwalk packets", ch.Name, n+1)
				}
			}
		})
	}
}
