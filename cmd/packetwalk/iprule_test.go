package main

import (
	"encoding/json"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rules of testdata/policy were added with the ip rule arguments of
// testdata/record-policy.sh; reading those arguments gives the rules
// `ip -j rule` lists.
func TestIPRuleJSONRecordedMatchesArgs(t *testing.T) {
	data, err := os.ReadFile("testdata/policy/ip-rule.json")
	require.NoError(t, err)
	rs, err := parseIPRuleJSON(data, netfilter.IPv4, defaultTableNames())
	require.NoError(t, err)
	require.Len(t, rs, 16)
	byPrio := map[uint32]netfilter.RouteRule{}
	for _, r := range rs {
		byPrio[r.Priority] = r
	}
	for prio, args := range map[uint32]string{
		100:   "priority 100 not from 10.0.0.0/8 to 10.1.0.0/16 tos 0x10 fwmark 0x5/0xf iif eth1 uidrange 100-200 ipproto udp sport 1000-2000 dport 53 goto 133",
		101:   "priority 101 oif eth0 blackhole",
		102:   "priority 102 dport 80 prohibit",
		103:   "priority 103 nop",
		133:   "fwmark 1337 lookup 133 priority 133",
		512:   "to 10.244.1.7 lookup main priority 512",
		1536:  "from 10.244.1.7 lookup 2 priority 1536",
		5210:  "fwmark 0x80000/0xff0000 table main priority 5210",
		5230:  "fwmark 0x80000/0xff0000 table default priority 5230",
		5250:  "fwmark 0x80000/0xff0000 type unreachable priority 5250",
		5270:  "table 52 priority 5270",
		32764: "table main suppress_prefixlength 0 priority 32764",
		32765: "not fwmark 0xca6c table 51820 priority 32765",
	} {
		r, err := parseIPRuleArgs(args, defaultTableNames())
		require.NoError(t, err, args)
		if r.Action != netfilter.RuleLookup {
			r.Table = 0
		}
		assert.Equal(t, byPrio[prio], r, args)
	}
	assert.Equal(t, netfilter.RouteRule{Family: netfilter.IPv4, Priority: 100, Not: true,
		Src: netip.MustParsePrefix("10.0.0.0/8"), Dst: netip.MustParsePrefix("10.1.0.0/16"), TOS: 0x10,
		HasMark: true, Mark: 5, Mask: 0xf, IIF: "eth1", HasUIDs: true, UIDs: netfilter.UIDRange{Lo: 100, Hi: 200},
		IPProto: 17, SPort: netfilter.PortRange{Lo: 1000, Hi: 2000}, DPort: netfilter.PortRange{Lo: 53, Hi: 53},
		Action: netfilter.RuleGoto, Goto: 133}, byPrio[100])

	data, err = os.ReadFile("testdata/policy/ip6-rule.json")
	require.NoError(t, err)
	rs6, err := parseIPRuleJSON(data, netfilter.IPv6, defaultTableNames())
	require.NoError(t, err)
	assert.Len(t, rs6, 4)
	h := netfilter.NewHost(netfilter.HostConfig{})
	require.NoError(t, h.SetRules(netfilter.IPv4, rs))
	require.NoError(t, h.SetRules(netfilter.IPv6, rs6))
	assert.Equal(t, rs, h.Rules(netfilter.IPv4))
}

// `ip -j route show table all` lists every table and both families.
func TestIPRouteJSONAllTables(t *testing.T) {
	data, err := os.ReadFile("testdata/policy/ip-route.json")
	require.NoError(t, err)
	rs, err := parseIPRouteJSON(data, defaultTableNames())
	require.NoError(t, err)
	p, a := netip.MustParsePrefix, netip.MustParseAddr
	has := func(want netfilter.Route) {
		t.Helper()
		for _, r := range rs {
			if r == want {
				return
			}
		}
		t.Errorf("missing route %+v", want)
	}
	has(netfilter.Route{Dst: p("0.0.0.0/0"), Iface: "eth0", Gateway: a("192.168.10.254"), Table: 2, Src: a("192.168.10.9"), Metric: 10})
	has(netfilter.Route{Dst: p("100.64.0.0/10"), Type: netfilter.RouteThrow, Table: 52})
	has(netfilter.Route{Dst: p("0.0.0.0/0"), Iface: "wg0", Table: 51820})
	has(netfilter.Route{Dst: p("0.0.0.0/0"), Iface: "lo", Type: netfilter.RouteLocal, Table: 133})
	has(netfilter.Route{Dst: p("10.7.0.0/16"), Type: netfilter.RouteProhibit, Table: 200})
	has(netfilter.Route{Dst: p("10.6.0.0/16"), Type: netfilter.RouteUnreachable, Table: netfilter.TableMain, Metric: 5})
	has(netfilter.Route{Dst: p("::/0"), Iface: "eth0", Table: 51820, Metric: 1024})
	for _, r := range rs {
		assert.NotEqual(t, netfilter.TableLocal, r.Table, "kernel entries of the local table are implied: %+v", r)
	}
}

func TestIPRuleArgsErrors(t *testing.T) {
	for in, want := range map[string]string{
		"fwmark":                      `"fwmark" needs a value`,
		"fwmark x lookup 1":           `fwmark x: expected MARK[/MASK]`,
		"from 10.0.0.0/33 lookup 1":   `from 10.0.0.0/33: bad prefix length 33 for 10.0.0.0`,
		"lookup wg":                   `lookup wg: unknown routing table "wg"`,
		"sport 80-10 lookup 1":        `sport 80-10: expected PORT or LOW-HIGH`,
		"realms 1 lookup 1":           `"realms": not an ip rule selector or action packetwalk models`,
		"type nat":                    `rule type "nat" is not modelled`,
		"uidrange 5 lookup 1":         `uidrange 5: expected LOW-HIGH`,
		"lookup 5 blackhole":          `a rule has either a table or a blackhole action`,
		"-6 from 10.0.0.1 lookup 100": `from 10.0.0.1: address 10.0.0.1 is not of family ipv6`,
	} {
		_, err := parseIPRuleArgs(in, defaultTableNames())
		if assert.Error(t, err, in) {
			assert.Contains(t, err.Error(), want, in)
		}
	}
	r, err := parseIPRuleArgs("from fd00::/8 lookup 100", defaultTableNames())
	require.NoError(t, err)
	assert.Equal(t, netfilter.IPv6, r.Family)
	assert.True(t, r.AutoPriority)
	r, err = parseIPRuleArgs("from 1.2.3.4", defaultTableNames())
	require.NoError(t, err)
	assert.Equal(t, netfilter.TableMain, r.Table, "ip rule add without a table looks up main")
}

func TestIPRouteArgs(t *testing.T) {
	p, a := netip.MustParsePrefix, netip.MustParseAddr
	names := defaultTableNames()
	require.NoError(t, parseRTTables([]byte("# comment\n200 wg\n"), names))
	for in, want := range map[string]netfilter.Route{
		"local 0.0.0.0/0 dev lo table 100":                         {Dst: p("0.0.0.0/0"), Iface: "lo", Type: netfilter.RouteLocal, Table: 100},
		"default via 192.168.10.254 dev eth0 table wg metric 10":   {Dst: p("0.0.0.0/0"), Iface: "eth0", Gateway: a("192.168.10.254"), Table: 200, Metric: 10},
		"-6 default dev wg0 table 51820":                           {Dst: p("::/0"), Iface: "wg0", Table: 51820},
		"throw 10.0.0.0/8 table 52":                                {Dst: p("10.0.0.0/8"), Type: netfilter.RouteThrow, Table: 52},
		"10.1.2.3 dev eth1 src 10.244.1.1 proto static scope link": {Dst: p("10.1.2.3/32"), Iface: "eth1", Src: a("10.244.1.1")},
		"blackhole 10.5.0.0/16":                                    {Dst: p("10.5.0.0/16"), Type: netfilter.RouteBlackhole},
	} {
		r, err := parseIPRouteArgs(in, names)
		require.NoError(t, err, in)
		assert.Equal(t, want, r, in)
	}
	for in, want := range map[string]string{
		"10.0.0.1/8 dev eth0":         "has host bits set",
		"10.0.0.0/8":                  "a unicast route needs dev",
		"10.0.0.0/8 dev eth0 table x": `table x: unknown routing table "x"`,
		"multicast 224.0.0.0/4":       `route type "multicast" is not modelled`,
		"10.0.0.0/8 dev eth0 advmss":  `"advmss" needs a value`,
		"10.0.0.0/8 dev eth0 realm 1": `"realm": not an ip route option`,
		"":                            "no destination",
	} {
		_, err := parseIPRouteArgs(in, names)
		if assert.Error(t, err, in) {
			assert.Contains(t, err.Error(), want, in)
		}
	}
}

// The recorded node with wg-quick, Tailscale, TPROXY and per-pod rules:
// trace names the rule and table of each routing decision.
func TestTracePolicyNode(t *testing.T) {
	code, stdout, stderr := runCmd([]string{"trace", "--node", "testdata/policy", "--format", "json",
		"proto=udp dst=8.8.8.8 dport=53",
		"proto=udp dst=8.8.8.8 dport=53 mark=0xca6c",
		"proto=udp dst=100.100.1.2 dport=53 mark=0xca6c",
		"in=eth1 proto=tcp src=10.244.1.5 dst=93.184.216.34 mark=1337",
		"in=eth1 proto=udp src=10.244.1.7 dst=1.1.1.1 dport=53 mark=0xca6c",
		"in=eth1 proto=udp src=10.244.1.5 dst=100.70.0.1 dport=53 mark=0x80000",
	}, "")
	require.Zero(t, code, stderr)
	type route struct {
		Rule  *int    `json:"rule"`
		Table *string `json:"table"`
		Dst   *string `json:"dst"`
		Dev   *string `json:"dev"`
		Via   *string `json:"via"`
		Error *string `json:"error"`
	}
	var got []string
	for _, l := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var o struct {
			Disposition string  `json:"disposition"`
			Routes      []route `json:"routes"`
		}
		require.NoError(t, json.Unmarshal([]byte(l), &o))
		require.Len(t, o.Routes, 1, l)
		r := o.Routes[0]
		s := o.Disposition + " rule="
		str := func(p *string) string {
			if p == nil {
				return "null"
			}
			return *p
		}
		if r.Rule != nil {
			s += strconv.Itoa(*r.Rule)
		}
		s += " table=" + str(r.Table) + " dst=" + str(r.Dst) + " dev=" + str(r.Dev) + " via=" + str(r.Via) + " error=" + str(r.Error)
		got = append(got, s)
	}
	assert.Equal(t, []string{
		"sent rule=32765 table=51820 dst=0.0.0.0/0 dev=wg0 via=null error=null",
		"sent rule=32766 table=main dst=0.0.0.0/0 dev=eth0 via=192.168.10.254 error=null",
		"sent rule=5270 table=52 dst=100.100.0.0/16 dev=tailscale0 via=null error=null",
		"delivered rule=133 table=133 dst=0.0.0.0/0 dev=lo via=null error=null",
		"forwarded rule=1536 table=2 dst=0.0.0.0/0 dev=eth0 via=192.168.10.254 error=null",
		// Tailscale's own marked packets take main (rule 5210).
		"forwarded rule=5210 table=main dst=0.0.0.0/0 dev=eth0 via=192.168.10.254 error=null",
	}, got)
}

// Whatever the arguments or JSON, the parsers return a rule or route the
// host takes, or an error; never a panic.
func FuzzIPRuleArgs(f *testing.F) {
	for _, s := range []string{"fwmark 0x1/0x1 lookup 100 priority 100", "not from 10.0.0.0/8 to fd00::/8", "-6 dsfield 0x20 goto 5",
		"uidrange 1-2 sport 1-2 dport 3 ipproto tcp iif eth0 oif eth1 suppress_prefixlength 0", "type unreachable", "lookup"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := parseIPRuleArgs(s, defaultTableNames())
		if err == nil {
			_ = netfilter.NewHost(netfilter.HostConfig{}).AddRule(r)
		}
		rt, err := parseIPRouteArgs(s, defaultTableNames())
		if err == nil {
			h := netfilter.NewHost(netfilter.HostConfig{})
			_ = h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24"))
			_ = h.AddRoute(rt)
		}
	})
}

func FuzzIPRuleJSON(f *testing.F) {
	if data, err := os.ReadFile("testdata/policy/ip-rule.json"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`[{"priority":1,"src":"1.2.3.4","srclen":99,"table":"x"}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := parseIPRuleJSON(data, netfilter.IPv4, defaultTableNames())
		if err == nil {
			_ = netfilter.NewHost(netfilter.HostConfig{}).SetRules(netfilter.IPv4, rs)
		}
		_, _ = parseIPRouteJSON(data, defaultTableNames())
	})
}
