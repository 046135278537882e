package difftest

import (
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"pgregory.net/rapid"
)

// xSuite is a suite of xCases drawn by gen and run by run in newXLab's
// labs; what names it in the summary.
func xSuite(what string, total int, gen func(*rapid.T) xCase, run func(*kerneltest.Lab, xCase) (*xRun, error)) diffSuite[xCase, *xRun] {
	var cases, skipped, flows, pkts, entries, checked, renamed atomic.Int64
	return diffSuite[xCase, *xRun]{
		cases:  total,
		newLab: newXLab,
		gen:    gen,
		run:    run,
		tally: func(c xCase, r *xRun) {
			cases.Add(1)
			if r.res.Skipped {
				skipped.Add(1)
				return
			}
			flows.Add(int64(len(c.Flows)))
			pkts.Add(int64(len(r.res.KernelFrames)))
			for _, k := range r.res.Kernel {
				entries.Add(int64(len(k)))
			}
			checked.Add(int64(r.Checked))
			renamed.Add(int64(r.Renamed))
		},
		summary: func(took time.Duration) string {
			return fmt.Sprintf("%s: %d cases (%d refused by both), %d flows, %d packets, %d conntrack lines compared, %d NAT choices checked against the rule (%d random ports renamed) in %v",
				what, cases.Load(), skipped.Load(), flows.Load(), pkts.Load(), entries.Load(), checked.Load(), renamed.Load(), took)
		},
	}
}

// runXDifferential runs the xCases gen draws, total in all.
func runXDifferential(t *testing.T, what string, total int, gen func(*rapid.T) xCase) {
	runSuite(t, xSuite(what, total, gen, runXCase))
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
