package netfilter

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The compiled IPv4 table finds the route the walk over all routes finds,
// whatever the order, overlap and types of the routes, and follows
// interfaces and routes added after a lookup.
func TestFIBMatchesRouteScan(t *testing.T) {
	genAddr := rapid.Custom(func(t *rapid.T) netip.Addr {
		// Few distinct values, so that prefixes overlap and lookups hit.
		return netip.AddrFrom4([4]byte{10, rapid.Byte().Draw(t, "b") & 3, rapid.Byte().Draw(t, "c") & 3, rapid.Byte().Draw(t, "d")})
	})
	rapid.Check(t, func(rt *rapid.T) {
		h := NewHost(HostConfig{})
		lookups := func() {
			for range 20 {
				a := genAddr.Draw(rt, "dst")
				require.Same(rt, h.routeScan(a), h.route(a), "route to %v", a)
			}
			require.Same(rt, &h.loRoute, h.route(netip.MustParseAddr("127.3.2.1")))
		}
		for i := range rapid.IntRange(1, 12).Draw(rt, "steps") {
			if rapid.Bool().Draw(rt, "iface") {
				a := genAddr.Draw(rt, "addr")
				bits := rapid.IntRange(8, 32).Draw(rt, "bits")
				require.NoError(rt, h.AddInterface("eth"+string(rune('a'+i)), netip.PrefixFrom(a, bits)))
			} else {
				r := Route{
					Dst:   netip.PrefixFrom(genAddr.Draw(rt, "net"), rapid.IntRange(0, 32).Draw(rt, "len")),
					Type:  rapid.SampledFrom([]RouteType{RouteUnicast, RouteLocal, RouteBlackhole, RouteUnreachable}).Draw(rt, "type"),
					Iface: "eth0",
				}
				if r.Type == RouteUnicast && h.Interface("eth0") == nil {
					require.NoError(rt, h.AddInterface("eth0"))
				}
				require.NoError(rt, h.AddRoute(r))
			}
			lookups()
		}
	})
}
