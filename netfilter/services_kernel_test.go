package netfilter

import (
	"fmt"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/internal/services"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// serviceNameCases returns one rule per service name or alias of the
// embedded database and per way a rule can name a port: the tcp, udp and
// sctp matches, multiport for each protocol and the conntrack match, as
// sources and
// destinations, plus a rule per port number of each protocol's entries
// (so that -L names every port).
func serviceNameCases() []string {
	var names []string
	seen := map[string]bool{}
	ports := map[string]map[uint16]bool{"tcp": {}, "udp": {}, "sctp": {}}
	for _, e := range services.Entries() {
		for _, n := range append([]string{e.Name}, e.Aliases...) {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
		if ports[e.Proto] != nil {
			ports[e.Proto][e.Port] = true
		}
	}
	var rules []string
	for i, n := range names {
		dir := "dport"
		if i%2 == 1 {
			dir = "sport"
		}
		for _, p := range []string{"tcp", "udp", "sctp"} {
			rules = append(rules,
				fmt.Sprintf("-A INPUT -p %s --%s %s", p, dir, n),
				fmt.Sprintf("-A INPUT -p %s -m multiport --%ss %s,1", p, dir, n))
		}
		ct := "--ctorigdstport"
		if dir == "sport" {
			ct = "--ctreplsrcport"
		}
		rules = append(rules, fmt.Sprintf("-A INPUT -m conntrack %s %s", ct, n))
	}
	for _, p := range []string{"tcp", "udp", "sctp"} {
		for port := range ports[p] {
			rules = append(rules, fmt.Sprintf("-A INPUT -p %s --dport %d", p, port))
		}
	}
	return rules
}

// TestKernelServiceNames loads every service name of the embedded database
// into the real iptables-restore, through each match that takes ports: the
// rules packetwalk accepts must load and save and list (-L, names) the
// same; each rule packetwalk refuses must be refused too.
func TestKernelServiceNames(t *testing.T) {
	kerneltest.Require(t)
	ns := kerneltest.NewNS(t, "pw-svc")
	var ok, bad []string
	for _, r := range serviceNameCases() {
		rs := NewRuleset(IPv4)
		if err := rs.Restore([]byte("*filter\n"+r+"\nCOMMIT\n"), RestoreOptions{}); err != nil {
			bad = append(bad, r)
		} else {
			ok = append(ok, r)
		}
	}
	t.Logf("%d rules accepted, %d refused", len(ok), len(bad))
	require.NotEmpty(t, ok)
	require.NotEmpty(t, bad)

	doc := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" + strings.Join(ok, "\n") + "\nCOMMIT\n"
	require.NoError(t, ns.Restore(doc))
	rs := NewRuleset(IPv4)
	require.NoError(t, rs.Restore([]byte(doc), RestoreOptions{}))
	save, err := ns.Save("-t", "filter")
	require.NoError(t, err)
	assert.Equal(t, save, rs.String(), "iptables-save")
	list, err := ns.IPTables("-L", "INPUT")
	require.NoError(t, err)
	got, err := rs.AppendList(nil, Filter, "INPUT", ListOptions{})
	require.NoError(t, err)
	assert.Equal(t, list, string(got), "iptables -L INPUT")

	for _, r := range bad {
		err := ns.Restore("*filter\n"+r+"\nCOMMIT\n", "--test")
		assert.Error(t, err, "iptables-restore accepts %q, which packetwalk refuses", r)
	}
}
