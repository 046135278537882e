package conntrack

import (
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// The index must behave as a map from key to (entry, direction) through
// any sequence of inserts and deletes, including growth, probe runs that
// wrap around the end of the slots, and deletes inside those runs. The key
// is the whole tuple, or with bySource its source part.
func TestIndexIsAMap(t *testing.T) {
	addrs := []netip.Addr{
		netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2"),
		netip.MustParseAddr("::ffff:10.0.0.1"), netip.MustParseAddr("fe80::1%eth0"), netip.MustParseAddr("fe80::1"),
	}
	genTuple := rapid.Custom(func(t *rapid.T) Tuple {
		return Tuple{
			Src: rapid.SampledFrom(addrs).Draw(t, "src"), Dst: rapid.SampledFrom(addrs).Draw(t, "dst"),
			SrcPort: rapid.Uint16Range(0, 3).Draw(t, "sport"), DstPort: rapid.Uint16Range(0, 3).Draw(t, "dport"),
			Proto: rapid.SampledFrom([]inet.Proto{inet.TCP, inet.UDP}).Draw(t, "proto"),
			Zone:  rapid.Uint16Range(0, 1).Draw(t, "zone"),
		}
	})
	type held struct {
		e   *Entry
		dir Dir
	}
	for _, bySource := range []bool{false, true} {
		key := func(tp Tuple) Tuple {
			if bySource {
				return Tuple{Src: tp.Src, SrcPort: tp.SrcPort, Proto: tp.Proto, Zone: tp.Zone}
			}
			return tp
		}
		// The keys an entry is put under, and their directions.
		keys := func(e *Entry) ([]Tuple, []Dir) {
			if bySource {
				return []Tuple{e.Original}, []Dir{Original}
			}
			return []Tuple{e.Reply, e.Original}, []Dir{Reply, Original}
		}
		t.Run(map[bool]string{false: "tuples", true: "sources"}[bySource], func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				x := index{bySource: bySource}
				ref := map[Tuple]held{}
				var live []*Entry
				for range rapid.IntRange(1, 300).Draw(rt, "ops") {
					if len(live) == 0 || rapid.IntRange(0, 2).Draw(rt, "op") > 0 {
						orig := genTuple.Draw(rt, "tuple")
						e := &Entry{Original: orig, Reply: orig.Reverse()}
						tps, dirs := keys(e)
						for i := range tps {
							x.put(e, dirs[i])
							ref[key(tps[i])] = held{e, dirs[i]}
						}
						live = append(live, e)
					} else {
						i := rapid.IntRange(0, len(live)-1).Draw(rt, "victim")
						e := live[i]
						live = append(live[:i], live[i+1:]...)
						tps, _ := keys(e)
						for _, tp := range tps {
							want := ref[key(tp)].e == e
							require.Equal(rt, want, x.del(&tp, e), "del %v", tp)
							if want {
								delete(ref, key(tp))
							}
						}
					}
					require.Equal(rt, len(ref), x.used)
					for k, h := range ref {
						e, dir, ok := x.get(&k)
						require.True(rt, ok, "get %v", k)
						require.Same(rt, h.e, e)
						require.Equal(rt, h.dir, dir)
					}
					probe := genTuple.Draw(rt, "probe")
					_, want := ref[key(probe)]
					_, _, got := x.get(&probe)
					require.Equal(rt, want, got, "get %v", probe)
				}
				n, originals := 0, 0
				x.entries(func(e *Entry) {
					n++
					require.Equal(rt, held{e, Original}, ref[key(e.Original)])
				})
				for _, h := range ref {
					if h.dir == Original {
						originals++
					}
				}
				require.Equal(rt, originals, n)
			})
		})
	}
}

func BenchmarkIndexGet(b *testing.B) {
	var x index
	var tuples []Tuple
	for i := range 1000 {
		orig := TupleFrom(inet.TCP, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), uint16(1024+i)),
			netip.MustParseAddrPort("10.96.0.1:80"))
		e := &Entry{Original: orig, Reply: orig.Reverse()}
		x.put(e, Reply)
		x.put(e, Original)
		tuples = append(tuples, orig)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if _, _, ok := x.get(&tuples[i%len(tuples)]); !ok {
			b.Fatal("missing")
		}
		i++
	}
}
