package difftest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/internal/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// caseResult is the comparison of one case.
type caseResult struct {
	Diffs      []string
	Transcript string
	// Skipped reports a ruleset both refused.
	Skipped bool
	// Sim and Kernel are, per packet, packetwalk's outcome and the frames
	// the lab captured.
	Sim    []simOutcome
	Kernel [][]string
	// KernelCounters is the node's iptables-save -c after the case.
	KernelCounters kerneltest.Counters
}

// runCase loads c into the lab and into a fresh simulated host, sends its
// packets through both and returns every divergence, with a transcript of
// both runs. A ruleset that both refuse is no divergence. The family of
// the ruleset follows the first packet.
func runCase(lab *kerneltest.Lab, c genCase, st *caseStats) (caseResult, error) {
	var res caseResult
	fam := netfilter.IPv4
	if len(c.Packets) > 0 && c.Packets[0].Src.Is6() {
		fam = netfilter.IPv6
	}
	h := newSimHost()
	if c.NewHost != nil {
		h = c.NewHost()
	}
	simErr := h.Restore(fam, []byte(c.Rules), netfilter.RestoreOptions{})
	var kernErr error
	if fam == netfilter.IPv6 {
		kernErr = lab.ResetRuleset(kerneltest.Ruleset{IPv6: c.Rules})
	} else {
		kernErr = lab.Reset(c.Rules)
	}
	var ce *kerneltest.CommandError
	if kernErr != nil && !errors.As(kernErr, &ce) {
		return res, kernErr // the harness failed, not the tool
	}
	switch {
	case kernErr != nil && simErr != nil:
		res.Skipped = true
		return res, nil
	case kernErr != nil:
		res.Diffs = []string{"kernel refused the ruleset, packetwalk loaded it: " + ce.Stderr}
		return res, nil
	case simErr != nil:
		res.Diffs = []string{"packetwalk refused the ruleset, the kernel loaded it: " + simErr.Error()}
		return res, nil
	}
	var tr strings.Builder
	for i, p := range c.Packets {
		obs, refused, err := kernelSend(lab, p)
		if err != nil {
			return res, fmt.Errorf("packet %d (%s): %w", i+1, p, err)
		}
		so := simRun(h, p)
		kf := kernelFrames(obs)
		res.Sim, res.Kernel = append(res.Sim, so), append(res.Kernel, kf)
		if st != nil {
			st.disp[so.Result.Disposition].Add(1)
			st.frames.Add(int64(len(kf)))
			if p.Perturb != "" {
				st.perturbed.Add(1)
				if so.Result.Conn == nil {
					st.perturbedNoConn.Add(1)
				}
			}
		}
		fmt.Fprintf(&tr, "packet %d %s\n  packetwalk: %s at %s; frames %q; %s\n  kernel: frames %q refused=%v\n",
			i+1, p, so.Result.Disposition, whereString(so.Result.Where), so.Frames, strings.Join(so.Notes, "; "), kf, refused)
		if strings.Join(kf, "\n") != strings.Join(so.Frames, "\n") {
			res.Diffs = append(res.Diffs, fmt.Sprintf("packet %d: kernel frames %q, packetwalk frames %q", i+1, kf, so.Frames))
		}
		if p.From == FromNode && refused != (so.Result.Disposition == netfilter.Dropped) {
			res.Diffs = append(res.Diffs, fmt.Sprintf("packet %d: kernel send refused=%v, packetwalk %s", i+1, refused, so.Result.Disposition))
		}
	}
	var err error
	saveTool := "iptables-save"
	if fam == netfilter.IPv6 {
		saveTool = "ip6tables-save"
		res.KernelCounters, err = lab.Counters6()
	} else {
		res.KernelCounters, err = lab.Counters()
	}
	if err != nil {
		return res, err
	}
	sc, err := simCounters(h, fam)
	if err != nil {
		return res, fmt.Errorf("parse packetwalk save: %w", err)
	}
	res.Diffs = append(res.Diffs, compareCounters(res.KernelCounters, sc)...)
	if len(res.Diffs) > 0 {
		ks, _, _ := lab.Node().Exec("", saveTool, "-c")
		fmt.Fprintf(&tr, "kernel %s -c:\n%s\npacketwalk:\n%s", saveTool, ks,
			h.Ruleset(fam).AppendSave(nil, netfilter.SaveOptions{Counters: true}))
	}
	res.Transcript = tr.String()
	return res, nil
}

// caseStats counts what the packets of a run did, to show coverage.
type caseStats struct {
	disp   [5]atomic.Int64 // by netfilter.Disposition
	frames atomic.Int64
	// perturbed counts TCP segments moved out of the window, and
	// perturbedNoConn those packetwalk left without a connection
	// (INVALID, or conntrack not in use).
	perturbed, perturbedNoConn atomic.Int64
}

func (s *caseStats) String() string {
	var parts []string
	for d := range s.disp {
		parts = append(parts, fmt.Sprintf("%s %d", netfilter.Disposition(d), s.disp[d].Load()))
	}
	return fmt.Sprintf("packets: %s; frames captured %d; out-of-window TCP %d (%d without a connection)",
		strings.Join(parts, ", "), s.frames.Load(), s.perturbed.Load(), s.perturbedNoConn.Load())
}

// kernelSend sends p into the lab. refused reports a locally generated
// packet that OUTPUT or POSTROUTING dropped: sendto fails with EPERM.
func kernelSend(lab *kerneltest.Lab, p genPacket) (obs kerneltest.Observation, refused bool, err error) {
	switch p.From {
	case FromNode:
		pkt, err := kerneltest.BuildPacket(p.frameSpec())
		if err != nil {
			return obs, false, err
		}
		if err := lab.SendFromNode(pkt); err != nil {
			if !errors.Is(err, syscall.EPERM) {
				return obs, false, err
			}
			refused = true
		}
		obs, err = lab.Settle()
		return obs, refused, err
	case FromServer:
		f, err := lab.FrameFrom(kerneltest.Server, p.frameSpec())
		if err != nil {
			return obs, false, err
		}
		if _, err := lab.Settle(); err != nil { // discard stale captures
			return obs, false, err
		}
		if err := lab.InjectFrom(kerneltest.Server, f); err != nil {
			return obs, false, err
		}
		obs, err = lab.Settle()
		return obs, false, err
	default:
		f, err := lab.Frame(p.frameSpec())
		if err != nil {
			return obs, false, err
		}
		obs, err = lab.Exchange(f)
		return obs, false, err
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

// TestKernelDifferential runs random rulesets and packets through the
// kernel and packetwalk and requires the same outcome for every packet and
// the same counters for every rule. PACKETWALK_DIFF_CASES (default 2000)
// sets the number of cases, PACKETWALK_DIFF_LABS (default 4) the number of
// labs run in parallel; -rapid.seed reproduces a run.
func TestKernelDifferential(t *testing.T) {
	kerneltest.Require(t)
	var ran, skipped atomic.Int64
	var st caseStats
	took := forEachLab(t, envInt("PACKETWALK_DIFF_CASES", 2000), func(t testing.TB) *kerneltest.Lab {
		return kerneltest.NewLab(t, kerneltest.LabConfig{})
	}, func(rt *rapid.T, lab *kerneltest.Lab) {
		c := caseGen.Draw(rt, "case")
		res, err := runCase(lab, c, &st)
		if err != nil {
			rt.Fatalf("harness: %v\n%s", err, c)
		}
		ran.Add(1)
		if res.Skipped {
			skipped.Add(1)
		}
		if len(res.Diffs) > 0 {
			rt.Fatalf("%d divergences:\n  %s\n%s%s", len(res.Diffs), strings.Join(res.Diffs, "\n  "), c, res.Transcript)
		}
	})
	t.Logf("%d cases (%d rulesets refused by both) in %v; %s", ran.Load(), skipped.Load(), took, &st)
}

// forEachLab checks cases in PACKETWALK_DIFF_LABS (default 4) labs in
// parallel, total cases in all, each lab made by newLab; check draws a case
// and fails on a divergence, which rapid shrinks and names by its seed.
func forEachLab(t *testing.T, total int, newLab func(testing.TB) *kerneltest.Lab, check func(*rapid.T, *kerneltest.Lab)) time.Duration {
	labs := envInt("PACKETWALK_DIFF_LABS", 4)
	setChecks(t, (total+labs-1)/labs)
	start := time.Now()
	t.Run("labs", func(t *testing.T) {
		for i := range labs {
			t.Run(fmt.Sprintf("lab%d", i), func(t *testing.T) {
				t.Parallel()
				lab := newLab(t)
				rapid.Check(t, func(rt *rapid.T) { check(rt, lab) })
			})
		}
	})
	return time.Since(start).Round(time.Millisecond)
}

// checksGiven reports whether -rapid.checks was given on the command line;
// it is read before any test changes the flag.
var checksGiven = sync.OnceValue(func() bool {
	f := flag.Lookup("rapid.checks")
	return f != nil && f.Value.String() != f.DefValue
})

// setChecks makes rapid run n checks for the rest of test t (rapid reads a
// global flag), unless -rapid.checks was given, and restores it afterwards
// so other tests keep their own count.
func setChecks(t *testing.T, n int) {
	f := flag.Lookup("rapid.checks")
	if f == nil || checksGiven() {
		return
	}
	old := f.Value.String()
	require.NoError(t, flag.Set("rapid.checks", strconv.Itoa(n)))
	t.Cleanup(func() { _ = flag.Set("rapid.checks", old) })
}

func whereString(w netfilter.Step) string {
	return fmt.Sprintf("%s %s/%s#%d %s", w.Hook, w.Table, w.Chain, w.Rule, w.Action)
}
