package difftest

import (
	"errors"
	"fmt"
	"net/netip"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
	"pgregory.net/rapid"
)

// grammarSeed is the seed of a grammar run: PACKETWALK_GRAMMAR_SEED (a
// number, or "random" for the clock, to hunt for new cases), else a fixed
// seed, so that a CI run fails only on a regression; the test prints it.
func grammarSeed(t testing.TB) uint64 {
	s := os.Getenv("PACKETWALK_GRAMMAR_SEED")
	if s == "random" {
		return uint64(time.Now().UnixNano())
	}
	if s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("PACKETWALK_GRAMMAR_SEED=%q: %v", s, err)
		}
		return v
	}
	return 42
}

// grammarIndexes are the case numbers to run: PACKETWALK_GRAMMAR_CASE=i
// replays one case of the seed, otherwise 0..n-1.
func grammarIndexes(t testing.TB, n int) []int {
	if s := os.Getenv("PACKETWALK_GRAMMAR_CASE"); s != "" {
		i, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("PACKETWALK_GRAMMAR_CASE=%q: %v", s, err)
		}
		return []int{i}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return idx
}

// replayHint says how to run case i of seed again, drawn with or without
// the extension modules.
func replayHint(seed uint64, i int, ext bool) string {
	test := "TestKernelGrammar$|TestGrammarCasesParse/base"
	if ext {
		test = "TestKernelGrammarExt|TestGrammarCasesParse/ext"
	}
	return fmt.Sprintf("replay: PACKETWALK_KERNEL=1 PACKETWALK_GRAMMAR_SEED=%d PACKETWALK_GRAMMAR_CASE=%d go test -run '%s' ./internal/harness/difftest/", seed, i, test)
}

// The objects generated rules may name: an accounting object and an ipset
// that exist on both sides (the generator also names ones that do not).
const (
	gNFAcct = "pwacct"
	gIPSet  = "pwset"
)

// grammarHost is a simulated node with the objects generated rules name,
// as the namespaces of the kernel comparison have them.
func grammarHost() *netfilter.Host {
	h := newSimHost()
	mustNoErr(h.AddNFAcct(gNFAcct))
	mustNoErr(h.Sets().Create(gIPSet, "hash:ip", false))
	return h
}

// grammarNSSetup creates those objects in a namespace.
func grammarNSSetup(ns *kerneltest.NS) error {
	if _, _, err := ns.Exec("", "nfacct", "add", gNFAcct); err != nil {
		return err
	}
	_, err := ns.IPSet("create", gIPSet, "hash:ip")
	return err
}

// The packet comparison's node has a second address on eth0 and an
// interface without addresses, besides the lab's usual ones, so that
// rules meet a multi-address interface and an address-less one.
var (
	gSecondAddr = netip.MustParsePrefix("192.168.10.3/24")
	// a veth pair with both ends in the node (no dummy driver here)
	gNoAddrLink, gNoAddrPeer = "pwv0", "pwv1"
)

// grammarLabSetup gives the lab's node what grammarPacketHost models.
func grammarLabSetup(lab *kerneltest.Lab) error {
	for _, args := range [][]string{
		{"ip", "addr", "add", gSecondAddr.String(), "dev", "eth0"},
		{"ip", "link", "add", gNoAddrLink, "type", "veth", "peer", "name", gNoAddrPeer},
		{"ip", "link", "set", gNoAddrLink, "up"},
		{"ip", "link", "set", gNoAddrPeer, "up"},
	} {
		if _, _, err := lab.Node().Exec("", args...); err != nil {
			return err
		}
	}
	return grammarNSSetup(lab.Node())
}

// grammarPacketHost is the simulated node of grammarLabSetup's lab.
func grammarPacketHost() *netfilter.Host {
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1, NoRouteLocalnet: true})
	mustNoErr(h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), gSecondAddr, netip.MustParsePrefix("fd00:10::1/64")))
	mustNoErr(h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24"), netip.MustParsePrefix("fd00:244::1/64")))
	mustNoErr(h.AddInterface(gNoAddrLink))
	mustNoErr(h.AddInterface(gNoAddrPeer))
	mustNoErr(h.AddNFAcct(gNFAcct))
	mustNoErr(h.Sets().Create(gIPSet, "hash:ip", false))
	return h
}

// parseCase loads one case into a fresh simulated host, as a node's
// iptables-restore would (objects named by rules must exist), turning a
// panic into an error that says so.
func parseCase(fam netfilter.Family, text string) (rs *netfilter.Ruleset, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("PANIC: %v", r)
			rs = nil
		}
	}()
	h := grammarHost()
	if err := h.Restore(fam, []byte(text), netfilter.RestoreOptions{}); err != nil {
		return nil, err
	}
	return h.Ruleset(fam), nil
}

// TestGrammarCasesParse needs no kernel: every generated case, drawn
// without (base) and with (ext) the extension modules, is accepted or
// refused without a panic, a refusal names the line, and what is accepted
// prints a save that parses back to the same save, -S and -L.
func TestGrammarCasesParse(t *testing.T) {
	for _, ext := range []bool{false, true} {
		name := "base"
		if ext {
			name = "ext"
		}
		t.Run(name, func(t *testing.T) { grammarCasesParse(t, ext) })
	}
}

func grammarCasesParse(t *testing.T, ext bool) {
	seed := grammarSeed(t)
	t.Logf("seed %d", seed)
	accepted := 0
	idx := grammarIndexes(t, envInt("PACKETWALK_GRAMMAR_PARSE_CASES", 3000))
	for _, i := range idx {
		c := grammarCase(seed, i, ext)
		text, _ := restoreText([]gCase{c})
		rs, err := parseCase(c.Fam, text)
		if err != nil {
			if strings.HasPrefix(err.Error(), "PANIC") {
				t.Fatalf("%v\n%s\n%s", err, c, replayHint(seed, i, ext))
			}
			continue
		}
		accepted++
		save := rs.AppendSave(nil, netfilter.SaveOptions{Counters: true})
		rs2, err := parseCase(c.Fam, string(save))
		if err != nil && strings.Contains(err.Error(), "with a base port") {
			// Not a fixed point in iptables either: for an icmp rule
			// iptables-save prints a NAT base port as "/0", which
			// iptables-restore refuses (docs/kernel-notes.md).
			continue
		}
		if err != nil && (strings.Contains(string(save), "--monthdays  ") || strings.Contains(string(save), "--weekdays  ")) {
			// Nor for "-m time --monthdays 0" or "--weekdays 8": a bit
			// no day has, never printed, so iptables-save prints an
			// empty list (docs/kernel-notes.md).
			continue
		}
		if strings.Contains(string(save), "-j RATEEST") {
			// Nor for RATEEST: the saved averaging time is derived from
			// what iptables kept and wraps at 32 bits, and an empty name
			// is saved as nothing (docs/kernel-notes.md).
			continue
		}
		if strings.Contains(string(save), "--monthdays 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31 ") {
			// Nor for "! --monthdays 0": iptables-save lists all 31 days,
			// which read back are the default and no longer printed
			// (docs/kernel-notes.md).
			continue
		}
		if err != nil && strings.Contains(err.Error(), "--cluster-local-nodemask") {
			// Nor for "-m cluster --cluster-local-node N": iptables-save
			// prints the node as a mask, which iptables-restore reads as a
			// number 1-32 (docs/kernel-notes.md).
			continue
		}
		if err != nil {
			t.Fatalf("own save refused: %v\n%s\nsave:\n%s\n%s", err, c, save, replayHint(seed, i, ext))
		}
		if save2 := rs2.AppendSave(nil, netfilter.SaveOptions{Counters: true}); string(save2) != string(save) {
			t.Fatalf("save is not a fixed point\n%s\n%s---\n%s\n%s", c, save, save2, replayHint(seed, i, ext))
		}
		for _, tb := range rs.Tables() {
			s1, err1 := rs.AppendRules(nil, tb.ID(), "", 0, false)
			s2, err2 := rs2.AppendRules(nil, tb.ID(), "", 0, false)
			l1, err3 := rs.AppendList(nil, tb.ID(), "", netfilter.ListOptions{Numeric: true, Verbose: true})
			l2, err4 := rs2.AppendList(nil, tb.ID(), "", netfilter.ListOptions{Numeric: true, Verbose: true})
			if err := errors.Join(err1, err2, err3, err4); err != nil {
				t.Fatalf("%v\n%s", err, c)
			}
			if strings.Contains(string(l1), "pts:!0:65535") {
				// iptables-save leaves out a tcp match's "! --sport 0:65535"
				// that --tcp-option keeps, which -L shows (docs/kernel-notes.md).
				continue
			}
			if string(s1) != string(s2) || string(l1) != string(l2) {
				t.Fatalf("-S or -L changes across save and restore\n%s\n%s", c, replayHint(seed, i, ext))
			}
		}
	}
	t.Logf("%d of %d cases accepted", accepted, len(idx))
	if len(idx) > 100 && (accepted < len(idx)/10 || accepted > len(idx)*9/10) {
		t.Fatalf("the generator is off balance: %d of %d cases accepted", accepted, len(idx))
	}
}

// ---- the kernel comparison ----

// gDivergence is one case on which packetwalk and the kernel disagree.
type gDivergence struct {
	c    gCase
	kind string // what differs
	text string
}

type grammarRun struct {
	seed uint64
	ext  bool // cases drawn with the extension modules
	mu   sync.Mutex
	divs []gDivergence
	// counters
	cases, bothAccept, bothRefuse, unmodelled, printedOnly, packetChunks, packetCases atomic.Int64
}

func (r *grammarRun) diverge(c gCase, kind, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.divs = append(r.divs, gDivergence{c: c, kind: kind, text: text})
}

var reErrLine = regexp.MustCompile(`Error occurred at line: (\d+)|line (\d+) failed`)

// TestKernelGrammar compares packetwalk with the real iptables-restore on
// rules drawn from the full grammar: the same rules accepted and refused,
// the same iptables-save, -S and -L -n -v for the accepted ones, and the
// same packet fates and counters for the IPv4 ones whose matches are
// deterministic. PACKETWALK_GRAMMAR_CASES (default 5000) sets the number
// of cases, PACKETWALK_GRAMMAR_WORKERS (default 4) the namespaces used in
// parallel, PACKETWALK_GRAMMAR_SEED and PACKETWALK_GRAMMAR_CASE replay;
// PACKETWALK_GRAMMAR_VERBOSE=1 logs every divergence on one line.
// PACKETWALK_GRAMMAR_EXT=1 draws the extension modules too, as
// TestKernelGrammarExt does, for a larger run of those.
func TestKernelGrammar(t *testing.T) {
	kerneltest.Require(t)
	runGrammar(t, grammarExt(), envInt("PACKETWALK_GRAMMAR_CASES", 5000))
}

// TestKernelGrammarExt is TestKernelGrammar with the extension modules of
// grammar_ext_gen_test.go drawn too, PACKETWALK_GRAMMAR_EXT_CASES cases
// (default 3000, about 25 s on a 2-core machine). Its seed and replay
// variables are TestKernelGrammar's.
func TestKernelGrammarExt(t *testing.T) {
	kerneltest.Require(t)
	runGrammar(t, true, envInt("PACKETWALK_GRAMMAR_EXT_CASES", 3000))
}

func runGrammar(t *testing.T, ext bool, n int) {
	run := &grammarRun{seed: grammarSeed(t), ext: ext}
	t.Logf("seed %d", run.seed)
	idx := grammarIndexes(t, n)
	const batch = 60
	var batches [][]int
	for len(idx) > 0 {
		n := min(batch, len(idx))
		batches = append(batches, idx[:n])
		idx = idx[n:]
	}
	work := make(chan []int)
	go func() {
		defer close(work)
		for _, b := range batches {
			work <- b
		}
	}()
	start := time.Now()
	workers := envInt("PACKETWALK_GRAMMAR_WORKERS", 4)
	t.Run("workers", func(t *testing.T) {
		for w := range workers {
			t.Run(fmt.Sprintf("w%d", w), func(t *testing.T) {
				t.Parallel()
				ns := kerneltest.NewNS(t, "pw-gram")
				if err := grammarNSSetup(ns); err != nil {
					t.Fatal(err)
				}
				lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-glab"})
				if err := grammarLabSetup(lab); err != nil {
					t.Fatal(err)
				}
				for b := range work {
					var cs []gCase
					for _, i := range b {
						cs = append(cs, grammarCase(run.seed, i, run.ext))
					}
					if err := run.batch(ns, lab, cs); err != nil {
						t.Errorf("harness: %v", err)
						return
					}
				}
			})
		}
	})
	took := time.Since(start).Round(time.Millisecond)
	run.report(t, took)
}

// printedDiffer counts the printing divergences of unmodelled rules.
func (r *grammarRun) printedDiffer() int {
	n := 0
	for _, d := range r.divs {
		if strings.HasPrefix(d.kind, "listing differs (a rule a Host") {
			n++
		}
	}
	return n
}

func (r *grammarRun) report(t *testing.T, took time.Duration) {
	t.Logf("seed %d: %d cases in %v: both accept %d, both refuse %d, packetwalk refuses as not modelled %d (of which printed alike %d); packets through %d rulesets of %d rules",
		r.seed, r.cases.Load(), took, r.bothAccept.Load(), r.bothRefuse.Load(), r.unmodelled.Load(), r.printedOnly.Load()-int64(r.printedDiffer()), r.packetChunks.Load(), r.packetCases.Load())
	type group struct {
		n       int
		example gDivergence
	}
	groups := map[string]*group{}
	var keys []string
	for _, d := range r.divs {
		g := groups[d.kind]
		if g == nil {
			g = &group{example: d}
			groups[d.kind] = g
			keys = append(keys, d.kind)
		}
		g.n++
	}
	sort.Strings(keys)
	if os.Getenv("PACKETWALK_GRAMMAR_VERBOSE") != "" { // every divergence, one per line, for triage
		for _, d := range r.divs {
			t.Logf("DIV\t%d\t%s\t%s\t%q", d.c.Index, d.kind, d.c.Rule, firstLine(d.text))
		}
	}
	for _, k := range keys {
		g := groups[k]
		t.Logf("%4d × %s\n  example: %s%s\n  %s", g.n, k, g.example.c, g.example.text, replayHint(r.seed, g.example.c.Index, r.ext))
	}
	if len(r.divs) > 0 {
		var lines []string
		for _, d := range r.divs[:min(len(r.divs), 20)] {
			lines = append(lines, fmt.Sprintf("%s: %s\n%s\n%s", d.kind, d.text, d.c, replayHint(r.seed, d.c.Index, r.ext)))
		}
		t.Fatalf("seed %d: %d divergences; the first:\n%s", r.seed, len(r.divs), strings.Join(lines, "\n"))
	}
}

// batch runs one batch of cases: packetwalk parses each case; those it
// accepts are loaded into the kernel together (one iptables-restore per
// family, a refused line taken out and the rest retried), those it refuses
// one by one; then the accepted ones are listed and compared, and sent
// packets through.
func (r *grammarRun) batch(ns *kerneltest.NS, lab *kerneltest.Lab, cs []gCase) error {
	for _, fam := range []netfilter.Family{netfilter.IPv4, netfilter.IPv6} {
		var acc []gCase
		for _, c := range cs {
			if c.Fam != fam {
				continue
			}
			r.cases.Add(1)
			text, _ := restoreText([]gCase{c})
			_, err := parseCase(fam, text)
			if err == nil {
				acc = append(acc, c)
				continue
			}
			if strings.HasPrefix(err.Error(), "PANIC") {
				r.diverge(c, "packetwalk panics", err.Error())
				continue
			}
			kerr, herr := kernelRestore(ns, fam, text)
			if herr != nil {
				return herr
			}
			switch {
			case kerr != "":
				r.bothRefuse.Add(1)
			case errors.Is(err, netfilter.ErrNotModelled):
				r.unmodelled.Add(1)
				if err := r.comparePrinted(ns, fam, c, text); err != nil {
					return err
				}
			default:
				r.diverge(c, "packetwalk refuses, the kernel accepts", err.Error())
			}
		}
		for len(acc) > 0 {
			if _, _, err := ns.Exec("", "nft", "flush", "ruleset"); err != nil {
				return err
			}
			text, lineOf := restoreText(renumber(acc))
			kerr, herr := kernelRestore(ns, fam, text)
			if herr != nil {
				return herr
			}
			if kerr == "" {
				break
			}
			bad := -1
			if m := reErrLine.FindStringSubmatch(kerr); m != nil {
				n, _ := strconv.Atoi(m[1] + m[2])
				if i, ok := lineOf[n]; ok {
					bad = i
				}
			}
			if bad < 0 { // no line named (a commit failure): one by one
				for i, c := range acc {
					one, _ := restoreText([]gCase{c})
					if k, herr := kernelRestore(ns, fam, one); herr != nil {
						return herr
					} else if k != "" {
						bad = i
						kerr = k
						break
					}
				}
			}
			if bad < 0 {
				r.diverge(acc[0], "kernel refuses the batch but no case alone", kerr)
				acc = nil
				break
			}
			r.diverge(acc[bad], "kernel refuses, packetwalk accepts", strings.TrimSpace(kerr))
			acc = slices.Delete(acc, bad, bad+1)
		}
		if len(acc) == 0 {
			continue
		}
		r.bothAccept.Add(int64(len(acc)))
		if err := r.compareText(ns, fam, acc); err != nil {
			return err
		}
		if fam == netfilter.IPv4 {
			if err := r.packets(lab, acc); err != nil {
				return err
			}
		}
	}
	return nil
}

// renumber gives each case of a batch a user chain of its own, so that
// one case's jumps cannot change where another's modules may run.
func renumber(cs []gCase) []gCase {
	out := make([]gCase, len(cs))
	for i, c := range cs {
		c.UserChain = fmt.Sprintf("%s%d", userChain, i)
		out[i] = c
	}
	return out
}

// kernelRestore loads text with the family's restore tool; kerr is the
// tool's stderr when it refuses, herr a failure of the harness.
func kernelRestore(ns *kerneltest.NS, fam netfilter.Family, text string) (kerr string, herr error) {
	var err error
	if fam == netfilter.IPv6 {
		err = ns.Restore6(text)
	} else {
		err = ns.Restore(text)
	}
	var ce *kerneltest.CommandError
	if err != nil {
		if !errors.As(err, &ce) {
			return "", err
		}
		return ce.Stderr + "(exit " + strconv.Itoa(ce.ExitCode) + ")", nil
	}
	return "", nil
}

// kernelViews returns iptables-save, and -S and -L -n -v of every table,
// from the namespace, in one string each keyed by view.
func kernelViews(ns *kerneltest.NS, fam netfilter.Family, tables []string) (map[string]string, error) {
	out := map[string]string{}
	save, tool := ns.Save, ns.IPTables
	if fam == netfilter.IPv6 {
		save, tool = ns.Save6, ns.IP6Tables
	}
	s, err := save()
	if err != nil {
		return nil, err
	}
	out["save"] = s
	for _, tb := range tables {
		if out["-t "+tb+" -S"], err = tool("-t", tb, "-S"); err != nil {
			return nil, err
		}
		if out["-t "+tb+" -L -n -v"], err = tool("-t", tb, "-L", "-n", "-v"); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func simViews(rs *netfilter.Ruleset, tables []string) (map[string]string, error) {
	out := map[string]string{"save": string(rs.AppendSave(nil, netfilter.SaveOptions{}))}
	for _, tb := range rs.Tables() {
		name := tb.ID().String()
		if !slices.Contains(tables, name) {
			continue
		}
		s, err := rs.AppendRules(nil, tb.ID(), "", 0, false)
		if err != nil {
			return nil, err
		}
		l, err := rs.AppendList(nil, tb.ID(), "", netfilter.ListOptions{Numeric: true, Verbose: true})
		if err != nil {
			return nil, err
		}
		out["-t "+name+" -S"], out["-t "+name+" -L -n -v"] = string(s), string(l)
	}
	return out, nil
}

func tablesOf(cs []gCase) []string {
	var out []string
	for _, c := range cs {
		if !slices.Contains(out, c.Table) {
			out = append(out, c.Table)
		}
	}
	return out
}

// viewDiff returns the first view that differs, with both texts' first
// differing line.
func viewDiff(kern, sim map[string]string) string {
	var keys []string
	for k := range kern {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if kern[k] == sim[k] {
			continue
		}
		kl, sl := strings.Split(kern[k], "\n"), strings.Split(sim[k], "\n")
		for i := 0; i < max(len(kl), len(sl)); i++ {
			var a, b string
			if i < len(kl) {
				a = kl[i]
			}
			if i < len(sl) {
				b = sl[i]
			}
			if a != b {
				return fmt.Sprintf("%s line %d:\n  kernel:     %q\n  packetwalk: %q", k, i+1, a, b)
			}
		}
	}
	return ""
}

// compareText compares the views of the batch acc as loaded in ns; on a
// difference it compares the cases one by one to name them.
func (r *grammarRun) compareText(ns *kerneltest.NS, fam netfilter.Family, acc []gCase) error {
	cmp := func(cs []gCase) (string, error) {
		text, _ := restoreText(renumber(cs))
		rs, err := parseCase(fam, text)
		if err != nil {
			return "packetwalk refuses the batch: " + err.Error(), nil
		}
		kv, err := kernelViews(ns, fam, tablesOf(cs))
		if err != nil {
			return "", err
		}
		sv, err := simViews(rs, tablesOf(cs))
		if err != nil {
			return "", err
		}
		return viewDiff(kv, sv), nil
	}
	d, err := cmp(acc)
	if err != nil || d == "" {
		return err
	}
	for _, c := range acc {
		if _, _, err := ns.Exec("", "nft", "flush", "ruleset"); err != nil {
			return err
		}
		text, _ := restoreText(renumber([]gCase{c}))
		if kerr, herr := kernelRestore(ns, fam, text); herr != nil || kerr != "" {
			return fmt.Errorf("case %d loaded in a batch but not alone: %v %s", c.Index, herr, kerr)
		}
		d, err := cmp([]gCase{c})
		if err != nil {
			return err
		}
		if d != "" {
			kind := "listing differs"
			if strings.HasPrefix(d, "save") {
				kind = "iptables-save differs"
			}
			r.diverge(c, kind, d)
		}
	}
	return nil
}

// comparePrinted compares the views of a case a Host refuses as not
// modelled but the kernel loads (TEE, TPROXY, SYNPROXY, osf, ...): the
// parser alone (ParseRestore) still reads and prints it, which must match.
func (r *grammarRun) comparePrinted(ns *kerneltest.NS, fam netfilter.Family, c gCase, text string) error {
	rs, err := netfilter.ParseRestore(fam, []byte(text))
	if errors.Is(err, netfilter.ErrNotModelled) {
		return nil // not even parsed: refused by name
	}
	if err != nil {
		r.diverge(c, "packetwalk's parser refuses, the kernel accepts", err.Error())
		return nil
	}
	if _, _, err := ns.Exec("", "nft", "flush", "ruleset"); err != nil {
		return err
	}
	if kerr, herr := kernelRestore(ns, fam, text); herr != nil || kerr != "" {
		return fmt.Errorf("case %d loaded once but not twice: %v %s", c.Index, herr, kerr)
	}
	r.printedOnly.Add(1)
	tables := tablesOf([]gCase{c})
	kv, err := kernelViews(ns, fam, tables)
	if err != nil {
		return err
	}
	sv, err := simViews(rs, tables)
	if err != nil {
		return err
	}
	if d := viewDiff(kv, sv); d != "" {
		r.diverge(c, "listing differs (a rule a Host refuses as not modelled)", d)
	}
	return nil
}

// deterministicForPackets reports whether a case's rule behaves the same
// in the lab and in packetwalk's host for the same packets: no randomness
// or clocks (statistic, limit, recent), no objects the lab lacks (sets,
// nfacct, helpers, timeout policies), and no conntrack state where REJECT's
// and the stack's replies pass (see the package documentation).
func deterministicForPackets(c gCase) bool {
	if c.Table == "nat" || c.Chain == userChain {
		return false
	}
	for _, w := range append([]string{"statistic", "limit", "recent", "set", "SET", "nfacct", "owner", "helper", "CT", "physdev", "TRACE", "udplite", "pwset", "QUEUE"}, gExtNoPackets...) {
		for _, tok := range strings.Fields(c.Rule) {
			if tok == w {
				return false
			}
		}
	}
	if c.Chain == "OUTPUT" || c.Chain == "POSTROUTING" {
		for _, w := range []string{"conntrack", "state", "connmark", "CONNMARK", "REJECT"} {
			if slices.Contains(strings.Fields(c.Rule), w) {
				return false
			}
		}
	}
	return true
}

var gPacketGen = rapid.Custom(genPackets)

// packets sends a few packets through rulesets of the batch's accepted
// IPv4 cases, in chunks of one table, and compares their fates and every
// counter with the existing difftest harness (runCase). A diverging chunk
// is narrowed down to the cases that diverge alone.
func (r *grammarRun) packets(lab *kerneltest.Lab, acc []gCase) error {
	byTable := map[string][]gCase{}
	for _, c := range acc {
		if deterministicForPackets(c) {
			byTable[c.Table] = append(byTable[c.Table], c)
		}
	}
	for _, tb := range []string{"raw", "mangle", "filter"} {
		cs := byTable[tb]
		if len(cs) == 0 {
			continue
		}
		text, _ := restoreTextWith(renumber(cs), true)
		for k := range 3 {
			pk := gPacketGen.Example(int(r.seed%1000000)*7 + cs[0].Index*3 + k)
			if k == 1 { // the same packets to and from eth0's second address
				for i := range pk {
					if pk[i].Dst == nodeEth0 {
						pk[i].Dst = gSecondAddr.Addr()
					}
					if pk[i].Src == nodeEth0 {
						pk[i].Src = gSecondAddr.Addr()
					}
				}
			}
			r.packetChunks.Add(1)
			r.packetCases.Add(int64(len(cs)))
			res, err := runCase(lab, genCase{Rules: text, Packets: pk, NewHost: grammarPacketHost}, nil)
			if err != nil {
				return err
			}
			if len(res.Diffs) == 0 {
				continue
			}
			named := false
			for _, c := range cs {
				one, _ := restoreTextWith([]gCase{c}, true)
				res1, err := runCase(lab, genCase{Rules: one, Packets: pk, NewHost: grammarPacketHost}, nil)
				if err != nil {
					return err
				}
				if len(res1.Diffs) > 0 {
					named = true
					r.diverge(c, "packet fate or counters differ", fmt.Sprintf("%s\npackets:\n%s%s", strings.Join(res1.Diffs, "\n"), packetList(pk), res1.Transcript))
				}
			}
			if !named {
				r.diverge(cs[0], "packet fates differ for a ruleset of several cases only", fmt.Sprintf("%s\nruleset:\n%s\npackets:\n%s", strings.Join(res.Diffs, "\n"), text, packetList(pk)))
			}
			break
		}
	}
	return nil
}

func firstLine(s string) string {
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "Error occurred") {
			return l
		}
	}
	return ""
}

func packetList(ps []genPacket) string {
	var b strings.Builder
	for i, p := range ps {
		fmt.Fprintf(&b, "  %d. %s\n", i+1, p)
	}
	return b.String()
}
