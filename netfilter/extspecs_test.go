package netfilter

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestExtSpecsRecorded replays single rules of the extension matches
// whose outcome iptables 1.8.9 recorded in testdata/extspecs/specs.out
// (by record.sh there): packetwalk accepts exactly the rules the tool
// (and the kernel) accepts, and prints each as "iptables -S" does.
func TestExtSpecsRecorded(t *testing.T) {
	f, err := os.Open("testdata/extspecs/specs.out")
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	n := 0
	for sc.Scan() {
		line, want, ok := strings.Cut(sc.Text(), "\t")
		require.True(t, ok, "malformed line %q", sc.Text())
		n++
		parts := strings.SplitN(line, " ", 3)
		require.Len(t, parts, 3)
		fam := IPv4
		if parts[0] == "6" {
			fam = IPv6
		}
		rs := NewRuleset(fam)
		err := rs.Exec("-t " + parts[1] + " " + parts[2])
		if err == nil {
			// Hook and table checks run at commit, as the kernel's do.
			tid, terr := ParseTable(parts[1])
			require.NoError(t, terr)
			err = rs.Table(tid).validate(fam)
		}
		if strings.HasPrefix(want, "REFUSE") {
			assert.Error(t, err, "%s: iptables says %s", line, want)
			continue
		}
		if !assert.NoError(t, err, line) {
			continue
		}
		tid, _ := ParseTable(parts[1])
		chain := strings.Fields(parts[2])[1]
		b, err := rs.AppendRules(nil, tid, chain, 0, false)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		assert.Equal(t, strings.TrimPrefix(want, "ACCEPT "), lines[len(lines)-1], line)
	}
	require.NoError(t, sc.Err())
	assert.Greater(t, n, 80)
}
