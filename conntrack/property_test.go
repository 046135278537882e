package conntrack

import (
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

func TestPropertyReverseIsInvolution(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		a := netip.AddrFrom4([4]byte{10, 0, 0, rapid.Byte().Draw(rt, "a")})
		b := netip.AddrFrom4([4]byte{10, 0, 1, rapid.Byte().Draw(rt, "b")})
		var tp Tuple
		if rapid.Bool().Draw(rt, "icmp") {
			typ := rapid.SampledFrom([]uint8{0, 8, 13, 14, 15, 16, 17, 18}).Draw(rt, "type")
			tp = ICMPTuple(a, b, typ, 0, rapid.Uint16().Draw(rt, "id"))
		} else {
			proto := rapid.SampledFrom([]inet.Proto{inet.TCP, inet.UDP, 47}).Draw(rt, "proto")
			tp = TupleFrom(proto, netip.AddrPortFrom(a, rapid.Uint16().Draw(rt, "sp")), netip.AddrPortFrom(b, rapid.Uint16().Draw(rt, "dp")))
		}
		require.Equal(rt, tp, tp.Reverse().Reverse())
		require.NotEqual(rt, tp, tp.Reverse())
	})
}

// However flows collide, every connection set up through DNAT and
// MASQUERADE gets a unique reply tuple, and its replies are translated back
// to exactly what the client sent, reversed.
func TestPropertyNATRepliesUnNAT(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		tb, _ := newTestTable(t, Config{Seed: rapid.Uint64().Draw(rt, "seed")})
		var flags NATFlags
		if rapid.Bool().Draw(rt, "randomFully") {
			flags = NATRandomFully
		}
		n := masqNode(tb, flags)
		n.dnat = func(tp Tuple) (NATRange, bool) {
			if tp.Dst == ip("10.96.0.10") {
				return NATRange{MinAddr: ip("10.244.1.5"), MinPort: 8080}, true
			}
			return NATRange{}, false
		}
		type flow struct{ sent, out Facts }
		var flows []flow
		for i := range rapid.IntRange(1, 40).Draw(rt, "flows") {
			src := netip.AddrPortFrom(netip.AddrFrom4([4]byte{192, 168, 10, rapid.ByteRange(2, 4).Draw(rt, "client")}),
				rapid.Uint16Range(1020, 1030).Draw(rt, "sport"))
			dst := rapid.SampledFrom([]string{"10.96.0.10:80", "10.244.1.5:8080"}).Draw(rt, "dst")
			f := Facts{Tuple: TupleFrom(inet.UDP, src, ap(dst)), Len: 29}
			if _, _, ok := tb.Lookup(f.Tuple); ok {
				continue
			}
			out, info, ok := n.forward(rt, f)
			require.True(rt, ok, "flow %d %v dropped", i, f.Tuple)
			require.Equal(rt, StateNew, info.State)
			require.Equal(rt, out.Tuple.Reverse(), info.Entry.Reply())
			flows = append(flows, flow{f, out})
		}
		seen := map[Tuple]bool{}
		for _, fl := range flows {
			require.False(rt, seen[fl.out.Tuple], "two flows leave as %v", fl.out.Tuple)
			seen[fl.out.Tuple] = true
			back, info, ok := n.forward(rt, Facts{Tuple: fl.out.Reverse()})
			require.True(rt, ok)
			require.Equal(rt, Reply, info.Dir)
			require.Equal(rt, fl.sent.Reverse(), back.Tuple)
		}
	})
}
