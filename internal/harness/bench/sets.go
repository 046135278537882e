package bench

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/ipset"
	"golang.org/x/sys/unix"
)

// SetTypes are the hash types of the sets table.
var SetTypes = []string{"hash:net", "hash:ip", "hash:ip,port", "hash:net,port"}

// SetSetup is one large set as `ipset restore` text, and the packet keys
// its lookups cycle through.
type SetSetup struct {
	Type    string
	Members int
	Doc     []byte // "create S <type> ..." then one "add S ..." line per member
	Keys    []ipset.Key
	// Want is the (match, nomatch) answer expected for each key.
	Want [][2]bool
}

// setClock is a fixed clock: the sets have no timeouts.
type setClock struct{}

func (setClock) Now() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

// setPrefixLen draws the prefix length of a net member: mostly /24 and
// hosts, the rest spread over /16../31, as in published blocklists.
func setPrefixLen(rng *rand.Rand) int {
	switch x := rng.IntN(100); {
	case x < 55:
		return 24
	case x < 75:
		return 32
	case x < 88:
		return 16 + rng.IntN(8)
	default:
		return 25 + rng.IntN(7)
	}
}

func randAddr4(rng *rand.Rand) netip.Addr {
	v := rng.Uint32()
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

func addrAt(a netip.Addr, off uint32) netip.Addr {
	b := a.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3]) + off
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
}

// NewSetSetup builds a set of n distinct members of type typ (one of
// SetTypes). In the net types one member in 16 is a /24 holding a nomatch
// /28, so that lookups resolve the most specific prefix; a third of the
// keys fall in a nomatch /28, a third in a plain member, a third are
// random addresses (mostly absent).
func NewSetSetup(typ string, n int) (*SetSetup, error) {
	rng := rand.New(rand.NewPCG(uint64(n), 18))
	net := typ == "hash:net" || typ == "hash:net,port"
	port := typ == "hash:ip,port" || typ == "hash:net,port"
	s := &SetSetup{Type: typ, Members: n}
	b := make([]byte, 0, n*32)
	b = fmt.Appendf(b, "create S %s family inet hashsize 1024 maxelem %d\n", typ, max(n, 65536))
	seen := make(map[string]bool, n)
	var hits, nomatches []ipset.Key
	protoPort := func() (inet.Proto, uint16, string) {
		p := uint16(1 + rng.IntN(1024))
		if rng.IntN(2) == 0 {
			return inet.TCP, p, "tcp:" + strconv.Itoa(int(p))
		}
		return inet.UDP, p, "udp:" + strconv.Itoa(int(p))
	}
	add := func(elem, opt string) bool {
		if seen[elem] {
			return false
		}
		seen[elem] = true
		b = append(b, "add S "...)
		b = append(b, elem...)
		b = append(b, opt...)
		b = append(b, '\n')
		return true
	}
	for count := 0; count < n; {
		a := randAddr4(rng)
		var proto inet.Proto
		var pn uint16
		var ps string
		if port {
			proto, pn, ps = protoPort()
			ps = "," + ps
		}
		if !net {
			if add(a.String()+ps, "") {
				count++
				if len(hits) < 1024 {
					hits = append(hits, ipset.Key{Addr: a, Proto: proto, Port: pn})
				}
			}
			continue
		}
		if count%16 == 0 && count+2 <= n {
			p := netip.PrefixFrom(a, 24).Masked()
			q := netip.PrefixFrom(addrAt(p.Addr(), 64), 28)
			if seen[p.String()+ps] || seen[q.String()+ps] {
				continue
			}
			add(p.String()+ps, "")
			add(q.String()+ps, " nomatch")
			count += 2
			if len(nomatches) < 1024 {
				nomatches = append(nomatches, ipset.Key{Addr: addrAt(q.Addr(), 5), Proto: proto, Port: pn})
				hits = append(hits, ipset.Key{Addr: addrAt(p.Addr(), 200), Proto: proto, Port: pn})
			}
			continue
		}
		p := netip.PrefixFrom(a, setPrefixLen(rng)).Masked()
		if add(p.String()+ps, "") {
			count++
		}
	}
	misses := make([]ipset.Key, 1024)
	for i := range misses {
		misses[i] = ipset.Key{Addr: randAddr4(rng), Proto: inet.TCP, Port: uint16(1 + rng.IntN(1024))}
	}
	s.Doc = b
	// Interleave hits, nomatches and misses.
	for i := range 1024 {
		for _, ks := range [][]ipset.Key{hits, nomatches, misses} {
			if i < len(ks) {
				s.Keys = append(s.Keys, ks[i])
			}
		}
	}
	r, err := s.Restore()
	if err != nil {
		return nil, err
	}
	set := r.Get("S")
	if got := set.Len(); got != n {
		return nil, fmt.Errorf("%s: %d members restored, want %d", typ, got, n)
	}
	for _, k := range s.Keys {
		m, nm := set.Lookup(k, setClock{}.Now())
		s.Want = append(s.Want, [2]bool{m, nm})
	}
	return s, nil
}

// Restore loads the set into a fresh registry.
func (s *SetSetup) Restore() (*ipset.Registry, error) {
	r := ipset.NewRegistry(setClock{}, nil)
	if err := r.Restore(s.Doc, ipset.RestoreOptions{}); err != nil {
		return nil, err
	}
	return r, nil
}

// SetRestoreBench measures `ipset restore` of the set into a fresh
// registry; it reports ns/member.
func SetRestoreBench(b *testing.B, s *SetSetup) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Restore(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(s.Members), "ns/member")
}

// SetRetainedPerMember returns the heap bytes a restored set keeps per
// member (after a GC, the registry alive).
func SetRetainedPerMember(s *SetSetup) (float64, error) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	r, err := s.Restore()
	if err != nil {
		return 0, err
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(r)
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / float64(s.Members), nil
}

// SetLookupBench looks the keys up in turn (hits, nomatch hits, misses)
// and checks the answers; it reports B/member retained as well.
func SetLookupBench(b *testing.B, s *SetSetup) {
	perMember, err := SetRetainedPerMember(s)
	if err != nil {
		b.Fatal(err)
	}
	r, err := s.Restore()
	if err != nil {
		b.Fatal(err)
	}
	set := r.Get("S")
	now := setClock{}.Now()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := &s.Keys[i]
		m, nm := set.Lookup(*k, now)
		if m != s.Want[i][0] || nm != s.Want[i][1] {
			b.Fatalf("key %d: lookup %v/%v, want %v", i, m, nm, s.Want[i])
		}
		i++
		if i == len(s.Keys) {
			i = 0
		}
	}
	b.ReportMetric(perMember, "B/member")
}

// cpuTime returns the CPU time (user and system) of the process, or with
// thread of the calling OS thread, in seconds. On a shared machine it
// drifts much less than wall time with the load of other processes.
func cpuTime(thread bool) float64 {
	who := unix.RUSAGE_SELF
	if thread {
		who = unix.RUSAGE_THREAD
	}
	var ru unix.Rusage
	if err := unix.Getrusage(who, &ru); err != nil {
		return 0
	}
	tv := func(t unix.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// SetRestoreTimes restores the set once into a fresh registry and returns
// the wall and process CPU seconds it took (the GC's work included).
func SetRestoreTimes(s *SetSetup) (wall, cpu float64, err error) {
	runtime.GC()
	c0, t0 := cpuTime(false), time.Now()
	r, err := s.Restore()
	wall, cpu = time.Since(t0).Seconds(), cpuTime(false)-c0
	runtime.KeepAlive(r)
	return wall, cpu, err
}

// SetLookupTimes looks the keys up n times in turn on one locked OS
// thread, checks the answers, and returns the wall and thread CPU
// nanoseconds per lookup and the allocations per lookup.
func SetLookupTimes(s *SetSetup, n int) (wallNs, cpuNs, allocs float64, err error) {
	r, err := s.Restore()
	if err != nil {
		return 0, 0, 0, err
	}
	set := r.Get("S")
	now := setClock{}.Now()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	c0, t0 := cpuTime(true), time.Now()
	j := 0
	for range n {
		m, nm := set.Lookup(s.Keys[j], now)
		if m != s.Want[j][0] || nm != s.Want[j][1] {
			return 0, 0, 0, fmt.Errorf("key %d: lookup %v/%v, want %v", j, m, nm, s.Want[j])
		}
		if j++; j == len(s.Keys) {
			j = 0
		}
	}
	wall, cpu := time.Since(t0).Seconds(), cpuTime(true)-c0
	runtime.ReadMemStats(&m1)
	return wall * 1e9 / float64(n), cpu * 1e9 / float64(n), float64(m1.Mallocs-m0.Mallocs) / float64(n), nil
}
