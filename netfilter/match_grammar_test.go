package netfilter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/internal/kerneltest"
	"github.com/stretchr/testify/require"
)

// grammarVector is one rule of INPUT and what iptables 1.8.9 makes of it:
// the -S line, or a refusal (want ""). The vectors come from divergences
// the grammar differential (internal/difftest/grammar_diff_test.go) found,
// checked against the real iptables-restore and iptables -S.
type grammarVector struct {
	rule, want string
}

var matchGrammarVectors = []grammarVector{
	// connmark's --mark is mandatory, like mark's.
	{"-m connmark", ""},
	{"-m connmark --mark 0x10/0xff", "-A INPUT -m connmark --mark 0x10/0xff"},
	// Marks are read as strtoul reads them: no 0b prefix, no underscores.
	{"-m connmark --mark 0b1", ""},
	{"-m connmark --mark 1_0", ""},
	{"-m connmark --mark 010", "-A INPUT -m connmark --mark 0x8"},
	// State words are case-insensitive prefixes of the state names.
	{"-m state --state e,r", "-A INPUT -m state --state RELATED,ESTABLISHED"},
	{"-m state --state new", "-A INPUT -m state --state NEW"},
	{"-m state --state snat", ""},
	{"-m state --state NEW,", ""},
	{"-m state --state NEW,,EST", ""},
	{"-m conntrack --ctstate inv,d", "-A INPUT -m conntrack --ctstate INVALID,DNAT"},
	{"-m conntrack --ctstate NEWX", ""},
	{"-m conntrack --ctstatus s,c,N", "-A INPUT -m conntrack --ctstatus SEEN_REPLY,CONFIRMED"},
	{"-m conntrack --ctstatus none", "-A INPUT -m conntrack --ctstatus NONE"},
	{"-m conntrack --ctdir original", "-A INPUT -m conntrack --ctdir ORIGINAL"},
	{"-m conntrack --ctdir O", ""},
	// --ctexpire: strtoul ends, open ends, reversed ranges kept.
	{"-m conntrack --ctexpire 0x10", "-A INPUT -m conntrack --ctexpire 16"},
	{"-m conntrack --ctexpire 010", "-A INPUT -m conntrack --ctexpire 8"},
	{"-m conntrack --ctexpire 5:", "-A INPUT -m conntrack --ctexpire 5:4294967295"},
	{"-m conntrack --ctexpire :5", "-A INPUT -m conntrack --ctexpire 0:5"},
	{"-m conntrack --ctexpire :", "-A INPUT -m conntrack --ctexpire 0:4294967295"},
	{"-m conntrack --ctexpire 10:5", "-A INPUT -m conntrack --ctexpire 10:5"},
	{"-m conntrack --ctexpire 5:5", "-A INPUT -m conntrack --ctexpire 5"},
	{"-m conntrack --ctexpire 4294967296", ""},
	{"-m conntrack --ctexpire -1", ""},
	// --ct*port: service names, open ends, reversed ranges, 16-bit wrap.
	{"-m conntrack --ctorigsrcport domain", "-A INPUT -m conntrack --ctorigsrcport 53"},
	{"-m conntrack --ctorigsrcport bootps", "-A INPUT -m conntrack --ctorigsrcport 67"},
	{"-m conntrack --ctorigsrcport 80:http", "-A INPUT -m conntrack --ctorigsrcport 80"},
	{"-m conntrack --ctorigdstport 90:80", "-A INPUT -m conntrack --ctorigdstport 90:80"},
	{"-m conntrack --ctorigdstport :80", "-A INPUT -m conntrack --ctorigdstport 0:80"},
	{"-m conntrack --ctorigdstport 80:", "-A INPUT -m conntrack --ctorigdstport 80:65535"},
	{"-m conntrack --ctreplsrcport :", "-A INPUT -m conntrack --ctreplsrcport 0:65535"},
	{"-m conntrack --ctrepldstport 65536", "-A INPUT -m conntrack --ctrepldstport 0"},
	{"-m conntrack --ctrepldstport 080", "-A INPUT -m conntrack --ctrepldstport 80"},
	{"-m conntrack --ctorigsrcport 0x50", ""},
}

func ruleOfVector(t *testing.T, v grammarVector) (string, error) {
	t.Helper()
	rs, err := ParseRestore(IPv4, []byte("*filter\n-A INPUT "+v.rule+"\nCOMMIT\n"))
	if err != nil {
		return "", err
	}
	out, err := rs.AppendRules(nil, Filter, "INPUT", 0, false)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

func TestMatchGrammarVectors(t *testing.T) {
	for _, v := range matchGrammarVectors {
		got, err := ruleOfVector(t, v)
		if v.want == "" {
			require.Error(t, err, "%s: iptables refuses it, packetwalk printed %q", v.rule, got)
			continue
		}
		require.NoError(t, err, v.rule)
		require.Equal(t, v.want, got, v.rule)
	}
}

// TestMatchGrammarVectorsKernel checks the vectors against the real
// iptables-restore and iptables -S.
func TestMatchGrammarVectorsKernel(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNS(t, "pw-mgram")
	for _, v := range matchGrammarVectors {
		err := ns.Restore(fmt.Sprintf("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT %s\nCOMMIT\n", v.rule))
		if v.want == "" {
			require.Error(t, err, v.rule)
			continue
		}
		require.NoError(t, err, v.rule)
		out, err := ns.IPTables("-S", "INPUT")
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Equal(t, v.want, lines[len(lines)-1], v.rule)
	}
}
