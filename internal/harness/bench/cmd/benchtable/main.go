// Command benchtable prints packetwalk's performance on kube-proxy
// rulesets of 100, 1,000 and 10,000 services × 5 endpoints as one table,
// and on large ipsets (hash:net, hash:ip, hash:ip,port, hash:net,port of
// 10k, 100k and 1M members: restore time, heap per member, lookup) as
// another.
// Run as root with PACKETWALK_KERNEL=1, it also measures the kernel on the
// same rulesets in network namespaces it creates (iptables-restore time,
// and the end-to-end cost of a bounded burst of new connections in the
// internal/harness/kerneltest lab) and prints the ratios side by side. Each cell
// is the median of -count runs: a shared virtual machine's speed drifts by
// some 10% from one minute to the next.
//
// With PACKETWALK_KERNEL=1 the sets table has the kernel's `ipset restore`
// time and "Size in memory" per member beside packetwalk's. The conntrack
// table (-tables conntrack) holds 10,000, 100,000 and 1,000,000
// connections (-ct-sizes), and with PACKETWALK_KERNEL=1 the kernel's
// `conntrack -R` and `conntrack -L` on as many entries, where they fit
// under nf_conntrack_max.
//
//	go run ./internal/harness/bench/cmd/benchtable [-sizes 100,1000,10000] [-burst 1000] [-count 3]
//	    [-tables kube,sets,conntrack] [-set-sizes 10000,100000,1000000] [-set-types hash:net,...]
//	    [-ct-sizes 10000,100000,1000000]
package main

import (
	"flag"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"

	"github.com/packetwalk/packetwalk/internal/harness/bench"
)

func main() {
	sizes := flag.String("sizes", "100,1000,10000", "numbers of services, comma-separated")
	burst := flag.Int("burst", 1000, "new connections per kernel burst")
	count := flag.Int("count", 3, "runs per size; each cell is their median")
	tables := flag.String("tables", "kube,sets", "tables to print: kube, sets, conntrack")
	setSizes := flag.String("set-sizes", "10000,100000,1000000", "set sizes (members), comma-separated")
	setTypes := flag.String("set-types", strings.Join(bench.SetTypes, ";"), "set types, ';'-separated")
	ctSizes := flag.String("ct-sizes", "10000,100000,1000000", "conntrack table sizes, comma-separated")
	flag.Parse()
	if *count < 1 {
		fmt.Fprintln(os.Stderr, "benchtable: -count must be at least 1")
		os.Exit(2)
	}
	ns := parseSizes(*sizes)
	kernel := os.Getenv("PACKETWALK_KERNEL") == "1"
	if kernel && os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "benchtable: PACKETWALK_KERNEL=1 needs root")
		os.Exit(1)
	}
	want := map[string]bool{}
	for _, t := range strings.Split(*tables, ",") {
		if t != "kube" && t != "sets" && t != "conntrack" {
			fmt.Fprintf(os.Stderr, "benchtable: unknown table %q (kube, sets, conntrack)\n", t)
			os.Exit(2)
		}
		want[t] = true
	}
	if want["kube"] {
		kubeTable(ns, *burst, *count, kernel)
	}
	if want["sets"] {
		if want["kube"] {
			fmt.Println()
		}
		types := strings.Split(*setTypes, ";")
		for _, t := range types {
			if !slices.Contains(bench.SetTypes, t) {
				fmt.Fprintf(os.Stderr, "benchtable: unknown set type %q\n", t)
				os.Exit(2)
			}
		}
		rows, err := measureSets(types, parseSizes(*setSizes), *count, kernel)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchtable: sets: %v\n", err)
			os.Exit(1)
		}
		printSets(rows, kernel)
	}
	if want["conntrack"] {
		if want["kube"] || want["sets"] {
			fmt.Println()
		}
		var rows []ctRow
		for _, n := range parseSizes(*ctSizes) {
			var runs []ctRow
			for range *count {
				r, err := measureCT(n, kernel)
				if err != nil {
					fmt.Fprintf(os.Stderr, "benchtable: %d connections: %v\n", n, err)
					os.Exit(1)
				}
				runs = append(runs, r)
			}
			rows = append(rows, medianCTRow(runs))
		}
		printCTTable(rows, kernel)
	}
}

func parseSizes(list string) []int {
	var ns []int
	for _, f := range strings.Split(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "benchtable: bad size %q\n", f)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	return ns
}

func kubeTable(ns []int, burst, count int, kernel bool) {
	var rows []row
	for _, n := range ns {
		var runs []row
		for range count {
			r, err := measure(n)
			if err == nil && kernel {
				r.k, err = measureKernel(r.setup, burst)
			}
			if err != nil {
				fmt.Fprintf(os.Stderr, "benchtable: %d services: %v\n", n, err)
				os.Exit(1)
			}
			runs = append(runs, r)
		}
		rows = append(rows, medianRow(runs))
	}
	printTable(rows, kernel)
}

type row struct {
	setup                       *bench.Setup
	loadSec, loadNsRule, allocB float64
	heapB                       float64
	first, last, est, estTo     float64 // ns per packet
	estAllocs                   int64
	explain                     float64 // ns
	k                           kernelRow
}

func measure(n int) (row, error) {
	s, err := bench.New(n)
	if err != nil {
		return row{}, err
	}
	r := row{setup: s}
	load := testing.Benchmark(func(b *testing.B) { bench.LoadBench(b, s) })
	r.loadSec = float64(load.NsPerOp()) / 1e9
	r.loadNsRule, r.allocB = load.Extra["ns/rule"], load.Extra["B/rule"]
	if r.heapB, err = bench.RetainedPerRule(s); err != nil {
		return r, err
	}
	r.first = nsPerOp(testing.Benchmark(func(b *testing.B) { bench.NewConnBench(b, s, 0) }))
	r.last = nsPerOp(testing.Benchmark(func(b *testing.B) { bench.NewConnBench(b, s, n-1) }))
	est := testing.Benchmark(func(b *testing.B) { bench.EstablishedBench(b, s) })
	r.est, r.estAllocs = nsPerOp(est), est.AllocsPerOp()
	estTo := testing.Benchmark(func(b *testing.B) { bench.EstablishedToBench(b, s) })
	r.estTo, r.estAllocs = nsPerOp(estTo), max(r.estAllocs, estTo.AllocsPerOp())
	r.explain = nsPerOp(testing.Benchmark(func(b *testing.B) { bench.ExplainBench(b, s) }))
	return r, nil
}

// medianRow returns the first run with every measured cell replaced by
// the median of that cell over all runs.
func medianRow(runs []row) row {
	cells := func(r *row) []*float64 {
		return []*float64{&r.loadSec, &r.loadNsRule, &r.allocB, &r.heapB, &r.first, &r.last, &r.est, &r.estTo,
			&r.explain, &r.k.restoreSec, &r.k.firstNs, &r.k.lastNs}
	}
	out := medianCells(runs, cells)
	for _, r := range runs {
		out.estAllocs = max(out.estAllocs, r.estAllocs)
	}
	return out
}

// medianCells returns a copy of runs[0] whose cells (the float fields
// cells points to) hold the median of each cell over runs.
func medianCells[R any](runs []R, cells func(*R) []*float64) R {
	out := runs[0]
	dst := cells(&out)
	vals := make([]float64, len(runs))
	for i := range dst {
		for j := range runs {
			vals[j] = *cells(&runs[j])[i]
		}
		slices.Sort(vals)
		*dst[i] = vals[len(vals)/2]
	}
	return out
}

func nsPerOp(r testing.BenchmarkResult) float64 {
	if r.N == 0 {
		return 0
	}
	return float64(r.T.Nanoseconds()) / float64(r.N)
}

func rate(ns float64) string {
	if ns == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fM", 1e3/ns)
}

func printTable(rows []row, kernel bool) {
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "services\trules\tload\tload/rule\talloc/rule\theap/rule\tnew conn first\tnew conn last\testablished\testablished (ReceiveTo)\tallocs/est pkt\tExplain\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%d\t%.3f s\t%.0f ns\t%.0f B\t%.0f B\t%s pkt/s\t%s pkt/s\t%s pkt/s\t%s pkt/s\t%d\t%.0f µs\t\n",
			r.setup.Services, r.setup.Rules, r.loadSec, r.loadNsRule, r.allocB, r.heapB,
			rate(r.first), rate(r.last), rate(r.est), rate(r.estTo), r.estAllocs, r.explain/1e3)
	}
	w.Flush()
	if !kernel {
		fmt.Println("\n(kernel columns: run as root with PACKETWALK_KERNEL=1)")
		return
	}
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "services\tkernel restore\tpacketwalk load\tspeed-up\tkernel new conn first\tpacketwalk\tspeed-up\tkernel new conn last\tpacketwalk\tspeed-up\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%.3f s\t%.3f s\t%.1f×\t%.1f µs\t%.2f µs\t%.1f×\t%.1f µs\t%.2f µs\t%.1f×\t\n",
			r.setup.Services, r.k.restoreSec, r.loadSec, r.k.restoreSec/r.loadSec,
			r.k.firstNs/1e3, r.first/1e3, r.k.firstNs/r.first,
			r.k.lastNs/1e3, r.last/1e3, r.k.lastNs/r.last)
	}
	w.Flush()
}
