package netfilter

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRestoreNormalisesLikeIptablesSave(t *testing.T) {
	in := `*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:zeta - [0:0]
:A - [0:0]
-A INPUT -p tcp --dport 80 -d 1.2.3.4 -s 5.6.7.8 -i eth0 -j ACCEPT
-A FORWARD -p udp --sport 53 ! -i lo -j DROP
-A INPUT -s 10.0.0.0/255.255.0.0 -j zeta
-A zeta -j RETURN
-A A -g zeta
COMMIT
`
	rs, err := ParseRestore(IPv4, []byte(in))
	require.NoError(t, err)
	want := `*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:A - [0:0]
:zeta - [0:0]
-A INPUT -s 5.6.7.8/32 -d 1.2.3.4/32 -i eth0 -p tcp -m tcp --dport 80 -j ACCEPT
-A INPUT -s 10.0.0.0/16 -j zeta
-A FORWARD ! -i lo -p udp -m udp --sport 53 -j DROP
-A A -g zeta
-A zeta -j RETURN
COMMIT
`
	assert.Equal(t, want, rs.String())
}

func TestRestoreErrorsNameTheLine(t *testing.T) {
	cases := []struct {
		name, in string
		line     int
		sentinel error
	}{
		{"missing chain", "*filter\n-A INPUT -j NOSUCH\nCOMMIT\n", 2, ErrNoSuchChain},
		{"unknown match", "*filter\n\n-A INPUT -m foo -j ACCEPT\nCOMMIT\n", 3, ErrUnknownMatch},
		{"unknown option", "*filter\n-A INPUT -p tcp --bogus 1 -j ACCEPT\nCOMMIT\n", 2, ErrUnknownOption},
		{"bad address", "*filter\n-A INPUT -s 10.0.0.300 -j ACCEPT\nCOMMIT\n", 2, ErrBadValue},
		{"bad port", "*filter\n-A INPUT -p tcp --dport 99999 -j ACCEPT\nCOMMIT\n", 2, ErrBadValue},
		{"loop", "*filter\n:A - [0:0]\n:B - [0:0]\n-A INPUT -j A\n-A A -j B\n-A B -j A\nCOMMIT\n", 6, ErrLoop},
		// iptables-restore: "COMMIT expected at line 3".
		{"no commit", "*filter\n-A INPUT -j ACCEPT\n", 3, ErrSyntax},
		{"-o in INPUT", "*filter\n-A INPUT -o eth0 -j ACCEPT\nCOMMIT\n", 2, ErrNotAllowed},
		{"tcp without -p", "*filter\n-A INPUT -m tcp --dport 80 -j ACCEPT\nCOMMIT\n", 2, ErrNotAllowed},
		{"table flag", "*filter\n-t nat -A INPUT -j ACCEPT\nCOMMIT\n", 2, ErrNotAllowed},
		{"user chain without policy", "*filter\n:X\nCOMMIT\n", 2, ErrSyntax},
		{"bad built-in policy", "*filter\n:INPUT RETURN [0:0]\nCOMMIT\n", 2, ErrBadValue},
		{"unterminated quote", "*filter\n-A INPUT -m comment --comment \"x\nCOMMIT\n", 2, ErrSyntax},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseRestore(IPv4, []byte(c.in))
			require.Error(t, err)
			var pe *ParseError
			require.True(t, errors.As(err, &pe), "%T %v", err, err)
			assert.Equal(t, c.line, pe.Line, err.Error())
			assert.ErrorIs(t, err, c.sentinel)
		})
	}
}

func TestRestoreIsAtomicPerTable(t *testing.T) {
	in := "*nat\n-A PREROUTING -j ACCEPT\nCOMMIT\n*filter\n-A INPUT -j NOSUCH\nCOMMIT\n*mangle\nCOMMIT\n"
	rs := NewRuleset(IPv4)
	require.Error(t, rs.Restore([]byte(in), RestoreOptions{}))
	require.NotNil(t, rs.Table(NAT))
	assert.Nil(t, rs.Table(Filter))
	assert.Nil(t, rs.Table(Mangle))
}

func TestExecCommands(t *testing.T) {
	rs := NewRuleset(IPv4)
	require.NoError(t, rs.Exec("iptables -t nat -N KUBE-SVC-X"))
	require.NoError(t, rs.Exec("-t nat -A PREROUTING -d 10.0.0.1/32 -p tcp --dport 80 -j KUBE-SVC-X"))
	require.NoError(t, rs.Exec("-t nat -I PREROUTING -s 10.1.0.0/16,10.2.0.0/16 -j RETURN"))
	require.NoError(t, rs.Exec("-t nat -D PREROUTING -s 10.2.0.0/16 -j RETURN"))
	require.NoError(t, rs.Exec("-P FORWARD DROP"))
	assert.ErrorIs(t, rs.Exec("-t nat -X KUBE-SVC-X"), ErrChainInUse)
	assert.ErrorIs(t, rs.Exec("-t nat -A PREROUTING -j NOPE"), ErrNoSuchChain)
	b, err := rs.AppendRules(nil, NAT, "", 0, false)
	require.NoError(t, err)
	assert.Equal(t, `-P PREROUTING ACCEPT
-P INPUT ACCEPT
-P OUTPUT ACCEPT
-P POSTROUTING ACCEPT
-N KUBE-SVC-X
-A PREROUTING -s 10.1.0.0/16 -j RETURN
-A PREROUTING -d 10.0.0.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-X
`, string(b))
	b, err = rs.AppendRules(nil, NAT, "PREROUTING", 2, true)
	require.NoError(t, err)
	assert.Equal(t, "-A PREROUTING -d 10.0.0.1/32 -p tcp -m tcp --dport 80 -c 0 0 -j KUBE-SVC-X\n", string(b))
}

func TestSplitArgsQuoting(t *testing.T) {
	got, err := splitArgs(`-m comment --comment "a \"b\" c" 'x y' "" z"q"w`)
	require.NoError(t, err)
	assert.Equal(t, []string{"-m", "comment", "--comment", `a "b" c`, "'x", "y'", "", "zq", "w"}, got) // a closing quote ends the argument, as in iptables-restore
	assert.Equal(t, `"a \"b\" \\ \'"`, string(appendQuoted(nil, `a "b" \ '`)))
	assert.Equal(t, `kube-proxy_1`, string(appendQuoted(nil, `kube-proxy_1`)))
	assert.Equal(t, `"default/web:http"`, string(appendQuoted(nil, `default/web:http`)))
}

// Recorded with iptables 1.8.9 (nf_tables): an inverted port range from 0
// is stored and printed as its complement.
func TestInvertedPortRangeFromZero(t *testing.T) {
	rs := NewRuleset(IPv4)
	rs.MustExec("-A INPUT -p tcp ! --sport 0:5", "-A INPUT -p udp ! --dport 0:65534", "-A INPUT -p tcp ! --sport 5:65535")
	b, err := rs.AppendRules(nil, Filter, "INPUT", 0, false)
	require.NoError(t, err)
	assert.Equal(t, "-P INPUT ACCEPT\n-A INPUT -p tcp -m tcp --sport 6:65535\n-A INPUT -p udp -m udp --dport 65535\n-A INPUT -p tcp -m tcp ! --sport 5:65535\n", string(b))
	// "! 0:65535" is left out of the rule: it matches every port and, being
	// the match's only option, hides the whole match.
	rs2 := NewRuleset(IPv4)
	rs2.MustExec("-A INPUT -p tcp ! --dport 0:65535", "-A INPUT -p udp -m udp ! --sport 0:65535 --dport 5")
	b, err = rs2.AppendRules(nil, Filter, "INPUT", 0, false)
	require.NoError(t, err)
	assert.Equal(t, "-P INPUT ACCEPT\n-A INPUT -p tcp\n-A INPUT -p udp -m udp --dport 5\n", string(b))
	// "-i !" names the interface "!"; "-i!" is the interface "-i!" in
	// iptables 1.8.9, refused here as not modelled.
	assert.ErrorIs(t, rs.Exec("-A INPUT -i! -j ACCEPT"), ErrNotModelled)
	rs3 := NewRuleset(IPv4)
	rs3.MustExec("-A INPUT -i ! -j ACCEPT", "-A INPUT -i !eth0")
	b, err = rs3.AppendRules(nil, Filter, "INPUT", 0, false)
	require.NoError(t, err)
	assert.Equal(t, "-P INPUT ACCEPT\n-A INPUT -i ! -j ACCEPT\n-A INPUT -i !eth0\n", string(b))
}

// iptables takes unique prefixes of long options (getopt_long); recorded
// with iptables 1.8.9.
func TestAbbreviatedOptions(t *testing.T) {
	rs := NewRuleset(IPv4)
	rs.MustExec(
		"-t nat -A PREROUTING -p tcp --dpor 80 -j DNAT --to-dest 1.2.3.4",
		"-A INPUT --proto tcp --dest 1.1.1.1 --in-int eth0 -j ACCEPT",
		"-A INPUT -m comment --comm x -j ACCEPT",
	)
	assert.Contains(t, rs.String(), "-A PREROUTING -p tcp -m tcp --dport 80 -j DNAT --to-destination 1.2.3.4\n")
	assert.Contains(t, rs.String(), "-A INPUT -d 1.1.1.1/32 -i eth0 -p tcp -j ACCEPT\n-A INPUT -m comment --comment x -j ACCEPT\n")
	assert.ErrorIs(t, rs.Exec("-A INPUT -p tcp --d 80"), ErrUnknownOption) // ambiguous
	assert.ErrorIs(t, rs.Exec("-A INPUT -p tcp --s 80 -j ACCEPT"), ErrUnknownOption)
	assert.ErrorIs(t, rs.Exec("-A INPUT -p tcp -m multiport --dports 1,2 --dp 5"), ErrMultipleFlags)
}
