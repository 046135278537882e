package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/golden"
)

const kubenetFile = "scenarios/cluster/kubenet.yaml"

// kubenetStdin is the example file as read from stdin (its files named
// from this directory), with edit applied: old → new.
func kubenetStdin(t *testing.T, edits ...string) string {
	t.Helper()
	data, err := os.ReadFile(kubenetFile)
	require.NoError(t, err)
	s := strings.ReplaceAll(string(data), "objects: services.yaml", "objects: scenarios/cluster/services.yaml")
	for i := 0; i+1 < len(edits); i += 2 {
		require.Contains(t, s, edits[i])
		s = strings.Replace(s, edits[i], edits[i+1], 1)
	}
	return s
}

func TestClusterGolden(t *testing.T) {
	lbSyn := "at=internet/world src=203.0.113.7 dst=20.1.2.3 dport=80"
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
	}{
		{"help-cluster", []string{"cluster", "--help"}, ""},
		{"cluster-trace", []string{"cluster", "trace", kubenetFile, "from=pod-a dst=10.0.0.10 dport=80", "reply=1"}, ""},
		{"cluster-trace-lb", []string{"cluster", "trace", kubenetFile, lbSyn, "reply=1"}, ""},
		{"cluster-trace-json", []string{"cluster", "trace", "--format", "json", kubenetFile, lbSyn}, ""},
		{"cluster-trace-dot", []string{"cluster", "trace", "--format", "dot", kubenetFile, lbSyn, "reply=1"}, ""},
		{"err-cluster-explain-dot", []string{"cluster", "explain", "--format", "dot", kubenetFile, lbSyn}, ""},
		// SSH from the LAN is accepted by node1's SSH chain, from outside
		// it is dropped by the INPUT policy (as 'trace --node' shows).
		{"cluster-snapshot", []string{"cluster", "trace", "testdata/cluster/snapshot.yaml", "from=laptop dst=192.168.10.1 dport=22", "reply=1",
			"at=lan/uplink src=203.0.113.9 dst=192.168.10.1 dport=22"}, ""},
		{"cluster-explain", []string{"cluster", "explain", kubenetFile, "from=pod-a dst=10.0.0.10 dport=80"}, ""},
		{"cluster-explain-lb", []string{"cluster", "explain", kubenetFile, lbSyn}, ""},
		{"cluster-explain-json", []string{"cluster", "explain", "--format", "json", kubenetFile, lbSyn}, ""},
		// Without health probes the load balancer also sends to node1,
		// which has no endpoint of the eTP Local Service and drops.
		{"cluster-explain-no-probes", []string{"cluster", "explain", "-", lbSyn},
			kubenetStdin(t, "{node: node1, addr: 10.240.0.4, service: default/lb}", "{node: node1, addr: 10.240.0.4, healthy: true}")},
		{"cluster-trace-internet", []string{"cluster", "trace", kubenetFile, "from=pod-a dst=93.184.216.34 dport=443"}, ""},
		{"err-cluster-unknown-field", []string{"cluster", "trace", "-", "from=pod-a dst=10.0.0.10"}, kubenetStdin(t, "    routes: [default=eth0@10.240.0.1]\n", "    routes: [default=eth0@10.240.0.1]\n    rutes: []\n")},
		{"err-cluster-bad-prefix", []string{"cluster", "trace", "-", "from=pod-a dst=10.0.0.10"}, kubenetStdin(t, "addr: 10.244.0.7/24", "addr: 10.244.0.700/24")},
		{"err-cluster-bad-route", []string{"cluster", "trace", "-", "from=pod-a dst=10.0.0.10"}, kubenetStdin(t, "routes: [default=eth0@10.240.0.1]", "routes: [default=eth0@10.240.0.1, 10.1.0.0/16]")},
		{"err-cluster-link", []string{"cluster", "trace", "-", "from=pod-a dst=10.0.0.10"}, kubenetStdin(t, "link: node2/veth-b", "link: node3/veth-b")},
		{"err-cluster-service", []string{"cluster", "trace", "-", "from=pod-a dst=10.0.0.10"}, kubenetStdin(t, "{node: node2, addr: 10.240.0.5, service: default/lb}", "{node: node2, addr: 10.240.0.5, service: default/web}")},
		{"err-cluster-yaml", []string{"cluster", "trace", "-", "from=pod-a dst=10.0.0.10"}, "nodes:\n  - name: a\n   bad indent\n"},
		{"err-cluster-type", []string{"cluster", "trace", "-", "from=pod-a dst=10.0.0.10"}, "seed: many\n"},
		{"err-cluster-packet", []string{"cluster", "trace", kubenetFile, "dst=10.0.0.10"}, ""},
		{"err-cluster-host", []string{"cluster", "trace", kubenetFile, "from=pod-z dst=10.0.0.10"}, ""},
		{"err-cluster-reply-dropped", []string{"cluster", "trace", "-", lbSyn, "reply=1"},
			kubenetStdin(t, "{node: node2, addr: 10.240.0.5, service: default/lb}", "{node: node2, addr: 10.240.0.5, healthy: false}", "{node: node1, addr: 10.240.0.4, service: default/lb}", "{node: node1, addr: 10.240.0.4, healthy: true}")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(tc.args, tc.stdin)
			got := fmt.Sprintf("exit: %d\n--- stdout\n%s--- stderr\n%s", code, stdout, stderr)
			golden.Check(t, filepath.Join("testdata", "golden", tc.name+".golden"), []byte(got))
			if strings.HasPrefix(tc.name, "err-") {
				assert.NotZero(t, code)
				assert.Empty(t, stdout)
				first := strings.TrimSuffix(strings.Split(stderr, "\nRun '")[0], "\n")
				assert.NotContains(t, first, "\n", "the error is one line")
			} else {
				assert.Zero(t, code, stderr)
			}
		})
	}
}

// The example the command prints is the embedded file; written to a
// directory with its Services, it runs; it is never written over a file.
func TestClusterExample(t *testing.T) {
	code, stdout, stderr := runCmd([]string{"cluster", "example"}, "")
	require.Zero(t, code, stderr)
	data, err := os.ReadFile(kubenetFile)
	require.NoError(t, err)
	assert.Equal(t, string(data), stdout)
	assert.Contains(t, stderr, "write both with 'packetwalk cluster example DIR'")

	dir := filepath.Join(t.TempDir(), "aks")
	code, stdout, stderr = runCmd([]string{"cluster", "example", dir}, "")
	require.Zero(t, code, stderr)
	assert.Equal(t, "wrote "+filepath.Join(dir, "kubenet.yaml")+"\nwrote "+filepath.Join(dir, "services.yaml")+"\n", stdout)
	code, stdout, stderr = runCmd([]string{"cluster", "trace", filepath.Join(dir, "kubenet.yaml"), "from=pod-a dst=10.0.0.10 dport=80"}, "")
	require.Zero(t, code, stderr)
	assert.Contains(t, stdout, "=> delivered at pod-")
	code, _, stderr = runCmd([]string{"cluster", "example", dir}, "")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "kubenet.yaml exists: not overwritten")
}

// Packets of the file run before those of the command line.
func TestClusterFilePackets(t *testing.T) {
	in := kubenetStdin(t) + "packets:\n  - from=pod-a dst=10.0.0.10 dport=80\n"
	code, stdout, stderr := runCmd([]string{"cluster", "trace", "-", "reply=1"}, in)
	require.Zero(t, code, stderr)
	assert.Contains(t, stdout, "packet 1: tcp 10.244.0.5:40001 > 10.0.0.10:80 flags=S ttl=64 len=40, from pod-a\n")
	assert.Contains(t, stdout, "packet 2: tcp ")
	assert.Contains(t, stdout, ", reply to packet 1, from pod-")
	assert.Contains(t, stdout, "=> delivered at pod-a: tcp 10.0.0.10:80 > 10.244.0.5:40001 flags=SA")
}

// Errors of the file name its line: each edit breaks one line, whose
// number the message must give.
func TestClusterFileErrorLines(t *testing.T) {
	base := kubenetStdin(t)
	lineOfText := func(in, s string) int {
		lines := strings.Split(in, "\n")
		for i, l := range lines {
			if strings.Contains(l, s) {
				return i + 1
			}
		}
		t.Fatalf("no line holds %q", s)
		return 0
	}
	for _, tc := range []struct{ old, new, at, msg string }{
		{"reach: [10.240.0.5/32]", "reach: [10.240.0.5/33]", "reach: [10.240.0.5/33]", "bad prefix"},
		{"public: 20.9.9.9", "public: 20.9.9", "public: 20.9.9", "bad address"},
		{"frontend: 20.1.2.3:80", "frontend: 20.1.2.3", "frontend: 20.1.2.3", "bad address and port"},
		{"proto: tcp", "proto: sctp", "proto: sctp", "protocol"},
		{"{dst: 0.0.0.0/0, port: nat}", "{dst: 0.0.0.0/0, port: gw}", "{dst: 0.0.0.0/0, port: gw}", "unknown port"},
		{"{name: cbr0, ports: [veth-b]}", "{name: cbr1, ports: [veth-b]}", "{name: cbr1, ports: [veth-b]}", "no interface"},
		{"- -t nat -A POSTROUTING ! -d 10.0.0.0/8", "- -t nat -A POSTROUTING ! -d 10.0.0.0/88", "10.0.0.0/88", "commands[0]"},
		{"clusterCIDR: 10.244.0.0/16", "clusterCIDR: ten", "clusterCIDR: ten", "bad prefix"},
		{"addrs: [eth0=10.240.0.4/16", "addrs: [eth0=10.240.0.400/16", "eth0=10.240.0.400/16", "nodes[0].addrs[0]"},
		{"link: node1/veth-c", "link: node1-veth-c", "link: node1-veth-c", "expected DEVICE/PORT"},
	} {
		t.Run(tc.at, func(t *testing.T) {
			in := strings.Replace(base, tc.old, tc.new, 1)
			require.NotEqual(t, base, in)
			code, stdout, stderr := runCmd([]string{"cluster", "trace", "-", "from=pod-a dst=10.0.0.10"}, in)
			assert.Equal(t, 1, code)
			assert.Empty(t, stdout)
			want := fmt.Sprintf("packetwalk cluster: <stdin>:%d: ", lineOfText(in, tc.at))
			assert.True(t, strings.HasPrefix(stderr, want), "want %q, got %q", want, stderr)
			assert.Contains(t, stderr, tc.msg)
		})
	}
}

// FuzzClusterFile: no input panics; every refusal of the file names a
// line of it.
func FuzzClusterFile(f *testing.F) {
	data, err := os.ReadFile(kubenetFile)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(string(data))
	f.Add("nodes:\n  - name: a\n    addrs: [eth0=10.0.0.1/24]\npods:\n  - {name: p, addr: 10.0.0.2/24, link: a/eth0}\n")
	f.Add("routers: [{name: r, ports: [{name: x, reach: [0.0.0.0/0]}], routes: [{dst: 10.0.0.0/8, port: x}]}]\n")
	f.Fuzz(func(t *testing.T, in string) {
		in = strings.ReplaceAll(in, "services.yaml", "scenarios/cluster/services.yaml")
		_, _, err := buildClusterNet([]byte(in), ".")
		if err == nil {
			return
		}
		var ce *cfError
		var pe *os.PathError
		if !errors.As(err, &ce) && !errors.As(err, &pe) {
			t.Fatalf("error without a line: %v", err)
		}
	})
}
