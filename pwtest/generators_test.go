package pwtest_test

import (
	"math/big"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"pgregory.net/rapid"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/probability"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/pwtest"
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
			require.Equal(t, tt.want, pwtest.AddrIn(netip.MustParsePrefix(tt.prefix), tt.n).String())
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
			opts := pwtest.PacketOptions{Src: []netip.Prefix{src}, Dst: []netip.Prefix{dst}, Ports: []uint16{80, 443}}
			rapid.Check(t, func(t *rapid.T) {
				p := pwtest.Packets(opts).Draw(t, "packet")
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
				doc := pwtest.Rulesets(pwtest.RulesetOptions{Family: fam}).Draw(t, "ruleset")
				h := netfilter.NewHost(netfilter.HostConfig{Seed: 1})
				if fam == netfilter.IPv4 {
					require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/8")))
					require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("192.168.0.1/16")))
				} else {
					require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("fd00::1/64")))
					require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("2001:db8::1/64")))
				}
				require.NoError(t, h.Restore(fam, []byte(doc), netfilter.RestoreOptions{}))
				p := pwtest.Packets(pwtest.PacketOptions{Family: fam, Ports: []uint16{22, 53, 80, 443, 8080}}).Draw(t, "packet")
				iface := rapid.SampledFrom([]string{"eth0", "eth1", ""}).Draw(t, "iface")
				outs, err := h.Explain(iface, p)
				require.NoError(t, err)
				d := pwtest.Distribute(outs, func(netfilter.Result) bool { return true })
				require.Equal(t, "1/1", d.Total().String())
				again, err := h.Explain(iface, p)
				require.NoError(t, err)
				require.True(t, pwtest.AssertExact(t, again, pwtest.ByFate, toRat(pwtest.Distribute(outs, pwtest.ByFate))))
			})
		})
	}
}

func toRat[K comparable](d pwtest.Distribution[K]) map[K]*big.Rat { return d }

// TestServicesEndpointsFair: for every generated service and endpoint
// set, a new connection to each service port reaches exactly the
// endpoints kube-proxy chooses (ready ones, else serving and terminating
// ones), with probabilities summing to exactly 1, each within
// probability.CurrentBound(n) of 1/n.
func TestServicesEndpointsFair(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		svc := pwtest.Services(pwtest.ServiceOptions{}).Draw(t, "service")
		slices := pwtest.EndpointSets(svc, pwtest.EndpointOptions{Max: 30}).Draw(t, "endpoints")
		h := node(t, 1)
		install(t, h, []corev1.Service{svc}, slices)
		for _, sp := range svc.Spec.Ports {
			eps := chosen(slices, sp)
			p := netfilter.Packet{Family: netfilter.IPv4, Proto: protoNumber(sp.Protocol),
				Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr(svc.Spec.ClusterIP),
				SrcPort: 40000, DstPort: uint16(sp.Port), TTL: 64, Length: 60}
			switch p.Proto {
			case inet.TCP:
				p.TCPFlags = inet.SYN
			case inet.SCTP:
				p.SCTPChunks[0], p.NumSCTPChunks = netfilter.SCTPChunk{Type: 1}, 1
			}
			outs, err := h.Explain("eth0", p)
			require.NoError(t, err)
			d := pwtest.Distribute(outs, pwtest.ByDestination)
			require.Equal(t, "1/1", d.Total().String())
			if len(eps) == 0 {
				require.Equal(t, map[string]*big.Rat{"rejected": big.NewRat(1, 1)}, toRat(pwtest.Distribute(outs, pwtest.ByFate)))
				continue
			}
			require.Len(t, d, len(eps), "%v", d)
			bound := probability.CurrentBound(len(eps))
			for _, ep := range eps {
				got, ok := d[ep]
				require.True(t, ok, "endpoint %v unreached:\n%v", ep, d)
				dev := new(big.Rat).Sub(got, big.NewRat(1, int64(len(eps))))
				require.LessOrEqual(t, new(big.Rat).Abs(dev).Cmp(bound), 0, "endpoint %v: %v", ep, got)
			}
		}
	})
}

// chosen returns the endpoints kube-proxy balances a service port over
// for cluster traffic: the ready ones, or else the serving and
// terminating ones.
func chosen(es []discoveryv1.EndpointSlice, sp corev1.ServicePort) []netip.AddrPort {
	var ready, fallback []netip.AddrPort
	for _, s := range es {
		var port uint16
		for _, p := range s.Ports {
			if *p.Name == sp.Name {
				port = uint16(*p.Port)
			}
		}
		for _, e := range s.Endpoints {
			ap := netip.AddrPortFrom(netip.MustParseAddr(e.Addresses[0]), port)
			c := e.Conditions
			switch {
			case c.Ready == nil || *c.Ready:
				ready = append(ready, ap)
			case (c.Serving == nil || *c.Serving) && c.Terminating != nil && *c.Terminating:
				fallback = append(fallback, ap)
			}
		}
	}
	if len(ready) > 0 {
		return ready
	}
	return fallback
}

func protoNumber(p corev1.Protocol) inet.Proto {
	return map[corev1.Protocol]inet.Proto{corev1.ProtocolTCP: inet.TCP, corev1.ProtocolUDP: inet.UDP, corev1.ProtocolSCTP: inet.SCTP}[p]
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
	pwtest.AssertExact(t, outs, pwtest.ByFate, map[string]*big.Rat{"dropped": big.NewRat(1, 2), "rejected": reject, "delivered": deliver})
	pwtest.AssertWithin(t, outs, pwtest.ByFate, map[string]float64{"dropped": 0.5, "rejected": 0.05, "delivered": 0.45}, 1e-9)
}

// TestPolicyServicesLoad: services with traffic policies and affinity,
// in both families, generate rules that load, and a new connection's
// fates sum to exactly 1.
func TestPolicyServicesLoad(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				opts := pwtest.ServiceOptions{Policies: true}
				cfg := kubeproxy.DefaultConfig("node-a")
				src, uplink := "192.168.10.2", "192.168.10.1/24"
				if v6 {
					opts.ClusterIPs = netip.MustParsePrefix("fd00:96::/112")
					cfg.Family = corev1.IPv6Protocol
					cfg.NodeIPs = []netip.Addr{netip.MustParseAddr("2001:db8:10::1")}
					src, uplink = "2001:db8:10::2", "2001:db8:10::1/64"
				}
				svc := pwtest.Services(opts).Draw(t, "service")
				slices := pwtest.EndpointSets(svc, pwtest.EndpointOptions{}).Draw(t, "endpoints")
				doc, err := kubeproxy.Generate(cfg, []corev1.Service{svc}, slices, nil)
				require.NoError(t, err)
				h := netfilter.NewHost(netfilter.HostConfig{})
				require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix(uplink)))
				require.NoError(t, kubeproxy.Install(h, doc))
				fam := netfilter.IPv4
				if v6 {
					fam = netfilter.IPv6
				}
				sp := svc.Spec.Ports[0]
				p := netfilter.Packet{Family: fam, Proto: protoNumber(sp.Protocol), Src: netip.MustParseAddr(src),
					Dst: netip.MustParseAddr(svc.Spec.ClusterIP), SrcPort: 40000, DstPort: uint16(sp.Port), TCPFlags: inet.SYN, TTL: 64, Length: 80}
				if p.Proto != inet.TCP {
					p.TCPFlags = 0
				}
				if p.Proto == inet.SCTP {
					p.SCTPChunks[0], p.NumSCTPChunks = netfilter.SCTPChunk{Type: 1}, 1
				}
				outs, err := h.Explain("eth0", p)
				require.NoError(t, err)
				require.Equal(t, "1/1", pwtest.Distribute(outs, pwtest.ByFate).Total().String())
			})
		})
	}
}
