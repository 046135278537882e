package difftest

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/netfilter"
)

// The grammar generator writes single rules from the full option grammar of
// iptables 1.8.9 for every module packetwalk registers, as the real tools
// define it (testdata/grammar/*.txt, recorded by testdata/grammar/record.sh,
// and the option tables of the libxt_*.c / libipt_*.c / libip6t_*.c sources
// of iptables 1.8.9, https://git.netfilter.org/iptables/tree/extensions?h=v1.8.9),
// not from packetwalk's own option tables: it draws what packetwalk does not
// implement too, so that the differential can find it. It also draws every
// spelling the command line takes (short and long options, getopt
// abbreviations, "!" before and after an option), odd but valid values and
// invalid ones, so that refusals are compared as well.

// gCase is one generated rule: "-A Chain Rule" in Table of family Fam.
type gCase struct {
	Fam   netfilter.Family
	Table string
	Chain string
	Rule  string
	// Policy, when set, is the policy written in the user chain's
	// declaration instead of "-".
	Policy string
	// Noise is a restore line-level oddity around the rule's line: "crlf",
	// "blank" or "comment".
	Noise string
	// Index is the case's number in its seed's sequence.
	Index int
	// UserChain, when set, replaces the user chain's name (userChain) in
	// the case, so that every case of a batch has a chain of its own.
	UserChain string
}

// userChain is the user chain every generated table declares; a rule may
// be appended to it or jump to it.
const userChain = "PWG"

// withChain returns the rule and chain with the case's own user chain.
func (c gCase) withChain() (chain, rule string) {
	if c.UserChain == "" {
		return c.Chain, c.Rule
	}
	toks := strings.Split(c.Rule, " ")
	for i, t := range toks {
		if t == userChain {
			toks[i] = c.UserChain
		}
	}
	chain = c.Chain
	if chain == userChain {
		chain = c.UserChain
	}
	return chain, strings.Join(toks, " ")
}

// restoreText returns restore input holding the cases, which must all be
// of one family, table by table in the order first seen, and which line
// holds which case (by index in cs).
func restoreText(cs []gCase) (string, map[int]int) { return restoreTextWith(cs, false) }

// restoreTextWith is restoreText, declaring the table's built-in chains
// too when builtins is set: iptables-nft creates a built-in chain that is
// only appended to without policy counters (docs/kernel-notes.md), and
// the packet comparison wants those counters.
func restoreTextWith(cs []gCase, builtins bool) (string, map[int]int) {
	var tables []string
	byTable := map[string][]int{}
	for i, c := range cs {
		if _, ok := byTable[c.Table]; !ok {
			tables = append(tables, c.Table)
		}
		byTable[c.Table] = append(byTable[c.Table], i)
	}
	var b strings.Builder
	lineOf := map[int]int{}
	line := 0
	w := func(s, eol string) { b.WriteString(s); b.WriteString(eol); line++ }
	for _, t := range tables {
		w("*"+t, "\n")
		if builtins {
			for _, ch := range gTables[t] {
				w(":"+ch+" ACCEPT [0:0]", "\n")
			}
		}
		declared := map[string]bool{}
		for _, i := range byTable[t] {
			name := cmp.Or(cs[i].UserChain, userChain)
			if declared[name] {
				continue
			}
			declared[name] = true
			w(":"+name+" "+cmp.Or(cs[i].Policy, "-")+" [0:0]", "\n")
		}
		for _, i := range byTable[t] {
			eol := "\n"
			switch cs[i].Noise {
			case "blank":
				w("", "\n")
			case "comment":
				w("  # a comment", "\n")
			case "crlf":
				eol = "\r\n"
			}
			chain, rule := cs[i].withChain()
			w("-A "+chain+" "+rule, eol)
			lineOf[line] = i
		}
		w("COMMIT", "\n")
	}
	return b.String(), lineOf
}

func (c gCase) String() string {
	t, _ := restoreText([]gCase{c})
	fam := "iptables"
	if c.Fam == netfilter.IPv6 {
		fam = "ip6tables"
	}
	return fmt.Sprintf("case %d (%s-restore):\n%s", c.Index, fam, t)
}

// grammarCase draws case i of seed, with the extension modules when ext is
// set; the same three always give the same case, whatever else is drawn.
func grammarCase(seed uint64, i int, ext bool) gCase {
	g := &gramGen{r: rand.New(rand.NewPCG(seed, uint64(i))), ext: ext}
	c := g.draw()
	c.Index = i
	return c
}

type gramGen struct {
	r     *rand.Rand
	fam   netfilter.Family
	table string
	chain string
	parts []string
	proto string // the -p given, "" for none
	ext   bool   // draw the extension modules too (grammar_ext_gen_test.go)
	// cgroupPath is set once "-m cgroup --path" is drawn.
	cgroupPath bool
}

func (g *gramGen) n(k int) int              { return g.r.IntN(k) }
func (g *gramGen) chance(k int) bool        { return g.r.IntN(k) == 0 }
func (g *gramGen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g *gramGen) add(xs ...string)         { g.parts = append(g.parts, xs...) }

var gTables = map[string][]string{
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"raw":    {"PREROUTING", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
}

var gTableNames = []string{"filter", "filter", "mangle", "raw", "nat"}

func (g *gramGen) draw() gCase {
	g.fam = netfilter.IPv4
	if g.chance(4) {
		g.fam = netfilter.IPv6
	}
	g.table = g.pick(gTableNames...)
	chains := gTables[g.table]
	g.chain = chains[g.n(len(chains))]
	if g.chance(8) {
		g.chain = userChain
	}
	g.generic()
	nm := g.n(3)
	if g.chance(6) {
		nm += 2
	}
	for range nm {
		g.match()
	}
	g.target()
	if g.chance(5) { // the generic options may come after the matches too
		g.generic()
	}
	c := gCase{Fam: g.fam, Table: g.table, Chain: g.chain, Rule: strings.Join(g.parts, " ")}
	if g.chance(60) {
		c.Policy = g.pick("ACCEPT", "DROP")
	}
	if g.chance(40) {
		c.Noise = g.pick("crlf", "blank", "comment")
		if c.Noise == "crlf" && g.cgroupPath {
			// A CR would end the cgroup path if it is the last argument,
			// naming a cgroup this machine has not got (see extMatchMore).
			c.Noise = "blank"
		}
	}
	return c
}

// spell returns a spelling of a long option: its name, one of its aliases,
// or a getopt abbreviation of either (which iptables takes when it is not
// ambiguous among the options known at that point).
func (g *gramGen) spell(names ...string) string {
	s := names[g.n(len(names))]
	if len(s) > 3 && g.chance(6) {
		s = s[:2+g.n(len(s)-2)]
	}
	if s == "help" {
		// "--help" is an option of its own: iptables-restore prints the
		// help and exits 0 without loading anything (docs/kernel-notes.md),
		// which would void a whole batch.
		s = names[0]
	}
	return "--" + s
}

// opt adds an option with its arguments; inv says whether the grammar takes
// "!" for it. The "!" goes before the option, or (rarely, the old syntax)
// between the option and its argument; now and then one is drawn where the
// grammar takes none, to compare the refusal.
func (g *gramGen) opt(inv bool, flag string, args ...string) {
	neg := (inv && g.chance(4)) || g.chance(60)
	switch {
	case neg && len(args) > 0 && g.chance(8):
		g.add(flag, "!")
		g.add(args...)
	case neg:
		g.add("!", flag)
		g.add(args...)
	default:
		g.add(flag)
		g.add(args...)
	}
}

// ---- values ----

func (g *gramGen) octet() string {
	v := []int{0, 1, 2, 5, 10, 127, 168, 192, 244, 255}[g.n(10)]
	if g.chance(80) {
		return "0" + strconv.Itoa(v) // leading zero
	}
	if g.chance(150) {
		return "256"
	}
	return strconv.Itoa(v)
}

func (g *gramGen) v4() string {
	switch g.n(12) {
	case 0:
		return "0.0.0.0"
	case 1:
		return "255.255.255.255"
	case 2:
		return g.pick("192.168.10.2", "10.244.1.5", "192.168.10.1", "10.244.1.1")
	case 3:
		if g.chance(3) {
			return g.pick("1.2.3", "1.2.3.4.5", "1..2.3", "a.b.c.d", "1.2.3.4/")
		}
	}
	return g.octet() + "." + g.octet() + "." + g.octet() + "." + g.octet()
}

func (g *gramGen) v6() string {
	switch g.n(12) {
	case 0:
		return "::"
	case 1:
		return "::1"
	case 2:
		return "::ffff:" + g.v4() // IPv4-mapped
	case 3:
		return g.pick("fd00:10::2", "fd00:244::5", "fd00:10::1", "fd00:244::1")
	case 4:
		return g.pick("fe80::1", "ff02::1", "2001:db8:0:0:0:0:0:1", "2001:DB8::A")
	case 5:
		if g.chance(3) {
			return g.pick("1:2:3:4:5:6:7:8:9", ":::1", "fd00::g", "1.2.3.4")
		}
	}
	return fmt.Sprintf("%x:%x::%x", g.n(0x10000), g.n(0x10000), g.n(0x10000))
}

func (g *gramGen) addr() string {
	if g.fam == netfilter.IPv6 {
		return g.v6()
	}
	return g.v4()
}

// mask returns "" or a "/..." suffix: a length (also /0, one too long,
// negative), and for IPv4 dotted masks, contiguous or not.
func (g *gramGen) mask() string {
	max := 32
	if g.fam == netfilter.IPv6 {
		max = 128
	}
	switch g.n(9) {
	case 0, 1, 2:
		return ""
	case 3:
		return "/0"
	case 4:
		return "/" + strconv.Itoa(max)
	case 5:
		if g.chance(3) {
			return g.pick("/"+strconv.Itoa(max+1), "/-1", "/x", "/")
		}
		return "/" + strconv.Itoa(g.n(max+1))
	case 6:
		if g.fam == netfilter.IPv6 {
			return g.pick("/ffff:ffff::", "/ffff:0:ffff::", "/::")
		}
		return g.pick("/255.255.255.0", "/255.255.0.0", "/255.0.255.0", "/0.0.0.255", "/255.255.255.255", "/0.0.0.0")
	}
	return "/" + strconv.Itoa(g.n(max+1))
}

// addrList is -s/-d's argument: one address with a mask, or a comma list.
func (g *gramGen) addrList() string {
	s := g.addr() + g.mask()
	if g.chance(8) {
		s += "," + g.addr() + g.mask()
	}
	return s
}

var services = []string{"http", "https", "ssh", "domain", "ftp", "smtp", "ntp", "nosuchservice", "www", "bootps", "HTTP"}

func (g *gramGen) port() string {
	switch g.n(10) {
	case 0:
		return services[g.n(len(services))]
	case 1:
		return g.pick("0", "65535", "65536", "70000", "-1", "0x50", "080", "")
	}
	return strconv.Itoa([]int{22, 53, 80, 443, 1024, 8080, 30000, 40000, 40001, 65535}[g.n(10)])
}

// portRange is "P", "P:Q" (also reversed), ":Q", "P:" or ":".
func (g *gramGen) portRange(sep string) string {
	switch g.n(8) {
	case 0, 1, 2:
		return g.port()
	case 3:
		return sep + g.port()
	case 4:
		return g.port() + sep
	case 5:
		if g.chance(4) {
			return sep
		}
	}
	return g.port() + sep + g.port()
}

func (g *gramGen) u32() string {
	switch g.n(8) {
	case 0:
		return "0"
	case 1:
		return g.pick("0xffffffff", "4294967295", "0x100000000", "-1", "x", "010")
	case 2:
		return strconv.Itoa(g.n(100))
	}
	return fmt.Sprintf("0x%x", g.r.Uint32()>>uint(g.n(32)))
}

func (g *gramGen) markMask() string {
	s := g.u32()
	if g.chance(2) {
		s += "/" + g.u32()
	}
	return s
}

func (g *gramGen) iface() string {
	switch g.n(10) {
	case 0:
		return "+"
	case 1:
		return strings.Repeat("x", 15+g.n(2)) // IFNAMSIZ-1 fits, one more does not
	case 2:
		return g.pick("eth0+", "e+th", "lo", "eth 0", "eth/0", "*")
	}
	return g.pick("eth0", "eth1", "eth+", "et+", "eth2", "veth12345678", gNoAddrLink, "pwv+")
}

func (g *gramGen) num(lo, hi int) string {
	if g.chance(15) {
		return g.pick("-1", "x", "", "4294967296", "1.5")
	}
	return strconv.Itoa(lo + g.n(hi-lo+1))
}

func (g *gramGen) list(n int, items ...string) string {
	k := 1 + g.n(n)
	var out []string
	for range k {
		out = append(out, items[g.n(len(items))])
	}
	return strings.Join(out, ",")
}

func (g *gramGen) quoted(xs ...string) string {
	s := xs[g.n(len(xs))]
	if strings.ContainsAny(s, " \t") || s == "" || g.chance(4) {
		return strconv.Quote(s)
	}
	return s
}

// ---- generic options (iptables-generic.txt, ip6tables-generic.txt) ----

func (g *gramGen) generic() {
	opts := []func(){
		func() { g.opt(true, g.pick("-s", g.spell("source", "src")), g.addrList()) },
		func() { g.opt(true, g.pick("-d", g.spell("destination", "dst")), g.addrList()) },
		func() {
			if g.chain != "OUTPUT" && g.chain != "POSTROUTING" || g.chance(8) {
				g.opt(true, g.pick("-i", g.spell("in-interface")), g.iface())
			}
		},
		func() {
			if g.chain != "INPUT" && g.chain != "PREROUTING" || g.chance(8) {
				g.opt(true, g.pick("-o", g.spell("out-interface")), g.iface())
			}
		},
		func() {
			if g.fam == netfilter.IPv4 || g.chance(10) {
				g.opt(true, g.pick("-f", g.spell("fragment")))
			}
		},
	}
	if g.proto == "" {
		opts = append(opts, g.protocol, g.protocol)
	}
	k := g.n(4)
	for _, i := range g.r.Perm(len(opts))[:min(k, len(opts))] {
		opts[i]()
	}
	if g.chance(30) { // an option given twice
		opts[g.n(len(opts))]()
	}
}

var protoNames = []string{"tcp", "udp", "icmp", "ipv6-icmp", "icmpv6", "sctp", "udplite", "all", "esp", "gre", "6", "17", "1", "58", "0", "132", "256", "TCP", "nosuchproto"}

func (g *gramGen) protocol() {
	if g.proto != "" && !g.chance(20) {
		return
	}
	p := protoNames[g.n(len(protoNames))]
	if !g.chance(3) {
		p = []string{"tcp", "udp", "icmp", "ipv6-icmp"}[g.n(4)]
		if p == "icmp" && g.fam == netfilter.IPv6 {
			p = "ipv6-icmp"
		}
	}
	g.opt(true, g.pick("-p", g.spell("protocol")), p)
	if g.proto == "" {
		g.proto = strings.ToLower(p)
	}
	// The options of the protocol's own match right after -p, loaded
	// implicitly.
	if g.chance(2) {
		switch g.proto {
		case "tcp", "6":
			g.tcpOpts()
		case "udp", "17":
			g.udpOpts()
		case "icmp", "1":
			g.icmpOpts()
		case "ipv6-icmp", "icmpv6", "58":
			g.icmp6Opts()
		case "sctp", "132":
			g.sctpOpts()
		}
	}
}

// ---- matches ----

// gMatches are the match modules packetwalk registers (netfilter's match
// registry), each with the options of its real grammar.
var gMatches = []string{"addrtype", "comment", "conntrack", "state", "connmark", "helper", "icmp", "icmp6",
	"iprange", "length", "limit", "mac", "mark", "multiport", "nfacct", "owner", "physdev", "pkttype", "recent",
	"sctp", "set", "statistic", "tcp", "udp", "udplite"}

func (g *gramGen) match() {
	if g.ext && g.chance(2) {
		g.extMatch()
		return
	}
	m := gMatches[g.n(len(gMatches))]
	if g.chance(5) { // two modules sharing an option name in one rule
		m = g.pick("mark", "connmark")
	}
	if (m == "icmp" && g.fam == netfilter.IPv6 || m == "icmp6" && g.fam == netfilter.IPv4) && !g.chance(5) {
		m = g.pick("icmp", "icmp6")
		if g.fam == netfilter.IPv6 {
			m = "icmp6"
		}
	}
	switch m { // matches that need a protocol: mostly give it
	case "tcp", "udp", "sctp", "icmp", "icmp6", "multiport", "udplite":
		if g.proto == "" && !g.chance(6) {
			p := m
			switch m {
			case "icmp6":
				p = "ipv6-icmp"
			case "multiport":
				p = g.pick("tcp", "udp", "sctp")
			}
			g.opt(true, "-p", p)
			g.proto = p
		}
	}
	g.add(g.pick("-m", "-m", "-m", "-m", "-m", "--match", g.spell("match")), m)
	switch m {
	case "addrtype":
		types := []string{"UNSPEC", "UNICAST", "LOCAL", "BROADCAST", "ANYCAST", "MULTICAST", "BLACKHOLE",
			"UNREACHABLE", "PROHIBIT", "THROW", "NAT", "XRESOLVE", "local", "NOSUCH"}
		g.some(
			func() { g.opt(true, g.spell("src-type"), g.list(3, types...)) },
			func() { g.opt(true, g.spell("dst-type"), g.list(3, types...)) },
			func() { g.opt(false, g.spell("limit-iface-in")) },
			func() { g.opt(false, g.spell("limit-iface-out")) },
		)
	case "comment":
		g.some(func() {
			g.opt(false, g.spell("comment"), g.quoted("x", "a b", "", "ns1/svc1:p80", strings.Repeat("c", 255), strings.Repeat("c", 256), `say "hi"`, "!", "-x"))
		})
	case "conntrack":
		states := []string{"INVALID", "ESTABLISHED", "NEW", "RELATED", "UNTRACKED", "SNAT", "DNAT", "new", "BOGUS"}
		statuses := []string{"NONE", "EXPECTED", "SEEN_REPLY", "ASSURED", "CONFIRMED", "none", "BOGUS"}
		g.some(
			func() { g.opt(true, g.spell("ctstate"), g.list(3, states...)) },
			func() { g.opt(true, g.spell("ctproto"), g.pick("tcp", "udp", "icmp", "6", "0", "all", "256")) },
			func() { g.opt(true, g.spell("ctorigsrc"), g.addr()+g.mask()) },
			func() { g.opt(true, g.spell("ctorigdst"), g.addr()+g.mask()) },
			func() { g.opt(true, g.spell("ctreplsrc"), g.addr()+g.mask()) },
			func() { g.opt(true, g.spell("ctrepldst"), g.addr()+g.mask()) },
			func() { g.opt(true, g.spell("ctorigsrcport"), g.portRange(":")) },
			func() { g.opt(true, g.spell("ctorigdstport"), g.portRange(":")) },
			func() { g.opt(true, g.spell("ctreplsrcport"), g.portRange(":")) },
			func() { g.opt(true, g.spell("ctrepldstport"), g.portRange(":")) },
			func() { g.opt(true, g.spell("ctstatus"), g.list(3, statuses...)) },
			func() { g.opt(true, g.spell("ctexpire"), g.numRange(0, 1000)) },
			func() { g.opt(false, g.spell("ctdir"), g.pick("ORIGINAL", "REPLY", "original", "BOTH")) },
		)
	case "state":
		g.some(func() {
			g.opt(true, g.spell("state"), g.list(3, "INVALID", "ESTABLISHED", "NEW", "RELATED", "UNTRACKED", "SNAT", "new"))
		})
	case "connmark", "mark":
		g.some(func() { g.opt(true, g.spell("mark"), g.markMask()) })
	case "helper":
		g.some(func() { g.opt(true, g.spell("helper"), g.quoted("ftp", "sip", "", "irc", strings.Repeat("h", 30))) })
	case "icmp":
		g.icmpOpts()
	case "icmp6":
		g.icmp6Opts()
	case "iprange":
		rng := func() string {
			s := g.addr()
			if g.chance(2) {
				s += "-" + g.addr()
			}
			return s
		}
		g.some(
			func() { g.opt(true, g.spell("src-range"), rng()) },
			func() { g.opt(true, g.spell("dst-range"), rng()) },
		)
	case "length":
		g.some(func() { g.opt(true, g.spell("length"), g.numRange(0, 65535)) })
	case "limit":
		g.some(
			func() {
				g.opt(false, g.spell("limit"), g.num(0, 10001)+g.pick("", "/s", "/sec", "/second", "/m", "/minute", "/h", "/hour", "/d", "/day", "/week", "/"))
			},
			func() { g.opt(false, g.spell("limit-burst"), g.num(0, 10001)) },
		)
	case "mac":
		g.some(func() {
			g.opt(true, g.spell("mac-source"), g.pick("00:11:22:33:44:55", "aa:BB:cc:dd:ee:ff", "0:1:2:3:4:5", "00:11:22:33:44", "00-11-22-33-44-55", "gg:11:22:33:44:55"))
		})
	case "multiport":
		ports := func() string {
			k := 1 + g.n(4)
			if g.chance(10) {
				k = 14 + g.n(4) // the limit is 15 ports, a range counting two
			}
			var ps []string
			for range k {
				if g.chance(3) {
					ps = append(ps, g.port()+":"+g.port())
				} else {
					ps = append(ps, g.port())
				}
			}
			return strings.Join(ps, ",")
		}
		g.some(
			func() { g.opt(true, g.spell("source-ports", "sports"), ports()) },
			func() { g.opt(true, g.spell("destination-ports", "dports"), ports()) },
			func() { g.opt(true, g.spell("ports"), ports()) },
		)
	case "nfacct":
		g.some(func() { g.opt(false, g.spell("nfacct-name"), g.quoted("pwacct", "", strings.Repeat("n", 40))) })
	case "owner":
		ids := func() string {
			s := g.pick("0", "1000", "65534", "root", "nobody", "nosuchuser", "4294967295", "4294967296")
			if g.chance(3) {
				s += "-" + g.pick("0", "1000", "2000", "root")
			}
			return s
		}
		g.some(
			func() { g.opt(true, g.spell("uid-owner"), ids()) },
			func() { g.opt(true, g.spell("gid-owner"), ids()) },
			func() { g.opt(true, g.spell("socket-exists")) },
			func() { g.opt(false, g.spell("suppl-groups")) },
		)
	case "physdev":
		g.some(
			func() { g.opt(true, g.spell("physdev-in"), g.iface()) },
			func() { g.opt(true, g.spell("physdev-out"), g.iface()) },
			func() { g.opt(true, g.spell("physdev-is-in")) },
			func() { g.opt(true, g.spell("physdev-is-out")) },
			func() { g.opt(true, g.spell("physdev-is-bridged")) },
		)
	case "pkttype":
		g.some(func() {
			g.opt(true, g.spell("pkt-type"), g.pick("unicast", "broadcast", "multicast", "host", "otherhost", "UNICAST", "bogus"))
		})
	case "recent":
		g.some(
			func() {
				g.opt(true, g.spell(g.pick("set", "rcheck", "update", "remove")))
			},
			func() { g.opt(false, g.spell("seconds"), g.num(0, 100000)) },
			func() { g.opt(false, g.spell("reap")) },
			func() { g.opt(false, g.spell("hitcount"), g.num(0, 300)) },
			func() { g.opt(false, g.spell("rttl")) },
			func() { g.opt(false, g.spell("name"), g.quoted("DEFAULT", "pw", "", strings.Repeat("r", 200))) },
			func() { g.opt(false, g.spell(g.pick("rsource", "rdest"))) },
			func() { g.opt(false, g.spell("mask"), g.addr()) },
		)
	case "sctp":
		g.sctpOpts()
	case "set":
		flags := func() string { return g.list(3, "src", "dst", "SRC", "bogus") }
		g.some(
			func() { g.opt(true, g.spell("match-set"), g.pick("pwset", "nosuchset", ""), flags()) },
			func() { g.opt(false, g.spell("return-nomatch")) },
			func() { g.opt(true, g.spell("update-counters")) },
			func() { g.opt(true, g.spell("update-subcounters")) },
			func() { g.opt(true, g.spell("packets-eq"), g.num(0, 100)) },
			func() { g.opt(false, g.spell(g.pick("packets-lt", "packets-gt")), g.num(0, 100)) },
			func() { g.opt(true, g.spell("bytes-eq"), g.num(0, 100)) },
			func() { g.opt(false, g.spell(g.pick("bytes-lt", "bytes-gt")), g.num(0, 100)) },
		)
	case "statistic":
		g.some(
			func() { g.opt(false, g.spell("mode"), g.pick("random", "nth", "bogus")) },
			func() {
				g.opt(true, g.spell("probability"), g.pick("0.5", "0", "1", "0.0001", "1.5", "-0.1", ".25", "x"))
			},
			func() { g.opt(true, g.spell("every"), g.num(0, 10)) },
			func() { g.opt(false, g.spell("packet"), g.num(0, 10)) },
		)
	case "tcp":
		g.tcpOpts()
	case "udp", "udplite":
		g.udpOpts()
	}
}

// some adds a random selection of the options, in random order, each at
// most once, and rarely one twice.
func (g *gramGen) some(opts ...func()) {
	k := g.n(len(opts) + 1)
	if k == 0 && !g.chance(8) {
		k = 1
	}
	perm := g.r.Perm(len(opts))
	for _, i := range perm[:min(k, 3)] {
		opts[i]()
	}
	if g.chance(25) {
		opts[g.n(len(opts))]()
	}
}

func (g *gramGen) numRange(lo, hi int) string {
	s := g.num(lo, hi)
	switch g.n(4) {
	case 0:
		s += ":" + g.num(lo, hi)
	case 1:
		if g.chance(4) {
			s += ":"
		}
	}
	return s
}

func (g *gramGen) portOpts() []func() {
	return []func(){
		func() { g.opt(true, g.spell("source-port", "sport"), g.portRange(":")) },
		func() { g.opt(true, g.spell("destination-port", "dport"), g.portRange(":")) },
	}
}

var tcpFlagNames = []string{"SYN", "ACK", "FIN", "RST", "URG", "PSH", "ALL", "NONE", "syn", "BOGUS"}

func (g *gramGen) tcpOpts() {
	g.some(append(g.portOpts(),
		func() { g.opt(true, g.spell("tcp-flags"), g.list(4, tcpFlagNames...), g.list(3, tcpFlagNames...)) },
		func() { g.opt(true, g.spell("syn")) },
		func() { g.opt(true, g.spell("tcp-option"), g.num(0, 256)) },
	)...)
}

func (g *gramGen) udpOpts() { g.some(g.portOpts()...) }

func (g *gramGen) sctpOpts() {
	chunks := []string{"DATA", "INIT", "INIT_ACK", "SACK", "HEARTBEAT", "ABORT", "SHUTDOWN", "COOKIE_ECHO", "DATA:U", "ABORT:T", "BOGUS"}
	g.some(append(g.portOpts(),
		func() {
			g.opt(true, g.spell("chunk-types"), g.pick("all", "any", "only", "none"), g.list(3, chunks...))
		},
	)...)
}

func (g *gramGen) icmpOpts() {
	g.some(func() {
		g.opt(true, g.spell("icmp-type"), g.pick("any", "echo-request", "ping", "echo-reply", "destination-unreachable",
			"port-unreachable", "host-prohibited", "time-exceeded", "ttl-zero-during-transit", "8", "3/3", "3/256", "255",
			"256", "8/0", "echo", "bogus", "0x8"))
	})
}

func (g *gramGen) icmp6Opts() {
	g.some(func() {
		g.opt(true, g.spell("icmpv6-type"), g.pick("echo-request", "ping", "echo-reply", "destination-unreachable",
			"no-route", "packet-too-big", "neighbour-solicitation", "neighbor-advertisement", "router-advertisement",
			"128", "1/4", "1/256", "255", "256", "bogus"))
	})
}

// ---- targets ----

var gTargets = []string{"ACCEPT", "DROP", "RETURN", "ACCEPT", "DROP", userChain, "NOSUCHCHAIN", "CONNMARK", "CT", "NOTRACK",
	"LOG", "MARK", "DNAT", "SNAT", "MASQUERADE", "REDIRECT", "NFLOG", "REJECT", "SET", "TRACE"}

func (g *gramGen) target() {
	if g.chance(6) {
		return
	}
	if g.ext && g.chance(3) {
		g.extTarget()
		return
	}
	t := gTargets[g.n(len(gTargets))]
	if g.chance(50) {
		t = "QUEUE"
	}
	// Mostly a target that belongs to the table.
	switch {
	case g.table == "nat" && (t == "DROP" || t == "REJECT" || t == "MARK" || t == "CT" || t == "NOTRACK") && !g.chance(5):
		t = g.pick("DNAT", "SNAT", "MASQUERADE", "REDIRECT", "ACCEPT")
	case g.table != "nat" && (t == "DNAT" || t == "SNAT" || t == "MASQUERADE" || t == "REDIRECT") && !g.chance(5):
		t = g.pick("MARK", "LOG", "ACCEPT", "CONNMARK")
	case g.table != "raw" && (t == "CT" || t == "NOTRACK") && !g.chance(5):
		t = g.pick("NFLOG", "RETURN")
	}
	// NAT targets in the chains they are made for, with a protocol for ports.
	if !g.chance(5) {
		switch t {
		case "DNAT", "REDIRECT":
			g.chain = g.pick("PREROUTING", "OUTPUT")
		case "SNAT":
			g.chain = g.pick("POSTROUTING", "INPUT")
		case "MASQUERADE":
			g.chain = "POSTROUTING"
		}
	}
	if g.chance(12) {
		g.add(g.pick("-g", g.spell("goto")), g.pick(userChain, "ACCEPT", "NOSUCHCHAIN"))
		return
	}
	g.add(g.pick("-j", "-j", "-j", "-j", "-j", "--jump", g.spell("jump")), t)
	switch t {
	case "CONNMARK":
		one := g.pick("set-xmark", "set-mark", "save-mark", "restore-mark", "and-mark", "or-mark", "xor-mark")
		switch one {
		case "save-mark", "restore-mark":
			g.opt(false, g.spell(one))
			g.some(
				func() { g.opt(false, g.spell("ctmask"), g.u32()) },
				func() { g.opt(false, g.spell("nfmask"), g.u32()) },
				func() { g.opt(false, g.spell("mask"), g.u32()) },
			)
		case "set-xmark", "set-mark":
			g.opt(false, g.spell(one), g.markMask())
		default:
			g.opt(false, g.spell(one), g.u32())
		}
		if g.chance(10) {
			g.opt(false, g.spell(g.pick("left-shift-mark", "right-shift-mark")), g.num(0, 32))
		}
	case "CT":
		g.some(
			func() { g.opt(false, g.spell("notrack")) },
			func() { g.opt(false, g.spell("helper"), g.pick("ftp", "nosuch", "")) },
			func() { g.opt(false, g.spell("timeout"), g.pick("pwtimeout", "")) },
			func() {
				g.opt(false, g.spell("ctevents"), g.list(3, "new", "related", "destroy", "reply", "assured", "protoinfo", "helper", "mark", "natseqinfo", "secmark", "bogus"))
			},
			func() { g.opt(false, g.spell("expevents"), g.list(2, "new", "bogus")) },
			func() { g.opt(false, g.spell("zone"), g.pick("0", "1", "65535", "65536", "mark")) },
			func() { g.opt(false, g.spell("zone-orig"), g.pick("0", "7", "mark")) },
			func() { g.opt(false, g.spell("zone-reply"), g.pick("0", "7", "mark")) },
		)
	case "LOG":
		g.some(
			func() {
				g.opt(false, g.spell("log-level"), g.pick("0", "4", "7", "8", "9", "warning", "warn", "debug", "emerg", "panic", "error", "err", "info", "bogus"))
			},
			func() {
				g.opt(false, g.spell("log-prefix"), g.quoted("pw: ", "", "x", strings.Repeat("p", 29), strings.Repeat("p", 30), "a\"b"))
			},
			func() { g.opt(false, g.spell("log-tcp-sequence")) },
			func() { g.opt(false, g.spell("log-tcp-options")) },
			func() { g.opt(false, g.spell("log-ip-options")) },
			func() { g.opt(false, g.spell("log-uid")) },
			func() { g.opt(false, g.spell("log-macdecode")) },
		)
	case "MARK":
		one := g.pick("set-xmark", "set-mark", "and-mark", "or-mark", "xor-mark")
		if one == "set-xmark" || one == "set-mark" {
			g.opt(false, g.spell(one), g.markMask())
		} else {
			g.opt(false, g.spell(one), g.u32())
		}
		if g.chance(10) {
			g.opt(false, g.spell(g.pick("set-xmark", "or-mark")), g.u32())
		}
	case "DNAT", "SNAT":
		name := "to-destination"
		if t == "SNAT" {
			name = "to-source"
		}
		g.some(
			func() { g.opt(false, g.spell(name), g.natRange()) },
			func() { g.opt(false, g.spell("random")) },
			func() { g.opt(false, g.spell("random-fully")) },
			func() { g.opt(false, g.spell("persistent")) },
		)
	case "MASQUERADE", "REDIRECT":
		g.some(
			func() { g.opt(false, g.spell("to-ports"), g.natPorts()) },
			func() { g.opt(false, g.spell("random")) },
			func() { g.opt(false, g.spell("random-fully")) },
		)
	case "NFLOG":
		g.some(
			func() { g.opt(false, g.spell("nflog-group"), g.num(0, 65536)) },
			func() { g.opt(false, g.spell("nflog-range"), g.num(0, 1000)) },
			func() { g.opt(false, g.spell("nflog-size"), g.num(0, 1000)) },
			func() { g.opt(false, g.spell("nflog-threshold"), g.num(0, 1000)) },
			func() {
				g.opt(false, g.spell("nflog-prefix"), g.quoted("pw", "", "a b", strings.Repeat("q", 64), strings.Repeat("q", 63)))
			},
		)
	case "REJECT":
		types := []string{"icmp-net-unreachable", "net-unreach", "icmp-host-unreachable", "host-unreach",
			"icmp-proto-unreachable", "proto-unreach", "icmp-port-unreachable", "port-unreach", "icmp-net-prohibited",
			"net-prohib", "icmp-host-prohibited", "host-prohib", "tcp-reset", "tcp-rst", "icmp-admin-prohibited",
			"admin-prohib", "bogus"}
		if g.fam == netfilter.IPv6 {
			types = []string{"icmp6-no-route", "no-route", "icmp6-adm-prohibited", "adm-prohibited",
				"icmp6-addr-unreachable", "addr-unreach", "icmp6-port-unreachable", "port-unreach", "tcp-reset",
				"icmp6-policy-fail", "policy-fail", "icmp6-reject-route", "reject-route", "icmp-port-unreachable", "bogus"}
		}
		g.some(func() { g.opt(false, g.spell("reject-with"), g.pick(types...)) })
	case "SET":
		flags := func() string { return g.list(3, "src", "dst", "bogus") }
		g.some(
			func() { g.opt(false, g.spell("add-set"), g.pick("pwset", "nosuchset"), flags()) },
			func() { g.opt(false, g.spell("del-set"), g.pick("pwset", "nosuchset"), flags()) },
			func() { g.opt(false, g.spell("map-set"), g.pick("pwset", "nosuchset"), flags()) },
			func() { g.opt(false, g.spell("exist")) },
			func() { g.opt(false, g.spell("timeout"), g.num(0, 100)) },
			func() { g.opt(false, g.spell(g.pick("map-mark", "map-prio", "map-queue"))) },
		)
	}
}

func (g *gramGen) natPorts() string {
	s := g.port()
	if g.chance(2) {
		s += "-" + g.port()
	}
	return s
}

// natRange is [addr[-addr]][:port[-port[/port]]], IPv6 addresses in
// brackets when a port follows.
func (g *gramGen) natRange() string {
	var s string
	if !g.chance(5) {
		a := g.addr()
		if g.chance(3) {
			a += "-" + g.addr()
		}
		s = a
	}
	if g.chance(3) {
		if g.fam == netfilter.IPv6 && s != "" && !g.chance(10) {
			s = "[" + s + "]"
		}
		s += ":" + g.natPorts()
		if g.chance(6) {
			s += "/" + g.port()
		}
	}
	return s
}
