package ipset

import (
	"bytes"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var writeMemsize = flag.Bool("write-memsize", false, "rewrite testdata/memsize.restore (then run testdata/record-memsize.sh as root)")

// fixtureCounts keeps testdata/memsize.* small; the kernel test goes further.
var fixtureCounts = []int{1, 2, 3, 5, 9, 17, 40, 300}

var hashTypes = []string{"hash:ip", "hash:net", "hash:ip,port", "hash:net,port", "hash:ip,port,ip",
	"hash:ip,port,net", "hash:net,iface"}

// memsizeScenario builds restore text exercising bucket placement: every
// hash type and family at many element counts with varied extensions,
// sets with hashsize 64 filled far enough to resize, deletes (slot reuse,
// bucket shrink and free) and re-adds. Every set has a known initval.
func memsizeScenario(rng *rand.Rand, counts []int) string {
	var b strings.Builder
	n := 0
	exts := []string{"", "", "counters", "comment", "timeout 600", "skbinfo", "counters comment skbinfo", "forceadd"}
	for _, typ := range hashTypes {
		for _, fam := range []int{4, 6} {
			for _, cnt := range counts {
				n++
				name := fmt.Sprintf("M%d", n)
				ext := exts[rng.IntN(len(exts))]
				opts := ""
				if fam == 6 {
					opts += " family inet6"
				}
				if cnt >= 300 {
					opts += " hashsize 64" // filled to resize
				}
				if cnt == 9 && typ == "hash:ip" && fam == 4 {
					opts += " netmask 24"
				}
				if ext == "forceadd" {
					// Full only after the deletes' re-adds; eviction
					// itself is TestKernelForceadd's.
					opts += fmt.Sprintf(" maxelem %d", cnt+cnt/3)
				}
				if ext != "" {
					opts += " " + ext
				}
				fmt.Fprintf(&b, "create %s %s%s initval 0x%08x\n", name, typ, opts, rng.Uint32())
				seen := map[string]bool{}
				var added []string
				for len(added) < cnt {
					e := randElem(rng, typ, fam, strings.Contains(opts, "netmask"))
					if seen[e] {
						continue
					}
					seen[e] = true
					added = append(added, e)
					fmt.Fprintf(&b, "add %s %s%s\n", name, e, entryExt(rng, ext))
				}
				if cnt >= 3 && rng.IntN(3) > 0 {
					// Delete some, then add a few back and a few new ones.
					var gone []string
					for _, e := range added {
						if rng.IntN(3) == 0 {
							fmt.Fprintf(&b, "del %s %s\n", name, e)
							gone = append(gone, e)
						}
					}
					for _, e := range gone {
						if rng.IntN(3) == 0 {
							fmt.Fprintf(&b, "add %s %s%s\n", name, e, entryExt(rng, ext))
						}
					}
				}
			}
		}
	}
	return b.String()
}

func entryExt(rng *rand.Rand, ext string) string {
	var s string
	if strings.Contains(ext, "timeout") {
		s += " timeout 0"
	}
	if strings.Contains(ext, "comment") && rng.IntN(2) == 0 {
		s += fmt.Sprintf(" comment \"%s\"", strings.Repeat("c", 1+rng.IntN(20)))
	}
	if strings.Contains(ext, "skbinfo") && rng.IntN(2) == 0 {
		s += fmt.Sprintf(" skbmark 0x%x", 1+rng.IntN(100))
	}
	return s
}

func randElem(rng *rand.Rand, typ string, fam int, netmask bool) string {
	addr := func() netip.Addr {
		if fam == 4 {
			return netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(256)), byte(rng.IntN(256))})
		}
		return netip.MustParseAddr(fmt.Sprintf("fd00:%x::%x:%x", rng.IntN(4), rng.IntN(65536), rng.IntN(65536)))
	}
	bitsMax := 32
	if fam == 6 {
		bitsMax = 128
	}
	net := func() string {
		l := bitsMax - rng.IntN(bitsMax/2)
		if rng.IntN(4) == 0 {
			l = bitsMax
		}
		p := netip.PrefixFrom(addr(), l).Masked()
		if l == bitsMax {
			return p.Addr().String()
		}
		return p.String()
	}
	port := func() string {
		switch rng.IntN(8) {
		case 0:
			if fam == 4 {
				return "icmp:echo-request"
			}
			return "icmpv6:echo-request"
		case 1:
			return fmt.Sprintf("sctp:%d", rng.IntN(65536))
		case 2, 3:
			return fmt.Sprintf("udp:%d", rng.IntN(65536))
		}
		return fmt.Sprintf("tcp:%d", rng.IntN(65536))
	}
	switch typ {
	case "hash:ip":
		if netmask {
			return netip.AddrFrom4([4]byte{10, byte(rng.IntN(256)), byte(rng.IntN(256)), 0}).String()
		}
		return addr().String()
	case "hash:net":
		return net()
	case "hash:ip,port":
		return addr().String() + "," + port()
	case "hash:net,port":
		return net() + "," + port()
	case "hash:ip,port,ip":
		return addr().String() + "," + port() + "," + addr().String()
	case "hash:ip,port,net":
		return addr().String() + "," + port() + "," + net()
	}
	// hash:net,iface: few networks, many interfaces, so buckets fill.
	nets := []string{"10.0.0.0/8", "10.1.0.0/16", "192.168.0.1"}
	if fam == 6 {
		nets = []string{"fd00::/16", "fd00:1::/64", "fd00::1"}
	}
	n := nets[rng.IntN(len(nets))]
	if rng.IntN(2) == 0 {
		n = net()
	}
	// Up to 32 interfaces per network: bucketsize grows past 12, but a
	// bucket stays small enough for one netlink message (the kernel lists
	// a set only partly, silently, when a bucket does not fit).
	iface := fmt.Sprintf("eth%d", rng.IntN(16))
	switch rng.IntN(6) {
	case 0:
		iface = fmt.Sprintf("physdev:eth%d", rng.IntN(12))
	case 1:
		iface = fmt.Sprintf("veth%d+", rng.IntN(4))
	}
	return n + "," + iface
}

func TestWriteMemsizeScenario(t *testing.T) {
	if !*writeMemsize {
		t.Skip("regenerates testdata/memsize.restore with -write-memsize")
	}
	seed := uint64(1)
	if v := os.Getenv("PACKETWALK_SEED"); v != "" {
		_, err := fmt.Sscan(v, &seed)
		require.NoError(t, err)
	}
	require.NoError(t, os.WriteFile("testdata/memsize.restore", []byte(memsizeScenario(rand.New(rand.NewPCG(seed, 0)), fixtureCounts)), 0o644))
}

// TestGoldenMemsize compares `ipset list` of the recorded scenario exactly:
// Size in memory, hashsize after resizes, bucketsize and member order.
func TestGoldenMemsize(t *testing.T) {
	in, err := os.ReadFile("testdata/memsize.restore")
	require.NoError(t, err)
	want, err := os.ReadFile("testdata/memsize.golden")
	require.NoError(t, err)
	r, _ := newTestRegistry()
	require.NoError(t, r.Restore(in, RestoreOptions{}))
	var got bytes.Buffer
	require.NoError(t, r.List(&got))
	compareLists(t, string(want), got.String())
}

// compareLists reports the first differing set block (whole-text diffs of
// thousands of lines are unreadable).
func compareLists(t *testing.T, want, got string) {
	t.Helper()
	wb, gb := strings.Split(want, "\nName: "), strings.Split(got, "\nName: ")
	require.Equal(t, len(wb), len(gb), "number of sets")
	bad := 0
	for i := range wb {
		if truncatedList(wb[i]) {
			// Compare what the kernel managed to print.
			wh, _, _ := strings.Cut(wb[i], "Members:\n")
			gh, _, _ := strings.Cut(gb[i], "Members:\n")
			t.Logf("kernel listed set %s only partly (a bucket larger than a netlink message)", strings.SplitN(wb[i], "\n", 2)[0])
			assert.Equal(t, wh, gh)
			continue
		}
		if wb[i] != gb[i] {
			assert.Equal(t, wb[i], gb[i])
			if bad++; bad > 3 {
				break
			}
		}
	}
}

// truncatedList reports a list block with fewer member lines than its
// "Number of entries".
func truncatedList(block string) bool {
	head, members, ok := strings.Cut(block, "Members:\n")
	if !ok {
		return false
	}
	var n int
	if i := strings.Index(head, "Number of entries: "); i >= 0 {
		fmt.Sscan(head[i+len("Number of entries: "):], &n)
	}
	return strings.Count(members, "\n") < n
}

func TestKernelMemsize(t *testing.T) {
	requireKernel(t)
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("PACKETWALK_SEED"); v != "" {
		_, err := fmt.Sscan(v, &seed)
		require.NoError(t, err)
	}
	t.Logf("seed %d", seed)
	text := memsizeScenario(rand.New(rand.NewPCG(seed, 0)), []int{1, 2, 3, 5, 9, 17, 40, 90, 200, 900})
	r, _ := newTestRegistry()
	require.NoError(t, r.Restore([]byte(text), RestoreOptions{}), "seed %d", seed)

	ns := fmt.Sprintf("pw-ipset-ms-%d", os.Getpid())
	out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput()
	require.NoError(t, err, string(out))
	defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()
	cmd := exec.Command("ip", "netns", "exec", ns, "ipset", "restore")
	cmd.Stdin = strings.NewReader(text)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "seed %d: %s", seed, out)
	kern, err := exec.Command("ip", "netns", "exec", ns, "ipset", "list").Output()
	require.NoError(t, err)
	_ = exec.Command("ip", "netns", "exec", ns, "ipset", "destroy").Run()

	var got bytes.Buffer
	require.NoError(t, r.List(&got))
	compareLists(t, string(kern), got.String())
}

// TestKernelForceadd fills small forceadd sets one command at a time (a
// full set fails an add into an empty bucket, evicts from a used one).
func TestKernelForceadd(t *testing.T) {
	requireKernel(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	r, _ := newTestRegistry()
	var cmds []string
	for i, typ := range hashTypes {
		name := fmt.Sprintf("F%d", i)
		opts := []string{"hashsize", "64", "maxelem", "6", "forceadd", "initval", fmt.Sprint(rng.Uint32())}
		require.NoError(t, r.Create(name, typ, false, opts...))
		cmds = append(cmds, "create "+name+" "+typ+" "+strings.Join(opts, " "))
		for range 60 {
			e := randElem(rng, typ, 4, false)
			cmds = append(cmds, "add -exist "+name+" "+e)
			if err := r.Add(name, e, true); err != nil {
				require.ErrorIs(t, err, ErrFull)
			}
		}
	}
	ns := fmt.Sprintf("pw-ipset-fa-%d", os.Getpid())
	out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput()
	require.NoError(t, err, string(out))
	defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()
	cmd := exec.Command("ip", "netns", "exec", ns, "bash", "-c", `while read -r l; do ipset $l 2>/dev/null; done; ipset list`)
	cmd.Stdin = strings.NewReader(strings.Join(cmds, "\n") + "\n")
	kern, err := cmd.Output()
	require.NoError(t, err)
	_ = exec.Command("ip", "netns", "exec", ns, "ipset", "destroy").Run()
	var got bytes.Buffer
	require.NoError(t, r.List(&got))
	compareLists(t, string(kern), got.String())
}

// bitmapNetmaskCases are bitmap:ip creates around the kernel's netmask
// rule (the range must start on its covering prefix, netmask must be
// longer than that prefix); counters make the element count visible in
// "Size in memory".
var bitmapNetmaskCases = []string{
	"range 10.244.1.0-10.244.1.15 netmask 28",
	"range 10.244.1.0-10.244.1.15 netmask 29 counters",
	"range 10.244.1.0-10.244.1.47 netmask 28 counters",
	"range 10.244.1.16-10.244.1.47 netmask 28",
	"range 10.244.1.0-10.244.1.47 counters",
	"range 10.0.0.0/8 netmask 8",
	"range 10.0.0.0/8 netmask 9 counters",
	"range 10.244.1.0-10.244.2.3 netmask 24",
	"range 10.244.0.0-10.244.2.3 netmask 24 counters",
	"range 192.168.10.0/24 netmask 30 counters",
	"range 192.168.10.0/24 netmask 31",
	"range 10.244.1.0-10.244.1.15 netmask 30",
	"range 10.244.1.0-10.244.1.15 netmask 31 comment",
	"range 10.244.1.5-10.244.1.6 netmask 31",
	"range 10.244.1.4-10.244.1.7 netmask 31 timeout 10",
	"range 0.0.0.0-255.255.255.255 netmask 16",
	"range 10.244.0.0/16",
}

func TestKernelBitmapNetmask(t *testing.T) {
	requireKernel(t)
	ns := fmt.Sprintf("pw-ipset-bm-%d", os.Getpid())
	out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput()
	require.NoError(t, err, string(out))
	defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()
	for _, c := range bitmapNetmaskCases {
		r, _ := newTestRegistry()
		ourErr := r.Create("B", "bitmap:ip", false, strings.Fields(c)...)
		args := append([]string{"netns", "exec", ns, "ipset", "create", "B", "bitmap:ip"}, strings.Fields(c)...)
		kout, kerr := exec.Command("ip", args...).CombinedOutput()
		if kerr != nil {
			require.Error(t, ourErr, "%s: kernel refused: %s", c, kout)
			assert.Equal(t, strings.TrimSpace(strings.TrimPrefix(string(kout), "ipset v7.17: ")), ourErr.Error(), c)
			continue
		}
		require.NoError(t, ourErr, c)
		kern, err := exec.Command("ip", "netns", "exec", ns, "ipset", "list", "B").Output()
		require.NoError(t, err)
		require.NoError(t, exec.Command("ip", "netns", "exec", ns, "ipset", "destroy", "B").Run())
		var got bytes.Buffer
		require.NoError(t, r.List(&got))
		assert.Equal(t, string(kern), got.String(), c)
	}
}
