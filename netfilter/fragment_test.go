package netfilter

import (
	"errors"
	"net/netip"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func restoreFragment(t *testing.T, text string, def TableID) (*Ruleset, FragmentReport, error) {
	t.Helper()
	var rep FragmentReport
	rs := NewRuleset(IPv4)
	err := rs.Restore([]byte(text), RestoreOptions{Fragment: &FragmentOptions{Table: def, Report: &rep}})
	return rs, rep, err
}

// The whereami grep of the AKS post (docs/blog-posts.md): every line is
// nat by its chain names and targets, and the chains it uses are declared.
func TestFragmentWhereami(t *testing.T) {
	data, err := os.ReadFile("../kubeproxy/testdata/whereami_aks_cluster.save")
	require.NoError(t, err)
	rs, rep, err := restoreFragment(t, string(data), NoTable)
	require.NoError(t, err)
	assert.Equal(t, []string{
		"lines 2-15: table nat (chain names and targets)",
		"declared in table nat: KUBE-FW-7G2JV7LNOR6DDNIY KUBE-MARK-DROP KUBE-MARK-MASQ KUBE-NODEPORTS KUBE-SEP-6HBOEI5FVFTJNRJ3 KUBE-SEP-IJTMGMPNVALZGJZD KUBE-SERVICES KUBE-SVC-7G2JV7LNOR6DDNIY",
		"no rule jumps to nat KUBE-NODEPORTS (line 2): packets never enter it",
		"no rule jumps to nat KUBE-SERVICES (line 4): packets never enter it",
	}, rep.Summary())
	save := rs.String()
	assert.True(t, strings.HasPrefix(save, "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:KUBE-FW-7G2JV7LNOR6DDNIY - [0:0]\n"), save)
	assert.Contains(t, save, "\n-A KUBE-SEP-IJTMGMPNVALZGJZD -p tcp -m comment --comment \"default/whereami:\" -m tcp -j DNAT --to-destination 10.13.76.7:80\n-A KUBE-SERVICES -d 51.144.176.251/32")
	assert.Equal(t, 1, strings.Count(save, "COMMIT"))

	// The same lines with the hook's jump added carry a packet to a pod.
	h := NewHost(HostConfig{Seed: 1})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.13.76.4/24")))
	require.NoError(t, h.Restore(IPv4, append(data, "-A PREROUTING -j KUBE-SERVICES\n"...), RestoreOptions{Fragment: &FragmentOptions{}}))
	res := h.Receive("eth0", TCP(netip.MustParseAddrPort("203.0.113.9:40000"), netip.MustParseAddrPort("51.144.176.251:80"), 0x02))
	require.NoError(t, res.Err)
	assert.Contains(t, []string{"10.13.76.26", "10.13.76.7"}, res.Packet.Dst.String())
}

func TestFragmentInference(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		def      TableID
		tables   []TableID // per command line
		why      string    // of the last line
	}{
		{"masquerade", "-A POSTROUTING -s 10.244.0.0/16 ! -d 10.244.0.0/16 -j MASQUERADE", NoTable, []TableID{NAT}, "chain names and targets"},
		{"reject", "-A INPUT -p tcp --dport 23 -j REJECT", NoTable, []TableID{Filter}, "chain names and targets"},
		{"notrack", "-A PREROUTING -p udp --dport 53 -j CT --notrack", NoTable, []TableID{Raw}, "chain names and targets"},
		{"tproxy", "-A PREROUTING -p tcp -j TPROXY --on-port 15001 --tproxy-mark 0x1/0x1", NoTable, []TableID{Mangle}, "chain names and targets"},
		{"dnat", "-A OUTPUT -d 10.96.0.1/32 -p tcp -j DNAT --to-destination 192.168.1.5:6443", NoTable, []TableID{NAT}, "chain names and targets"},
		{"unknown chain narrowed by its lines", "-A POSTROUTING -j MYNAT\n-A MYNAT -d 10.0.0.0/8 -j RETURN\n-A MYNAT -j MASQUERADE", NoTable, []TableID{NAT, NAT, NAT}, "chain names and targets"},
		{"default table", "-A INPUT -p tcp --dport 22 -j ACCEPT", Filter, []TableID{Filter}, "default table"},
		{"ambiguous chain by default", "-A FORWARD -j MYFW\n-A MYFW -j ACCEPT", Filter, []TableID{Filter, Filter}, "default table"},
		{"iptables command", "sudo iptables -A INPUT -p tcp --dport 22 -j ACCEPT", NoTable, []TableID{Filter}, "iptables command without -t"},
		{"-t", "iptables -t nat -A POSTROUTING -o eth0 -j MASQUERADE", NoTable, []TableID{NAT}, "-t option"},
		{"section", "*mangle\n-A PREROUTING -j MYMARK\n-A MYMARK -j MARK --set-mark 1\nCOMMIT\n-A POSTROUTING -j MASQUERADE", NoTable, []TableID{Mangle, Mangle, NAT}, "chain names and targets"},
		{"counters and comments", "# grep output\n[12:720] -A KUBE-SERVICES -d 10.0.0.10/32 -p udp -m udp --dport 53 -j KUBE-SVC-TCOU7JCQXEZGVUNU\n\n", NoTable, []TableID{NAT}, "chain names and targets"},
		{"filter KUBE-SERVICES", "-A KUBE-SERVICES -d 10.0.0.11/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable", NoTable, []TableID{Filter}, "chain names and targets"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rep, err := restoreFragment(t, tc.in, tc.def)
			require.NoError(t, err)
			require.Len(t, rep.Lines, len(tc.tables))
			for i, l := range rep.Lines {
				assert.Equal(t, tc.tables[i], l.Table, "line %d", l.Line)
			}
			assert.Equal(t, tc.why, rep.Lines[len(rep.Lines)-1].Why)
		})
	}
}

func TestFragmentCounters(t *testing.T) {
	var rep FragmentReport
	rs := NewRuleset(IPv4)
	require.NoError(t, rs.Restore([]byte("[12:720] -A POSTROUTING -j MASQUERADE\n"), RestoreOptions{Counters: true, Fragment: &FragmentOptions{Report: &rep}}))
	assert.Equal(t, Counters{Packets: 12, Bytes: 720}, rs.Table(NAT).Chain("POSTROUTING").Rules[0].Counters)
	assert.Empty(t, rep.Declared)
}

func TestFragmentErrors(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		def      TableID
		line     int
		is       error
		msg      string
	}{
		{"ambiguous", "# x\n-A INPUT -p tcp --dport 22 -j ACCEPT", NoTable, 2, ErrAmbiguousTable,
			"line 2: table cannot be told: -A INPUT fits the tables mangle, filter, nat: give a default table or a *table section"},
		{"ambiguous FORWARD", "-A FORWARD -j ACCEPT", NoTable, 1, ErrAmbiguousTable,
			"line 1: table cannot be told: -A FORWARD fits the tables mangle, filter: give a default table or a *table section"},
		{"conflict", "-A PREROUTING -j X\n-A X -j DNAT --to-destination 10.0.0.1\n-A X -p tcp -j REJECT", NoTable, 1, ErrNotAllowed,
			"line 1: not allowed here: no table fits -A PREROUTING: chain PREROUTING is in mangle, raw, nat; chain X is used by lines that fit different tables: line 1 (mangle, raw, nat), line 2 (nat), line 3 (filter)"},
		{"no table for name and target", "-A KUBE-FORWARD -j DNAT --to-destination 10.0.0.1", NoTable, 1, ErrNotAllowed,
			"line 1: not allowed here: no table fits -A KUBE-FORWARD: chain KUBE-FORWARD is in filter"},
		{"bad option", "-A KUBE-SERVICES -p tcp --dportx 80 -j ACCEPT", NoTable, 1, ErrUnknownOption, "--dportx"},
		{"wrong hook, in an explicit section", "*nat\n-A INPUT -j DNAT --to-destination 10.0.0.1\nCOMMIT", NoTable, 2, ErrNotAllowed, "line 2:"},
		{"missing COMMIT", "*nat\n-A POSTROUTING -j MASQUERADE", NoTable, 3, ErrSyntax, "COMMIT expected"},
		{"COMMIT alone", "COMMIT", NoTable, 1, ErrSyntax, "COMMIT outside"},
		{"ip6tables in IPv4", "ip6tables -A INPUT -j ACCEPT", NoTable, 1, ErrSyntax, "IPv6 command"},
		{"flush without table", "-F", NoTable, 1, ErrSyntax, "needs its table"},
		{"two tables", "iptables -t nat -t filter -A INPUT -j ACCEPT", NoTable, 1, ErrSyntax, "two tables"},
		{"a listing", "Chain INPUT (policy ACCEPT)\ntarget     prot opt source               destination", NoTable, 1, ErrSyntax, "this is iptables -L output"},
		{"bad default", "-A INPUT -j ACCEPT", TableID(99), 0, ErrBadValue, "default table"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := restoreFragment(t, tc.in, tc.def)
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.is), "%v", err)
			assert.Contains(t, err.Error(), tc.msg)
			var pe *ParseError
			if tc.line > 0 {
				require.ErrorAs(t, err, &pe)
				assert.Equal(t, tc.line, pe.Line, "%v", err)
				if pe.Line <= strings.Count(tc.in, "\n")+1 {
					assert.Equal(t, strings.Split(tc.in, "\n")[pe.Line-1], pe.Text)
				}
			}
		})
	}
}

// A lenient fragment names the fragment's lines in its placeholders.
func TestFragmentPlaceholderLines(t *testing.T) {
	rs := NewRuleset(IPv4)
	in := "# two lines\n-A POSTROUTING -j MASQUERADE\n-A KUBE-POSTROUTING -m foo --bar 1 -j RETURN\n"
	require.NoError(t, rs.Restore([]byte(in), RestoreOptions{Lenient: LenientNeverMatch, Fragment: &FragmentOptions{}}))
	ps := rs.Placeholders()
	require.Len(t, ps, 1)
	assert.Equal(t, 3, ps[0].Line)
	assert.Equal(t, "KUBE-POSTROUTING", ps[0].Chain)
}

func FuzzFragment(f *testing.F) {
	f.Add("-A KUBE-SERVICES -d 10.0.0.1/32 -j KUBE-SVC-X\n-A KUBE-SVC-X -j KUBE-SEP-Y\n-A KUBE-SEP-Y -p tcp -j DNAT --to-destination 10.1.1.1:80\n")
	f.Add("*nat\n:FOO - [0:0]\n-A FOO -j RETURN\nCOMMIT\n-A INPUT -j FOO\n")
	f.Add("iptables -t nat -A POSTROUTING -j MASQUERADE\n[1:2] -A FORWARD -j X\n")
	f.Fuzz(func(t *testing.T, in string) {
		for _, def := range []TableID{NoTable, Filter} {
			var rep FragmentReport
			rs := NewRuleset(IPv4)
			err := rs.Restore([]byte(in), RestoreOptions{Fragment: &FragmentOptions{Table: def, Report: &rep}})
			if err != nil {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("error without a line: %v", err)
				}
				continue
			}
			// What loaded prints and loads again as a whole dump.
			if err := NewRuleset(IPv4).Restore([]byte(rs.String()), RestoreOptions{}); err != nil {
				t.Fatalf("saved fragment does not restore: %v\n%s", err, rs.String())
			}
		}
	})
}
