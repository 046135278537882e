package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// TestKernelNFAcctSnapshot records a node snapshot with kube-proxy's
// nfacct objects (and oddly named ones) from a real namespace, loads it
// with --node and compares save with iptables-save; then checks that a
// dump naming an object the node lacks is refused on the line the real
// iptables-restore names.
func TestKernelNFAcctSnapshot(t *testing.T) {
	kerneltest.Require(t)
	_, err := exec.LookPath("nfacct")
	require.NoError(t, err, "PACKETWALK_KERNEL=1 needs nfacct (Debian package nfacct)")
	ns := kerneltest.NewNS(t, "pw-cli-nfacct")
	objs := []string{"ct_state_invalid_dropped_pkts", "localhost_nps_accepted_pkts", "sp ace", "x;y"}
	for _, o := range objs {
		_, _, err := ns.Exec("", "nfacct", "add", o)
		require.NoError(t, err)
	}
	rules, err := os.ReadFile(filepath.Join(nodeKube, "iptables-save"))
	require.NoError(t, err)
	require.NoError(t, ns.Restore(string(rules)))

	dir := t.TempDir()
	list, _, err := ns.Exec("", "nfacct", "list")
	require.NoError(t, err)
	save, err := ns.SaveRaw("-c")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "nfacct-list"), []byte(list), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "iptables-save"), []byte(save), 0o644))

	got, err := parseNFAcctList("nfacct-list", []byte(list))
	require.NoError(t, err)
	var names []string
	for _, o := range got {
		names = append(names, o.name)
	}
	assert.ElementsMatch(t, objs, names)

	code, stdout, stderr := runCmd([]string{"save", "--node", dir, "-c"}, "")
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, kerneltest.StripSaveComments(save), kerneltest.StripSaveComments(stdout))

	// A fresh namespace without the objects: both refuse, on the same line.
	bare := kerneltest.NewNS(t, "pw-cli-nfacct")
	err = bare.Restore(string(rules))
	var ce *kerneltest.CommandError
	require.ErrorAs(t, err, &ce)
	m := regexp.MustCompile(`line (\d+): RULE_APPEND failed \(No such file or directory\)`).FindStringSubmatch(ce.Stderr)
	require.NotNil(t, m, ce.Stderr)
	code, _, stderr = runCmd([]string{"save", "--rules", filepath.Join(dir, "iptables-save")}, "")
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "/iptables-save:"+m[1]+": no such nfacct object")
	assert.True(t, strings.Contains(stderr, "--nfacct ") && strings.Contains(stderr, "nfacct-list"), stderr)
}
