package netfilter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/stretchr/testify/require"
)

// grammarVector is one rule of INPUT and what iptables 1.8.9 makes of it:
// the -S line, or a refusal (want ""). The vectors come from divergences
// the grammar differential (internal/harness/difftest/grammar_diff_test.go) found,
// checked against the real iptables-restore and iptables -S.
type grammarVector struct {
	// rule goes into filter INPUT; "nat6 CHAIN rest" puts rest into
	// ip6tables' nat CHAIN, "nat CHAIN rest" and "mangle CHAIN rest" into
	// iptables' nat and mangle.
	rule, want string
	// unmodelled: the kernel takes the rule (as want) but packetwalk
	// refuses it by name (ErrNotModelled).
	unmodelled bool
}

var matchGrammarVectors = []grammarVector{
	// connmark's --mark is mandatory, like mark's.
	{"-m connmark", "", false},
	{"-m connmark --mark 0x10/0xff", "-A INPUT -m connmark --mark 0x10/0xff", false},
	// Marks are read as strtoul reads them: no 0b prefix, no underscores.
	{"-m connmark --mark 0b1", "", false},
	{"-m connmark --mark 1_0", "", false},
	{"-m connmark --mark 010", "-A INPUT -m connmark --mark 0x8", false},
	// State words are case-insensitive prefixes of the state names.
	{"-m state --state e,r", "-A INPUT -m state --state RELATED,ESTABLISHED", false},
	{"-m state --state new", "-A INPUT -m state --state NEW", false},
	{"-m state --state snat", "", false},
	{"-m state --state NEW,", "", false},
	{"-m state --state NEW,,EST", "", false},
	{"-m conntrack --ctstate inv,d", "-A INPUT -m conntrack --ctstate INVALID,DNAT", false},
	{"-m conntrack --ctstate NEWX", "", false},
	{"-m conntrack --ctstatus s,c,N", "-A INPUT -m conntrack --ctstatus SEEN_REPLY,CONFIRMED", false},
	{"-m conntrack --ctstatus none", "-A INPUT -m conntrack --ctstatus NONE", false},
	{"-m conntrack --ctdir original", "-A INPUT -m conntrack --ctdir ORIGINAL", false},
	{"-m conntrack --ctdir O", "", false},
	// --ctexpire: strtoul ends, open ends, reversed ranges kept.
	{"-m conntrack --ctexpire 0x10", "-A INPUT -m conntrack --ctexpire 16", false},
	{"-m conntrack --ctexpire 010", "-A INPUT -m conntrack --ctexpire 8", false},
	{"-m conntrack --ctexpire 5:", "-A INPUT -m conntrack --ctexpire 5:4294967295", false},
	{"-m conntrack --ctexpire :5", "-A INPUT -m conntrack --ctexpire 0:5", false},
	{"-m conntrack --ctexpire :", "-A INPUT -m conntrack --ctexpire 0:4294967295", false},
	{"-m conntrack --ctexpire 10:5", "-A INPUT -m conntrack --ctexpire 10:5", false},
	{"-m conntrack --ctexpire 5:5", "-A INPUT -m conntrack --ctexpire 5", false},
	{"-m conntrack --ctexpire 4294967296", "", false},
	{"-m conntrack --ctexpire -1", "", false},
	// --ct*port: service names, open ends, reversed ranges, 16-bit wrap.
	{"-m conntrack --ctorigsrcport domain", "-A INPUT -m conntrack --ctorigsrcport 53", false},
	{"-m conntrack --ctorigsrcport bootps", "-A INPUT -m conntrack --ctorigsrcport 67", false},
	{"-m conntrack --ctorigsrcport 80:http", "-A INPUT -m conntrack --ctorigsrcport 80", false},
	{"-m conntrack --ctorigdstport 90:80", "-A INPUT -m conntrack --ctorigdstport 90:80", false},
	{"-m conntrack --ctorigdstport :80", "-A INPUT -m conntrack --ctorigdstport 0:80", false},
	{"-m conntrack --ctorigdstport 80:", "-A INPUT -m conntrack --ctorigdstport 80:65535", false},
	{"-m conntrack --ctreplsrcport :", "-A INPUT -m conntrack --ctreplsrcport 0:65535", false},
	{"-m conntrack --ctrepldstport 65536", "-A INPUT -m conntrack --ctrepldstport 0", false},
	{"-m conntrack --ctrepldstport 080", "-A INPUT -m conntrack --ctrepldstport 80", false},
	{"-m conntrack --ctorigsrcport 0x50", "", false},
	// Conntrack addresses keep their host bits.
	{"-m conntrack --ctorigdst 10.1.2.3/8", "-A INPUT -m conntrack --ctorigdst 10.1.2.3/8", false},
	{"-m conntrack ! --ctreplsrc 10.1.2.3/255.255.0.0", "-A INPUT -m conntrack ! --ctreplsrc 10.1.2.3/16", false},
	{"-m conntrack --ctorigsrc 10.1.2.3/32", "-A INPUT -m conntrack --ctorigsrc 10.1.2.3", false},
	// Conntrack prefix lengths are strtoul numbers; over 32 is 32 for IPv4.
	{"-m conntrack --ctrepldst 5.127.10.10/33", "-A INPUT -m conntrack --ctrepldst 5.127.10.10", false},
	{"-m conntrack --ctrepldst 5.127.10.10/4294967295", "-A INPUT -m conntrack --ctrepldst 5.127.10.10", false},
	{"-m conntrack --ctrepldst 5.127.10.10/4294967296", "", false},
	{"-m conntrack --ctrepldst 5.127.10.10/033", "-A INPUT -m conntrack --ctrepldst 5.127.10.10/27", false},
	{"-m conntrack --ctrepldst 5.127.10.10/0x10", "-A INPUT -m conntrack --ctrepldst 5.127.10.10/16", false},
	{"-m conntrack --ctrepldst 5.127.10.10/08", "", false},
	{"-m conntrack --ctrepldst 5.127.10.10/-1", "", false},
	// Protocol 0 is taken and never matches a connection.
	{"-m conntrack --ctproto all", "-A INPUT -m conntrack --ctproto 0", false},
	{"-m conntrack --ctproto 0", "-A INPUT -m conntrack --ctproto 0", false},
	// recent: --rttl only with --rcheck and --update, in either order.
	{"-m recent --set --rttl", "", false},
	{"-m recent --rttl --remove", "", false},
	{"-m recent --rttl --update", "-A INPUT -m recent --update --rttl --name DEFAULT --mask 255.255.255.255 --rsource", false},
	// recent: names are cut to 199 characters; an empty one is refused.
	{"-m recent --rcheck --name " + strings.Repeat("r", 200), "-A INPUT -m recent --rcheck --name " + strings.Repeat("r", 199) + " --mask 255.255.255.255 --rsource", false},
	{`-m recent --rcheck --name ""`, "", false},
	// nfacct: an empty name is refused before the object is looked up.
	{`-m nfacct --nfacct-name ""`, "", false},
	// iptables 1.8.9 has no udplite extension.
	{"-p udplite -m udplite --dport 5", "", false},
	{"-p udplite --dport 5", "", false},
	{"-m udplite", "", false},
	// "! -p tcp -m tcp" is taken (only an equal protocol is checked), and
	// so is "! -p udp -m udp"; icmp and sctp refuse it.
	{"! -p tcp -m tcp --sport 80", "-A INPUT ! -p tcp -m tcp --sport 80", true},
	{"! -p udp -m udp --dport 53", "-A INPUT ! -p udp -m udp --dport 53", true},
	{"-p udp -m tcp --sport 80", "", false},
	{"! -p icmp -m icmp --icmp-type 8", "", false},
	{"! -p sctp -m sctp --dport 1", "", false},
	// Ports: tcp, sctp, multiport and NAT read numbers as strtoul does,
	// udp as decimals.
	{"-p tcp --sport 010", "-A INPUT -p tcp -m tcp --sport 8", false},
	{"-p tcp --sport 0x50", "-A INPUT -p tcp -m tcp --sport 80", false},
	{"-p tcp --sport 08", "", false},
	{"-p tcp --sport 080", "", false},
	{"-p tcp --dport 65536", "", false},
	{"-p sctp --dport 010", "-A INPUT -p sctp -m sctp --dport 8", false},
	{"-p udp --dport 010", "-A INPUT -p udp -m udp --dport 10", false},
	{"-p udp --dport 0x10", "", false},
	{"-p udp --dport 070000", "-A INPUT -p udp -m udp --dport 4464", false},
	{"-p tcp -m multiport --dports 010,0x10", "-A INPUT -p tcp -m multiport --dports 8,16", false},
	{"-p udp -m multiport --dports 010,0x10", "-A INPUT -p udp -m multiport --dports 8,16", false},
	{"-p tcp -m multiport --dports 70000", "", false},
	{"nat OUTPUT -p tcp -j DNAT --to-destination 1.2.3.4:010", "-A OUTPUT -p tcp -j DNAT --to-destination 1.2.3.4:8", false},
	{"nat OUTPUT -p tcp -j REDIRECT --to-ports 010-0x20", "-A OUTPUT -p tcp -j REDIRECT --to-ports 8-32", false},
	// SET ignores a "!" before its options; MARK refuses one.
	{"mangle FORWARD -j SET ! --add-set pwset dst,dst", "-A FORWARD -j SET --add-set pwset dst,dst", false},
	{"mangle FORWARD -j SET --add-set pwset src ! --exist", "-A FORWARD -j SET --add-set pwset src --exist", false},
	{"mangle FORWARD -j MARK ! --set-mark 1", "", false},
	// "! 0:N" becomes N+1:65535 when iptables-nft makes the match native
	// nftables, and stays with --tcp-option (an xtables match).
	{"-p tcp ! --dport 0:8080", "-A INPUT -p tcp -m tcp --dport 8081:65535", false},
	{"-p tcp --tcp-option 32 ! --dport 0:8080", "-A INPUT -p tcp -m tcp ! --dport 0:8080 --tcp-option 32", false},
	{"-p tcp ! --sport 0:1 --tcp-option 5", "-A INPUT -p tcp -m tcp ! --sport 0:1 --tcp-option 5", false},
	{"-p udp ! --sport 0:1", "-A INPUT -p udp -m udp --sport 2:65535", false},
	// CONNMARK: libxt_CONNMARK takes shifts of 0-32, the kernel 0-31.
	{"mangle PREROUTING -j CONNMARK --save-mark --right-shift-mark 31", "-A PREROUTING -j CONNMARK --save-mark --nfmask 0xffffffff --ctmask 0xffffffff --right-shift-mark 31", false},
	{"mangle PREROUTING -j CONNMARK --save-mark --right-shift-mark 32", "", false},
	{"mangle PREROUTING -j CONNMARK --or-mark 0xf5b5 --left-shift-mark 32", "", false},
	// IPv6 NAT without brackets: one colon separates the ports, more make
	// an address (range).
	{"nat6 OUTPUT -p tcp -j DNAT --to-destination ::1-1a51:eaef::8ef7", "-A OUTPUT -p tcp -j DNAT --to-destination ::1-1a51:eaef::8ef7", false},
	{"nat6 OUTPUT -p tcp -j DNAT --to-destination :80", "-A OUTPUT -p tcp -j DNAT --to-destination :80", false},
	{"nat6 OUTPUT -p tcp -j DNAT --to-destination fd00::1:80", "-A OUTPUT -p tcp -j DNAT --to-destination fd00::1:80", false},
	{"nat6 OUTPUT -p tcp -j DNAT --to-destination 1:80", "", false},
	{"nat6 POSTROUTING -p tcp -j SNAT --to-source ::1-::5", "-A POSTROUTING -p tcp -j SNAT --to-source ::1-::5", false},
}

// vectorPlace returns the family, table, chain and rule text of v.
func vectorPlace(v grammarVector) (Family, TableID, string, string) {
	f := strings.Fields(v.rule)
	switch f[0] {
	case "nat6":
		return IPv6, NAT, f[1], strings.Join(f[2:], " ")
	case "mangle":
		return IPv4, Mangle, f[1], strings.Join(f[2:], " ")
	case "nat":
		return IPv4, NAT, f[1], strings.Join(f[2:], " ")
	}
	return IPv4, Filter, "INPUT", v.rule
}

func ruleOfVector(t *testing.T, v grammarVector) (string, error) {
	t.Helper()
	fam, table, chain, rule := vectorPlace(v)
	rs, err := ParseRestore(fam, []byte(fmt.Sprintf("*%s\n-A %s %s\nCOMMIT\n", table, chain, rule)))
	if err != nil {
		return "", err
	}
	out, err := rs.AppendRules(nil, table, chain, 0, false)
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	return lines[len(lines)-1], nil
}

func TestMatchGrammarVectors(t *testing.T) {
	for _, v := range matchGrammarVectors {
		got, err := ruleOfVector(t, v)
		if v.unmodelled {
			require.ErrorIs(t, err, ErrNotModelled, v.rule)
			continue
		}
		if v.want == "" {
			require.Error(t, err, "%s: iptables refuses it, packetwalk printed %q", v.rule, got)
			continue
		}
		require.NoError(t, err, v.rule)
		require.Equal(t, v.want, got, v.rule)
	}
}

// TestKernelMatchGrammarVectors checks the vectors against the real
// iptables-restore and iptables -S.
func TestKernelMatchGrammarVectors(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNS(t, "pw-mgram")
	_, err := ns.IPSet("create", "pwset", "hash:ip")
	require.NoError(t, err)
	for _, v := range matchGrammarVectors {
		fam, table, chain, rule := vectorPlace(v)
		text := fmt.Sprintf("*%s\n:%s ACCEPT [0:0]\n-A %s %s\nCOMMIT\n", table, chain, chain, rule)
		restore, list := ns.Restore, ns.IPTables
		if fam == IPv6 {
			restore, list = ns.Restore6, ns.IP6Tables
		}
		err := restore(text)
		if v.want == "" {
			require.Error(t, err, v.rule)
			continue
		}
		require.NoError(t, err, v.rule)
		out, err := list("-t", table.String(), "-S", chain)
		require.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		require.Equal(t, v.want, lines[len(lines)-1], v.rule)
	}
}
