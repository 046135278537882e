package probability

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func udp(sport uint16) netfilter.Packet {
	return netfilter.Packet{Family: netfilter.IPv4, Proto: inet.UDP, Src: netip.MustParseAddr("192.168.10.2"),
		Dst: netip.MustParseAddr("10.96.0.10"), SrcPort: sport, DstPort: 53, TTL: 64, Length: 28}
}

func host(t *testing.T, rules string) *netfilter.Host {
	t.Helper()
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 3})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth1", Gateway: netip.MustParseAddr("10.244.1.254")}))
	require.NoError(t, h.Restore(netfilter.IPv4, []byte(rules), netfilter.RestoreOptions{}))
	return h
}

// cascadeRules is a kube-proxy style cascade over n endpoints with the
// given --probability arguments, or nth round robin when nth is set.
func cascadeRules(n int, args []string, nth bool) string {
	s := "*nat\n"
	for i := range n {
		switch {
		case nth && i < n-1:
			s += fmt.Sprintf("-A PREROUTING -d 10.96.0.10/32 -p udp -m statistic --mode nth --every %d --packet 0 -j DNAT --to-destination %s:53\n", n-i, epAddr(i))
		case !nth && i < n-1:
			s += fmt.Sprintf("-A PREROUTING -d 10.96.0.10/32 -p udp -m statistic --mode random --probability %s -j DNAT --to-destination %s:53\n", args[i], epAddr(i))
		default:
			s += fmt.Sprintf("-A PREROUTING -d 10.96.0.10/32 -p udp -j DNAT --to-destination %s:53\n", epAddr(i))
		}
	}
	return s + "COMMIT\n"
}

// Explain and the closed form agree exactly, in both formats.
func TestExplainAgreesWithCascade(t *testing.T) {
	for _, format := range []string{FormatCurrent, FormatLegacy} {
		for _, n := range []int{1, 2, 3, 5, 7, 64, 321} {
			args := KubeProxyArgs(n, format)
			h := host(t, cascadeRules(n, args, false))
			outs, err := h.Explain("eth0", udp(1000))
			require.NoError(t, err)
			got := map[string]string{}
			for _, o := range outs {
				got[o.Result.Packet.Dst.String()] = o.Probability.Rat().String()
			}
			want := map[string]string{}
			for i, p := range EndpointProbabilities(n, format) {
				if p.Sign() > 0 {
					want[epAddr(i)] = p.String()
				}
			}
			assert.Equal(t, want, got, "n=%d %s", n, format)
		}
	}
}

// nth round robin is exactly periodic: the cascade every n-i, packet 0
// sends new connection k to endpoint k mod n, every time, for any seed,
// and Explain sees one certain outcome per packet.
func TestNthRoundRobinIsPeriodic(t *testing.T) {
	for _, n := range []int{2, 3, 5} {
		h := host(t, cascadeRules(n, nil, true))
		var seq []string
		for k := range 4 * n {
			p := udp(uint16(2000 + k))
			outs, err := h.Explain("eth0", p)
			require.NoError(t, err)
			require.Len(t, outs, 1)
			res := h.Receive("eth0", p)
			assert.Equal(t, outs[0].Result.Packet.Dst, res.Packet.Dst, "Explain predicts the run")
			seq = append(seq, res.Packet.Dst.String())
		}
		for k := range seq {
			assert.Equal(t, seq[k%n], seq[k], "n=%d: connection %d", n, k)
		}
		seen := map[string]bool{}
		for _, d := range seq[:n] {
			seen[d] = true
		}
		assert.Len(t, seen, n, "n=%d: one period visits every endpoint once: %v", n, seq[:n])
	}
}

func epAddr(i int) string { return fmt.Sprintf("10.244.%d.%d", 2+i/250, i%250) }
