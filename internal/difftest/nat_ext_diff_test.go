package difftest

import (
	"strings"
	"sync/atomic"
	"testing"

	"github.com/packetwalk/packetwalk/internal/kerneltest"
	"pgregory.net/rapid"
)

// xStats sums up an extended differential run.
type xStats struct {
	cases, skipped, flows, pkts, entries, checked, renamed atomic.Int64
}

func (s *xStats) add(c xCase, r *xRun) {
	s.cases.Add(1)
	if r.res.Skipped {
		s.skipped.Add(1)
		return
	}
	s.flows.Add(int64(len(c.Flows)))
	s.pkts.Add(int64(len(r.res.KernelFrames)))
	for _, k := range r.res.Kernel {
		s.entries.Add(int64(len(k)))
	}
	s.checked.Add(int64(r.Checked))
	s.renamed.Add(int64(r.Renamed))
}

func (s *xStats) log(t *testing.T, what string, took any) {
	t.Logf("%s: %d cases (%d refused by both), %d flows, %d packets, %d conntrack lines compared, %d NAT choices checked against the rule (%d random ports renamed) in %v",
		what, s.cases.Load(), s.skipped.Load(), s.flows.Load(), s.pkts.Load(), s.entries.Load(), s.checked.Load(), s.renamed.Load(), took)
}

// runXDifferential draws cases with gen in PACKETWALK_DIFF_LABS labs and
// fails on the first divergence.
func runXDifferential(t *testing.T, what string, total int, gen func(*rapid.T) xCase) {
	kerneltest.Require(t)
	var st xStats
	took := forEachLab(t, total, newXLab, func(rt *rapid.T, lab *kerneltest.Lab) {
		c := gen(rt)
		r, err := runXCase(lab, c)
		if err != nil {
			rt.Fatalf("harness: %v\n%s", err, c)
		}
		st.add(c, r)
		if len(r.res.Diffs) > 0 {
			rt.Fatalf("%d divergences:\n  %s\n%s%s", len(r.res.Diffs), strings.Join(r.res.Diffs, "\n  "), c, r.res.Transcript)
		}
	})
	st.log(t, what, took)
}

// TestKernelNATRangeDifferential: SNAT and MASQUERADE to address and port
// ranges, with --random, --random-fully and --persistent, DNAT to address
// and port ranges with --random and --persistent, and flows from several
// clients reusing one source port so that translated tuples clash.
// Addresses (the kernel's hash) and kept ports are compared exactly; ports
// the kernel draws at random are checked against the rule on both sides
// and then compared by name. PACKETWALK_NAT_RANGE_CASES (default 200).
func TestKernelNATRangeDifferential(t *testing.T) {
	runXDifferential(t, "SNAT ranges", envInt("PACKETWALK_NAT_RANGE_CASES", 200), genRangeCase)
}
