package netfiltertest_test

import (
	"math/big"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

func TestAddrIn(t *testing.T) {
	tests := []struct {
		prefix string
		n      uint64
		want   string
	}{
		{"10.0.0.0/8", 0, "10.0.0.1"},
		{"10.0.0.0/8", 258, "10.0.1.2"},
		{"10.1.2.3/24", 256 + 7, "10.1.2.7"},
		{"192.168.1.9/32", 5, "192.168.1.9"},
		{"192.168.1.8/31", 0, "192.168.1.8"},
		{"0.0.0.0/0", 1<<32 - 1, "255.255.255.255"},
		{"fd00::/64", 0x1234, "fd00::1234"},
		{"fd00::/120", 0x1234, "fd00::34"},
		{"2001:db8::/32", 1 << 63, "2001:db8:0:0:8000::"},
	}
	for _, tt := range tests {
		t.Run(tt.prefix, func(t *testing.T) {
			require.Equal(t, tt.want, netfiltertest.AddrIn(netip.MustParsePrefix(tt.prefix), tt.n).String())
		})
	}
}

func TestPacketsStayInOptions(t *testing.T) {
	for _, fam := range []netfilter.Family{netfilter.IPv4, netfilter.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			src, dst := netip.MustParsePrefix("172.16.0.0/12"), netip.MustParsePrefix("198.51.100.0/24")
			if fam == netfilter.IPv6 {
				src, dst = netip.MustParsePrefix("fd00:1::/48"), netip.MustParsePrefix("2001:db8:5::/64")
			}
			opts := netfiltertest.PacketOptions{Src: []netip.Prefix{src}, Dst: []netip.Prefix{dst}, Ports: []uint16{80, 443}}
			rapid.Check(t, func(t *rapid.T) {
				p := netfiltertest.Packets(opts).Draw(t, "packet")
				require.Equal(t, fam, p.Family)
				require.True(t, src.Contains(p.Src), p.Src)
				require.True(t, dst.Contains(p.Dst), p.Dst)
				switch p.Proto {
				case inet.TCP, inet.UDP, inet.SCTP:
					require.Contains(t, opts.Ports, p.DstPort)
					require.GreaterOrEqual(t, p.SrcPort, uint16(1024))
				case inet.ICMP:
					require.Equal(t, netfilter.IPv4, fam)
				case inet.ICMPv6:
					require.Equal(t, netfilter.IPv6, fam)
				default:
					t.Fatalf("protocol %d", p.Proto)
				}
				require.GreaterOrEqual(t, p.Length, 28)
				require.NotZero(t, p.TTL)
			})
		})
	}
}

// TestRulesetsLoadAndExplainSumsToOne: every generated ruleset loads, and
// Explain's outcomes for any packet sum to exactly 1 without changing
// what the next packet sees.
func TestRulesetsLoadAndExplainSumsToOne(t *testing.T) {
	for _, fam := range []netfilter.Family{netfilter.IPv4, netfilter.IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				doc := netfiltertest.Rulesets(netfiltertest.RulesetOptions{Family: fam}).Draw(t, "ruleset")
				h := netfilter.NewHost(netfilter.HostConfig{Seed: 1})
				if fam == netfilter.IPv4 {
					require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/8")))
					require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("192.168.0.1/16")))
				} else {
					require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("fd00::1/64")))
					require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("2001:db8::1/64")))
				}
				require.NoError(t, h.Restore(fam, []byte(doc), netfilter.RestoreOptions{}))
				p := netfiltertest.Packets(netfiltertest.PacketOptions{Family: fam, Ports: []uint16{22, 53, 80, 443, 8080}}).Draw(t, "packet")
				iface := rapid.SampledFrom([]string{"eth0", "eth1", ""}).Draw(t, "iface")
				outs, err := h.Explain(iface, p)
				require.NoError(t, err)
				d := netfiltertest.Distribute(outs, func(netfilter.Result) bool { return true })
				require.Equal(t, "1/1", d.Total().String())
				again, err := h.Explain(iface, p)
				require.NoError(t, err)
				require.True(t, netfiltertest.AssertExact(t, again, netfiltertest.ByFate, toRat(netfiltertest.Distribute(outs, netfiltertest.ByFate))))
			})
		})
	}
}

// TestExactFilterCascade: two random rules in a filter chain give exact
// dyadic fates, which AssertExact checks by disposition.
func TestExactFilterCascade(t *testing.T) {
	h := netfilter.NewHost(netfilter.HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/8")))
	require.NoError(t, h.Restore(netfilter.IPv4, []byte(`*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -m statistic --mode random --probability 0.5 -j DROP
-A INPUT -p tcp -m statistic --mode random --probability 0.1 -j REJECT
COMMIT
`), netfilter.RestoreOptions{}))
	p := netfilter.Packet{Family: netfilter.IPv4, Proto: inet.TCP, Src: netip.MustParseAddr("10.1.2.3"),
		Dst: netip.MustParseAddr("10.0.0.1"), SrcPort: 5555, DstPort: 22, TCPFlags: inet.SYN, TTL: 64, Length: 40}
	outs, err := h.Explain("eth0", p)
	require.NoError(t, err)
	// 0.1 is stored as lround(0.1·2^31) = 214748365.
	reject := big.NewRat(214748365, 1<<32)
	deliver := new(big.Rat).Sub(big.NewRat(1, 2), reject)
	netfiltertest.AssertExact(t, outs, netfiltertest.ByFate, map[string]*big.Rat{"dropped": big.NewRat(1, 2), "rejected": reject, "delivered": deliver})
	netfiltertest.AssertWithin(t, outs, netfiltertest.ByFate, map[string]float64{"dropped": 0.5, "rejected": 0.05, "delivered": 0.45}, 1e-9)
}

func toRat[K comparable](d netfiltertest.Distribution[K]) map[K]*big.Rat { return d }
