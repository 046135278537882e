package difftest

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Every random differential suite has the same shape: labs in parallel,
// cases drawn by rapid, each run in the kernel and in packetwalk and
// compared, the first divergence failing with the case and its transcript
// (rapid then shrinks it and prints the seed that replays it), and a line
// of coverage figures at the end. diffSuite says what differs between
// suites; runSuite is the rest.

// outcome is what running one case in both worlds tells the runner.
type outcome struct {
	Diffs      []string
	Transcript string
	// Skipped reports a ruleset (or set) both refused.
	Skipped bool
}

func (o outcome) verdict() outcome { return o }

// verdict is a case's result as the runner reads it.
type verdict interface{ verdict() outcome }

// diffSuite is one random differential suite over cases of type C whose
// runs give an R.
type diffSuite[C fmt.Stringer, R verdict] struct {
	// cases is the number of cases in all labs together.
	cases int
	// newLab makes one lab; the suite's simulated hosts mirror it.
	newLab func(testing.TB) *kerneltest.Lab
	// gen draws a case.
	gen func(*rapid.T) C
	// run loads the case into the lab and a fresh simulated host, sends
	// it through both and compares. The two runs go step by step, as the
	// model follows choices the kernel makes at random (ports, addresses).
	// An error is the harness's, not a divergence.
	run func(*kerneltest.Lab, C) (R, error)
	// tally counts what a case covered; it is called from every lab at once.
	tally func(C, R)
	// summary is the coverage line logged at the end.
	summary func(took time.Duration) string
}

// drawCase draws from g under the label "case", as the suites always have
// (the label is part of what rapid prints for a failing case).
func drawCase[C any](g *rapid.Generator[C]) func(*rapid.T) C {
	return func(t *rapid.T) C { return g.Draw(t, "case") }
}

// runSuite runs s in PACKETWALK_DIFF_LABS labs and fails on the first
// divergence.
func runSuite[C fmt.Stringer, R verdict](t *testing.T, s diffSuite[C, R]) {
	kerneltest.Require(t)
	took := forEachLab(t, s.cases, s.newLab, func(rt *rapid.T, lab *kerneltest.Lab) {
		c := s.gen(rt)
		r, err := s.run(lab, c)
		if err != nil {
			rt.Fatalf("harness: %v\n%s", err, c)
		}
		if s.tally != nil {
			s.tally(c, r)
		}
		if o := r.verdict(); len(o.Diffs) > 0 {
			rt.Fatalf("%d divergences:\n  %s\n%s%s", len(o.Diffs), strings.Join(o.Diffs, "\n  "), c, o.Transcript)
		}
	})
	t.Log(s.summary(took))
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

// plainLab is the lab with nothing added, for the filter and set suites.
func plainLab(t testing.TB) *kerneltest.Lab {
	return kerneltest.NewLab(t, kerneltest.LabConfig{})
}

// loaded compares how the two worlds took a case's input: kernErr from the
// lab, simErr from packetwalk. ok is true when both loaded it; otherwise o
// says whether both refused it (Skipped) or only one did (a divergence).
// what names the input in the divergence ("ruleset", "case"). A kernel
// error that is not the tool's refusal is the harness's and returned.
func loaded(what string, kernErr, simErr error) (o outcome, ok bool, err error) {
	var ce *kerneltest.CommandError
	if kernErr != nil && !errors.As(kernErr, &ce) {
		return o, false, kernErr
	}
	switch {
	case kernErr != nil && simErr != nil:
		o.Skipped = true
	case kernErr != nil:
		o.Diffs = []string{"kernel refused the " + what + ", packetwalk loaded it: " + ce.Stderr}
	case simErr != nil:
		o.Diffs = []string{"packetwalk refused the " + what + ", the kernel loaded it: " + simErr.Error()}
	default:
		return o, true, nil
	}
	return o, false, nil
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
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
