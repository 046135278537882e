package netfiltertest

import (
	"fmt"
	"net/netip"
	"strings"

	"pgregory.net/rapid"

	"github.com/packetwalk/packetwalk/netfilter"
)

// RulesetOptions configures [Rulesets]. The zero value draws IPv4
// rulesets over 10.0.0.0/8 and 192.168.0.0/16.
type RulesetOptions struct {
	// Family selects iptables (IPv4) or ip6tables (IPv6) syntax.
	Family netfilter.Family
	// Prefixes are the addresses rules match and NAT to, all of Family;
	// empty means
	// 10.0.0.0/8 and 192.168.0.0/16, or fd00::/64 and 2001:db8::/64.
	Prefixes []netip.Prefix
	// Ports are the ports rules match and NAT to; empty means 22, 53, 80,
	// 443 and 8080.
	Ports []uint16
	// MaxRules bounds the rules of each table (default 8).
	MaxRules int
}

// Rulesets returns a generator of iptables-restore documents with a filter
// table (policies, up to three user chains jumped to forwards only, rules
// on protocol, ports, addresses, conntrack state and statistic random and
// nth, with ACCEPT, DROP, REJECT, RETURN and jumps) and a nat table (DNAT
// in PREROUTING and OUTPUT, SNAT and MASQUERADE in POSTROUTING). Every
// document loads with [netfilter.Host.Restore] in opts.Family.
func Rulesets(opts RulesetOptions) *rapid.Generator[string] {
	v6 := opts.Family == netfilter.IPv6
	prefixes := opts.Prefixes
	if len(prefixes) == 0 {
		prefixes = []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("192.168.0.0/16")}
		if v6 {
			prefixes = []netip.Prefix{netip.MustParsePrefix("fd00::/64"), netip.MustParsePrefix("2001:db8::/64")}
		}
	}
	ports := opts.Ports
	if len(ports) == 0 {
		ports = []uint16{22, 53, 80, 443, 8080}
	}
	maxRules := opts.MaxRules
	if maxRules <= 0 {
		maxRules = 8
	}
	return rapid.Custom(func(t *rapid.T) string {
		g := rulesetGen{t: t, prefixes: prefixes, ports: ports}
		var b strings.Builder
		b.WriteString("*filter\n")
		for _, c := range []string{"INPUT", "FORWARD", "OUTPUT"} {
			fmt.Fprintf(&b, ":%s %s [0:0]\n", c, rapid.SampledFrom([]string{"ACCEPT", "DROP"}).Draw(t, "policy"))
		}
		users := rapid.IntRange(0, 3).Draw(t, "userChains")
		for i := range users {
			fmt.Fprintf(&b, ":U%d - [0:0]\n", i)
		}
		chains := []string{"INPUT", "FORWARD", "OUTPUT"}
		for i := range users {
			chains = append(chains, fmt.Sprintf("U%d", i))
		}
		for range rapid.IntRange(0, maxRules).Draw(t, "filterRules") {
			ci := rapid.IntRange(0, len(chains)-1).Draw(t, "chain")
			targets := []string{"ACCEPT", "DROP", "REJECT", "RETURN"}
			// Jumps go to later user chains only, so there is no loop.
			for u := max(ci-2, 0); u < users; u++ {
				targets = append(targets, fmt.Sprintf("U%d", u))
			}
			fmt.Fprintf(&b, "-A %s%s -j %s\n", chains[ci], g.matches(), rapid.SampledFrom(targets).Draw(t, "target"))
		}
		b.WriteString("COMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
		for range rapid.IntRange(0, maxRules).Draw(t, "natRules") {
			switch rapid.IntRange(0, 2).Draw(t, "natKind") {
			case 0, 1:
				chain := []string{"PREROUTING", "OUTPUT"}[rapid.IntRange(0, 1).Draw(t, "natChain")]
				proto := rapid.SampledFrom([]string{"tcp", "udp"}).Draw(t, "natProto")
				to := g.addr()
				if rapid.Bool().Draw(t, "natPort") {
					to = netip.AddrPortFrom(netip.MustParseAddr(to), g.port()).String()
				}
				fmt.Fprintf(&b, "-A %s -d %s -p %s -m %s --dport %d%s -j DNAT --to-destination %s\n",
					chain, g.prefix(), proto, proto, g.port(), g.statistic(), to)
			default:
				if rapid.Bool().Draw(t, "masquerade") {
					fmt.Fprintf(&b, "-A POSTROUTING -s %s -j MASQUERADE\n", g.prefix())
				} else {
					fmt.Fprintf(&b, "-A POSTROUTING -s %s%s -j SNAT --to-source %s\n", g.prefix(), g.statistic(), g.addr())
				}
			}
		}
		b.WriteString("COMMIT\n")
		return b.String()
	})
}

type rulesetGen struct {
	t        *rapid.T
	prefixes []netip.Prefix
	ports    []uint16
}

// prefix draws a prefix inside one of the configured ones.
func (g rulesetGen) prefix() string {
	p := rapid.SampledFrom(g.prefixes).Draw(g.t, "prefix")
	bits := rapid.IntRange(p.Bits(), p.Addr().BitLen()).Draw(g.t, "bits")
	a := AddrIn(p, rapid.Uint64().Draw(g.t, "host"))
	return netip.PrefixFrom(a, bits).Masked().String()
}

func (g rulesetGen) addr() string {
	return AddrIn(rapid.SampledFrom(g.prefixes).Draw(g.t, "prefix"), rapid.Uint64().Draw(g.t, "host")).String()
}

func (g rulesetGen) port() uint16 { return rapid.SampledFrom(g.ports).Draw(g.t, "port") }

// statistic draws no match, a random one or an nth one.
func (g rulesetGen) statistic() string {
	switch rapid.IntRange(0, 3).Draw(g.t, "statistic") {
	case 1:
		return fmt.Sprintf(" -m statistic --mode random --probability %0.10f", float64(rapid.IntRange(1, 999).Draw(g.t, "permille"))/1000)
	case 2:
		every := rapid.IntRange(2, 5).Draw(g.t, "every")
		return fmt.Sprintf(" -m statistic --mode nth --every %d --packet %d", every, rapid.IntRange(0, every-1).Draw(g.t, "packet"))
	}
	return ""
}

// matches draws the matches of a filter rule.
func (g rulesetGen) matches() string {
	var b strings.Builder
	if rapid.Bool().Draw(g.t, "src") {
		fmt.Fprintf(&b, " %s-s %s", g.not(), g.prefix())
	}
	if rapid.Bool().Draw(g.t, "dst") {
		fmt.Fprintf(&b, " %s-d %s", g.not(), g.prefix())
	}
	switch proto := rapid.SampledFrom([]string{"", "tcp", "udp"}).Draw(g.t, "proto"); proto {
	case "tcp", "udp":
		fmt.Fprintf(&b, " -p %s", proto)
		if rapid.Bool().Draw(g.t, "dport") {
			fmt.Fprintf(&b, " -m %s --dport %d", proto, g.port())
		}
	}
	if rapid.IntRange(0, 3).Draw(g.t, "ctstate") == 0 {
		b.WriteString(rapid.SampledFrom([]string{" -m conntrack --ctstate NEW", " -m conntrack --ctstate RELATED,ESTABLISHED", " -m conntrack --ctstate INVALID"}).Draw(g.t, "state"))
	}
	b.WriteString(g.statistic())
	return b.String()
}

func (g rulesetGen) not() string {
	if rapid.IntRange(0, 4).Draw(g.t, "not") == 0 {
		return "! "
	}
	return ""
}
