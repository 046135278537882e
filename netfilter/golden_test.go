package netfilter

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/ipset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// goldenDir holds iptables-restore corpora and the real tools' outputs for
// them, written by testdata/golden/record.sh.
const goldenDir = "testdata/golden"

// goldenCase is one corpus file.
type goldenCase struct {
	name   string // base name, "docker"
	file   string // "docker.rules"
	family Family
}

func goldenCases(t testing.TB) []goldenCase {
	t.Helper()
	ents, err := os.ReadDir(goldenDir)
	require.NoError(t, err)
	var out []goldenCase
	for _, e := range ents {
		n := e.Name()
		switch {
		case strings.HasSuffix(n, ".rules"):
			out = append(out, goldenCase{strings.TrimSuffix(n, ".rules"), n, IPv4})
		case strings.HasSuffix(n, ".rules6"):
			out = append(out, goldenCase{strings.TrimSuffix(n, ".rules6"), n, IPv6})
		}
	}
	require.NotEmpty(t, out)
	return out
}

// sentinels are the errors a refused corpus must wrap.
var sentinels = []error{
	ErrUnknownTable, ErrUnknownMatch, ErrUnknownTarget, ErrUnknownOption, ErrBadValue, ErrNoSuchChain,
	ErrChainExists, ErrChainInUse, ErrChainNotEmpty, ErrBuiltinChain, ErrLoop, ErrNotAllowed,
	ErrNoSuchRule, ErrSyntax, ErrMissingArgument, ErrNotModelled, ErrMultipleFlags, ErrIncompatibleOpts,
	ErrTooDeep, ErrNoSuchSet, ErrNoSuchNFAcct,
}

func wrapsSentinel(err error) bool {
	for _, s := range sentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// tableSections splits a per-table golden file into its "# table T"
// sections, in file order.
func tableSections(t *testing.T, text string) (tables []TableID, bodies []string) {
	t.Helper()
	for _, sec := range strings.Split(text, "# table ")[1:] {
		name, body, _ := strings.Cut(sec, "\n")
		id, err := ParseTable(name)
		require.NoError(t, err)
		tables = append(tables, id)
		bodies = append(bodies, body)
	}
	return tables, bodies
}

func TestGolden(t *testing.T) {
	for _, gc := range goldenCases(t) {
		t.Run(gc.name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(goldenDir, gc.file))
			require.NoError(t, err)
			base := filepath.Join(goldenDir, gc.name)
			rs, err := ParseRestore(gc.family, in)

			if _, statErr := os.Stat(base + ".err"); statErr == nil {
				kernelErr, _ := os.ReadFile(base + ".err")
				if err == nil {
					// Some refusals depend on the namespace, not the text:
					// sets and nfacct objects that do not exist. A fresh
					// host has none, like the recorder's fresh namespace.
					h := NewHost(HostConfig{})
					if sets, rerr := os.ReadFile(base + ".ipsets"); rerr == nil {
						require.NoError(t, h.Sets().Restore(sets, ipset.RestoreOptions{}))
					}
					err = h.Restore(gc.family, in, RestoreOptions{Counters: true})
					require.Error(t, err, "iptables-restore refused %s:\n%s", gc.file, kernelErr)
					assert.True(t, wrapsSentinel(err), "error %v wraps no sentinel", err)
					return
				}
				require.Error(t, err, "iptables-restore refused %s:\n%s", gc.file, kernelErr)
				assert.True(t, wrapsSentinel(err), "error %v wraps no sentinel", err)
				var pe *ParseError
				assert.True(t, errors.As(err, &pe), "error %v is not a *ParseError", err)
				return
			}
			// A corpus the kernel accepts must load: an unknown module or
			// option fails here, it is not skipped.
			require.NoError(t, err)

			read := func(ext string) string {
				b, err := os.ReadFile(base + ext)
				require.NoError(t, err, "missing fixture: run testdata/golden/record.sh")
				return string(b)
			}
			t.Run("save", func(t *testing.T) {
				assert.Equal(t, read(".save"), string(rs.AppendSave(nil, SaveOptions{})))
			})
			t.Run("save-c", func(t *testing.T) {
				assert.Equal(t, read(".save-c"), string(rs.AppendSave(nil, SaveOptions{Counters: true})))
			})
			t.Run("S", func(t *testing.T) {
				tables, want := tableSections(t, read(".S"))
				for i, tb := range tables {
					got, err := rs.AppendRules(nil, tb, "", 0, false)
					require.NoError(t, err)
					assert.Equal(t, want[i], string(got), "table %s", tb)
				}
			})
			for _, l := range []struct {
				ext string
				opt ListOptions
			}{
				{".L-nv", ListOptions{Numeric: true, Verbose: true}},
				{".L-n", ListOptions{Numeric: true}},
				{".L-nvx-line", ListOptions{Numeric: true, Verbose: true, Exact: true, LineNumbers: true}},
				{".L", ListOptions{}},
			} {
				t.Run(l.ext[1:], func(t *testing.T) {
					tables, want := tableSections(t, read(l.ext))
					for i, tb := range tables {
						got, err := rs.AppendList(nil, tb, "", l.opt)
						require.NoError(t, err)
						assert.Equal(t, want[i], string(got), "table %s", tb)
					}
				})
			}
		})
	}
}

// TestKernelGolden re-records every corpus with the real tools and compares
// the outputs with the committed fixtures, so they cannot go stale.
func TestKernelGolden(t *testing.T) {
	kerneltest.Require(t)
	dir := rerecord(t, goldenDir, "bash", "ip6tables-restore", "ip6tables-save", "ip6tables")
	ents, err := os.ReadDir(goldenDir)
	require.NoError(t, err)

	fresh, err := os.ReadDir(dir)
	require.NoError(t, err)
	seen := map[string]bool{}
	for _, e := range fresh {
		n := e.Name()
		seen[n] = true
		got, err := os.ReadFile(filepath.Join(dir, n))
		require.NoError(t, err)
		want, err := os.ReadFile(filepath.Join(goldenDir, n))
		if !assert.NoError(t, err, "fixture %s is not committed", n) {
			continue
		}
		assert.Equal(t, string(want), string(got), "fixture %s differs from the live tools", n)
	}
	for _, e := range ents {
		if !seen[e.Name()] && !strings.HasSuffix(e.Name(), ".md") {
			t.Errorf("committed fixture %s was not produced by the live tools", e.Name())
		}
	}
}

// rerecord copies the inputs of a fixture directory (*.rules, *.rules6,
// *.ipsets) and its record.sh into a temporary directory, runs the script
// there with the real tools and returns the directory. It fails the test
// when a tool the script needs is missing.
func rerecord(t *testing.T, fixtures string, tools ...string) string {
	t.Helper()
	for _, tool := range tools {
		_, err := exec.LookPath(tool)
		require.NoError(t, err, "%s=1 but %s is missing", kerneltest.EnvVar, tool)
	}
	dir := t.TempDir()
	ents, err := os.ReadDir(fixtures)
	require.NoError(t, err)
	for _, e := range ents {
		n := e.Name()
		if strings.HasSuffix(n, ".rules") || strings.HasSuffix(n, ".rules6") || strings.HasSuffix(n, ".ipsets") || n == "record.sh" {
			b, err := os.ReadFile(filepath.Join(fixtures, n))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, n), b, 0o755))
		}
	}
	out, err := exec.Command("bash", filepath.Join(dir, "record.sh")).CombinedOutput()
	require.NoError(t, err, "%s/record.sh: %s", fixtures, out)
	return dir
}
