package difftest

import (
	"fmt"
	"os"
	"strings"

	"github.com/packetwalk/packetwalk/netfilter"
)

// The extension modules of docs/extensions.md, drawn only when
// PACKETWALK_GRAMMAR_EXT=1: their grammar (testdata/grammar/*-m-NAME.txt,
// *-j-NAME.txt, recorded by record.sh) is newer in the differential, and
// keeping them out of the default draw leaves the default seed's cases
// (and CI) as they were.
var gExtMatches = []string{"tos", "dscp", "ecn", "ttl", "tcpmss", "esp", "ah", "connbytes", "quota",
	"string", "u32", "hashlimit", "time", "connlimit", "devgroup", "cpu"}

var gExtTargets = []string{"DSCP", "TOS", "TTL", "ECN", "TCPMSS", "CLASSIFY", "AUDIT", "CHECKSUM", "IDLETIMER", "TCPOPTSTRIP"}

// gExtNoPackets are the extensions whose outcome depends on what the lab
// and a Host do not share: clocks and rates, CPUs, the node's conntrack
// table, device groups, the stack's answers to a mangled MSS.
var gExtNoPackets = []string{"hashlimit", "time", "connlimit", "cpu", "devgroup", "quota", "connbytes", "TCPMSS", "IDLETIMER", "AUDIT"}

func grammarExt() bool { return os.Getenv("PACKETWALK_GRAMMAR_EXT") == "1" }

func (g *gramGen) extMatch() {
	m := gExtMatches[g.n(len(gExtMatches))]
	if m == "ttl" && g.fam == netfilter.IPv6 && !g.chance(5) { // an IPv4 module: mostly not in ip6tables
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
	}
}

func (g *gramGen) extTarget() {
	t := gExtTargets[g.n(len(gExtTargets))]
	if (t == "TTL" || t == "ECN") && g.fam == netfilter.IPv6 && !g.chance(5) {
		t = "DSCP"
	}
	if g.table != "mangle" && !g.chance(5) {
		g.table = "mangle"
		chains := gTables["mangle"]
		if g.chain != userChain {
			g.chain = chains[g.n(len(chains))]
		}
	}
	switch t {
	case "TCPMSS", "ECN", "TCPOPTSTRIP":
		if g.proto == "" && !g.chance(6) {
			g.opt(false, "-p", "tcp")
			g.proto = "tcp"
		}
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
	}
}
