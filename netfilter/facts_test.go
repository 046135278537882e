package netfilter

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// fillFacts reuses the host's Facts field by field; whatever an earlier
// packet left in any field must not survive into the next packet's facts.
func TestFillFactsLeavesNothingBehind(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		p := genFactsPacket().Draw(rt, "packet")
		var fresh conntrack.Facts
		fillFacts(&fresh, &p)

		var reused conntrack.Facts
		dirty(reflect.ValueOf(&reused).Elem())
		fillFacts(&reused, &p)
		require.Equal(rt, fresh, reused)
	})
}

// dirty sets every field of v, recursively, to a non-zero value.
func dirty(v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		if v.Type() == reflect.TypeFor[netip.Addr]() {
			v.Set(reflect.ValueOf(netip.MustParseAddr("203.0.113.77")))
			return
		}
		for i := range v.NumField() {
			dirty(v.Field(i))
		}
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64:
		v.SetInt(7)
	case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(7)
	default:
		panic("dirty: unhandled kind " + v.Kind().String())
	}
}

func genFactsPacket() *rapid.Generator[Packet] {
	return rapid.Custom(func(t *rapid.T) Packet {
		p := Packet{
			Family: IPv4,
			Proto:  rapid.SampledFrom([]inet.Proto{inet.TCP, inet.UDP, inet.ICMP, inet.SCTP, 47}).Draw(t, "proto"),
			Src:    netip.AddrFrom4([4]byte{10, 0, 0, rapid.Byte().Draw(t, "src")}),
			Dst:    netip.AddrFrom4([4]byte{10, 0, 1, rapid.Byte().Draw(t, "dst")}),
			Length: rapid.IntRange(20, 1500).Draw(t, "len"),
		}
		p.SrcPort, p.DstPort = rapid.Uint16().Draw(t, "sport"), rapid.Uint16().Draw(t, "dport")
		switch p.Proto {
		case inet.TCP:
			p.TCPFlags = inet.TCPFlags(rapid.Uint8().Draw(t, "flags"))
			p.Seq, p.Ack = rapid.Uint32().Draw(t, "seq"), rapid.Uint32().Draw(t, "ack")
			p.Window = rapid.Uint16().Draw(t, "win")
			if rapid.Bool().Draw(t, "wscale") {
				p.SetTCPOption(3)
				p.WScale = rapid.Uint8Range(0, 14).Draw(t, "shift")
			}
		case inet.ICMP:
			p.ICMPType = rapid.SampledFrom([]uint8{0, 3, 8, 11}).Draw(t, "type")
			p.ICMPID = rapid.Uint16().Draw(t, "id")
			p.Inner = InnerHeader{Proto: inet.UDP, Src: p.Dst, Dst: p.Src, SrcPort: 53, DstPort: 4000}
		}
		return p
	})
}
