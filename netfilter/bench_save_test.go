package netfilter

import (
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// kubeProxyLikeDump returns an iptables-restore nat table in kube-proxy's
// shape with about nRules rules: per service a KUBE-SERVICES jump, a
// masquerade rule and three endpoints with statistic load balancing, each
// endpoint with a masquerade and a DNAT rule. Modules not registered yet
// are left out of the rules, so the benchmark runs at every stage.
func kubeProxyLikeDump(nRules int) (string, int) {
	has := func(m map[string]*module, n string) bool { _, ok := m[n]; return ok }
	comment := has(matchModules, "comment")
	stat := has(matchModules, "statistic")
	dnat := has(targetModules, "DNAT")
	mark := has(targetModules, "MARK")
	cmt := func(s string) string {
		if comment {
			return fmt.Sprintf(" -m comment --comment %q", s)
		}
		return ""
	}
	var chains, rules strings.Builder
	n := 0
	add := func(format string, a ...any) {
		fmt.Fprintf(&rules, format+"\n", a...)
		n++
	}
	chains.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	chains.WriteString(":KUBE-SERVICES - [0:0]\n:KUBE-MARK-MASQ - [0:0]\n")
	add("-A PREROUTING%s -j KUBE-SERVICES", cmt("kubernetes service portals"))
	if mark {
		add("-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000")
	} else {
		add("-A KUBE-MARK-MASQ -j RETURN")
	}
	for s := 0; n < nRules; s++ {
		svc := fmt.Sprintf("KUBE-SVC-%016X", s)
		vip := fmt.Sprintf("10.%d.%d.%d", 96+s>>16&0x1f, s>>8&0xff, s&0xff)
		name := fmt.Sprintf("ns%d/svc%d:http", s%50, s)
		fmt.Fprintf(&chains, ":%s - [0:0]\n", svc)
		add("-A KUBE-SERVICES -d %s/32 -p tcp%s -m tcp --dport 80 -j %s", vip, cmt(name+" cluster IP"), svc)
		add("-A %s ! -s 10.244.0.0/16 -d %s/32 -p tcp%s -m tcp --dport 80 -j KUBE-MARK-MASQ", svc, vip, cmt(name+" cluster IP"))
		for e, p := range []string{"0.3333333333", "0.5000000000", ""} {
			sep := fmt.Sprintf("KUBE-SEP-%014X%02d", s, e)
			ep := fmt.Sprintf("10.244.%d.%d", s>>6&0xff, (s&0x3f)<<2|e)
			fmt.Fprintf(&chains, ":%s - [0:0]\n", sep)
			lb := ""
			if p != "" && stat {
				lb = " -m statistic --mode random --probability " + p
			}
			add("-A %s%s%s -j %s", svc, cmt(name+" -> "+ep+":8080"), lb, sep)
			add("-A %s -s %s/32%s -j KUBE-MARK-MASQ", sep, ep, cmt(name))
			if dnat {
				add("-A %s -p tcp%s -m tcp -j DNAT --to-destination %s:8080", sep, cmt(name), ep)
			} else {
				add("-A %s -p tcp%s -m tcp -j ACCEPT", sep, cmt(name))
			}
		}
	}
	return chains.String() + rules.String() + "COMMIT\n", n
}

func BenchmarkParseRestore100k(b *testing.B) {
	dump, n := kubeProxyLikeDump(100_000)
	in := []byte(dump)
	b.SetBytes(int64(len(in)))
	perRule(b, n, func() {
		if _, err := ParseRestore(IPv4, in); err != nil {
			b.Fatal(err)
		}
	})
}

func BenchmarkAppendSave100k(b *testing.B) {
	dump, n := kubeProxyLikeDump(100_000)
	rs, err := ParseRestore(IPv4, []byte(dump))
	if err != nil {
		b.Fatal(err)
	}
	buf := rs.AppendSave(nil, SaveOptions{})
	b.SetBytes(int64(len(buf)))
	perRule(b, n, func() { buf = rs.AppendSave(buf[:0], SaveOptions{}) })
}

func BenchmarkAppendList100k(b *testing.B) {
	dump, n := kubeProxyLikeDump(100_000)
	rs, err := ParseRestore(IPv4, []byte(dump))
	if err != nil {
		b.Fatal(err)
	}
	opt := ListOptions{Numeric: true, Verbose: true}
	buf, _ := rs.AppendList(nil, NAT, "", opt)
	perRule(b, n, func() { buf, _ = rs.AppendList(buf[:0], NAT, "", opt) })
}

// perRule runs op b.N times and adds ns/rule and B/rule (bytes allocated),
// the figures that matter for clusters whose size is counted in rules.
func perRule(b *testing.B, rules int, op func()) {
	b.ReportAllocs()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ResetTimer()
	for b.Loop() {
		op()
	}
	b.StopTimer()
	runtime.ReadMemStats(&after)
	ops := float64(b.N) * float64(rules)
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/ops, "ns/rule")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/ops, "B/rule")
}
