package main

import (
	"encoding/json"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/golden"
)

const kubeCluster = "testdata/kube/cluster.yaml"

// kubeNodeA is the kube output for node-a, used as --rules by the explain
// cases; TestKubeNodeAFixture keeps it in sync with the generator.
var kubeNodeA = []string{"kube", "-f", kubeCluster, "--node-name", "node-a", "--node-ip", "192.168.10.1", "--cluster-cidr", "10.244.0.0/16"}

var explainNode = []string{"--rules", "testdata/kube/node-a.save", "--addr", "eth0=192.168.10.1/24", "--addr", "cbr0=10.244.1.1/24", "--route", "10.244.0.0/16=eth0@192.168.10.254", "--route", "default=eth0@192.168.10.254"}

func explainArgs(extra ...string) []string {
	return append(append([]string{"explain"}, explainNode...), extra...)
}

var kubeExplainGoldenCases = []struct {
	name string
	args []string
}{
	{"help-kube", []string{"kube", "--help"}},
	{"help-explain", []string{"explain", "--help"}},
	{"kube-current", kubeNodeA},
	{"kube-legacy", []string{"kube", "-f", kubeCluster, "--layout", "legacy", "--legacy-probability", "--node-name", "node-a", "--node-ip", "192.168.10.1", "--detect-local", "none", "--masquerade-all", "--random-fully"}},
	{"kube-ipv6-nodeports", []string{"kube", "-f", "testdata/kube/cluster6.yaml", "--node-name", "node-a", "--node-ip", "fd00:10::1", "--nodeport-addresses", "fd00:10::/64", "--localhost-nodeports=false"}},
	{"explain-cluster-ip", explainArgs("in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80")},
	{"explain-cluster-ip-json", explainArgs("--format", "json", "in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80")},
	{"explain-established-json", explainArgs("--format", "json", "in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80 sport=5000", "in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80 sport=5000 flags=A")},
	{"explain-no-endpoints-json", explainArgs("--format", "json", "in=eth0 src=192.168.10.2 dst=10.96.0.30 proto=udp dport=53")},
	{"explain-nodeport-local", explainArgs("in=eth0 src=192.168.10.2 dst=192.168.10.1 dport=30080")},
	{"err-explain-no-packet", explainArgs()},
	{"err-explain-format", explainArgs("--format", "xtables", "dst=10.96.0.10")},
	{"err-kube-no-file", []string{"kube"}},
	{"err-kube-layout", []string{"kube", "-f", kubeCluster, "--layout", "v1.18"}},
	{"err-kube-detect", []string{"kube", "-f", kubeCluster, "--detect-local", "cluster-cidr"}},
	{"err-kube-bad-object", []string{"kube", "-f", "testdata/kube/bad.yaml"}},
}

// TestGoldenKubeExplain is the golden test of kube and explain (run with
// -run TestGolden -update to rewrite the files).
func TestGoldenKubeExplain(t *testing.T) {
	for _, tc := range kubeExplainGoldenCases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(tc.args, "")
			got := fmt.Sprintf("exit: %d\n--- stdout\n%s--- stderr\n%s", code, stdout, stderr)
			path := filepath.Join("testdata", "golden", tc.name+".golden")
			golden.Check(t, path, []byte(got))
			if strings.HasPrefix(tc.name, "err-") {
				assert.NotZero(t, code)
				assert.Empty(t, stdout)
			} else {
				assert.Zero(t, code, stderr)
			}
		})
	}
}

func TestKubeNodeAFixture(t *testing.T) {
	code, stdout, stderr := runCmd(kubeNodeA, "")
	require.Zero(t, code, stderr)
	want, err := os.ReadFile("testdata/kube/node-a.save")
	require.NoError(t, err)
	assert.Equal(t, string(want), stdout, "regenerate testdata/kube/node-a.save with: packetwalk %s", strings.Join(kubeNodeA, " "))
}

// The json contract, field by field: probabilities are exact, sum to 1,
// and each path is table:chain:rule:N:ACTION.
func TestExplainJSONShape(t *testing.T) {
	code, stdout, stderr := runCmd(explainArgs("--format", "json", "in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80"), "")
	require.Zero(t, code, stderr)
	var doc struct {
		Outcomes []map[string]json.RawMessage `json:"outcomes"`
	}
	require.NoError(t, json.Unmarshal([]byte(stdout), &doc))
	require.Len(t, doc.Outcomes, 3)
	sum := new(big.Rat)
	dsts := map[string]string{}
	for _, o := range doc.Outcomes {
		for _, k := range []string{"probability", "p", "verdict", "disposition", "where", "out", "packet", "emitted", "path"} {
			assert.Contains(t, o, k)
		}
		var prob string
		var p float64
		var path []string
		var pkt struct{ Dst string }
		require.NoError(t, json.Unmarshal(o["probability"], &prob))
		require.NoError(t, json.Unmarshal(o["p"], &p))
		require.NoError(t, json.Unmarshal(o["path"], &path))
		require.NoError(t, json.Unmarshal(o["packet"], &pkt))
		r, ok := new(big.Rat).SetString(prob)
		require.True(t, ok, prob)
		f, _ := r.Float64()
		assert.Equal(t, f, p)
		sum.Add(sum, r)
		dsts[pkt.Dst] = prob
		assert.Equal(t, []string{"mangle:PREROUTING:rule:0:POLICY:ACCEPT", "nat:PREROUTING:rule:1:JUMP:KUBE-SERVICES"}, path[:2])
		assert.Contains(t, strings.Join(path, " "), "nat:KUBE-SVC-CDGGSHYLG3RE2FKL:rule:")
		assert.JSONEq(t, `"ACCEPT"`, string(o["verdict"]))
		assert.JSONEq(t, `"forwarded"`, string(o["disposition"]))
	}
	assert.Equal(t, "1/1", sum.String())
	// kube-proxy's 1/3, 1/2 cascade as the kernel quantises it.
	assert.Equal(t, map[string]string{
		"10.244.1.5": "715827883/2147483648",
		"10.244.1.6": "1431655765/4294967296",
		"10.244.2.7": "1431655765/4294967296",
	}, dsts)
}
