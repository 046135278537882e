package ipset

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Large sets in the kernel and in the compact storage, with known
// initvals: after a restore of 200,000 hash:net members of mixed prefix
// lengths (nomatch ones among them) and 100,000 hash:ip,port members, and
// again after deleting a third of them, `ipset list` (hashsize after the
// resizes, Size in memory, every member in bucket order) is byte for byte
// the kernel's, and `ipset test` answers agree.
func TestKernelLargeSets(t *testing.T) {
	requireKernel(t)
	rng := rand.New(rand.NewPCG(18, 2026))
	var b, del strings.Builder
	fmt.Fprintf(&b, "create L hash:net maxelem 1000000 initval 0x%08x\n", rng.Uint32())
	fmt.Fprintf(&b, "create P hash:ip,port maxelem 1000000 initval 0x%08x counters\n", rng.Uint32())
	seen := map[string]bool{}
	addr := func() netip.Addr {
		v := rng.Uint32()
		return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	for n := 0; n < 200_000; {
		l := []int{16, 20, 22, 24, 24, 24, 24, 26, 28, 30, 32, 32}[rng.IntN(12)]
		e := netip.PrefixFrom(addr(), l).Masked().String()
		if seen[e] {
			continue
		}
		seen[e] = true
		opt := ""
		if rng.IntN(10) == 0 {
			opt = " nomatch"
		}
		fmt.Fprintf(&b, "add L %s%s\n", e, opt)
		if rng.IntN(3) == 0 {
			fmt.Fprintf(&del, "del L %s\n", e)
		}
		n++
	}
	for n := 0; n < 100_000; {
		e := fmt.Sprintf("%s,%s:%d", addr(), []string{"tcp", "udp"}[rng.IntN(2)], 1+rng.IntN(65535))
		if seen[e] {
			continue
		}
		seen[e] = true
		fmt.Fprintf(&b, "add P %s packets %d\n", e, rng.IntN(1000))
		if rng.IntN(3) == 0 {
			fmt.Fprintf(&del, "del P %s\n", e)
		}
		n++
	}
	var probes []string
	for range 300 {
		probes = append(probes, "L "+addr().String(), "P "+addr().String()+",tcp:80")
	}
	// Addresses inside members, most specific prefix and nomatch included.
	for e := range seen {
		if len(probes) >= 1000 {
			break
		}
		if p, err := netip.ParsePrefix(e); err == nil {
			probes = append(probes, "L "+p.Addr().String())
		}
	}

	ns := fmt.Sprintf("pw-ipset-large-%d", os.Getpid())
	out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput()
	require.NoError(t, err, string(out))
	defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()
	r, _ := newTestRegistry()
	compare := func(step, text string) {
		require.NoError(t, r.Restore([]byte(text), RestoreOptions{}), step)
		cmd := exec.Command("ip", "netns", "exec", ns, "ipset", "restore")
		cmd.Stdin = strings.NewReader(text)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s: %s", step, out)
		kern, err := exec.Command("ip", "netns", "exec", ns, "ipset", "list").Output()
		require.NoError(t, err, step)
		var ours bytes.Buffer
		require.NoError(t, r.List(&ours))
		if kern := string(kern); kern != ours.String() {
			kl, ol := strings.Split(kern, "\n"), strings.Split(ours.String(), "\n")
			for i := range min(len(kl), len(ol)) {
				if kl[i] != ol[i] {
					t.Fatalf("%s: ipset list differs at line %d: kernel %q, packetwalk %q", step, i+1, kl[i], ol[i])
				}
			}
			t.Fatalf("%s: ipset list: kernel %d lines, packetwalk %d", step, len(kl), len(ol))
		}
		for _, l := range strings.Split(ours.String(), "\n") {
			if strings.HasPrefix(l, "Name: ") || strings.HasPrefix(l, "Header: ") || strings.HasPrefix(l, "Size in memory: ") ||
				strings.HasPrefix(l, "Number of entries: ") {
				t.Logf("%s: %s", step, l)
			}
		}
		script := `while read -r s e; do ipset test "$s" "$e" >/dev/null 2>&1; echo $?; done`
		cmd = exec.Command("ip", "netns", "exec", ns, "bash", "-c", script)
		cmd.Stdin = strings.NewReader(strings.Join(probes, "\n") + "\n")
		var stdout bytes.Buffer
		cmd.Stdout = &stdout
		require.NoError(t, cmd.Run())
		rcs := strings.Fields(stdout.String())
		require.Len(t, rcs, len(probes))
		for i, p := range probes {
			s, e, _ := strings.Cut(p, " ")
			in, err := r.Test(s, e)
			require.NoError(t, err, p)
			require.Equal(t, rcs[i] == "0", in, "%s: ipset test %s", step, p)
		}
	}
	compare("restore", b.String())
	compare("delete a third", del.String())
}
