package netfilter

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/ipset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// grammarDir holds small iptables-restore inputs at the edges of the
// grammar (shared option names, odd ranges and masks, line endings) and
// what the real iptables-restore did with each, written by
// testdata/grammar/record.sh.
const grammarDir = "testdata/grammar"

// grammarOut renders what packetwalk does with one case in the form
// record.sh writes.
func grammarOut(t *testing.T, name string, f Family, in []byte) string {
	t.Helper()
	h := NewHost(HostConfig{})
	if sets, err := os.ReadFile(filepath.Join(grammarDir, name+".ipsets")); err == nil {
		require.NoError(t, h.Sets().Restore(sets, ipset.RestoreOptions{}))
	}
	if err := h.Restore(f, in, RestoreOptions{}); err != nil {
		assert.True(t, wrapsSentinel(err), "error %v wraps no sentinel", err)
		var pe *ParseError
		if !errors.As(err, &pe) {
			return fmt.Sprintf("refused without a line: %v\n", err)
		}
		return fmt.Sprintf("refused at line %d\n", pe.Line)
	}
	rs := h.Ruleset(f)
	var b strings.Builder
	b.WriteString("accepted\n# save\n")
	b.Write(rs.AppendSave(nil, SaveOptions{}))
	for _, tb := range []TableID{Mangle, Security, Raw, Filter, NAT} {
		if !grammarNamesTable(in, tb) {
			continue
		}
		s, err := rs.AppendRules(nil, tb, "", 0, false)
		require.NoError(t, err)
		l, err := rs.AppendList(nil, tb, "", ListOptions{Numeric: true, Verbose: true})
		require.NoError(t, err)
		fmt.Fprintf(&b, "# S %s\n%s# L %s\n%s", tb, s, tb, l)
	}
	return b.String()
}

// grammarNamesTable mirrors record.sh's test for a "*TABLE" line.
func grammarNamesTable(in []byte, tb TableID) bool {
	for _, line := range strings.Split(string(in), "\n") {
		rest := strings.TrimLeft(line, " \t\r\f\v")
		if name, ok := strings.CutPrefix(rest, "*"+tb.String()); ok {
			if name == "" || !isWordByte(name[0]) {
				return true
			}
		}
	}
	return false
}

func isWordByte(c byte) bool {
	return c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

// grammarWant is a recorded outcome: for a refusal only the first line
// (packetwalk's messages are its own).
func grammarWant(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(grammarDir, name+".out"))
	require.NoError(t, err, "missing fixture: run testdata/grammar/record.sh")
	s := string(b)
	if strings.HasPrefix(s, "refused") {
		first, _, _ := strings.Cut(s, "\n")
		return first + "\n"
	}
	return s
}

func TestGrammar(t *testing.T) {
	ents, err := os.ReadDir(grammarDir)
	require.NoError(t, err)
	n := 0
	for _, e := range ents {
		name, f := e.Name(), IPv4
		switch {
		case strings.HasSuffix(name, ".rules"):
			name = strings.TrimSuffix(name, ".rules")
		case strings.HasSuffix(name, ".rules6"):
			name, f = strings.TrimSuffix(name, ".rules6"), IPv6
		default:
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			in, err := os.ReadFile(filepath.Join(grammarDir, e.Name()))
			require.NoError(t, err)
			want, got := grammarWant(t, name), grammarOut(t, name, f, in)
			if want == "refused at line 0\n" {
				// The kernel refused the commit; iptables-restore names
				// no line, packetwalk names the rule's.
				if strings.HasPrefix(got, "refused at line ") {
					got = want
				}
			}
			if want != got {
				t.Errorf("differs from iptables-restore:\n%s", lineDiff(want, got))
			}
		})
	}
	require.NotZero(t, n)
}

// TestKernelGrammarFixtures re-records every grammar case with the real tools and
// compares the result with the committed fixtures.
func TestKernelGrammarFixtures(t *testing.T) {
	kerneltest.Require(t)
	dir := rerecord(t, grammarDir, "bash", "iptables-restore", "ip6tables-restore", "ipset")
	ents, err := os.ReadDir(grammarDir)
	require.NoError(t, err)
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".out")
		if !ok {
			continue
		}
		got, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if !assert.NoError(t, err, "case %s was not recorded live", name) {
			continue
		}
		want, err := os.ReadFile(filepath.Join(grammarDir, e.Name()))
		require.NoError(t, err)
		assert.Equal(t, string(want), string(got), "case %s differs from the live tools", name)
	}
}

// lineDiff lists the lines where want and got differ, numbered.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i, shown := 0, 0; (i < len(w) || i < len(g)) && shown < 12; i++ {
		var a, c string
		if i < len(w) {
			a = w[i]
		}
		if i < len(g) {
			c = g[i]
		}
		if a != c || i >= len(w) || i >= len(g) {
			fmt.Fprintf(&b, "%d want %q\n%d got  %q\n", i+1, a, i+1, c)
			shown++
		}
	}
	return b.String()
}

// With -c, iptables-restore 1.8.9 requires a built-in chain's counters
// ("invalid policy counters for chain 'INPUT'") and reads none for a user
// chain, whatever its policy word.
func TestRestoreChainCountersWithC(t *testing.T) {
	_, err := ParseRestore(IPv4, []byte("*filter\n:FOO BOGUS [x]\n:INPUT DROP\nCOMMIT\n"))
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 3, pe.Line)
	assert.ErrorIs(t, err, ErrBadValue)

	_, err = ParseRestore(IPv4, []byte("*filter\n:INPUT DROP [x]\nCOMMIT\n"))
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 2, pe.Line)

	rs, err := ParseRestore(IPv4, []byte("*filter\n:FOO BOGUS [x]\n:INPUT DROP [7:8] junk\nCOMMIT\n"))
	require.NoError(t, err)
	assert.Equal(t, "*filter\n:INPUT DROP [7:8]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:FOO - [0:0]\nCOMMIT\n",
		string(rs.AppendSave(nil, SaveOptions{Counters: true})))
}
