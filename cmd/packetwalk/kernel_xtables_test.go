package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/golden"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// The xtables trace comparison. testdata/xtables-trace holds a node
// snapshot (node/, captured by testdata/capture-node.sh) and what the real
// `xtables-monitor --trace` printed for xtablesPackets (kernel.txt).
// TestKernelXtablesTrace records both from the lab when run with
// PACKETWALK_KERNEL=1 -update (and compares live without -update);
// TestXtablesTraceFixture compares the recording with packetwalk without a
// kernel.
var xtablesDir = filepath.Join("testdata", "xtables-trace")

// xtablesRules is labNodeRules with a TRACE rule in raw PREROUTING, and
// MASQUERADE without --random-fully so that the source port is kept (it is
// free) in both, and the reply's lines are comparable.
var xtablesRules = "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -j TRACE\nCOMMIT\n" +
	strings.Replace(labNodeRules, " --random-fully", "", 1)

// xtablesPackets: a SYN to a DNATed service, the pod's SYN-ACK, the
// client's ACK of the same flow, a SYN to a local port, one REJECTed with
// a RST, a forwarded SYN that RETURNs from KUBE-POSTROUTING, and an ICMP
// echo with its reply.
var xtablesPackets = []labPacket{
	labPackets[0],
	labPackets[1],
	labPackets[2],
	labPackets[4],
	labPackets[5],
	labPackets[9],
	labPackets[10],
	{spec: "reply=7", replyTo: 7},
}

var (
	xtHandle = regexp.MustCompile(`:rule:0x[0-9a-f]+:`)
	xtMAC    = regexp.MustCompile(` MACSRC=\S+ MACDST=\S+ MACPROTO=\S+`)
	xtIPID   = regexp.MustCompile(` ID=\d+`)
	xtExtra  = regexp.MustCompile(` (IIF|OIF|IIFTYPE|OIFTYPE|SKUID|SKGID|CGROUP)=\S+`)
	xtSpaces = regexp.MustCompile(` +\n`)
)

// normaliseXtables rewrites xtables-monitor --trace output so that the
// kernel's and packetwalk's can be compared line by line:
//   - the per-packet trace id (a hash of the skb in the kernel) becomes the
//     packet's number, counted in order of first appearance;
//   - rule handles `rule:0x..` become `rule:H` (the kernel's are nf_tables
//     handles, packetwalk's the rule's position);
//   - MACSRC/MACDST/MACPROTO, the IPv4 ID, and the kernel's interface
//     index and type fields (IIF, OIF, IIFTYPE, OIFTYPE) and socket owner
//     fields are dropped: the frames are injected, not simulated;
//   - trailing blanks are dropped.
//
// Everything else — the order of PACKET and TRACE lines, the chains, the
// verdicts, the rule text, IN/OUT, addresses, ports, LEN, TOS, TTL, TCP
// flags, MARK — must match.
func normaliseXtables(s string) string {
	ids := map[string]string{}
	var b strings.Builder
	for _, line := range strings.SplitAfter(s, "\n") {
		if line == "" {
			continue
		}
		f := strings.Fields(line)
		if len(f) >= 3 && (f[0] == "PACKET:" || f[0] == "TRACE:") {
			n, ok := ids[f[2]]
			if !ok {
				n = string(rune('1' + len(ids)))
				ids[f[2]] = n
			}
			line = strings.Replace(line, " "+f[2]+" ", " #"+n+" ", 1)
		}
		line = xtHandle.ReplaceAllString(line, ":rule:H:")
		line = xtMAC.ReplaceAllString(line, "")
		line = xtIPID.ReplaceAllString(line, "")
		line = xtExtra.ReplaceAllString(line, "")
		b.WriteString(line)
	}
	return xtSpaces.ReplaceAllString(b.String(), "\n")
}

// packetwalkXtables runs xtablesPackets through packetwalk on the
// snapshot in dir.
func packetwalkXtables(t *testing.T, dir string) string {
	t.Helper()
	args := []string{"trace", "--node", dir, "--format", "xtables"}
	for _, p := range xtablesPackets {
		args = append(args, p.spec)
	}
	code, stdout, stderr := runCmd(args, "")
	require.Equal(t, 0, code, stderr)
	return stdout
}

// syncBuffer is a bytes.Buffer written by the monitor's output copier and
// read by the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestKernelXtablesTrace runs xtables-monitor --trace in the lab node
// while xtablesPackets go through it, and compares its normalised output
// with packetwalk's for the same packets on a snapshot of the node.
func TestKernelXtablesTrace(t *testing.T) {
	kerneltest.Require(t)
	for _, tool := range []string{"xtables-monitor", "stdbuf"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s=1 needs %s", kerneltest.EnvVar, tool)
	}
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-cli-xt"})
	require.NoError(t, lab.Reset(xtablesRules))
	dir := t.TempDir()
	out, err := exec.Command("sh", "testdata/capture-node.sh", lab.Node().Name(), dir).CombinedOutput()
	require.NoError(t, err, "capture-node.sh: %s", out)

	// The monitor prints to a pipe: stdbuf makes it flush every line, so
	// that nothing is lost in a stdio buffer when it is killed.
	var mon syncBuffer
	cmd := exec.Command("ip", "netns", "exec", lab.Node().Name(), "stdbuf", "-oL", "xtables-monitor", "--trace")
	cmd.Stdout = &mon
	require.NoError(t, cmd.Start())
	stopped := false
	stop := func() {
		if !stopped {
			stopped = true
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}
	t.Cleanup(stop)

	// Wait until the monitor is subscribed: ARP-free warm-up echoes to a
	// node address, bounded, until one of them is traced.
	warm, err := lab.Frame(kerneltest.FrameSpec{Proto: "icmp", Src: labClient, Dst: labNode, ICMPType: 8, ICMPID: 0xfff0})
	require.NoError(t, err)
	for i := 0; !strings.Contains(mon.String(), "TRACE:"); i++ {
		require.Less(t, i, 50, "xtables-monitor --trace printed nothing for the warm-up echoes")
		_, err := lab.Exchange(warm)
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond)
	}
	// Start from a clean slate: the echoes' conntrack entries go, and the
	// output so far is discarded once it stops growing.
	require.NoError(t, lab.FlushConntrack())
	skip := waitQuiet(&mon)

	var left []kernelOutcome
	for i, lp := range xtablesPackets {
		side, spec, obs := injectLabPacket(t, lab, i, lp, left)
		left = append(left, classify(side, obs, nil, nil, spec.Dst == labNode))
	}
	got := waitQuiet(&mon)[len(skip):]
	stop()
	kernel := normaliseXtables(got)
	ours := normaliseXtables(packetwalkXtables(t, dir))
	t.Logf("xtables-monitor --trace:\n%s", got)

	if golden.Updating() {
		// The snapshot taken before the packets.
		nodeDir := filepath.Join(xtablesDir, "node")
		require.NoError(t, os.RemoveAll(nodeDir))
		require.NoError(t, os.MkdirAll(nodeDir, 0o755))
		files, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, f := range files {
			data, err := os.ReadFile(filepath.Join(dir, f.Name()))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(nodeDir, f.Name()), data, 0o644))
		}
		require.NoError(t, os.WriteFile(filepath.Join(xtablesDir, "kernel.txt"), []byte(got), 0o644))
	}
	assert.Equal(t, kernel, ours)
}

// waitQuiet returns the monitor's output once it has not grown for 200ms
// (at most 3s): trace events reach it asynchronously over netlink.
func waitQuiet(mon *syncBuffer) string {
	prev := mon.String()
	for range 15 {
		time.Sleep(200 * time.Millisecond)
		cur := mon.String()
		if cur == prev {
			return cur
		}
		prev = cur
	}
	return prev
}

// TestXtablesTraceFixture compares packetwalk's xtables output with the
// recorded xtables-monitor --trace output, both normalised.
func TestXtablesTraceFixture(t *testing.T) {
	want, err := os.ReadFile(filepath.Join(xtablesDir, "kernel.txt"))
	require.NoError(t, err, "record it with PACKETWALK_KERNEL=1 go test -run TestKernelXtablesTrace -update")
	got := packetwalkXtables(t, filepath.Join(xtablesDir, "node"))
	assert.Equal(t, normaliseXtables(string(want)), normaliseXtables(got))
}
