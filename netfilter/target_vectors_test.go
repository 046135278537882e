package netfilter

import (
	"bufio"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// targetVector is one rule of testdata/targets/vectors.txt with what
// iptables 1.8.9 printed for it, or the error it gave.
type targetVector struct {
	fam                 Family
	table, chain, spec  string
	line                string
	err                 string
	save, listN, listNm string
}

func readTargetVectors(t *testing.T) []targetVector {
	f, err := os.Open("testdata/targets/vectors.txt")
	require.NoError(t, err)
	defer f.Close()
	var out []targetVector
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		key, val, _ := strings.Cut(line, ": ")
		if strings.HasSuffix(line, ":") { // an empty value
			key, val = strings.TrimSuffix(line, ":"), ""
		}
		switch key {
		case "case":
			fields := strings.SplitN(val, " ", 4)
			require.Len(t, fields, 4, val)
			v := targetVector{fam: IPv4, table: fields[1], chain: fields[2], spec: fields[3], line: val}
			if fields[0] == "6" {
				v.fam = IPv6
			}
			out = append(out, v)
		case "ERR":
			out[len(out)-1].err = val
		case "S":
			out[len(out)-1].save = val
		case "Ln":
			out[len(out)-1].listN = val
		case "L":
			out[len(out)-1].listNm = val
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out)
	return out
}

// lastLine returns the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestTargetVectors checks every recorded rule: refused where iptables
// refused it, otherwise printed exactly as iptables -S, -L -n and -L do.
func TestTargetVectors(t *testing.T) {
	for _, v := range readTargetVectors(t) {
		t.Run(v.line, func(t *testing.T) {
			rs := NewRuleset(v.fam)
			err := rs.Exec("-t " + v.table + " -A " + v.chain + " " + v.spec)
			if v.err != "" {
				require.Error(t, err, "iptables said: %s", v.err)
				return
			}
			require.NoError(t, err)
			tid, err := ParseTable(v.table)
			require.NoError(t, err)
			s, err := rs.AppendRules(nil, tid, v.chain, 1, false)
			require.NoError(t, err)
			assert.Equal(t, v.save, strings.TrimSuffix(string(s), "\n"), "-S")
			l, err := rs.AppendList(nil, tid, v.chain, ListOptions{Numeric: true})
			require.NoError(t, err)
			assert.Equal(t, v.listN, lastLine(string(l)), "-L -n")
			l, err = rs.AppendList(nil, tid, v.chain, ListOptions{})
			require.NoError(t, err)
			assert.Equal(t, v.listNm, lastLine(string(l)), "-L")
		})
	}
}
