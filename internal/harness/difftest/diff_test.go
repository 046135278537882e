package difftest

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
	"pgregory.net/rapid"
)

// caseResult is the comparison of one case.
type caseResult struct {
	outcome
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
	o, ok, err := loaded("ruleset", kernErr, simErr)
	if !ok {
		res.outcome = o
		return res, err
	}
	var tr strings.Builder
	if err := sendCompared(lab, h, c.Packets, &res, st, &tr); err != nil {
		return res, err
	}
	var diffs []string
	res.KernelCounters, diffs, err = counterDiffs(lab, h, fam)
	if err != nil {
		return res, err
	}
	res.Diffs = append(res.Diffs, diffs...)
	if len(res.Diffs) > 0 {
		tr.WriteString(savesWithCounters(lab, h, fam))
	}
	res.Transcript = tr.String()
	return res, nil
}

// sendCompared sends packets through the lab and h one by one, adds both
// outcomes to res and the transcript, counts them in st (unless nil) and
// notes where the two differ. Packets are numbered on from those res has.
func sendCompared(lab *kerneltest.Lab, h *netfilter.Host, packets []genPacket, res *caseResult, st *caseStats, tr *strings.Builder) error {
	for _, p := range packets {
		if err := sendOne(lab, h, len(res.Sim), p, res, st, tr); err != nil {
			return err
		}
	}
	return nil
}

func sendOne(lab *kerneltest.Lab, h *netfilter.Host, i int, p genPacket, res *caseResult, st *caseStats, tr *strings.Builder) error {
	obs, refused, err := kernelSend(lab, p)
	if err != nil {
		return fmt.Errorf("packet %d (%s): %w", i+1, p, err)
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
	fmt.Fprintf(tr, "packet %d %s\n  packetwalk: %s at %s; frames %q; %s\n  kernel: frames %q refused=%v\n",
		i+1, p, so.Result.Disposition, whereString(so.Result.Where), so.Frames, strings.Join(so.Notes, "; "), kf, refused)
	if strings.Join(kf, "\n") != strings.Join(so.Frames, "\n") {
		res.Diffs = append(res.Diffs, fmt.Sprintf("packet %d: kernel frames %q, packetwalk frames %q", i+1, kf, so.Frames))
	}
	if p.From == FromNode && refused != (so.Result.Disposition == netfilter.Dropped) {
		res.Diffs = append(res.Diffs, fmt.Sprintf("packet %d: kernel send refused=%v, packetwalk %s", i+1, refused, so.Result.Disposition))
	}
	return nil
}

// counterDiffs reads the node's rule and policy counters of fam and
// compares them with h's.
func counterDiffs(lab *kerneltest.Lab, h *netfilter.Host, fam netfilter.Family) (kern kerneltest.Counters, diffs []string, err error) {
	if fam == netfilter.IPv6 {
		kern, err = lab.Counters6()
	} else {
		kern, err = lab.Counters()
	}
	if err != nil {
		return kern, nil, err
	}
	sc, err := simCounters(h, fam)
	if err != nil {
		return kern, nil, fmt.Errorf("parse packetwalk save: %w", err)
	}
	return kern, compareCounters(kern, sc), nil
}

// savesWithCounters is how a failed case's transcript ends: both rulesets
// of fam, with their counters.
func savesWithCounters(lab *kerneltest.Lab, h *netfilter.Host, fam netfilter.Family) string {
	tool := "iptables-save"
	if fam == netfilter.IPv6 {
		tool = "ip6tables-save"
	}
	ks, _, _ := lab.Node().Exec("", tool, "-c")
	return fmt.Sprintf("kernel %s -c:\n%s\npacketwalk:\n%s", tool, ks, h.Ruleset(fam).AppendSave(nil, netfilter.SaveOptions{Counters: true}))
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

// TestKernelDifferential runs random rulesets and packets through the
// kernel and packetwalk and requires the same outcome for every packet and
// the same counters for every rule. PACKETWALK_DIFF_CASES (default 2000)
// sets the number of cases, PACKETWALK_DIFF_LABS (default 4) the number of
// labs run in parallel; -rapid.seed reproduces a run.
func TestKernelDifferential(t *testing.T) {
	runSuite(t, packetSuite(envInt("PACKETWALK_DIFF_CASES", 2000), "cases", drawCase(caseGen), runCase))
}

// packetSuite is a suite of cases run packet by packet in the plain lab,
// counted by caseStats; what names them in the summary.
func packetSuite[C fmt.Stringer](n int, what string, gen func(*rapid.T) C, run func(*kerneltest.Lab, C, *caseStats) (caseResult, error)) diffSuite[C, caseResult] {
	var ran, skipped atomic.Int64
	var st caseStats
	return diffSuite[C, caseResult]{
		cases:  n,
		newLab: plainLab,
		gen:    gen,
		run:    func(lab *kerneltest.Lab, c C) (caseResult, error) { return run(lab, c, &st) },
		tally: func(_ C, r caseResult) {
			ran.Add(1)
			if r.Skipped {
				skipped.Add(1)
			}
		},
		summary: func(took time.Duration) string {
			return fmt.Sprintf("%d %s (%d refused by both) in %v; %s", ran.Load(), what, skipped.Load(), took, &st)
		},
	}
}

func whereString(w netfilter.Step) string {
	return fmt.Sprintf("%s %s/%s#%d %s", w.Hook, w.Table, w.Chain, w.Rule, w.Action)
}
