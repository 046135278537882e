package netfilter

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// setLinear switches h between the indexed evaluator and the reference
// one that walks every rule.
func setLinear(h *Host, linear bool) {
	for _, p := range h.progs {
		if p == nil {
			continue
		}
		for _, t := range p.tables {
			if t != nil {
				t.linear = linear
			}
		}
	}
}

// dispatchRuns counts the indexed runs of the loaded IPv4 program.
func dispatchRuns(h *Host) int {
	n := 0
	for _, t := range h.progs[famIdx(IPv4)].tables {
		if t == nil {
			continue
		}
		var last *dispatch
		for i := range t.rules {
			if d := t.rules[i].disp; d != nil && d != last {
				n++
				last = d
			}
		}
	}
	return n
}

var indexDsts = []string{"10.96.0.1", "10.96.0.2", "10.96.0.3", "192.168.10.1", "10.96.0.9"}

// indexRule draws one rule, mostly of the indexable kinds, with the
// adversarial variants (other matches, inversions, prefixes, nth and
// random statistic, duplicates through the small pools) mixed in.
func indexRule(t *rapid.T, chains []string, self int) string {
	var b strings.Builder
	dst := rapid.SampledFrom(indexDsts).Draw(t, "dst")
	switch rapid.IntRange(0, 9).Draw(t, "dstKind") {
	case 0:
		fmt.Fprintf(&b, " ! -d %s/32", dst)
	case 1:
		fmt.Fprintf(&b, " -d %s/24", dst)
	case 2:
		// no destination
	default:
		fmt.Fprintf(&b, " -d %s/32", dst)
	}
	if rapid.IntRange(0, 9).Draw(t, "src") == 0 {
		b.WriteString(" -s 192.168.10.0/24")
	}
	proto := rapid.SampledFrom([]string{"", "tcp", "tcp", "udp", "icmp", "!tcp"}).Draw(t, "proto")
	switch proto {
	case "":
	case "!tcp":
		b.WriteString(" ! -p tcp")
	default:
		fmt.Fprintf(&b, " -p %s", proto)
	}
	if rapid.Bool().Draw(t, "comment") {
		fmt.Fprintf(&b, " -m comment --comment \"svc %d\"", rapid.IntRange(0, 3).Draw(t, "c"))
	}
	switch rapid.IntRange(0, 12).Draw(t, "extra") {
	case 0:
		b.WriteString(" -m statistic --mode nth --every 3 --packet 1")
	case 1:
		b.WriteString(" -m statistic --mode random --probability 0.5")
	case 2:
		b.WriteString(" -m mark --mark 0x0")
	}
	if proto == "tcp" || proto == "udp" {
		switch rapid.IntRange(0, 6).Draw(t, "port") {
		case 0:
		case 1:
			fmt.Fprintf(&b, " -m %s ! --dport 80", proto)
		case 2:
			fmt.Fprintf(&b, " -m %s --dport 80:81", proto)
		case 3:
			fmt.Fprintf(&b, " -m %s --sport 40000 --dport 80", proto)
		default:
			fmt.Fprintf(&b, " -m %s --dport %d", proto, rapid.SampledFrom([]int{80, 81, 443}).Draw(t, "dport"))
		}
		if proto == "tcp" && rapid.IntRange(0, 8).Draw(t, "syn") == 0 {
			b.WriteString(" --syn")
		}
	}
	targets := []string{"", "ACCEPT", "DROP", "RETURN"}
	for _, c := range chains[self+1:] {
		targets = append(targets, c, "goto "+c)
	}
	switch tg := rapid.SampledFrom(targets).Draw(t, "target"); {
	case tg == "":
	case strings.HasPrefix(tg, "goto "):
		fmt.Fprintf(&b, " -g %s", tg[5:])
	default:
		fmt.Fprintf(&b, " -j %s", tg)
	}
	return b.String()
}

// indexRuleset draws a filter table: INPUT and user chains, each made of
// a few segments, some of them kube-proxy-like runs of service rules.
func indexRuleset(t *rapid.T) string {
	nUser := rapid.IntRange(0, 3).Draw(t, "chains")
	chains := []string{"INPUT"}
	for i := 0; i < nUser; i++ {
		chains = append(chains, fmt.Sprintf("U%d", i))
	}
	var b strings.Builder
	b.WriteString("*filter\n:INPUT " + rapid.SampledFrom([]string{"ACCEPT", "DROP"}).Draw(t, "policy") + " [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, c := range chains[1:] {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	for i, c := range chains {
		for s := rapid.IntRange(0, 3).Draw(t, "segments"); s > 0; s-- {
			if rapid.Bool().Draw(t, "serviceRun") {
				// A KUBE-SERVICES-like run: -d VIP -p tcp --dport P -j CHAIN,
				// with duplicates from the small pools.
				for n := rapid.IntRange(1, 20).Draw(t, "runLen"); n > 0; n-- {
					if rapid.IntRange(0, 3).Draw(t, "odd") == 0 {
						// An odd one inside the run: another protocol, no
						// port, a stateful match, an inversion...
						fmt.Fprintf(&b, "-A %s%s\n", c, indexRule(t, chains, i))
						continue
					}
					fmt.Fprintf(&b, "-A %s -d %s/32 -p %s -m comment --comment svc -m %[3]s --dport %d", c,
						rapid.SampledFrom(indexDsts).Draw(t, "vip"), rapid.SampledFrom([]string{"tcp", "udp"}).Draw(t, "p"),
						rapid.SampledFrom([]int{80, 81, 443}).Draw(t, "svcPort"))
					if i+1 < len(chains) && rapid.IntRange(0, 3).Draw(t, "svcJump") > 0 {
						fmt.Fprintf(&b, " -j %s\n", rapid.SampledFrom(chains[i+1:]).Draw(t, "svcChain"))
					} else {
						fmt.Fprintf(&b, " -j %s\n", rapid.SampledFrom([]string{"ACCEPT", "DROP", "RETURN"}).Draw(t, "svcVerdict"))
					}
				}
				continue
			}
			for n := rapid.IntRange(0, 12).Draw(t, "rules"); n > 0; n-- {
				fmt.Fprintf(&b, "-A %s%s\n", c, indexRule(t, chains, i))
			}
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

func indexHost(t require.TestingT, rules string, linear bool) *Host {
	h := NewHost(HostConfig{Seed: 7})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.96.0.1/24"), netip.MustParsePrefix("10.96.0.2/24"),
		netip.MustParsePrefix("10.96.0.3/24"), netip.MustParsePrefix("10.96.0.9/24")))
	require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
	setLinear(h, linear)
	h.Tracing = true
	return h
}

// TestIndexedDispatchMatchesLinear is the proof that the dispatch maps do
// not change meaning: on random rulesets and packets the indexed and the
// linear evaluator give the same results, traces, counters and nth state.
func TestIndexedDispatchMatchesLinear(t *testing.T) {
	runs := 0
	rapid.Check(t, func(t *rapid.T) {
		rules := indexRuleset(t)
		fast, ref := indexHost(t, rules, false), indexHost(t, rules, true)
		runs += dispatchRuns(fast)
		for n := rapid.IntRange(1, 30).Draw(t, "packets"); n > 0; n-- {
			p := Packet{
				Proto:   rapid.SampledFrom([]inet.Proto{inet.TCP, inet.TCP, inet.UDP, inet.ICMP}).Draw(t, "pproto"),
				Src:     netip.MustParseAddr(rapid.SampledFrom([]string{"192.168.10.2", "192.168.11.2"}).Draw(t, "psrc")),
				Dst:     netip.MustParseAddr(rapid.SampledFrom(indexDsts[:4]).Draw(t, "pdst")),
				SrcPort: 40000, DstPort: rapid.SampledFrom([]uint16{80, 81, 443, 22}).Draw(t, "pport"),
				TCPFlags: inet.SYN, TTL: 64, Length: 60,
			}
			if p.Proto == inet.ICMP {
				p.SrcPort, p.DstPort, p.TCPFlags = 0, 0, 0
			}
			if rapid.IntRange(0, 9).Draw(t, "frag") == 0 {
				p.FragOffset = 8
			}
			want, got := ref.Receive("eth0", p), fast.Receive("eth0", p)
			require.Equal(t, want, got, "packet %v\nrules:\n%s", p, rules)
		}
		opt := SaveOptions{Counters: true}
		require.Equal(t, string(ref.Ruleset(IPv4).AppendSave(nil, opt)), string(fast.Ruleset(IPv4).AppendSave(nil, opt)))
	})
	assert.Positive(t, runs, "no random ruleset had an indexed run")
}

// TestIndexedDispatchKubeServices pins the dispatch on a KUBE-SERVICES
// shaped chain: the first and the last service are reached, an unknown
// address falls through, and duplicates keep their order.
func TestIndexedDispatchKubeServices(t *testing.T) {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:SVC - [0:0]\n")
	b.WriteString("-A INPUT -j SVC\n-A INPUT -j DROP\n")
	b.WriteString("-A SVC -d 10.96.0.1/32 -p tcp -m tcp --dport 80 -j RETURN\n")
	for i := 0; i < 20; i++ {
		fmt.Fprintf(&b, "-A SVC -d 10.96.1.%d/32 -p tcp -m comment --comment \"svc %d\" -m tcp --dport 80 -j DROP\n", i, i)
	}
	b.WriteString("-A SVC -d 10.96.0.2/32 -p tcp -m tcp --dport 443 -j ACCEPT\n")
	b.WriteString("-A SVC -d 10.96.0.2/32 -p tcp -m tcp --dport 443 -j DROP\n")
	b.WriteString("-A SVC -d 10.96.0.3/32 -j ACCEPT\n")
	b.WriteString("COMMIT\n")
	fast, ref := indexHost(t, b.String(), false), indexHost(t, b.String(), true)
	require.Equal(t, 1, dispatchRuns(fast))
	tests := []struct {
		dst  string
		port uint16
		want Disposition
		rule int
	}{
		{"10.96.0.1", 80, Dropped, 2},    // RETURN, then INPUT's DROP
		{"10.96.0.2", 443, Delivered, 0}, // the first of the duplicates
		{"10.96.0.3", 22, Delivered, 0},  // a rule without a port
		{"10.96.0.9", 80, Dropped, 2},    // no candidate: falls through
	}
	for _, tc := range tests {
		t.Run(tc.dst, func(t *testing.T) {
			p := tcpPacket("192.168.10.2", tc.dst, tc.port, inet.SYN)
			want, got := ref.Receive("eth0", p), fast.Receive("eth0", p)
			assert.Equal(t, tc.want, got.Disposition)
			assert.Equal(t, want, got)
		})
	}
	opt := SaveOptions{Counters: true}
	assert.Equal(t, string(ref.Ruleset(IPv4).AppendSave(nil, opt)), string(fast.Ruleset(IPv4).AppendSave(nil, opt)))
}

// explainRuleset draws a nat table of random cascades: user chains with
// statistic random rules, MARK and CONNMARK before and between the
// branches, nested chains with RETURN, and DNAT endpoints.
func explainRuleset(t *rapid.T) string {
	nChains := rapid.IntRange(1, 4).Draw(t, "chains")
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	for i := 0; i < nChains; i++ {
		fmt.Fprintf(&b, ":C%d - [0:0]\n", i)
	}
	b.WriteString("-A PREROUTING -j C0\n")
	for i := 0; i < nChains; i++ {
		for n := rapid.IntRange(1, 8).Draw(t, "rules"); n > 0; n-- {
			fmt.Fprintf(&b, "-A C%d", i)
			if rapid.IntRange(0, 2).Draw(t, "random") > 0 {
				fmt.Fprintf(&b, " -m statistic --mode random --probability %s",
					rapid.SampledFrom([]string{"0.5", "0.25", "0.3333333333", "0.0000000000", "1.0"}).Draw(t, "prob"))
			}
			if rapid.IntRange(0, 5).Draw(t, "dport") == 0 {
				b.WriteString(" -m comment --comment port81")
			}
			targets := []string{"-j MARK --set-xmark 0x1/0x1", "-j MARK --set-xmark 0x2/0x0", "-j CONNMARK --set-xmark 0x4/0x4",
				"-j RETURN", "-p tcp -j DNAT --to-destination 10.244.1.7:8080", "-p tcp -j DNAT --to-destination 10.244.1.8:8080", ""}
			for j := i + 1; j < nChains; j++ {
				targets = append(targets, fmt.Sprintf("-j C%d", j), fmt.Sprintf("-g C%d", j))
			}
			if tg := rapid.SampledFrom(targets).Draw(t, "target"); tg != "" {
				b.WriteString(" " + tg)
			}
			b.WriteString("\n")
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// TestExplainResumeMatchesReplay proves that resuming Explain's paths at
// their branch points gives the outcomes of replaying every path from the
// start.
func TestExplainResumeMatchesReplay(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		rules := explainRuleset(t)
		fast, ref := testExplainHost(t, rules, false), testExplainHost(t, rules, true)
		p := tcpPacket("192.168.10.2", "10.96.0.10", rapid.SampledFrom([]uint16{80, 81}).Draw(t, "port"), inet.SYN)
		want, werr := ref.Explain("eth0", p)
		got, gerr := fast.Explain("eth0", p)
		require.Equal(t, werr, gerr)
		require.Equal(t, len(want), len(got), "rules:\n%s", rules)
		for i := range want {
			require.Equal(t, want[i].Probability.String(), got[i].Probability.String(), "outcome %d\nrules:\n%s", i, rules)
			require.Equal(t, want[i].Result, got[i].Result, "outcome %d\nrules:\n%s", i, rules)
		}
	})
}

func testExplainHost(t require.TestingT, rules string, reference bool) *Host {
	h := NewHost(HostConfig{Seed: 3})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("10.96.0.0/12"), Iface: "eth1", Gateway: netip.MustParseAddr("10.244.1.5")}))
	require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
	setLinear(h, reference)
	return h
}

// TestIndexedDispatchIPv6 covers /128 destinations.
func TestIndexedDispatchIPv6(t *testing.T) {
	var b strings.Builder
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for i := 1; i <= 10; i++ {
		fmt.Fprintf(&b, "-A OUTPUT -d fd00:10::%x/128 -p tcp -m tcp --dport 80 -j DROP\n", i)
	}
	b.WriteString("COMMIT\n")
	hosts := map[bool]*Host{}
	for _, linear := range []bool{false, true} {
		h := NewHost(HostConfig{})
		require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("fd00:10::1/64")))
		require.NoError(t, h.Restore(IPv6, []byte(b.String()), RestoreOptions{}))
		setLinear(h, linear)
		h.Tracing = true
		hosts[linear] = h
	}
	var last *dispatch
	for _, r := range hosts[false].progs[famIdx(IPv6)].tables[Filter].rules {
		if r.disp != nil {
			last = r.disp
		}
	}
	require.NotNil(t, last, "no indexed run")
	for _, dst := range []string{"fd00:10::7", "fd00:10::99"} {
		p := Packet{Family: IPv6, Proto: inet.TCP, Src: netip.MustParseAddr("fd00:10::1"), Dst: netip.MustParseAddr(dst),
			SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN, TTL: 64, Length: 80}
		want, got := hosts[true].Send(p), hosts[false].Send(p)
		assert.Equal(t, want, got, dst)
	}
	assert.Equal(t, 7, hosts[false].Send(Packet{Family: IPv6, Proto: inet.TCP, Src: netip.MustParseAddr("fd00:10::1"),
		Dst: netip.MustParseAddr("fd00:10::7"), SrcPort: 40001, DstPort: 80, TCPFlags: inet.SYN, TTL: 64, Length: 80}).Where.Rule)
}

// BenchmarkDispatch walks a KUBE-SERVICES-like run of n rules to its last
// rule, with the dispatch maps and with the reference linear walk.
func BenchmarkDispatch(b *testing.B) {
	for _, n := range []int{1000, 100_000} {
		var rules strings.Builder
		rules.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&rules, "-A INPUT -d 10.%d.%d.%d/32 -p tcp -m comment --comment \"ns/svc%d:http cluster IP\" -m tcp --dport 80 -j DROP\n",
				96+i>>16, i>>8&255, i&255, i)
		}
		rules.WriteString("COMMIT\n")
		last := fmt.Sprintf("10.%d.%d.%d", 96+(n-1)>>16, (n-1)>>8&255, (n-1)&255)
		for _, linear := range []bool{false, true} {
			b.Run(fmt.Sprintf("rules=%d/linear=%v", n, linear), func(b *testing.B) {
				h := NewHost(HostConfig{})
				require.NoError(b, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), netip.MustParsePrefix(last+"/8")))
				require.NoError(b, h.Restore(IPv4, []byte(rules.String()), RestoreOptions{}))
				setLinear(h, linear)
				p := tcpPacket("192.168.10.2", last, 80, inet.SYN)
				b.ReportAllocs()
				for b.Loop() {
					if h.Receive("eth0", p).Where.Rule != n {
						b.Fatal("not dropped by the last rule")
					}
				}
			})
		}
	}
}

// BenchmarkExplainResume compares Explain on a 1000-endpoint cascade
// resuming each path at its branch point with the reference replay.
func BenchmarkExplainResume(b *testing.B) {
	rules := kubeServiceRules(1000)
	for _, reference := range []bool{false, true} {
		b.Run(fmt.Sprintf("replay=%v", reference), func(b *testing.B) {
			h := testExplainHost(b, rules, reference)
			p := tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN)
			b.ReportAllocs()
			for b.Loop() {
				if out, err := h.Explain("eth0", p); err != nil || len(out) != 1000 {
					b.Fatal(len(out), err)
				}
			}
		})
	}
}
