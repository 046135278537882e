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
	"time"

	"github.com/stretchr/testify/require"
)

// requireKernel skips unless PACKETWALK_KERNEL=1; when set, missing tools
// or privileges fail the test.
func requireKernel(t *testing.T) {
	t.Helper()
	if os.Getenv("PACKETWALK_KERNEL") != "1" {
		t.Skip("kernel-backed test: set PACKETWALK_KERNEL=1 (needs root, ip and ipset)")
	}
	for _, tool := range []string{"ip", "ipset", "bash"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "PACKETWALK_KERNEL=1 but %s is missing", tool)
	}
	require.Equal(t, 0, os.Geteuid(), "PACKETWALK_KERNEL=1 needs root")
}

// randomScenario builds restore text for sets with overlapping prefixes,
// nomatch entries, ports with protocols and IPv6, plus probes for them.
func randomScenario(rng *rand.Rand) (restore string, probes []string) {
	var b strings.Builder
	v4 := func() netip.Addr {
		// A small space so prefixes overlap and probes hit.
		return netip.AddrFrom4([4]byte{10, byte(rng.IntN(4)), byte(rng.IntN(4)), byte(rng.IntN(8))})
	}
	v6 := func() netip.Addr {
		return netip.MustParseAddr(fmt.Sprintf("2001:db8:%x:%x::%x", rng.IntN(3), rng.IntN(3), rng.IntN(5)))
	}
	protos := []string{"tcp", "udp", "sctp"}
	port := func() string { return fmt.Sprintf("%s:%d", protos[rng.IntN(3)], 80+rng.IntN(3)) }

	// Known initvals: the saves then match line for line (bucket order).
	for _, c := range []string{"KN hash:net", "KN6 hash:net family inet6", "KNP hash:net,port", "KIP hash:ip,port",
		"KIPN hash:ip,port,net"} {
		fmt.Fprintf(&b, "create %s initval 0x%08x\n", c, rng.Uint32())
	}
	nomatch := func() string {
		if rng.IntN(3) == 0 {
			return " nomatch"
		}
		return ""
	}
	for range 40 {
		fmt.Fprintf(&b, "add KN %s%s\n", netip.PrefixFrom(v4(), 8+rng.IntN(25)).Masked(), nomatch())
		fmt.Fprintf(&b, "add KN6 %s%s\n", netip.PrefixFrom(v6(), 16+rng.IntN(113)).Masked(), nomatch())
		fmt.Fprintf(&b, "add KNP %s,%s%s\n", netip.PrefixFrom(v4(), 8+rng.IntN(25)).Masked(), port(), nomatch())
		fmt.Fprintf(&b, "add KIP %s,%s\n", v4(), port())
		fmt.Fprintf(&b, "add KIPN %s,%s,%s%s\n", v4(), port(),
			netip.PrefixFrom(v4(), 8+rng.IntN(25)).Masked(), nomatch())
	}
	for range 250 {
		probes = append(probes,
			"KN "+v4().String(),
			"KN6 "+v6().String(),
			"KNP "+v4().String()+","+port(),
			"KIP "+v4().String()+","+port(),
			"KIPN "+v4().String()+","+port()+","+v4().String(),
		)
		if rng.IntN(5) == 0 {
			probes = append(probes, "KN "+netip.PrefixFrom(v4(), 8+rng.IntN(25)).Masked().String())
		}
	}
	return b.String(), probes
}

func TestKernelDifferential(t *testing.T) {
	requireKernel(t)
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 0))
	restore, probes := randomScenario(rng)

	r, _ := newTestRegistry()
	// Random entries may repeat: both sides restore with -exist.
	kernelText := restore
	require.NoError(t, r.Restore([]byte(kernelText), RestoreOptions{Exist: true}), "seed %d", seed)

	ns := fmt.Sprintf("pw-ipset-kt-%d", os.Getpid())
	out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput()
	require.NoError(t, err, string(out))
	defer func() { _ = exec.Command("ip", "netns", "del", ns).Run() }()

	cmd := exec.Command("ip", "netns", "exec", ns, "ipset", "-exist", "restore")
	cmd.Stdin = strings.NewReader(kernelText)
	out, err = cmd.CombinedOutput()
	require.NoError(t, err, "seed %d: %s", seed, out)

	// One shell for all probes: print each exit status on its own line.
	script := `while read -r s e; do ipset test "$s" "$e" >/dev/null 2>&1; echo $?; done`
	cmd = exec.Command("ip", "netns", "exec", ns, "bash", "-c", script)
	cmd.Stdin = strings.NewReader(strings.Join(probes, "\n") + "\n")
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	require.NoError(t, cmd.Run())
	rcs := strings.Fields(stdout.String())
	require.Len(t, rcs, len(probes), "seed %d", seed)
	require.GreaterOrEqual(t, len(probes), 1000)

	var kernelSave bytes.Buffer
	cmd = exec.Command("ip", "netns", "exec", ns, "ipset", "save")
	cmd.Stdout = &kernelSave
	require.NoError(t, cmd.Run())

	fails := 0
	for i, p := range probes {
		s, e, _ := strings.Cut(p, " ")
		in, err := r.Test(s, e)
		require.NoError(t, err, "seed %d probe %q", seed, p)
		if in != (rcs[i] == "0") {
			fails++
			t.Errorf("seed %d: ipset test %s: kernel exit %s, simulator in=%v", seed, p, rcs[i], in)
			if fails > 10 {
				break
			}
		}
	}
	ours, err := r.AppendSave(nil)
	require.NoError(t, err)
	require.Equal(t, kernelSave.String(), string(ours), "seed %d", seed)
}
