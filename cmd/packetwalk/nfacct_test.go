package main

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/netfilter"
)

// Lines as nfacct 1.0.2 prints them (recorded in a namespace): names are
// printed raw, so they may hold blanks, ';' and '='.
func TestParseNFAcctList(t *testing.T) {
	in := "{ pkts = 00000000000000000000, bytes = 00000000000000000000 } = ct_state_invalid_dropped_pkts;\n" +
		"\n" +
		"{ pkts = 00000000000000000042, bytes = 00000000000000003360 } = localhost_nps_accepted_pkts;\n" +
		"{ pkts = 00000000000000000000, bytes = 00000000000000000000 } = sp ace;\n" +
		"{ pkts = 00000000000000000000, bytes = 00000000000000000000 } = x;y;\n" +
		"{ pkts = 18446744073709551615, bytes = 00000000000000000000 } = a=b;\n"
	objs, err := parseNFAcctList("nfacct-list", []byte(in))
	require.NoError(t, err)
	assert.Equal(t, []nfacctObject{
		{"ct_state_invalid_dropped_pkts", netfilter.Counters{}},
		{"localhost_nps_accepted_pkts", netfilter.Counters{Packets: 42, Bytes: 3360}},
		{"sp ace", netfilter.Counters{}},
		{"x;y", netfilter.Counters{}},
		{"a=b", netfilter.Counters{Packets: 18446744073709551615}},
	}, objs)

	ok := "{ pkts = 00000000000000000000, bytes = 00000000000000000000 } = a;\n"
	for _, tc := range []struct{ text, msg string }{
		{"a\n", "expected `nfacct list` output"},
		{"<obj><name>a</name></obj>\n", "expected `nfacct list` output"}, // the xml form
		{"{ pkts = 1 } = a;\n", `expected ", bytes = N"`},
		{"{ pkts = 1, bytes = 2 } a;\n", `expected " } = NAME;"`},
		{"{ pkts = 1, bytes = 2 } = a\n", "expected ';'"},
		{"{ pkts = -1, bytes = 2 } = a;\n", "bad counter"},
		{"{ pkts = 1, bytes = 18446744073709551616 } = a;\n", "bad counter"},
		{"{ pkts = 1, bytes = 2 } = ;\n", "bad object name"},
		{"{ pkts = 1, bytes = 2 } = x2345678901234567890123456789012;\n", "expected 1 to 31 characters"},
		{"{ pkts = 1, bytes = 2 } = a;\n", `object "a" listed twice (first on line 1)`},
	} {
		_, err := parseNFAcctList("f", []byte(ok+tc.text))
		var ie *inputError
		require.True(t, errors.As(err, &ie), tc.text)
		assert.Equal(t, 2, ie.line, tc.text)
		assert.True(t, strings.HasPrefix(err.Error(), "f:2: "), err.Error())
		assert.Contains(t, err.Error(), tc.msg, tc.text)
	}
}

// A snapshot's objects exist before the rules load, with the counters the
// node listed; --nfacct adds more, and a name in both is one object.
func TestNodeNFAcctObjects(t *testing.T) {
	dir := t.TempDir()
	rules, err := os.ReadFile(nodeKube + "/iptables-save")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(dir+"/iptables-save", rules, 0o644))
	require.NoError(t, os.WriteFile(dir+"/nfacct-list", []byte(
		"{ pkts = 00000000000000000007, bytes = 00000000000000000420 } = ct_state_invalid_dropped_pkts;\n"), 0o644))

	n := nodeInput{dir: dir}
	_, err = n.build(strings.NewReader(""))
	require.Error(t, err)
	assert.ErrorIs(t, err, netfilter.ErrNoSuchNFAcct)
	assert.Contains(t, err.Error(), dir+"/iptables-save:62: ")
	assert.Contains(t, err.Error(), `"localhost_nps_accepted_pkts"`)

	n = nodeInput{dir: dir, nfacct: nfacctList{"localhost_nps_accepted_pkts", "ct_state_invalid_dropped_pkts", "extra"}}
	nd, err := n.build(strings.NewReader(""))
	require.NoError(t, err)
	c, ok := nd.host.NFAcct("ct_state_invalid_dropped_pkts")
	require.True(t, ok)
	assert.Equal(t, netfilter.Counters{Packets: 7, Bytes: 420}, c)
	for _, name := range []string{"localhost_nps_accepted_pkts", "extra"} {
		c, ok := nd.host.NFAcct(name)
		assert.True(t, ok, name)
		assert.Zero(t, c, name)
	}
}

// The recorded kube-proxy node loads through the CLI and saves back what
// the real iptables-save printed.
func TestNodeKubeSavesAsRecorded(t *testing.T) {
	want, err := os.ReadFile(nodeKube + "/iptables-save")
	require.NoError(t, err)
	code, out, errOut := runCmd([]string{"save", "--node", nodeKube, "-c"}, "")
	require.Equal(t, 0, code, errOut)
	strip := func(s string) string {
		var b strings.Builder
		for _, l := range strings.SplitAfter(s, "\n") {
			if !strings.HasPrefix(l, "# ") {
				b.WriteString(l)
			}
		}
		return b.String()
	}
	assert.Equal(t, strip(string(want)), strip(out))
}
