package conntrack

import (
	"net/netip"
	"testing"
	"time"
	"unsafe"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
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
		netip.MustParseAddr("::ffff:10.0.0.1"), netip.MustParseAddr("fe80::2"), netip.MustParseAddr("fe80::1"),
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
				return []Tuple{e.Original()}, []Dir{Original}
			}
			return []Tuple{e.Reply(), e.Original()}, []Dir{Reply, Original}
		}
		t.Run(map[bool]string{false: "tuples", true: "sources"}[bySource], func(t *testing.T) {
			rapid.Check(t, func(rt *rapid.T) {
				x := index{bySource: bySource}
				ref := map[Tuple]held{}
				var live []*Entry
				for range rapid.IntRange(1, 300).Draw(rt, "ops") {
					if len(live) == 0 || rapid.IntRange(0, 2).Draw(rt, "op") > 0 {
						orig := genTuple.Draw(rt, "tuple")
						e := NewEntry(orig, orig.Reverse())
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
					require.Equal(rt, held{e, Original}, ref[key(e.Original())])
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
		e := NewEntry(orig, orig.Reverse())
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

// TestEntrySize: an Entry fills a 160-byte allocation size class; a
// field added carelessly would move a million of them to 176 or more.
func TestEntrySize(t *testing.T) {
	assert.Equal(t, uintptr(160), unsafe.Sizeof(Entry{}))
	assert.Equal(t, uintptr(48), unsafe.Sizeof(group{}))
}

// TestEntryTuples: tuples round-trip through the compact storage: IPv4,
// IPv6, IPv4-mapped IPv6, mixed and missing addresses, zones and ICMP.
func TestEntryTuples(t *testing.T) {
	a := netip.MustParseAddr
	cases := []Tuple{
		TupleFrom(inet.TCP, netip.MustParseAddrPort("10.0.0.1:1234"), netip.MustParseAddrPort("10.0.0.2:80")),
		TupleFrom(inet.UDP, netip.MustParseAddrPort("[2001:db8::1]:53"), netip.MustParseAddrPort("[2001:db8::2]:5353")),
		TupleFrom(inet.UDP, netip.MustParseAddrPort("[::ffff:10.0.0.1]:53"), netip.MustParseAddrPort("10.0.0.2:9")),
		ICMPTuple(a("10.0.0.1"), a("10.0.0.2"), 8, 0, 77),
		{Src: a("10.0.0.1"), Proto: inet.GRE, Zone: 7},
		{},
	}
	for _, o := range cases {
		for _, r := range cases {
			e := NewEntry(o, r)
			assert.Equal(t, o, e.Original())
			assert.Equal(t, r, e.Reply())
			assert.True(t, o == Tuple{} || e.matches(Original, &o))
			e.SetTuples(r, o)
			assert.Equal(t, r, e.Original())
			assert.Equal(t, o, e.Reply())
			assert.True(t, e.matches(Reply, &o))
		}
	}
	e := NewEntry(cases[0], cases[0].Reverse())
	assert.Equal(t, time.Time{}, e.Expires())
	assert.Equal(t, [2]uint64{}, e.Labels())
	e.SetLabels([2]uint64{0, 1 << 63})
	assert.Equal(t, [2]uint64{0, 1 << 63}, e.Labels())
	at := time.Date(2026, 11, 26, 0, 0, 0, 5, time.UTC)
	e.SetExpires(at)
	assert.True(t, at.Equal(e.Expires()))
}

// TestEntryStorageProperty: whatever tuples an entry is given, in
// whatever order, it gives them back, and matches exactly them: the
// compact storage is the straightforward one (two Tuple fields).
func TestEntryStorageProperty(t *testing.T) {
	addrs := []netip.Addr{{},
		netip.MustParseAddr("0.0.0.0"), netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.1"),
		netip.MustParseAddr("::"), netip.MustParseAddr("2001:db8::1"),
	}
	genTuple := rapid.Custom(func(t *rapid.T) Tuple {
		return Tuple{
			Src: rapid.SampledFrom(addrs).Draw(t, "src"), Dst: rapid.SampledFrom(addrs).Draw(t, "dst"),
			SrcPort: rapid.Uint16Range(0, 2).Draw(t, "sport"), DstPort: rapid.Uint16Range(0, 2).Draw(t, "dport"),
			ICMPType: rapid.Uint8Range(0, 1).Draw(t, "type"), ICMPCode: rapid.Uint8Range(0, 1).Draw(t, "code"),
			Proto: rapid.SampledFrom([]inet.Proto{inet.TCP, inet.UDP, inet.ICMP}).Draw(t, "proto"),
			Zone:  rapid.Uint16Range(0, 1).Draw(t, "zone"),
		}
	})
	rapid.Check(t, func(rt *rapid.T) {
		e := NewEntry(genTuple.Draw(rt, "orig"), genTuple.Draw(rt, "reply"))
		for range rapid.IntRange(1, 4).Draw(rt, "steps") {
			o, r := genTuple.Draw(rt, "o"), genTuple.Draw(rt, "r")
			if rapid.Bool().Draw(rt, "both") {
				e.SetTuples(o, r)
			} else {
				o = e.Original()
				e.setTuple(Reply, &r) // as SetupNAT does
			}
			if e.Original() != o || e.Reply() != r {
				rt.Fatalf("stored %v / %v, got %v / %v", o, r, e.Original(), e.Reply())
			}
			for _, u := range []Tuple{o, r, genTuple.Draw(rt, "other")} {
				if e.matches(Original, &u) != (u == o) || e.matches(Reply, &u) != (u == r) {
					rt.Fatalf("%v: matches %v %v, stored %v / %v", u, e.matches(Original, &u), e.matches(Reply, &u), o, r)
				}
				src := u.Src == o.Src && u.SrcPort == o.SrcPort && u.Proto == o.Proto && u.Zone == o.Zone
				if e.matchesSource(&u) != src {
					rt.Fatalf("%v: matchesSource %v, original %v", u, !src, o)
				}
			}
		}
	})
}
