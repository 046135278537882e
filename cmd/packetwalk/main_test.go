package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/golden"
)

const (
	node1 = "testdata/node1" // filter and mangle rules, routes recorded from ip -j
	node2 = "testdata/node2" // ipsets and a conntrack snapshot
	// nodeKube holds kube-proxy's rules with -m nfacct and the node's
	// nfacct list (record-node-kube.sh).
	nodeKube = "testdata/node-kube"
)

// lenientRules use a match and a target packetwalk does not model.
const lenientRules = "*filter\n:INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
	"-A INPUT -p tcp -m tcp --dport 22 -m frobnicate --level 3 -j ACCEPT\n" +
	"-A INPUT -p tcp -j SYNPROXY --mss 1460\n-A INPUT -p tcp -m tcp --dport 80 -j ACCEPT\nCOMMIT\n"

// whereamiNAT is the nat table of the AKS whereami service as
// 'iptables -t nat -nvL' prints it (written by packetwalk from
// testdata/fragment/whereami).
const whereamiNAT = `Chain PREROUTING (policy ACCEPT 0 packets, 0 bytes)
 pkts bytes target     prot opt in     out     source               destination         
    0     0 KUBE-SERVICES  0    --  *      *       0.0.0.0/0            0.0.0.0/0            /* kubernetes service portals */

Chain INPUT (policy ACCEPT 0 packets, 0 bytes)
 pkts bytes target     prot opt in     out     source               destination         

Chain OUTPUT (policy ACCEPT 0 packets, 0 bytes)
 pkts bytes target     prot opt in     out     source               destination         

Chain POSTROUTING (policy ACCEPT 0 packets, 0 bytes)
 pkts bytes target     prot opt in     out     source               destination         

Chain KUBE-MARK-MASQ (2 references)
 pkts bytes target     prot opt in     out     source               destination         
    0     0 MARK       0    --  *      *       0.0.0.0/0            0.0.0.0/0            MARK or 0x4000

Chain KUBE-SEP-6HBOEI5FVFTJNRJ3 (1 references)
 pkts bytes target     prot opt in     out     source               destination         
    0     0 KUBE-MARK-MASQ  0    --  *      *       10.13.76.26          0.0.0.0/0            /* default/whereami: */
    0     0 DNAT       6    --  *      *       0.0.0.0/0            0.0.0.0/0            /* default/whereami: */ tcp to:10.13.76.26:80

Chain KUBE-SERVICES (1 references)
 pkts bytes target     prot opt in     out     source               destination         
    0     0 KUBE-MARK-MASQ  6    --  *      *      !10.13.76.0/24        10.0.159.58          /* default/whereami: cluster IP */ tcp dpt:80
    0     0 KUBE-SVC-7G2JV7LNOR6DDNIY  6    --  *      *       0.0.0.0/0            10.0.159.58          /* default/whereami: cluster IP */ tcp dpt:80

Chain KUBE-SVC-7G2JV7LNOR6DDNIY (1 references)
 pkts bytes target     prot opt in     out     source               destination         
    0     0 KUBE-SEP-6HBOEI5FVFTJNRJ3  0    --  *      *       0.0.0.0/0            0.0.0.0/0            /* default/whereami: */
`

// golden cases run the command in-process; each golden file holds the
// exit status, stdout and stderr.
var goldenCases = []struct {
	name  string
	args  []string
	stdin string
}{
	{"help", []string{"--help"}, ""},
	{"help-trace", []string{"trace", "--help"}, ""},
	{"help-save", []string{"save", "-h"}, ""},
	{"help-list", []string{"help", "list"}, ""},
	{"help-demo", []string{"demo", "--help"}, ""},
	{"trace-text", []string{"trace", "--node", node1, "--packets", node1 + "/packets"}, ""},
	{"trace-json", []string{"trace", "--node", node1, "--packets", node1 + "/packets", "--format", "json"}, ""},
	{"trace-xtables", []string{"trace", "--node", node1, "--packets", node1 + "/packets", "--format=xtables"}, ""},
	{"trace-policy", []string{"trace", "--node", "testdata/policy", "--rules", "-", "--sysctl", "net.ipv4.conf.all.rp_filter=1",
		"proto=udp dst=8.8.8.8 dport=53", "proto=udp dst=8.8.8.8 dport=123", "in=eth1 proto=tcp src=10.244.1.5 dst=93.184.216.34 mark=1337",
		"in=eth0 proto=udp src=10.244.1.5 dst=192.168.10.7 dport=53", "in=eth1 proto=udp src=10.244.1.5 dst=10.6.0.1 dport=53"},
		"*mangle\n-A OUTPUT -p udp --dport 123 -j MARK --set-mark 0xca6c\nCOMMIT\n"},
	{"trace-flags-after-packets", []string{"trace", "in=eth0 src=10.0.0.2 dst=10.0.0.1 proto=icmp", "--addr", "eth0=10.0.0.1/24", "--format", "json"}, ""},
	{"trace-stdin-rules", []string{"trace", "--rules", "-", "--addr", "eth0=10.0.0.1/24", "--iface", "cali7",
		"--route", "10.244.7.0/24=cali7", "in=eth0 src=10.0.0.2 dst=10.244.7.3 proto=udp dport=53"},
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -o cali+ -p udp -m udp --dport 53 -j ACCEPT\nCOMMIT\n"},
	{"trace-forwarding-off", []string{"trace", "--addr", "eth0=10.0.0.1/24", "--addr", "eth1=10.1.0.1/24",
		"--sysctl", "net.ipv4.ip_forward=0", "in=eth0 src=10.0.0.2 dst=10.1.0.9"}, ""},
	{"trace-route-localnet-off", []string{"trace", "--rules", "-", "--addr", "eth1=10.244.1.1/24", "--sysctl", "net.ipv4.conf.all.route_localnet=0",
		"dst=127.0.0.1 dport=30020", "in=eth1 src=10.244.1.5 dst=127.0.0.1", "in=eth1 src=127.0.0.2 dst=10.244.1.9"},
		"*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
			"-A OUTPUT -d 127.0.0.1/32 -p tcp -m tcp --dport 30020 -j DNAT --to-destination 10.244.1.5:80\n" +
			"-A POSTROUTING -s 127.0.0.0/8 -o eth1 -j MASQUERADE\nCOMMIT\n"},
	{"trace-ipv6", []string{"trace", "--addr", "eth0=fd00::1/64", "--rules6", node1 + "/ip6tables-save", "--format", "xtables",
		"in=eth0 src=fd00::2 dst=fd00::1 proto=icmpv6", "in=eth0 src=fd00::2 dst=fd00::1 dport=22"}, ""},
	{"trace-lenient", []string{"trace", "--rules", "-", "--addr", "eth0=10.0.0.1/24", "--lenient", "always-match",
		"in=eth0 src=10.0.0.2 dst=10.0.0.1 dport=22", "in=eth0 src=10.0.0.2 dst=10.0.0.1 dport=80"}, lenientRules},
	{"trace-lenient-never", []string{"trace", "--rules", "-", "--addr", "eth0=10.0.0.1/24", "--lenient=never-match", "--format", "json",
		"in=eth0 src=10.0.0.2 dst=10.0.0.1 dport=22"}, lenientRules},
	{"trace-fragment", []string{"trace", "--fragment", "--rules", "testdata/fragment/whereami", "--addr", "eth0=10.13.76.4/24", "--seed", "3",
		"in=eth0 src=203.0.113.7 dst=51.144.176.251 dport=80", "in=eth0 src=10.13.76.40 dst=10.0.159.58 dport=80"}, ""},
	{"save-fragment", []string{"save", "--fragment", "--rules", "../../kubeproxy/testdata/whereami_aks_local.save"}, ""},
	{"trace-fragment-table", []string{"trace", "--fragment", "--fragment-table", "filter", "--rules", "-", "--addr", "eth0=10.0.0.1/24",
		"in=eth0 src=10.0.0.2 dst=10.0.0.1 dport=22"}, "iptables -t nat -A POSTROUTING -o eth0 -j MASQUERADE\n-A INPUT -p tcp --dport 22 -j DROP\n"},
	{"err-fragment-ambiguous", []string{"trace", "--fragment", "--rules", "-", "dst=10.0.0.1"}, "# from a post\n-A INPUT -p tcp --dport 22 -j DROP\n"},
	{"err-fragment-table-alone", []string{"trace", "--fragment-table", "nat", "dst=10.0.0.1"}, ""},
	{"trace-dot", []string{"trace", "--fragment", "--rules", "testdata/fragment/whereami", "--addr", "eth0=10.13.76.4/24", "--seed", "3",
		"--format", "dot", "in=eth0 src=203.0.113.7 dst=51.144.176.251 dport=80"}, ""},
	{"trace-dot-filter", []string{"trace", "--node", node1, "--format", "dot", "--graph-table", "filter", "in=eth0 src=192.168.10.2 dst=192.168.10.1 dport=22"}, ""},
	{"err-graph-no-table", []string{"trace", "--node", node1, "--format", "dot", "--graph-table", "raw", "in=eth0 src=10.0.0.2 dst=192.168.10.1"}, ""},
	{"err-graph-nothing", []string{"trace", "--addr", "eth0=10.0.0.1/24", "--format", "dot", "in=eth0 src=10.0.0.2 dst=10.0.0.1"}, ""},
	{"err-graph-table-format", []string{"trace", "--graph-table", "nat", "dst=10.0.0.1"}, ""},
	{"list-from-listing", []string{"list", "--listing", "--rules", "../../netfilter/testdata/golden/kubeproxy-legacy.L-nv", "-t", "nat", "-nvL", "KUBE-SVC-4N57TFCL4MD7ZTDA"}, ""},
	{"trace-listing", []string{"trace", "--listing", "--rules", "-", "--addr", "eth0=10.13.76.4/24", "in=eth0 src=10.13.76.40 dst=10.0.159.58 dport=80"},
		"$ sudo iptables -t nat -nvL\n" + whereamiNAT},
	{"err-listing-row", []string{"trace", "--listing", "--rules", "-", "dst=10.0.0.1"},
		"$ iptables -nvL INPUT\nChain INPUT (policy ACCEPT 0 packets, 0 bytes)\n pkts bytes target     prot opt in     out     source               destination         \n" +
			"   10   600 ACCEPT     0    --  *      *       0.0.0.0/0            0.0.0.0/0            limit: avg 3/min burst 5\n"},
	{"err-fragment-and-listing", []string{"trace", "--listing", "--fragment", "dst=10.0.0.1"}, ""},
	{"save", []string{"save", "--node", node1, "--packets", node1 + "/packets", "-c"}, ""},
	{"save-table", []string{"save", "--node", node1, "-t", "mangle"}, ""},
	{"list-S", []string{"list", "--node", node1, "--packets", node1 + "/packets", "-S", "-v"}, ""},
	{"list-S-rule", []string{"list", "--node", node1, "-S", "SSH", "2"}, ""},
	{"list-nvL", []string{"list", "--node", node1, "--packets", node1 + "/packets", "-nvL", "--line-numbers"}, ""},
	{"list-nvxL-chain", []string{"list", "--node", node1, "--packets", node1 + "/packets", "-t", "mangle", "-nvxL", "PREROUTING"}, ""},
	{"trace-node2", []string{"trace", "--node", node2, "--packets", node2 + "/packets"}, ""},
	{"trace-node2-json", []string{"trace", "--node", node2, "--packets", node2 + "/packets", "--format", "json"}, ""},
	{"conntrack", []string{"conntrack", "--node", node2, "--packets", node2 + "/packets"}, ""},
	{"ipset-list", []string{"ipset", "--node", node2, "--packets", node2 + "/packets"}, ""},
	{"ipset-save-one", []string{"ipset", "--node", node2, "save", "BLOCK"}, ""},
	{"help-conntrack", []string{"conntrack", "--help"}, ""},
	{"help-ipset", []string{"ipset", "--help"}, ""},
	{"demo", []string{"demo"}, ""},
	{"demo-xtables", []string{"demo", "--format", "xtables"}, ""},
	{"demo-json", []string{"demo", "--format", "json"}, ""},

	// Usage errors: exit 2.
	{"usage-no-args", nil, ""},
	{"err-unknown-command", []string{"frobnicate"}, ""},
	{"err-unknown-flag", []string{"trace", "--bogus", "dst=10.0.0.1"}, ""},
	{"err-bad-addr-flag", []string{"trace", "--addr", "eth0=10.0.0.300/24", "dst=10.0.0.1"}, ""},
	{"err-bad-format", []string{"trace", "--format", "yaml", "dst=10.0.0.1"}, ""},
	{"err-unknown-sysctl", []string{"trace", "--sysctl", "net.core.somaxconn=4096", "dst=10.0.0.1"}, ""},
	{"err-no-packets", []string{"trace", "--addr", "eth0=10.0.0.1/24"}, ""},
	{"err-list-two-forms", []string{"list", "-S", "-L"}, ""},
	{"err-stdin-twice", []string{"trace", "--rules", "-", "--rules6", "-", "dst=10.0.0.1"}, ""},

	// Bad input: exit 1, one line naming file, line and token.
	{"err-rules-line", []string{"trace", "--rules", "testdata/bad.rules", "dst=10.0.0.1"}, ""},
	{"err-packet-token", []string{"trace", "--addr", "eth0=10.0.0.1/24", "dst=10.0.0.2", "dst=10.0.0.2 dport=htp"}, ""},
	{"err-packets-file-line", []string{"trace", "--node", node1, "--packets", "testdata/bad.packets"}, ""},
	{"err-reply-forward", []string{"trace", "--addr", "eth0=10.0.0.1/24", "dst=10.0.0.2", "reply=3"}, ""},
	{"err-unknown-in", []string{"trace", "--addr", "eth0=10.0.0.1/24", "in=eth9 src=10.0.0.2 dst=10.0.0.1"}, ""},
	{"err-missing-file", []string{"trace", "--rules", "testdata/does-not-exist", "dst=10.0.0.1"}, ""},
	{"err-bad-ipsets", []string{"trace", "--ipsets", "testdata/bad.ipset", "dst=10.0.0.1"}, ""},
	{"err-bad-conntrack", []string{"trace", "--conntrack", "testdata/bad.conntrack", "dst=10.0.0.1"}, ""},
	{"err-list-one-rule", []string{"list", "--node", node1, "-L", "INPUT", "2"}, ""},
	{"err-planned-command", []string{"pcap", "-r", "x.pcap"}, ""},
	{"err-bad-addrs-json", []string{"trace", "--addrs", "testdata/bad-addr.json", "dst=10.0.0.1"}, ""},
	{"nfacct-node", []string{"list", "--node", nodeKube, "-t", "nat", "-S", "KUBE-NODEPORTS"}, ""},
	{"nfacct-flags", []string{"save", "--rules", nodeKube + "/iptables-save", "--nfacct", "ct_state_invalid_dropped_pkts", "--nfacct", "localhost_nps_accepted_pkts", "-t", "filter"}, ""},
	{"err-nfacct-missing", []string{"list", "--rules", nodeKube + "/iptables-save", "-S"}, ""},
	{"err-nfacct-one-missing", []string{"list", "--rules", nodeKube + "/iptables-save", "--nfacct", "ct_state_invalid_dropped_pkts", "-S"}, ""},
	{"err-nfacct-list-line", []string{"list", "--node", nodeKube, "--nfacct-list", "testdata/bad.nfacct-list"}, ""},
	{"err-nfacct-flag", []string{"list", "--nfacct", "x2345678901234567890123456789012"}, ""},
}

func runCmd(args []string, stdin string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, strings.NewReader(stdin), &out, &errb)
	return code, out.String(), errb.String()
}

func TestGolden(t *testing.T) {
	for _, tc := range goldenCases {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runCmd(tc.args, tc.stdin)
			got := fmt.Sprintf("exit: %d\n--- stdout\n%s--- stderr\n%s", code, stdout, stderr)
			path := filepath.Join("testdata", "golden", tc.name+".golden")
			golden.Check(t, path, []byte(got))

			// The contract around the exit status.
			switch {
			case strings.HasPrefix(tc.name, "err-"):
				assert.NotZero(t, code)
				assert.Empty(t, stdout, "nothing is written to stdout on error")
				first := strings.TrimSuffix(strings.Split(stderr, "\nRun '")[0], "\n")
				assert.NotContains(t, first, "\n", "the error is one line")
			case strings.HasPrefix(tc.name, "usage-"):
				assert.Equal(t, 2, code)
			default:
				assert.Zero(t, code, stderr)
			}
		})
	}
}

func TestExitStatus(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int
	}{
		{nil, 2},
		{[]string{"frobnicate"}, 2},
		{[]string{"trace", "--bogus"}, 2},
		{[]string{"trace", "--addr", "eth0"}, 2},
		{[]string{"trace", "dst=10.0.0.1 proto=tcpx"}, 1},
		{[]string{"trace", "--rules", "testdata/bad.rules", "dst=10.0.0.1"}, 1},
		{[]string{"trace", "--help"}, 0},
		{[]string{"demo"}, 0},
	} {
		code, _, _ := runCmd(tc.args, "")
		assert.Equal(t, tc.want, code, "%q", tc.args)
	}
}

// TestTraceSVG draws with Graphviz when it is installed, and says what is
// missing when it is not.
func TestTraceSVG(t *testing.T) {
	code, stdout, stderr := runCmd([]string{"trace", "--addr", "eth0=10.0.0.1/24", "--rules", "-", "--format", "svg",
		"in=eth0 src=10.0.0.2 dst=10.0.0.1 dport=23"}, "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --dport 23 -j DROP\nCOMMIT\n")
	if _, err := exec.LookPath("dot"); err != nil {
		assert.Equal(t, 1, code)
		assert.Empty(t, stdout)
		assert.Equal(t, "packetwalk trace: --format svg needs Graphviz's dot in PATH (install graphviz, or use --format dot)\n", stderr)
		return
	}
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "<svg")
	assert.Contains(t, stdout, ">INPUT</text>")
	assert.Contains(t, stdout, ">DROP</text>") // the leaf of the rule that dropped it
}

// TestNothingHalfWritten: a bad packet after good ones leaves stdout empty.
func TestNothingHalfWritten(t *testing.T) {
	code, stdout, stderr := runCmd([]string{"trace", "--addr", "eth0=10.0.0.1/24",
		"in=eth0 src=10.0.0.2 dst=10.0.0.1", "in=eth0 src=10.0.0.2 dst=10.0.0.1", "reply=7"}, "")
	assert.Equal(t, 1, code)
	assert.Empty(t, stdout)
	assert.Equal(t, "packetwalk trace: packet 3 (\"reply=7\"): reply to packet 7, which does not come earlier (this is packet 3) at \"reply=7\"\n", stderr)
}

// Example_snapshot lists the commands that capture a node for --node.
func Example_snapshot() {
	fmt.Print(snapshotCommands)
	// Output:
	// iptables-save -c > iptables-save
	// ip6tables-save -c > ip6tables-save
	// ipset save > ipset-save
	// ip -j addr > ip-addr.json
	// ip -j route show table all > ip-route.json
	// ip -j rule > ip-rule.json
	// ip -6 -j rule > ip6-rule.json
	// conntrack -L > conntrack
}

// Example_trace traces one packet through a one-rule firewall.
func Example_trace() {
	run([]string{"trace", "--addr", "eth0=10.0.0.1/24", "--rules", "-",
		"in=eth0 src=10.0.0.2 dst=10.0.0.1 dport=23"},
		strings.NewReader("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --dport 23 -j DROP\nCOMMIT\n"),
		os.Stdout, os.Stderr)
	// Output:
	// packet 1: tcp 10.0.0.2:40001 > 10.0.0.1:23 flags=S ttl=64 len=40, in eth0
	//   routing                     ROUTE  local delivery
	//   INPUT    filter  INPUT  #1  DROP   -A INPUT -p tcp -m tcp --dport 23 -j DROP
	//   => DROP, dropped at INPUT filter INPUT #1
	//   dropped as: tcp 10.0.0.2:40001 > 10.0.0.1:23 flags=S ttl=64 len=40
}

// TestJSONShape checks the trace JSON field by field: the names and
// order of the contract, and null for fields that do not apply.
func TestJSONShape(t *testing.T) {
	code, stdout, stderr := runCmd([]string{"trace", "--node", node1, "--format", "json",
		"in=eth0 src=192.168.10.2 dst=192.168.10.1 dport=80 mark=0x2a",
		"proto=icmp in=eth0 src=192.168.10.2 dst=192.168.10.1 id=77",
		"in=eth0 src=192.168.10.2 dst=10.8.1.1"}, "")
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSuffix(stdout, "\n"), "\n")
	require.Len(t, lines, 3)

	// Key order is part of the contract for people reading the lines.
	assert.True(t, strings.HasPrefix(lines[0], `{"n":1,"verdict":"REJECT","disposition":"rejected","where":{"hook":"INPUT","table":"filter","chain":"INPUT","rule":4,"action":"REJECT"},"in":"eth0","out":null,"packet":{"proto":"tcp","src":"192.168.10.2","sport":40001,"dst":"192.168.10.1","dport":80,"flags":"S","type":null,"code":null,"id":null,"mark":"0x2a","ttl":64,"len":40,"seq":1000,"ack":0,"win":64240},"emitted":[`), lines[0])
	assert.True(t, strings.HasSuffix(lines[0], `,"conntrack":null}`), lines[0])

	var objs []map[string]any
	for _, l := range lines {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(l), &m))
		objs = append(objs, m)
	}
	keys := func(m map[string]any) []string {
		var ks []string
		for k := range m {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	}
	assert.Equal(t, []string{"conntrack", "disposition", "emitted", "in", "n", "out", "packet", "routes", "trace", "verdict", "where"}, keys(objs[0]))
	pkt := objs[0]["packet"].(map[string]any)
	assert.Equal(t, []string{"ack", "code", "dport", "dst", "flags", "id", "len", "mark", "proto", "seq", "sport", "src", "ttl", "type", "win"}, keys(pkt))
	trace := objs[0]["trace"].([]any)
	require.NotEmpty(t, trace)
	assert.Equal(t, []string{"action", "chain", "hook", "rule", "table", "text"}, keys(trace[0].(map[string]any)))
	last := trace[len(trace)-1].(map[string]any)
	assert.Equal(t, map[string]any{"hook": "INPUT", "table": "filter", "chain": "INPUT", "rule": float64(4),
		"text": "-A INPUT -p tcp -m tcp --dport 80 -j REJECT --reject-with tcp-reset", "action": "REJECT"}, last)

	// ICMP: ports and flags null, type/code/id set.
	icmp := objs[1]["packet"].(map[string]any)
	assert.Nil(t, icmp["sport"])
	assert.Nil(t, icmp["dport"])
	assert.Nil(t, icmp["flags"])
	assert.Equal(t, float64(8), icmp["type"])
	assert.Equal(t, float64(0), icmp["code"])
	assert.Equal(t, float64(77), icmp["id"])
	assert.Equal(t, float64(28), icmp["len"])
	assert.Equal(t, "delivered", objs[1]["disposition"])

	// A routing drop: where names the hook, no table or chain.
	assert.Equal(t, map[string]any{"hook": "PREROUTING", "table": "", "chain": "", "rule": float64(0), "action": "ROUTE"}, objs[2]["where"])
	assert.Equal(t, "DROP", objs[2]["verdict"])
	// The unreachable route answers with ICMP host unreachable (3/1), as
	// the kernel's ip_error does.
	emitted := objs[2]["emitted"].([]any)
	require.Len(t, emitted, 1)
	assert.Equal(t, float64(3), emitted[0].(map[string]any)["type"])
	assert.Equal(t, float64(1), emitted[0].(map[string]any)["code"])
	routes := objs[2]["routes"].([]any)
	require.Len(t, routes, 1)
	assert.Equal(t, map[string]any{"hook": "PREROUTING", "reroute": false, "rule": float64(32766), "table": "main", "dst": "10.8.0.0/16",
		"type": nil, "dev": nil, "via": nil, "error": "unreachable"}, routes[0])
}

// FuzzTrace runs whole command lines: any packet argument gives exit 0,
// 1 or 2, and never output on failure.
func FuzzTrace(f *testing.F) {
	f.Add("in=eth0 src=192.168.10.2 dst=192.168.10.1 dport=22", "--format=json")
	f.Add("proto=icmp dst=192.168.10.9", "--format=xtables")
	f.Add("reply=1", "--format=text")
	f.Fuzz(func(t *testing.T, pkt, format string) {
		code, stdout, _ := runCmd([]string{"trace", "--node", node1, format, "in=eth0 src=192.168.10.2 dst=10.244.2.5", pkt}, "")
		if code != 0 && code != 1 && code != 2 {
			t.Fatalf("exit status %d", code)
		}
		if code != 0 && stdout != "" {
			t.Fatalf("output on failure: %q", stdout)
		}
	})
}

func TestParseFlagsInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		fmt  string
	}{
		{[]string{"a", "--format", "json", "b"}, []string{"a", "b"}, "json"},
		{[]string{"--format=xtables", "a"}, []string{"a"}, "xtables"},
		{[]string{"a", "--", "--format", "b"}, []string{"a", "--format", "b"}, "text"},
		{[]string{"-"}, []string{"-"}, "text"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		format := fs.String("format", "text", "")
		c := &cmdEnv{name: "t"}
		pos, err := c.parseFlags(fs, command{}, tc.args)
		require.NoError(t, err, tc.args)
		assert.Equal(t, tc.pos, pos, tc.args)
		assert.Equal(t, tc.fmt, *format, tc.args)
	}
}

func TestSplitShortFlags(t *testing.T) {
	assert.Equal(t, []string{"-n", "-v", "-L", "-t", "nat", "--", "-nv"},
		splitShortFlags([]string{"-nvL", "-t", "nat", "--", "-nv"}))
	assert.Equal(t, []string{"-nvq"}, splitShortFlags([]string{"-nvq"}), "unknown letters are left for flag to refuse")
}

func TestLenientFlagErrors(t *testing.T) {
	var out, errb bytes.Buffer
	code := run([]string{"trace", "--rules", "-", "--addr", "eth0=10.0.0.1/24", "in=eth0 src=10.0.0.2 dst=10.0.0.1 dport=22"},
		strings.NewReader(lenientRules), &out, &errb)
	assert.Equal(t, 1, code)
	assert.Equal(t, "packetwalk trace: <stdin>:5: unsupported match \"frobnicate\" at \"-m\" in \"-A INPUT -p tcp -m tcp --dport 22 -m frobnicate --level 3 -j ACCEPT\"\n", errb.String())
	out.Reset()
	errb.Reset()
	code = run([]string{"trace", "--lenient", "sometimes", "dst=10.0.0.1"}, strings.NewReader(""), &out, &errb)
	assert.Equal(t, 2, code)
	assert.Contains(t, errb.String(), `invalid value "sometimes" for flag -lenient: want never-match, always-match or off`)
}
