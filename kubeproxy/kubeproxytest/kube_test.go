package kubeproxytest_test

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
	"github.com/packetwalk/packetwalk/kubeproxy/kubeproxytest"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

func toRat[K comparable](d netfiltertest.Distribution[K]) map[K]*big.Rat { return d }

// TestServicesEndpointsFair: for every generated service and endpoint
// set, a new connection to each service port reaches exactly the
// endpoints kube-proxy chooses (ready ones, else serving and terminating
// ones), with probabilities summing to exactly 1, each within
// probability.CurrentBound(n) of 1/n.
func TestServicesEndpointsFair(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		svc := kubeproxytest.Services(kubeproxytest.ServiceOptions{}).Draw(t, "service")
		slices := kubeproxytest.EndpointSets(svc, kubeproxytest.EndpointOptions{Max: 30}).Draw(t, "endpoints")
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
			d := netfiltertest.Distribute(outs, netfiltertest.ByDestination)
			require.Equal(t, "1/1", d.Total().String())
			if len(eps) == 0 {
				require.Equal(t, map[string]*big.Rat{"rejected": big.NewRat(1, 1)}, toRat(netfiltertest.Distribute(outs, netfiltertest.ByFate)))
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

// TestPolicyServicesLoad: services with traffic policies and affinity,
// in both families, generate rules that load, and a new connection's
// fates sum to exactly 1.
func TestPolicyServicesLoad(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				opts := kubeproxytest.ServiceOptions{Policies: true}
				cfg := kubeproxy.DefaultConfig("node-a")
				src, uplink := "192.168.10.2", "192.168.10.1/24"
				if v6 {
					opts.ClusterIPs = netip.MustParsePrefix("fd00:96::/112")
					cfg.Family = corev1.IPv6Protocol
					cfg.NodeIPs = []netip.Addr{netip.MustParseAddr("2001:db8:10::1")}
					src, uplink = "2001:db8:10::2", "2001:db8:10::1/64"
				}
				svc := kubeproxytest.Services(opts).Draw(t, "service")
				slices := kubeproxytest.EndpointSets(svc, kubeproxytest.EndpointOptions{}).Draw(t, "endpoints")
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
				require.Equal(t, "1/1", netfiltertest.Distribute(outs, netfiltertest.ByFate).Total().String())
			})
		})
	}
}

// node returns a host with an uplink (192.168.10.1/24 on eth0), a pod
// bridge (10.244.0.1/16 on cbr0) and a default route, as a Kubernetes
// node.
func node(t require.TestingT, seed uint64) *netfilter.Host {
	h := netfilter.NewHost(netfilter.HostConfig{Seed: seed})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("cbr0", netip.MustParsePrefix("10.244.0.1/16")))
	// A default route, as on a real node: without it a service with no
	// endpoints would fail routing before kube-proxy's REJECT.
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("192.168.10.254")}))
	return h
}

// install generates kube-proxy's rules for the cluster and loads them.
func install(t require.TestingT, h *netfilter.Host, svcs []corev1.Service, slices []discoveryv1.EndpointSlice) {
	doc, err := kubeproxy.Generate(kubeproxy.DefaultConfig("node-a"), svcs, slices, nil)
	require.NoError(t, err)
	require.NoError(t, kubeproxy.Install(h, doc))
}
