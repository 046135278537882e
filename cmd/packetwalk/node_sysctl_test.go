package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestSysctlsReachTheHost checks that every sysctl --sysctl accepts
// changes what the host does: none is parsed and then ignored.
func TestSysctlsReachTheHost(t *testing.T) {
	const localnetRules = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A OUTPUT -d 127.0.0.1/32 -p tcp -m tcp --dport 30020 -j DNAT --to-destination 10.244.1.5:80\n" +
		"-A POSTROUTING -s 127.0.0.0/8 -o eth1 -j MASQUERADE\nCOMMIT\n"
	const invalidRules = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
		"-A FORWARD -m conntrack --ctstate INVALID -j DROP\nCOMMIT\n"
	addrs := []string{"--addr", "eth0=10.0.0.1/24", "--addr", "eth1=10.244.1.1/24"}
	covered := map[string]bool{}
	for _, tc := range []struct {
		name   string
		sysctl string // "" = defaults
		rules  string
		packet string
		want   string // disposition, where
		extra  []string
	}{
		{"ip_forward default", "", "", "in=eth0 src=10.0.0.2 dst=10.244.1.5", "forwarded", nil},
		{"ip_forward=0", "net.ipv4.ip_forward=0", "", "in=eth0 src=10.0.0.2 dst=10.244.1.5", "dropped ROUTE", nil},
		{"route_localnet default", "", localnetRules, "dst=127.0.0.1 dport=30020", "sent nat POSTROUTING #1", nil},
		{"route_localnet=0", "net.ipv4.conf.all.route_localnet=0", localnetRules, "dst=127.0.0.1 dport=30020", "dropped ROUTE", nil},
		{"route_localnet=0 martian", "net.ipv4.conf.all.route_localnet=0", "", "in=eth0 src=10.0.0.2 dst=127.0.0.1", "dropped ROUTE", nil},
		{"tcp_loose default", "", invalidRules, "in=eth0 src=10.0.0.2 dst=10.244.1.5 flags=A", "forwarded", nil},
		{"tcp_loose=0", "net.netfilter.nf_conntrack_tcp_loose=0", invalidRules, "in=eth0 src=10.0.0.2 dst=10.244.1.5 flags=A", "dropped filter FORWARD #1", nil},
		{"rp_filter default", "", "", "in=eth0 src=10.244.1.9 dst=10.0.0.2", "forwarded", nil},
		{"rp_filter=1", "net.ipv4.conf.all.rp_filter=1", "", "in=eth0 src=10.244.1.9 dst=10.0.0.2", "dropped ROUTE", nil},
		{"rp_filter=2", "net.ipv4.conf.all.rp_filter=2", "", "in=eth0 src=10.244.1.9 dst=10.0.0.2", "forwarded", nil},
		{"conf.eth0.rp_filter=1", "net.ipv4.conf.eth0.rp_filter=1", "", "in=eth0 src=10.244.1.9 dst=10.0.0.2", "dropped ROUTE", nil},
		{"accept_local default", "", "", "in=eth0 src=10.244.1.1 dst=10.0.0.2", "dropped ROUTE", nil},
		{"accept_local=1", "net.ipv4.conf.all.accept_local=1", "", "in=eth0 src=10.244.1.1 dst=10.0.0.2", "forwarded", nil},
		{"src_valid_mark default", "", "", "in=eth0 src=10.99.0.9 dst=10.244.1.5 mark=7", "dropped ROUTE",
			[]string{"--sysctl", "net.ipv4.conf.all.rp_filter=1", "--ip-rule", "fwmark 7 lookup 7", "--ip-route", "default dev eth0 table 7"}},
		{"src_valid_mark=1", "net.ipv4.conf.all.src_valid_mark=1", "", "in=eth0 src=10.99.0.9 dst=10.244.1.5 mark=7", "forwarded",
			[]string{"--sysctl", "net.ipv4.conf.all.rp_filter=1", "--ip-rule", "fwmark 7 lookup 7", "--ip-route", "default dev eth0 table 7"}},
		{"conf.eth0.forwarding=0", "net.ipv4.conf.eth0.forwarding=0", "", "in=eth0 src=10.0.0.2 dst=10.244.1.5", "dropped ROUTE", nil},
	} {
		if k, _, ok := strings.Cut(tc.sysctl, "="); ok {
			covered[k] = true
		}
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"trace", "--format", "json"}, addrs...)
			if tc.sysctl != "" {
				args = append(args, "--sysctl", tc.sysctl)
			}
			if tc.rules != "" {
				args = append(args, "--rules", "-")
			}
			args = append(args, tc.extra...)
			code, stdout, stderr := runCmd(append(args, tc.packet), tc.rules)
			require.Zero(t, code, stderr)
			var out struct {
				Disposition string `json:"disposition"`
				Where       *struct {
					Table  string `json:"table"`
					Chain  string `json:"chain"`
					Rule   int    `json:"rule"`
					Action string `json:"action"`
				} `json:"where"`
			}
			require.NoError(t, json.Unmarshal([]byte(strings.TrimSpace(stdout)), &out))
			got := out.Disposition
			if w := out.Where; w != nil && tc.want != "forwarded" {
				if w.Table != "" {
					got += " " + w.Table
				}
				if w.Action == "ROUTE" {
					got += " ROUTE"
				} else {
					got += " " + w.Chain
					if w.Rule > 0 {
						got += " #" + strconv.Itoa(w.Rule)
					}
				}
			}
			assert.Equal(t, tc.want, got, stdout)
		})
	}
	// A sysctl added to the flag needs a case here.
	for k := range sysctlDefaults {
		assert.True(t, covered[k], "no case sets %s=0", k)
	}
}
