package netfilter

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// TestKernelTCPLoose sends a mid-stream ACK (no SYN seen) through the
// kernel lab's node and a Host, with net.netfilter.nf_conntrack_tcp_loose
// 1 (picked up: NEW, then ESTABLISHED) and 0 (INVALID, dropped by
// `--ctstate INVALID -j DROP`), and compares counters and delivery.
func TestKernelTCPLoose(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-tl"})
	cfg := lab.Config()
	const rules = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A FORWARD -m conntrack --ctstate INVALID -j DROP\n-A FORWARD -m conntrack --ctstate NEW\nCOMMIT\n"
	for _, loose := range []string{"1", "0"} {
		t.Run("tcp_loose="+loose, func(t *testing.T) {
			require.NoError(t, lab.Node().Sysctl("net.netfilter.nf_conntrack_tcp_loose", loose))
			defer func() { require.NoError(t, lab.Node().Sysctl("net.netfilter.nf_conntrack_tcp_loose", "1")) }()
			require.NoError(t, lab.Reset(rules))
			spec := kerneltest.FrameSpec{Proto: "tcp", Src: cfg.Client.Addr(), Dst: cfg.Server[0].Addr(), SrcPort: 40000, DstPort: 80,
				TCPFlags: "ACK", Seq: 1000, Ack: 5000}
			f, err := lab.Frame(spec)
			require.NoError(t, err)
			obs, err := lab.Exchange(f)
			require.NoError(t, err)
			kc, err := lab.Counters()
			require.NoError(t, err)
			ct, err := lab.Conntrack()
			require.NoError(t, err)

			h := NewHost(HostConfig{ConntrackTCPStrict: loose == "0"})
			require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0))
			require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1))
			require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
			res := h.Receive("eth0", Packet{Proto: inet.TCP, Src: spec.Src, Dst: spec.Dst, SrcPort: 40000, DstPort: 80,
				TCPFlags: inet.ACK, Seq: 1000, Ack: 5000, Window: 64240, TTL: 64, Length: 40})
			t.Logf("kernel: %s; conntrack %q; packetwalk %s", strings.Join(kc.NonZero(), ", "), ct, res.Disposition)
			assert.Equal(t, len(obs.Server) > 0, res.Disposition == Forwarded, "reached the server")
			assert.Equal(t, len(ct) > 0, res.Conn != nil, "conntrack entry")
			for n, r := range h.Ruleset(IPv4).Table(Filter).Chain("FORWARD").Rules {
				want, ok := kc.Rule("filter", "FORWARD", n+1)
				require.True(t, ok)
				assert.Equal(t, want.Packets, r.Counters.Packets, "FORWARD rule %d", n+1)
			}
		})
	}
}
