package netfilter

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Port names in rules resolve as iptables 1.8.9 resolves them (recorded
// with iptables-restore in a namespace; services_kernel_test.go checks the
// whole database): tcp, sctp and multiport look the name up for their
// protocol, the udp match and NAT ports take a name of any protocol; -L
// prints getservbyport's name for the match's protocol.
func TestServiceNamesInRules(t *testing.T) {
	for _, tc := range []struct {
		table, rule, save, list string
	}{
		{"filter", "-A INPUT -p tcp --dport imaps -j ACCEPT", "-A INPUT -p tcp -m tcp --dport 993 -j ACCEPT", "tcp dpt:imaps"},
		{"filter", "-A INPUT -p tcp --sport smtp", "-A INPUT -p tcp -m tcp --sport 25", "tcp spt:smtp"},
		{"filter", "-A INPUT -p tcp --dport www", "-A INPUT -p tcp -m tcp --dport 80", "tcp dpt:http"},
		{"filter", "-A INPUT -p tcp --dport imap", "-A INPUT -p tcp -m tcp --dport 143", "tcp dpt:imap2"},
		{"filter", "-A INPUT -p tcp --dport ssh:http", "-A INPUT -p tcp -m tcp --dport 22:80", "tcp dpts:ssh:http"},
		{"filter", "-A INPUT -p tcp --dport ssh:", "-A INPUT -p tcp -m tcp --dport 22:65535", "tcp dpts:ssh:65535"},
		{"filter", "-A INPUT -p tcp --dport :http", "-A INPUT -p tcp -m tcp --dport 0:80", "tcp dpts:0:http"},
		{"filter", "-A INPUT -p tcp --dport 010", "-A INPUT -p tcp -m tcp --dport 8", "tcp dpt:8"},
		{"filter", "-A INPUT -p tcp --dport 0x50", "-A INPUT -p tcp -m tcp --dport 80", "tcp dpt:http"},
		{"filter", "-A INPUT -p tcp --dport 514", "-A INPUT -p tcp -m tcp --dport 514", "tcp dpt:shell"},
		{"filter", "-A INPUT -p tcp --dport syslog", "-A INPUT -p tcp -m tcp --dport 514", "tcp dpt:shell"},
		{"filter", "-A INPUT -p tcp --dport 5353", "-A INPUT -p tcp -m tcp --dport 5353", "tcp dpt:5353"},
		{"filter", "-A INPUT -p udp --dport bootps", "-A INPUT -p udp -m udp --dport 67", "udp dpt:bootps"},
		{"filter", "-A INPUT -p udp --dport 514", "-A INPUT -p udp -m udp --dport 514", "udp dpt:syslog"},
		{"filter", "-A INPUT -p udp --dport mdns:", "-A INPUT -p udp -m udp --dport 5353:65535", "udp dpts:mdns:65535"},
		{"filter", "-A INPUT -p udp --dport ssh", "-A INPUT -p udp -m udp --dport 22", "udp dpt:22"}, // a tcp name
		{"filter", "-A INPUT -p udp --dport amqp", "-A INPUT -p udp -m udp --dport 5672", "udp dpt:5672"},
		{"filter", "-A INPUT -p udp --dport 010", "-A INPUT -p udp -m udp --dport 10", "udp dpt:10"},
		{"filter", "-A INPUT -p sctp --dport amqp", "-A INPUT -p sctp -m sctp --dport 5672", "sctp dpt:amqp"},
		{"filter", "-A INPUT -p sctp --dport 0x16", "-A INPUT -p sctp -m sctp --dport 22", "sctp dpt:22"},
		{"filter", "-A INPUT -p udp -m multiport --dports domain,ntp", "-A INPUT -p udp -m multiport --dports 53,123", "multiport dports domain,ntp"},
		{"filter", "-A INPUT -p udp -m multiport --dports 22,514", "-A INPUT -p udp -m multiport --dports 22,514", "multiport dports 22,syslog"},
		{"filter", "-A INPUT -p tcp -m multiport --ports 0x16,010", "-A INPUT -p tcp -m multiport --ports 22,8", "multiport ports ssh,8"},
		{"filter", "-A INPUT -p sctp -m multiport --dports amqp,22", "-A INPUT -p sctp -m multiport --dports 5672,22", "multiport dports amqp,22"},
		{"filter", "-A INPUT -p tcp -m conntrack --ctorigdstport http", "-A INPUT -p tcp -m conntrack --ctorigdstport 80", "ctorigdstport 80"},
		{"filter", "-A INPUT -m conntrack --ctreplsrcport mdns", "-A INPUT -m conntrack --ctreplsrcport 5353", "ctreplsrcport 5353"},
		{"filter", "-A INPUT -m conntrack --ctorigsrcport ssh:http", "-A INPUT -m conntrack --ctorigsrcport 22:80", "ctorigsrcport 22:80"},
		{"filter", "-A INPUT -m conntrack --ctrepldstport 010", "-A INPUT -m conntrack --ctrepldstport 10", "ctrepldstport 10"},
		{"filter", "-A INPUT -m conntrack --ctorigdstport 70000", "-A INPUT -m conntrack --ctorigdstport 4464", "ctorigdstport 4464"},
		{"nat", "-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:mdns", "-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:5353", "to:1.2.3.4:5353"},
		{"nat", "-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:010", "-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:8", "to:1.2.3.4:8"},
		{"nat", "-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:1000-2000/http", "-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:1000-2000/80", "to:1.2.3.4:1000-2000/80"},
		{"nat", "-A PREROUTING -p tcp -j REDIRECT --to-ports ftp-data", "-A PREROUTING -p tcp -j REDIRECT --to-ports 20", "redir ports 20"},
		{"nat", "-A POSTROUTING -p tcp -j MASQUERADE --to-ports 010-0x20", "-A POSTROUTING -p tcp -j MASQUERADE --to-ports 8-32", "masq ports: 8-32"},
	} {
		rs := NewRuleset(IPv4)
		err := rs.Restore([]byte("*"+tc.table+"\n"+tc.rule+"\nCOMMIT\n"), RestoreOptions{})
		require.NoError(t, err, tc.rule)
		assert.Contains(t, rs.String(), "\n"+tc.save+"\n", tc.rule)
		chain, _, _ := strings.Cut(strings.TrimPrefix(tc.rule, "-A "), " ")
		id := Filter
		if tc.table == "nat" {
			id = NAT
		}
		l, err := rs.AppendList(nil, id, chain, ListOptions{})
		require.NoError(t, err)
		assert.True(t, strings.HasSuffix(strings.TrimRight(string(l), " \n"), tc.list), "%s: -L gives %q", tc.rule, l)
	}
}

func TestServiceNamesRefused(t *testing.T) {
	for _, tc := range []struct{ table, rule, token string }{
		{"filter", "-A INPUT -p tcp --dport mdns", "mdns"}, // udp only
		{"filter", "-A INPUT -p tcp --dport HTTP", "HTTP"},
		{"filter", "-A INPUT -p tcp --dport ssh:nosuch", "nosuch"},
		{"filter", "-A INPUT -p udp --dport rtmp", "rtmp"}, // ddp only
		{"filter", "-A INPUT -p udp --dport 0x50", "0x50"},
		{"filter", "-A INPUT -p sctp --dport ssh", "ssh"},
		{"filter", "-A INPUT -p sctp --dport mdns", "mdns"},
		{"filter", "-A INPUT -p tcp -m multiport --dports http,mdns", "mdns"},
		{"filter", "-A INPUT -p udp -m multiport --dports ssh", "ssh"},
		{"filter", "-A INPUT -p sctp -m multiport --dports ssh", "ssh"},
		{"filter", "-A INPUT -m conntrack --ctorigdstport 0x10", "0x10"},
		{"filter", "-A INPUT -m conntrack --ctorigdstport rtmp", "rtmp"},
		{"nat", "-A POSTROUTING -p tcp -j MASQUERADE --to-ports ssh-http", "ssh-http"},
		{"nat", "-A PREROUTING -p tcp -j DNAT --to-destination 1.2.3.4:22-http", "22-http"},
		{"nat", "-A PREROUTING -p tcp -j REDIRECT --to-ports 22-ftp-data", "22-ftp-data"},
	} {
		rs := NewRuleset(IPv4)
		err := rs.Restore([]byte("*"+tc.table+"\n"+tc.rule+"\nCOMMIT\n"), RestoreOptions{})
		require.Error(t, err, tc.rule)
		assert.Contains(t, err.Error(), tc.token, tc.rule)
		assert.Contains(t, err.Error(), "line 2", tc.rule)
	}
}

// -L names ports on every line it prints: the lookup must not allocate.
func TestServiceLookupDoesNotAllocate(t *testing.T) {
	b := make([]byte, 0, 64)
	appendServ(b, 443, "tcp", false)
	n := testing.AllocsPerRun(100, func() {
		b = appendServ(b[:0], 443, "tcp", false)
		b = appendServ(b, 5353, "udp", false)
		parsePort("https", "tcp")
		parsePort("mdns", "udp")
	})
	assert.Zero(t, n)
}
