package difftest

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/packetwalk/packetwalk/netfilter"
)

// The extension modules of docs/extensions.md, drawn by TestKernelGrammarExt
// (and by TestKernelGrammar with PACKETWALK_GRAMMAR_EXT=1). Their options
// come from the tools' recorded help (testdata/grammar/*-m-NAME.txt,
// *-j-NAME.txt, recorded by record.sh) and the option tables of the
// iptables 1.8.9 sources (libxt_*.c, libipt_*.c, libip6t_*.c), with
// values out of range and combinations the tools or the kernel refuse.
var gExtMatches = []string{"tos", "dscp", "ecn", "ttl", "tcpmss", "esp", "ah", "connbytes", "quota",
	"string", "u32", "hashlimit", "time", "connlimit", "devgroup", "cpu",
	"bpf", "cgroup", "cluster", "connlabel", "dccp", "ipcomp", "osf", "policy", "rateest", "realm",
	"rpfilter", "socket"}

// gExtMatches6 are ip6tables' own: drawn in IPv6 cases, and now and then
// in IPv4 ones, where iptables has no such module.
var gExtMatches6 = []string{"hl", "dst", "hbh", "frag", "rt", "ipv6header", "mh", "srh", "eui64"}

var gExtTargets = []string{"DSCP", "TOS", "TTL", "ECN", "TCPMSS", "CLASSIFY", "AUDIT", "CHECKSUM", "IDLETIMER", "TCPOPTSTRIP",
	"HMARK", "NETMAP", "NFQUEUE", "TEE", "TPROXY", "SYNPROXY", "CONNSECMARK", "RATEEST", "HL", "DNPT", "SNPT"}

// gExtRefused are targets the tools know but the reference kernel refuses
// (no module, or no SELinux): drawn rarely, to compare the refusal.
var gExtRefused = []string{"SECMARK", "LED", "CLUSTERIP", "ULOG"}

// gExtNoPackets are the extensions whose outcome depends on what the lab
// and a Host do not share: clocks and rates, CPUs, the node's conntrack
// table, device groups, the stack's answers to a mangled MSS, sockets,
// cgroups, connection labels, queue listeners.
var gExtNoPackets = []string{"hashlimit", "time", "connlimit", "cpu", "devgroup", "quota", "connbytes", "TCPMSS", "IDLETIMER", "AUDIT",
	"socket", "cgroup", "connlabel", "NFQUEUE", "osf", "rateest", "RATEEST", "SYNPROXY"}

// grammarExt reports whether TestKernelGrammar draws the extensions too.
func grammarExt() bool { return os.Getenv("PACKETWALK_GRAMMAR_EXT") == "1" }

// needProto gives the rule the protocol p (one of ps) unless it has one,
// mostly: the kernel refuses these modules for any other protocol.
func (g *gramGen) needProto(ps ...string) {
	if g.proto == "" && !g.chance(6) {
		p := g.pick(ps...)
		g.opt(false, "-p", p)
		g.proto = p
	}
}

// toChain mostly moves the rule to one of the chains (in one of the
// tables) the module is made for.
func (g *gramGen) toChain(tables []string, chains ...string) {
	if g.chance(6) {
		return
	}
	if len(tables) > 0 && !slices.Contains(tables, g.table) {
		g.table = tables[g.n(len(tables))]
	}
	if g.chain == userChain {
		return
	}
	var ok []string
	for _, c := range chains {
		if slices.Contains(gTables[g.table], c) {
			ok = append(ok, c)
		}
	}
	if len(ok) > 0 && !slices.Contains(ok, g.chain) {
		g.chain = ok[g.n(len(ok))]
	}
}

// u16 is a 16-bit value: decimal or hex, now and then out of range.
func (g *gramGen) u16() string {
	switch g.n(6) {
	case 0:
		return g.pick("0", "65535", "0xffff", "65536", "-1", "x")
	case 1:
		return fmt.Sprintf("%#x", g.n(0x10000))
	}
	return fmt.Sprint(g.n(0x10000))
}

// bpfPrograms are classic BPF programs in nfbpf_compile's "N,op jt jf k,..."
// form: "ip proto 6", accept all, drop all, a length that does not match
// the count, one without a return (the kernel's checker refuses it), 65
// instructions (one over XT_BPF_MAX_NUM_INSTR), and text that is no program.
var bpfPrograms = []string{
	"4,48 0 0 9,21 0 1 6,6 0 0 1,6 0 0 0",
	"1,6 0 0 1", "1,6 0 0 0", "2,6 0 0 1", "1,21 0 1 6", "0,",
	"65," + strings.TrimSuffix(strings.Repeat("6 0 0 1,", 65), ","),
	"bogus", "",
}

func (g *gramGen) extMatch() {
	m := gExtMatches[g.n(len(gExtMatches))]
	if g.fam == netfilter.IPv6 && g.chance(2) || g.chance(40) {
		m = gExtMatches6[g.n(len(gExtMatches6))]
	}
	if (m == "ttl" || m == "realm") && g.fam == netfilter.IPv6 && !g.chance(5) { // IPv4 modules: mostly not in ip6tables
		m = "dscp"
	}
	switch m {
	case "tcpmss", "ecn":
		if g.proto == "" && !g.chance(6) {
			g.opt(true, "-p", "tcp")
			g.proto = "tcp"
		}
	case "esp", "ah":
		if g.proto == "" && !g.chance(6) {
			g.opt(false, "-p", m)
			g.proto = m
		}
	case "dccp":
		g.needProto("dccp", "33")
	case "ipcomp":
		g.needProto("ipcomp", "108")
	case "osf":
		g.needProto("tcp")
	case "mh":
		g.needProto("mh", "ipv6-mh", "135")
	case "rpfilter":
		g.toChain([]string{"raw", "mangle"}, "PREROUTING")
	case "socket":
		g.toChain(nil, "PREROUTING", "INPUT")
	case "cgroup":
		g.toChain(nil, "INPUT", "OUTPUT", "POSTROUTING")
	case "eui64":
		g.toChain(nil, "PREROUTING", "INPUT", "FORWARD")
	}
	g.add("-m", m)
	hexOrDec := func(max int) string {
		v := g.n(max + 2)
		if g.chance(2) {
			return fmt.Sprintf("%#x", v)
		}
		return g.num(0, max+1)
	}
	switch m {
	case "tos":
		g.some(func() {
			g.opt(true, g.spell("tos"), g.pick("0x10", "16", "0x08/0x0f", "Minimize-Delay", "Normal-Service", "0x1ff", "bogus", "0x04/0xff"))
		})
	case "dscp":
		g.some(
			func() { g.opt(true, g.spell("dscp"), hexOrDec(63)) },
			func() { g.opt(true, g.spell("dscp-class"), g.pick("EF", "BE", "AF11", "CS3", "af41", "XX")) },
		)
	case "ecn":
		g.some(
			func() { g.opt(true, g.spell("ecn-tcp-cwr")) },
			func() { g.opt(true, g.spell("ecn-tcp-ece")) },
			func() { g.opt(true, g.spell("ecn-ip-ect"), g.num(0, 4)) },
		)
	case "ttl":
		g.some(
			func() { g.opt(true, g.spell("ttl-eq"), g.num(0, 256)) },
			func() { g.opt(false, g.spell("ttl-lt"), g.num(0, 256)) },
			func() { g.opt(false, g.spell("ttl-gt"), g.num(0, 256)) },
		)
	case "tcpmss":
		g.some(func() { g.opt(true, g.spell("mss"), g.numRange(0, 65536)) })
	case "esp":
		g.some(func() { g.opt(true, g.spell("espspi"), g.numRange(0, 1000)) })
	case "ah":
		g.some(func() { g.opt(true, g.spell("ahspi"), g.numRange(0, 1000)) })
	case "connbytes":
		g.some(
			func() { g.opt(true, g.spell("connbytes"), g.num(0, 100)+g.pick(":", ":"+g.num(0, 1000), "")) },
			func() { g.opt(false, g.spell("connbytes-dir"), g.pick("original", "reply", "both", "bogus")) },
			func() { g.opt(false, g.spell("connbytes-mode"), g.pick("packets", "bytes", "avgpkt", "bogus")) },
		)
	case "quota":
		g.some(func() {
			g.opt(true, g.spell("quota"), g.pick("0", "100", "1000000", "18446744073709551615", "-1", "x"))
		})
	case "string":
		g.some(
			func() {
				g.opt(true, g.spell("string"), g.quoted("GET", "a b", "", strings.Repeat("s", 128), strings.Repeat("s", 129)))
			},
			func() { g.opt(true, g.spell("hex-string"), g.quoted("|47 45 54|", "|4745|", "|zz|", "a|20|b")) },
			func() { g.opt(false, g.spell("algo"), g.pick("bm", "kmp", "bogus")) },
			func() { g.opt(false, g.spell("from"), g.num(0, 100)) },
			func() { g.opt(false, g.spell("to"), g.num(0, 1600)) },
			func() { g.opt(false, g.spell("icase")) },
		)
	case "u32":
		g.some(func() {
			g.opt(true, g.spell("u32"), g.quoted("0>>22&0x3C@12>>26&0x3F=0x10", "6&0xFF=6", "0&0xFFFF=0x100:0xFFFF",
				"6 & 0xFF = 1,6,17", "0>>22&0x3C@4=0x29", "bogus", "4&0x3FFF=0", "1=2=3"))
		})
	case "hashlimit":
		g.some(
			func() {
				g.opt(false, g.spell("hashlimit-upto"), g.pick("1/sec", "10/min", "5/hour", "1/day", "100", "1kb/s", "0/sec", "x"))
			},
			func() { g.opt(false, g.spell("hashlimit-above"), g.pick("1/sec", "10/minute", "2mb/s", "x")) },
			func() { g.opt(false, g.spell("hashlimit-name"), g.quoted("pwh", "", strings.Repeat("h", 40))) },
			func() {
				g.opt(false, g.spell("hashlimit-mode"), g.list(3, "srcip", "dstip", "srcport", "dstport", "bogus"))
			},
			func() { g.opt(false, g.spell("hashlimit-burst"), g.num(0, 20)) },
			func() { g.opt(false, g.spell("hashlimit-srcmask"), g.num(0, 130)) },
			func() { g.opt(false, g.spell("hashlimit-htable-expire"), g.num(0, 100000)) },
		)
	case "time":
		g.some(
			func() { g.opt(false, g.spell("timestart"), g.pick("08:00", "23:59:59", "24:00", "7", "x")) },
			func() { g.opt(false, g.spell("timestop"), g.pick("17:30", "00:00", "12:00:01")) },
			func() { g.opt(true, g.spell("weekdays"), g.list(3, "Mon", "Tue", "Sun", "1", "7", "8", "bogus")) },
			func() { g.opt(true, g.spell("monthdays"), g.list(3, "1", "15", "31", "32", "0")) },
			func() {
				g.opt(false, g.spell("datestart"), g.pick("2020-01-01", "2020-01-01T10:00:00", "2040", "bogus"))
			},
			func() { g.opt(false, g.spell("kerneltz")) },
			func() { g.opt(false, g.spell("contiguous")) },
		)
	case "connlimit":
		g.some(
			func() { g.opt(false, g.spell("connlimit-upto"), g.num(0, 10)) },
			func() { g.opt(false, g.spell("connlimit-above"), g.num(0, 10)) },
			func() { g.opt(false, g.spell("connlimit-mask"), g.num(0, 130)) },
			func() { g.opt(false, g.spell(g.pick("connlimit-saddr", "connlimit-daddr"))) },
		)
	case "devgroup":
		g.some(
			func() { g.opt(true, g.spell("src-group"), g.markMask()) },
			func() { g.opt(true, g.spell("dst-group"), g.markMask()) },
		)
	case "cpu":
		g.some(func() { g.opt(true, g.spell("cpu"), g.num(0, 4)) })
	default:
		g.extMatchMore(m)
	}
}

// extMatchMore draws the options of the modules added in the second round.
func (g *gramGen) extMatchMore(m string) {
	addr := func() string { return g.addr() + g.mask() }
	switch m {
	case "bpf":
		g.some(
			func() { g.opt(false, g.spell("bytecode"), g.quoted(bpfPrograms...)) },
			func() { g.opt(false, g.spell("object-pinned"), g.pick("/sys/fs/bpf/pwnosuch", "")) },
		)
	case "cgroup":
		// Only paths that exist on every machine: the kernel resolves the
		// path in the machine's cgroup2 tree, which a Host does not know
		// (docs/extensions.md).
		g.some(
			func() { g.opt(true, g.spell("path"), "/"); g.cgroupPath = true },
			func() { g.opt(true, g.spell("cgroup"), g.u32()) },
		)
	case "cluster":
		g.some(
			func() { g.opt(false, g.spell("cluster-total-nodes"), g.num(0, 33)) },
			func() { g.opt(true, g.spell("cluster-local-node"), g.num(0, 33)) },
			func() { g.opt(true, g.spell("cluster-local-nodemask"), g.u32()) },
			func() { g.opt(false, g.spell("cluster-hash-seed"), g.u32()) },
		)
	case "connlabel":
		g.some(
			func() { g.opt(true, g.spell("label"), g.pick("0", "1", "127", "128", "pwlabel", "", "-1")) },
			func() { g.opt(false, g.spell("set")) },
		)
	case "dccp":
		types := []string{"REQUEST", "RESPONSE", "DATA", "ACK", "DATAACK", "CLOSEREQ", "CLOSE", "RESET", "SYNC", "SYNCACK", "INVALID", "request", "BOGUS"}
		g.some(append(g.portOpts(),
			func() { g.opt(true, g.spell("dccp-types"), g.list(4, types...)) },
			func() { g.opt(true, g.spell("dccp-option"), g.num(0, 256)) },
		)...)
	case "ipcomp":
		g.some(
			func() { g.opt(true, g.spell("ipcompspi"), g.numRange(0, 1000)) },
			func() { g.opt(false, g.spell("compres")) },
		)
	case "osf":
		g.some(
			func() { g.opt(true, g.spell("genre"), g.quoted("Linux", "Windows", "", strings.Repeat("g", 40))) },
			func() { g.opt(false, g.spell("ttl"), g.num(0, 3)) },
			func() { g.opt(false, g.spell("log"), g.num(0, 3)) },
		)
	case "policy":
		g.some(
			func() { g.opt(false, g.spell("dir"), g.pick("in", "out", "in", "out", "bogus")) },
			func() { g.opt(false, g.spell("pol"), g.pick("none", "ipsec", "none", "bogus")) },
			func() { g.opt(false, g.spell("strict")) },
		)
		for g.chance(2) { // the elements
			g.some(
				func() { g.opt(true, g.spell("reqid"), g.u32()) },
				func() { g.opt(true, g.spell("spi"), g.u32()) },
				func() { g.opt(true, g.spell("proto"), g.pick("ah", "esp", "ipcomp", "tcp", "50", "bogus")) },
				func() { g.opt(true, g.spell("mode"), g.pick("transport", "tunnel", "bogus")) },
				func() { g.opt(true, g.spell("tunnel-src"), addr()) },
				func() { g.opt(true, g.spell("tunnel-dst"), addr()) },
			)
			if g.chance(2) {
				g.opt(false, g.spell("next"))
			}
		}
	case "rateest":
		rate := func() string { return g.pick("0", "100", "10kbit", "1mbit", "1Mbit", "5bps", "x") }
		g.some(
			func() { g.opt(false, g.spell("rateest1"), g.pick("pwrate", "")) },
			func() { g.opt(false, g.spell("rateest2"), g.pick("pwrate2")) },
			func() { g.opt(false, g.spell("rateest-delta")) },
			func() { g.opt(false, g.spell(g.pick("rateest-bps1", "rateest-bps2")), rate()) },
			func() { g.opt(false, g.spell(g.pick("rateest-pps1", "rateest-pps2")), g.num(0, 1000)) },
			func() { g.opt(true, g.spell(g.pick("rateest-lt", "rateest-gt", "rateest-eq"))) },
		)
	case "realm":
		g.some(func() {
			v := g.pick("0", "1", "0x10", "255", "4294967295", "cosmos", "nosuchrealm", "1/0xff", "0x100/0xff00", "x")
			g.opt(true, g.spell("realm"), v)
		})
	case "rpfilter":
		g.some(
			func() { g.opt(false, g.spell("loose")) },
			func() { g.opt(false, g.spell("validmark")) },
			func() { g.opt(false, g.spell("accept-local")) },
			func() { g.opt(false, g.spell("invert")) },
		)
	case "socket":
		g.some(
			func() { g.opt(false, g.spell("nowildcard")) },
			func() { g.opt(false, g.spell("transparent")) },
			func() { g.opt(false, g.spell("restore-skmark")) },
		)
	case "hl":
		g.some(
			func() { g.opt(true, g.spell("hl-eq"), g.num(0, 256)) },
			func() { g.opt(false, g.spell("hl-lt"), g.num(0, 256)) },
			func() { g.opt(false, g.spell("hl-gt"), g.num(0, 256)) },
		)
	case "dst", "hbh":
		opts := func() string {
			k := 1 + g.n(3)
			if g.chance(10) {
				k = 16 + g.n(2) // the list holds 16
			}
			var xs []string
			for range k {
				x := g.pick("0", "1", "5", "194", "201", "255", "256", "x")
				if g.chance(2) {
					x += ":" + g.pick("0", "2", "4", "255", "256")
				}
				xs = append(xs, x)
			}
			return strings.Join(xs, ",")
		}
		g.some(
			func() { g.opt(true, g.spell(m+"-len"), g.num(0, 256)) },
			func() { g.opt(false, g.spell(m+"-opts"), opts()) },
		)
	case "frag":
		g.some(
			func() { g.opt(true, g.spell("fragid"), g.numRange(0, 100000)) },
			func() { g.opt(true, g.spell("fraglen"), g.num(0, 256)) },
			func() { g.opt(false, g.spell("fragres")) },
			func() { g.opt(false, g.spell("fragfirst")) },
			func() { g.opt(false, g.spell(g.pick("fragmore", "fraglast"))) },
		)
	case "rt":
		addrs := func() string {
			k := 1 + g.n(3)
			if g.chance(10) {
				k = 16 + g.n(2)
			}
			var xs []string
			for range k {
				xs = append(xs, g.v6())
			}
			return strings.Join(xs, ",")
		}
		g.some(
			func() { g.opt(true, g.spell("rt-type"), g.pick("0", "2", "4", "255", "256", "x")) },
			func() { g.opt(true, g.spell("rt-segsleft"), g.numRange(0, 300)) },
			func() { g.opt(true, g.spell("rt-len"), g.num(0, 256)) },
			func() { g.opt(false, g.spell("rt-0-res")) },
			func() { g.opt(false, g.spell("rt-0-addrs"), addrs()) },
			func() { g.opt(false, g.spell("rt-0-not-strict")) },
		)
	case "ipv6header":
		g.some(
			func() {
				g.opt(true, g.spell("header"), g.list(3, "hop", "dst", "route", "frag", "auth", "esp", "none", "prot",
					"hop-by-hop", "ipv6-opts", "ipv6-route", "ipv6-frag", "ah", "ipv6-nonxt", "protocol", "0", "60", "43", "44",
					"51", "50", "59", "6", "bogus"))
			},
			func() { g.opt(false, g.spell("soft")) },
		)
	case "mh":
		types := []string{"binding-refresh-request", "brr", "home-test-init", "hoti", "careof-test-init", "coti",
			"home-test", "hot", "careof-test", "cot", "binding-update", "bu", "binding-acknowledgement", "ba",
			"binding-error", "be", "0", "7", "255", "256", "bogus"}
		g.some(func() {
			t := g.pick(types...)
			if g.chance(3) {
				t += ":" + g.pick(types...)
			}
			g.opt(true, g.spell("mh-type"), t)
		})
	case "srh":
		num := func() string { return g.num(0, 256) }
		g.some(
			func() { g.opt(true, g.spell("srh-next-hdr"), num()) },
			func() { g.opt(true, g.spell(g.pick("srh-hdr-len-eq", "srh-hdr-len-gt", "srh-hdr-len-lt")), num()) },
			func() {
				g.opt(true, g.spell(g.pick("srh-segs-left-eq", "srh-segs-left-gt", "srh-segs-left-lt")), num())
			},
			func() {
				g.opt(true, g.spell(g.pick("srh-last-entry-eq", "srh-last-entry-gt", "srh-last-entry-lt")), num())
			},
			func() { g.opt(true, g.spell("srh-tag"), g.u16()) },
			func() { g.opt(true, g.spell(g.pick("srh-psid", "srh-nsid", "srh-lsid")), addr()) },
		)
	case "eui64":
		if g.chance(10) {
			g.opt(false, g.spell("eui64"))
		}
	}
}

func (g *gramGen) extTarget() {
	t := gExtTargets[g.n(len(gExtTargets))]
	if g.chance(30) {
		t = gExtRefused[g.n(len(gExtRefused))]
	}
	switch {
	case (t == "TTL" || t == "ECN" || t == "CLUSTERIP" || t == "ULOG") && g.fam == netfilter.IPv6 && !g.chance(5):
		t = "DSCP"
	case (t == "HL" || t == "DNPT" || t == "SNPT") && g.fam == netfilter.IPv4 && !g.chance(5):
		t = "TOS"
	}
	// Mostly the table and chains the target is made for.
	switch t {
	case "NETMAP":
		g.toChain([]string{"nat"}, "PREROUTING", "OUTPUT", "POSTROUTING", "INPUT")
	case "NFQUEUE", "SYNPROXY", "LED", "CLUSTERIP", "ULOG":
		if t == "SYNPROXY" {
			g.toChain([]string{"filter"}, "INPUT", "FORWARD")
		}
	case "TPROXY":
		g.toChain([]string{"mangle"}, "PREROUTING")
	case "DNPT":
		g.toChain([]string{"mangle"}, "PREROUTING", "OUTPUT")
	case "SNPT":
		g.toChain([]string{"mangle"}, "POSTROUTING", "INPUT")
	default:
		if g.table != "mangle" && !g.chance(5) {
			g.table = "mangle"
			chains := gTables["mangle"]
			if g.chain != userChain {
				g.chain = chains[g.n(len(chains))]
			}
		}
	}
	switch t {
	case "TCPMSS", "ECN", "TCPOPTSTRIP", "SYNPROXY":
		if g.proto == "" && !g.chance(6) {
			g.opt(false, "-p", "tcp")
			g.proto = "tcp"
		}
	case "TPROXY":
		g.needProto("tcp", "udp")
	}
	g.add("-j", t)
	switch t {
	case "DSCP":
		if g.chance(2) {
			g.opt(false, g.spell("set-dscp"), g.pick("0", "10", "0x2e", "63", "64", "x"))
		} else {
			g.opt(false, g.spell("set-dscp-class"), g.pick("EF", "BE", "AF41", "cs1", "XX"))
		}
	case "TOS":
		switch g.n(4) {
		case 0:
			g.opt(false, g.spell("set-tos"), g.pick("0x10", "0x08/0x0f", "Minimize-Cost", "0x100", "x"))
		case 1:
			g.opt(false, g.spell("and-tos"), g.pick("0x0f", "255", "256"))
		case 2:
			g.opt(false, g.spell("or-tos"), g.pick("0x10", "1"))
		default:
			g.opt(false, g.spell("xor-tos"), g.pick("0x04", "0"))
		}
	case "TTL":
		g.opt(false, g.spell(g.pick("ttl-set", "ttl-dec", "ttl-inc")), g.num(0, 257))
	case "ECN":
		g.some(func() { g.opt(false, g.spell("ecn-tcp-remove")) })
	case "TCPMSS":
		if g.chance(2) {
			g.opt(false, g.spell("set-mss"), g.pick("1400", "536", "0", "65535", "65536"))
		} else {
			g.opt(false, g.spell("clamp-mss-to-pmtu"))
		}
	case "CLASSIFY":
		g.opt(false, g.spell("set-class"), g.pick("1:10", "ffff:ffff", "10000:1", "1", "x:y"))
	case "AUDIT":
		g.opt(false, g.spell("type"), g.pick("accept", "drop", "reject", "bogus"))
	case "CHECKSUM":
		g.some(func() { g.opt(false, g.spell("checksum-fill")) })
	case "IDLETIMER":
		g.some(
			func() { g.opt(false, g.spell("timeout"), g.num(0, 100)) },
			func() { g.opt(false, g.spell("label"), g.quoted("pwidle", "", strings.Repeat("l", 30))) },
			func() { g.opt(false, g.spell("alarm")) },
		)
	case "TCPOPTSTRIP":
		g.some(func() {
			g.opt(false, g.spell("strip-options"), g.list(3, "wscale", "mss", "sack-permitted", "sack", "timestamp", "md5", "8", "300", "bogus"))
		})
	default:
		g.extTargetMore(t)
	}
}

// extTargetMore draws the options of the targets added in the second round.
func (g *gramGen) extTargetMore(t string) {
	prefix := func() string {
		if g.fam == netfilter.IPv6 {
			return g.v6() + g.pick("/64", "/48", "/0", "/128", "/129", "/ffff:ffff::", "")
		}
		return g.v4() + g.pick("/24", "/16", "/32", "/0", "/33", "/255.255.0.0", "")
	}
	switch t {
	case "HMARK":
		max := 32
		if g.fam == netfilter.IPv6 {
			max = 128
		}
		g.some(
			func() {
				g.opt(false, g.spell("hmark-tuple"), g.list(4, "src", "dst", "sport", "dport", "spi", "proto", "ct", "s", "SRC", "bogus"))
			},
			func() { g.opt(false, g.spell("hmark-mod"), g.pick("1", "10", "0", "4294967295", "4294967296", "x")) },
			func() { g.opt(false, g.spell("hmark-rnd"), g.u32()) },
			func() { g.opt(false, g.spell("hmark-offset"), g.u32()) },
		)
		g.some(
			func() { g.opt(false, g.spell("hmark-src-prefix"), g.num(0, max+1)) },
			func() { g.opt(false, g.spell("hmark-dst-prefix"), g.num(0, max+1)) },
			func() {
				g.opt(false, g.spell(g.pick("hmark-sport-mask", "hmark-dport-mask", "hmark-sport", "hmark-dport")), g.u16())
			},
			func() { g.opt(false, g.spell(g.pick("hmark-spi-mask", "hmark-spi")), g.u32()) },
			func() {
				g.opt(false, g.spell("hmark-proto-mask"), g.pick("0", "0xff", "255", "256", "0xffff", "65536"))
			},
		)
	case "NETMAP":
		g.some(func() { g.opt(false, g.spell("to"), prefix()) })
	case "NFQUEUE":
		g.some(
			func() { g.opt(false, g.spell("queue-num"), g.pick("0", "1", "65535", "65536", "-1", "x")) },
			func() {
				g.opt(false, g.spell("queue-balance"), g.pick("0:3", "1:1", "3:1", "0:65535", "0:65536", "5", "a:b"))
			},
			func() { g.opt(false, g.spell("queue-bypass")) },
			func() { g.opt(false, g.spell("queue-cpu-fanout")) },
		)
	case "TEE":
		g.some(
			func() { g.opt(false, g.spell("gateway"), g.addr()) },
			func() { g.opt(false, g.spell("oif"), g.iface()) },
		)
	case "TPROXY":
		g.some(
			func() { g.opt(false, g.spell("on-port"), g.port()) },
			func() { g.opt(false, g.spell("on-ip"), g.addr()) },
			func() { g.opt(false, g.spell("tproxy-mark"), g.markMask()) },
		)
	case "SYNPROXY":
		g.some(
			func() { g.opt(false, g.spell("sack-perm")) },
			func() { g.opt(false, g.spell("timestamp")) },
			func() { g.opt(false, g.spell("wscale"), g.num(0, 15)) },
			func() { g.opt(false, g.spell("mss"), g.pick("1460", "536", "0", "65535", "65536")) },
			func() { g.opt(false, g.spell("ecn")) },
		)
	case "CONNSECMARK":
		g.some(
			func() { g.opt(false, g.spell("save")) },
			func() { g.opt(false, g.spell("restore")) },
		)
	case "RATEEST":
		g.some(
			func() { g.opt(false, g.spell("rateest-name"), g.quoted("pwrate", "", strings.Repeat("r", 20))) },
			func() {
				g.opt(false, g.spell("rateest-interval"), g.pick("250ms", "1s", "0.5s", "8s", "16s", "100us", "1", "x"))
			},
			func() { g.opt(false, g.spell("rateest-ewmalog"), g.pick("1s", "4s", "500ms", "x")) },
		)
	case "HL":
		g.opt(false, g.spell(g.pick("hl-set", "hl-dec", "hl-inc")), g.num(0, 257))
	case "DNPT", "SNPT":
		g.some(
			func() { g.opt(false, g.spell("src-pfx"), prefix()) },
			func() { g.opt(false, g.spell("dst-pfx"), prefix()) },
		)
	case "SECMARK":
		g.some(func() { g.opt(false, g.spell("selctx"), g.quoted("system_u:object_r:ssh_packet_t:s0", "")) })
	case "LED":
		g.some(
			func() { g.opt(false, g.spell("led-trigger-id"), g.quoted("pwled", "")) },
			func() { g.opt(false, g.spell("led-delay"), g.pick("100", "inf", "x")) },
			func() { g.opt(false, g.spell("led-always-blink")) },
		)
	case "CLUSTERIP":
		g.some(
			func() { g.opt(false, g.spell("new")) },
			func() { g.opt(false, g.spell("hashmode"), g.pick("sourceip", "sourceip-sourceport", "bogus")) },
			func() { g.opt(false, g.spell("clustermac"), g.pick("01:00:5e:00:00:20", "00:11:22:33:44:55")) },
			func() { g.opt(false, g.spell("total-nodes"), g.num(0, 4)) },
			func() { g.opt(false, g.spell("local-node"), g.num(0, 4)) },
		)
	case "ULOG":
		g.some(func() { g.opt(false, g.spell("ulog-nlgroup"), g.num(0, 33)) })
	}
}
