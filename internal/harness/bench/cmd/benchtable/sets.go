package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/packetwalk/packetwalk/internal/harness/bench"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// setRow is one line of the sets table. Times are wall and CPU (user and
// system): the CI machine's two cores are shared, and CPU time drifts much
// less with the load of others.
type setRow struct {
	typ                    string
	members                int
	restoreSec, restoreCPU float64
	perMemB                float64
	lookupNs, lookupCPU    float64
	lookupAllocs           float64
	// the kernel's ipset restore (wall, and the ipset process's CPU,
	// the kernel's netlink work included) and Size in memory per member
	kRestoreSec, kRestoreCPU, kMemPer float64
}

const lookupsPerRun = 2_000_000

// measureSets fills the sets table: for each type and size, the median
// of count runs (the kernel's figures from the same runs).
func measureSets(types []string, sizes []int, count int, kernel bool) ([]setRow, error) {
	var rows []setRow
	for _, typ := range types {
		for _, n := range sizes {
			s, err := bench.NewSetSetup(typ, n)
			if err != nil {
				return nil, err
			}
			var runs []setRow
			for range count {
				r := setRow{typ: typ, members: n}
				if r.restoreSec, r.restoreCPU, err = bench.SetRestoreTimes(s); err != nil {
					return nil, err
				}
				if r.perMemB, err = bench.SetRetainedPerMember(s); err != nil {
					return nil, err
				}
				if r.lookupNs, r.lookupCPU, r.lookupAllocs, err = bench.SetLookupTimes(s, lookupsPerRun); err != nil {
					return nil, err
				}
				if kernel {
					if r.kRestoreSec, r.kRestoreCPU, r.kMemPer, err = kernelSet(s); err != nil {
						return nil, err
					}
				}
				runs = append(runs, r)
			}
			rows = append(rows, medianSetRow(runs))
		}
	}
	return rows, nil
}

func medianSetRow(runs []setRow) setRow {
	cells := func(r *setRow) []*float64 {
		return []*float64{&r.restoreSec, &r.restoreCPU, &r.perMemB, &r.lookupNs, &r.lookupCPU,
			&r.kRestoreSec, &r.kRestoreCPU, &r.kMemPer}
	}
	out := medianCells(runs, cells)
	for _, r := range runs {
		out.lookupAllocs = max(out.lookupAllocs, r.lookupAllocs)
	}
	return out
}

var sizeInMemory = regexp.MustCompile(`Size in memory: (\d+)`)

// kernelSet times `ipset restore` of the set in a fresh namespace (wall,
// and the CPU time of the ipset process, in which the kernel handles its
// netlink messages) and returns the kernel's Size in memory per member.
func kernelSet(s *bench.SetSetup) (restoreSec, restoreCPU, perMember float64, err error) {
	ns, err := kerneltest.CreateNS("pw-bset")
	if err != nil {
		return 0, 0, 0, err
	}
	defer ns.Close()
	// ip netns exec execs ipset in its own process: its CPU times are
	// ipset's.
	cmd := exec.Command("ip", "netns", "exec", ns.Name(), "ipset", "restore")
	cmd.Stdin = bytes.NewReader(s.Doc)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return 0, 0, 0, fmt.Errorf("ipset restore: %v: %s", err, stderr.String())
	}
	restoreSec = time.Since(start).Seconds()
	restoreCPU = (cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()).Seconds()
	out, err := ns.IPSet("list", "-t", "S")
	if err != nil {
		return 0, 0, 0, err
	}
	m := sizeInMemory.FindStringSubmatch(out)
	if m == nil {
		return 0, 0, 0, fmt.Errorf("no Size in memory in ipset list -t:\n%s", out)
	}
	size, _ := strconv.ParseFloat(m[1], 64)
	if _, _, err := ns.Exec("", "ipset", "destroy", "S"); err != nil {
		return 0, 0, 0, err
	}
	return restoreSec, restoreCPU, size / float64(s.Members), nil
}

func printSets(rows []setRow, kernel bool) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "type\tmembers\trestore wall / CPU\theap/member\tlookup wall / CPU\tallocs/lookup\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%.3f / %.3f s\t%.1f B\t%.0f / %.0f ns\t%.0f\t\n", r.typ, r.members,
			r.restoreSec, r.restoreCPU, r.perMemB, r.lookupNs, r.lookupCPU, r.lookupAllocs)
	}
	w.Flush()
	if !kernel {
		fmt.Println("\n(kernel columns: run as root with PACKETWALK_KERNEL=1)")
		return
	}
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "type\tmembers\tkernel ipset restore wall / CPU\tpacketwalk CPU\tCPU ratio\tkernel Size in memory/member\tpacketwalk heap/member\tratio\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%s\t%d\t%.3f / %.3f s\t%.3f s\t%.2f×\t%.1f B\t%.1f B\t%.2f×\t\n", r.typ, r.members,
			r.kRestoreSec, r.kRestoreCPU, r.restoreCPU, r.kRestoreCPU/r.restoreCPU, r.kMemPer, r.perMemB, r.perMemB/r.kMemPer)
	}
	w.Flush()
}
