package difftest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/ipset"
	"github.com/packetwalk/packetwalk/netfilter"
	"pgregory.net/rapid"
)

// setCase is a set differential case: ipsets, a ruleset using them and
// packets.
type setCase struct {
	Sets    string // ipset restore input
	Rules   string
	Packets []genPacket
	// Family is the family of Rules and Packets; zero means IPv4.
	Family netfilter.Family
	// Later are packets sent after both worlds waited Wait (entry
	// timeouts expire in between).
	Later []genPacket
	Wait  time.Duration
}

func (c setCase) String() string {
	s := "ipsets:\n" + c.Sets + genCase{Rules: c.Rules, Packets: c.Packets}.String()
	if len(c.Later) > 0 {
		s += fmt.Sprintf("after %v:\n%s", c.Wait, genCase{Packets: c.Later}.String())
	}
	return s
}

func (c setCase) family() netfilter.Family {
	if c.Family == 0 {
		return netfilter.IPv4
	}
	return c.Family
}

// genSet is one drawn set: its name, type and dimension count.
type genSet struct {
	name, typ string
	dims      int
	timeout   bool
}

var (
	setAddrs    = []string{"192.168.10.1", "192.168.10.2", "192.168.10.3", "10.244.1.1", "10.244.1.5", "10.244.1.6"}
	setNets     = []string{"192.168.10.0/24", "192.168.10.2/32", "192.168.10.0/30", "10.244.1.0/24", "10.244.1.5/32", "10.244.1.4/30", "10.244.0.0/16", "10.0.0.0/8", "192.168.0.0/16", "10.244.1.0/28", "192.168.10.1/32"}
	setPorts    = []string{"tcp:22", "tcp:80", "tcp:443", "udp:53", "tcp:8080", "udp:30000", "tcp:40000", "udp:40001", "icmp:echo-request", "icmp:echo-reply"}
	setTypes    = []string{"hash:ip", "hash:net", "hash:net", "hash:ip,port", "hash:net,port", "hash:ip,port,ip", "bitmap:port"}
	bitmapPorts = []string{"22", "53", "80", "443", "8080", "30000", "40000", "40001"}
)

// genSets draws 1-3 sets with members around the lab's addresses.
func genSets(t *rapid.T) (string, []genSet) {
	var b strings.Builder
	var out []genSet
	n := rapid.IntRange(1, 3).Draw(t, "nsets")
	for i := range n {
		s := genSet{name: fmt.Sprintf("S%d", i+1), typ: rapid.SampledFrom(setTypes).Draw(t, "settype")}
		s.dims = strings.Count(s.typ, ",") + 1
		opts := ""
		if s.typ == "bitmap:port" {
			opts = " range 0-65535"
		}
		if rapid.IntRange(0, 3).Draw(t, "counters") > 0 {
			opts += " counters"
		}
		if rapid.IntRange(0, 4).Draw(t, "timeout") == 0 {
			s.timeout = true
			opts += " timeout 600"
		}
		fmt.Fprintf(&b, "create %s %s%s\n", s.name, s.typ, opts)
		seen := map[string]bool{}
		for range rapid.IntRange(0, 6).Draw(t, "nmembers") {
			m := genMember(t, s.typ, false)
			if seen[m] {
				continue
			}
			seen[m] = true
			if strings.Contains(s.typ, "net") && rapid.IntRange(0, 2).Draw(t, "nomatch") == 0 {
				m += " nomatch"
			}
			if s.timeout && rapid.IntRange(0, 3).Draw(t, "elem-timeout") == 0 {
				m += " timeout " + rapid.SampledFrom([]string{"0", "300"}).Draw(t, "etmo")
			}
			fmt.Fprintf(&b, "add %s %s\n", s.name, m)
		}
		out = append(out, s)
	}
	return b.String(), out
}

var setChains = []struct{ table, chain string }{
	{"mangle", "PREROUTING"}, {"filter", "INPUT"}, {"filter", "FORWARD"}, {"filter", "OUTPUT"},
}

// genSetRules draws rules using -m set and -j SET in mangle PREROUTING and
// filter INPUT/FORWARD/OUTPUT.
func genSetRules(t *rapid.T, sets []genSet) string {
	byTable := map[string][]string{}
	for _, sc := range setChains {
		for range rapid.IntRange(0, 4).Draw(t, "nrules-"+sc.chain) {
			byTable[sc.table] = append(byTable[sc.table], genSetRule(t, sc.chain, sets))
		}
	}
	var b strings.Builder
	for _, tb := range []string{"mangle", "filter"} {
		fmt.Fprintf(&b, "*%s\n", tb)
		for _, ts := range tableSpecs {
			if ts.name != tb {
				continue
			}
			for _, ch := range ts.builtins {
				pol := "ACCEPT"
				if tb == "filter" && ch != "OUTPUT" && rapid.IntRange(0, 3).Draw(t, "pol") == 0 {
					pol = "DROP"
				}
				fmt.Fprintf(&b, ":%s %s [0:0]\n", ch, pol)
			}
		}
		for _, r := range byTable[tb] {
			b.WriteString(r + "\n")
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

func flags(t *rapid.T, n int, label string) string {
	// Sometimes one flag fewer (the set never matches) or one more.
	n = max(1, n+rapid.SampledFrom([]int{0, 0, 0, 0, -1, 1}).Draw(t, label+"-n"))
	f := make([]string, n)
	for i := range f {
		f[i] = rapid.SampledFrom([]string{"src", "dst"}).Draw(t, label)
	}
	return strings.Join(f, ",")
}

func genSetRule(t *rapid.T, chain string, sets []genSet) string {
	parts := []string{"-A", chain}
	if p := rapid.SampledFrom([]string{"", "", "tcp", "udp"}).Draw(t, "sproto"); p != "" {
		parts = append(parts, "-p", p)
	}
	nm := rapid.IntRange(0, 2).Draw(t, "nsetmatch")
	for range nm {
		s := rapid.SampledFrom(sets).Draw(t, "mset")
		parts = append(parts, "-m", "set", not(t, "set-not")+"--match-set", s.name, flags(t, s.dims, "mflags"))
		if rapid.IntRange(0, 3).Draw(t, "ret-nomatch") == 0 {
			parts = append(parts, "--return-nomatch")
		}
		if rapid.IntRange(0, 3).Draw(t, "no-update") == 0 {
			parts = append(parts, "!", "--update-counters")
		}
		if rapid.IntRange(0, 2).Draw(t, "pcmp") == 0 {
			op := rapid.SampledFrom([]string{"--packets-eq", "! --packets-eq", "--packets-lt", "--packets-gt"}).Draw(t, "pop")
			parts = append(parts, op, fmt.Sprint(rapid.IntRange(0, 3).Draw(t, "pval")))
		}
		if rapid.IntRange(0, 4).Draw(t, "bcmp") == 0 {
			op := rapid.SampledFrom([]string{"--bytes-eq", "! --bytes-eq", "--bytes-lt", "--bytes-gt"}).Draw(t, "bop")
			parts = append(parts, op, fmt.Sprint(rapid.SampledFrom([]int{0, 40, 60, 100, 200}).Draw(t, "bval")))
		}
	}
	switch rapid.SampledFrom([]string{"ACCEPT", "DROP", "NONE", "SET", "SET"}).Draw(t, "starget") {
	case "ACCEPT":
		parts = append(parts, "-j", "ACCEPT")
	case "DROP":
		if chain == "OUTPUT" { // keep the node's answers flowing
			parts = append(parts, "-j", "ACCEPT")
		} else {
			parts = append(parts, "-j", "DROP")
		}
	case "SET":
		parts = append(parts, "-j", "SET")
		add := rapid.Bool().Draw(t, "add")
		if add || rapid.Bool().Draw(t, "both") {
			s := rapid.SampledFrom(sets).Draw(t, "aset")
			parts = append(parts, "--add-set", s.name, flags(t, s.dims, "aflags"))
			if rapid.Bool().Draw(t, "exist") {
				parts = append(parts, "--exist")
			}
			if s.timeout && rapid.Bool().Draw(t, "ttimeout") {
				parts = append(parts, "--timeout", rapid.SampledFrom([]string{"0", "100"}).Draw(t, "tval"))
			}
		}
		if !add {
			s := rapid.SampledFrom(sets).Draw(t, "dset")
			parts = append(parts, "--del-set", s.name, flags(t, s.dims, "dflags"))
		}
	}
	return strings.Join(parts, " ")
}

var setCaseGen = rapid.Custom(func(t *rapid.T) setCase {
	text, sets := genSets(t)
	return setCase{Sets: text, Rules: genSetRules(t, sets), Packets: genPackets(t)}
})

// loadSetCase builds the simulated node with c's sets and rules.
func loadSetCase(c setCase) (*netfilter.Host, error, error) {
	h := newSimHost()
	if err := h.Sets().Restore([]byte(c.Sets), ipset.RestoreOptions{}); err != nil {
		return h, err, nil
	}
	return h, nil, h.Restore(c.family(), []byte(c.Rules), netfilter.RestoreOptions{})
}

// TestGeneratedSetCasesLoad keeps the set generator within what packetwalk
// models.
func TestGeneratedSetCasesLoad(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := setCaseGen.Draw(t, "case")
		h, setErr, err := loadSetCase(c)
		if setErr != nil {
			t.Fatalf("sets: %v\n%s", setErr, c)
		}
		if err != nil {
			t.Fatalf("%v\n%s", err, c)
		}
		for _, p := range c.Packets {
			if _, err := kerneltest.BuildPacket(p.frameSpec()); err != nil {
				t.Fatalf("%v\n%s", err, c)
			}
			simRun(h, p)
		}
	})
}
