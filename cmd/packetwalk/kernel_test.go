package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelSnapshot captures a node snapshot from a real network
// namespace with the documented commands, loads it with --node, and
// compares the save and list views with what the real tools print for the
// same namespace. It runs with PACKETWALK_KERNEL=1 (as root).
func TestKernelSnapshot(t *testing.T) {
	if os.Getenv("PACKETWALK_KERNEL") != "1" {
		t.Skip("set PACKETWALK_KERNEL=1 (root, iproute2, iptables 1.8.9) to compare with the kernel")
	}
	for _, tool := range []string{"ip", "iptables", "iptables-save", "iptables-restore"} {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "PACKETWALK_KERNEL=1 needs %s", tool)
	}
	ns := fmt.Sprintf("pw-cli-k%d", os.Getpid())
	out, err := exec.Command("ip", "netns", "add", ns).CombinedOutput()
	require.NoError(t, err, string(out))
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", ns).Run() })
	inNS := func(stdin string, args ...string) string {
		t.Helper()
		cmd := exec.Command("ip", append([]string{"netns", "exec", ns}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%v: %s", args, out)
		return string(out)
	}
	for _, l := range []string{
		"ip link set lo up",
		"ip link add eth0 type veth peer name eth0p",
		"ip link add cali1 type veth peer name cali1p",
		"ip link set eth0 up", "ip link set eth0p up", "ip link set cali1 up", "ip link set cali1p up",
		"ip addr add 192.168.10.1/24 dev eth0",
		"ip route add default via 192.168.10.254 dev eth0",
		"ip route add 10.244.2.5 dev cali1 scope link",
		"ip route add unreachable 10.8.0.0/16",
	} {
		inNS("", strings.Fields(l)...)
	}
	rules, err := os.ReadFile(filepath.Join(node1, "iptables-save"))
	require.NoError(t, err)
	inNS(string(rules), "iptables-restore")

	// The snapshot, captured as the package documentation says.
	dir := t.TempDir()
	for file, cmd := range map[string][]string{
		"iptables-save": {"iptables-save", "-c"},
		"ip-addr.json":  {"ip", "-j", "addr"},
		"ip-route.json": {"ip", "-j", "route"},
	} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, file), []byte(inNS("", cmd...)), 0o644))
	}

	stripComments := func(s string) string {
		var b strings.Builder
		for _, l := range strings.SplitAfter(s, "\n") {
			if !strings.HasPrefix(l, "# ") {
				b.WriteString(l)
			}
		}
		return b.String()
	}
	for _, tc := range []struct {
		ours   []string
		kernel []string
	}{
		{[]string{"save", "-c"}, []string{"iptables-save", "-c"}},
		{[]string{"save", "-t", "mangle"}, []string{"iptables-save", "-t", "mangle"}},
		{[]string{"list", "-S"}, []string{"iptables", "-S"}},
		{[]string{"list", "-t", "mangle", "-S"}, []string{"iptables", "-t", "mangle", "-S"}},
		{[]string{"list", "-S", "SSH", "2"}, []string{"iptables", "-S", "SSH", "2"}},
		{[]string{"list", "-nvL"}, []string{"iptables", "-nvL"}},
		{[]string{"list", "-nvxL", "--line-numbers", "INPUT"}, []string{"iptables", "-nvxL", "INPUT", "--line-numbers"}},
		{[]string{"list", "-L", "-t", "mangle"}, []string{"iptables", "-L", "-t", "mangle"}},
	} {
		code, stdout, stderr := runCmd(append([]string{tc.ours[0], "--node", dir}, tc.ours[1:]...), "")
		require.Equal(t, 0, code, "%v: %s", tc.ours, stderr)
		assert.Equal(t, stripComments(inNS("", tc.kernel...)), stripComments(stdout), "%v", tc.ours)
	}

	// The loaded interfaces and routes route like the namespace does.
	code, stdout, stderr := runCmd([]string{"trace", "--node", dir, "--format", "json",
		"in=eth0 src=192.168.10.2 dst=10.244.2.5", "in=eth0 src=192.168.10.2 dst=8.8.8.8", "in=eth0 src=192.168.10.2 dst=10.8.0.1"}, "")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(stdout, "\n")
	assert.Contains(t, lines[0], `"disposition":"forwarded"`)
	assert.Contains(t, lines[0], `"out":"cali1"`)
	assert.Contains(t, lines[1], `"out":"eth0"`)
	for _, want := range []string{"unreachable 10.8.0.0/16", "10.244.2.5 dev cali1"} {
		assert.Contains(t, inNS("", "ip", "route"), want)
	}
	assert.Contains(t, lines[2], `"where":{"hook":"PREROUTING","table":"","chain":"","rule":0,"action":"ROUTE"}`)
}
