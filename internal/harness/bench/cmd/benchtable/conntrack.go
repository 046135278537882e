package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"github.com/packetwalk/packetwalk/internal/harness/bench"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"golang.org/x/sys/unix"
)

// ctRow is one size of the conntrack table.
type ctRow struct {
	n                                      int
	insert, insertEntry, est, expire, none float64 // ns
	estCPU                                 float64 // ns of the thread's CPU time
	list, full                             float64 // ns
	listAlloc, perEntry                    float64 // bytes
	kInsert, kList                         float64 // kernel ns per entry; 0: not measured
	kSkip                                  string
}

// measureCT measures packetwalk's conntrack table at n connections, and
// with kernel set the kernel's `conntrack -R` and `conntrack -L` on a
// namespace's table of n entries (when n fits under nf_conntrack_max).
func measureCT(n int, kernel bool) (ctRow, error) {
	r := ctRow{n: n}
	c, err := bench.NewCT(n)
	if err != nil {
		return r, err
	}
	ins := testing.Benchmark(func(b *testing.B) { bench.CTInsertBench(b, n) })
	r.insert = ins.Extra["ns/conn"]
	if r.insertEntry, err = bench.CTInsertEntriesOnce(n); err != nil {
		return r, err
	}
	r.est = nsPerOp(testing.Benchmark(func(b *testing.B) { bench.CTEstablishedBench(b, c) }))
	if r.estCPU, err = threadCPUPerOp(1_000_000, func(n int) error { return bench.CTEstablishedN(c, n) }); err != nil {
		return r, err
	}
	if r.expire, err = bench.CTExpireOnce(n); err != nil {
		return r, err
	}
	r.none = nsPerOp(testing.Benchmark(func(b *testing.B) { bench.CTExpireNoneBench(b, c) }))
	list := testing.Benchmark(func(b *testing.B) { bench.CTListBench(b, c) })
	r.list, r.listAlloc = list.Extra["ns/conn"], float64(list.AllocedBytesPerOp())
	r.full = nsPerOp(testing.Benchmark(func(b *testing.B) { bench.CTFullBench(b, c) }))
	c = nil
	if r.perEntry, err = bench.CTRetainedPerEntry(n); err != nil {
		return r, err
	}
	if kernel {
		err = measureCTKernel(&r)
	}
	return r, err
}

// measureCTKernel fills a fresh namespace's conntrack table with n
// entries by `conntrack -R` and lists it with `conntrack -L`.
func measureCTKernel(r *ctRow) error {
	b, err := os.ReadFile("/proc/sys/net/netfilter/nf_conntrack_max")
	if err != nil {
		return err
	}
	limit, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return err
	}
	if r.n > limit {
		r.kSkip = fmt.Sprintf("over nf_conntrack_max (%d)", limit)
		return nil
	}
	ns, err := kerneltest.CreateNS("pw-benchct")
	if err != nil {
		return err
	}
	defer ns.Close()
	// Conntrack must be loaded in the namespace: any rule using it.
	if err := ns.Restore("*raw\n:PREROUTING ACCEPT [0:0]\n-A PREROUTING -m conntrack --ctstate NEW\nCOMMIT\n"); err != nil {
		return err
	}
	_, text := bench.CTEntries(r.n, time.Now())
	dir, err := os.MkdirTemp("", "pw-benchct")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	file := filepath.Join(dir, "fill")
	if err := os.WriteFile(file, text, 0o600); err != nil {
		return err
	}
	start := time.Now()
	if _, _, err := ns.Exec("", "conntrack", "-R", file); err != nil {
		return err
	}
	r.kInsert = float64(time.Since(start).Nanoseconds()) / float64(r.n)
	start = time.Now()
	out, _, err := ns.Exec("", "conntrack", "-L")
	if err != nil {
		return err
	}
	r.kList = float64(time.Since(start).Nanoseconds()) / float64(r.n)
	if got := strings.Count(out, "\n"); got != r.n {
		return fmt.Errorf("conntrack -L listed %d entries, want %d", got, r.n)
	}
	_, _, err = ns.Exec("", "conntrack", "-F")
	return err
}

func medianCTRow(runs []ctRow) ctRow {
	cells := func(r *ctRow) []*float64 {
		return []*float64{&r.insert, &r.insertEntry, &r.est, &r.estCPU, &r.expire, &r.none, &r.list, &r.full, &r.listAlloc,
			&r.perEntry, &r.kInsert, &r.kList}
	}
	out := medianCells(runs, cells)
	return out
}

func ns(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.1f ms", v/1e6)
	case v >= 1e3:
		return fmt.Sprintf("%.2f µs", v/1e3)
	}
	return fmt.Sprintf("%.0f ns", v)
}

func printCTTable(rows []ctRow, kernel bool) {
	fmt.Println()
	w := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(w, "conns\tnew conn (Track+NAT+Confirm)\tInsert\testablished\testablished, CPU\texpire, per conn\tExpire, none due\t-L streamed, per conn\t-L memory\tnew conn at the limit\theap per entry\t")
	for _, r := range rows {
		fmt.Fprintf(w, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.0f KiB\t%s\t%.0f B\t\n", r.n, ns(r.insert), ns(r.insertEntry), ns(r.est),
			ns(r.estCPU), ns(r.expire), ns(r.none), ns(r.list), r.listAlloc/1024, ns(r.full), r.perEntry)
	}
	w.Flush()
	if !kernel {
		fmt.Println("\n(kernel columns: run as root with PACKETWALK_KERNEL=1)")
		return
	}
	fmt.Println()
	w = tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	note := ""
	fmt.Fprintln(w, "conns\tkernel conntrack -R, per entry\tpacketwalk Insert\tspeed-up\tkernel conntrack -L, per entry\tpacketwalk -L\tspeed-up\t")
	for _, r := range rows {
		if r.kSkip != "" {
			fmt.Fprintf(w, "%d\t-\t%s\t-\t-\t%s\t-\t\n", r.n, ns(r.insertEntry), ns(r.list))
			note = fmt.Sprintf("(%d: %s)", r.n, r.kSkip)
			continue
		}
		fmt.Fprintf(w, "%d\t%s\t%s\t%.0f×\t%s\t%s\t%.1f×\t\n", r.n, ns(r.kInsert), ns(r.insertEntry), r.kInsert/r.insertEntry,
			ns(r.kList), ns(r.list), r.kList/r.list)
	}
	w.Flush()
	if note != "" {
		fmt.Println(note)
	}
}

// threadCPUPerOp runs f(n) on a locked OS thread and returns the thread's
// CPU time per operation: unlike the wall clock, it does not count the
// time other processes of a loaded machine take.
func threadCPUPerOp(n int, f func(n int) error) (float64, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var before, after unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &before); err != nil {
		return 0, err
	}
	if err := f(n); err != nil {
		return 0, err
	}
	if err := unix.Getrusage(unix.RUSAGE_THREAD, &after); err != nil {
		return 0, err
	}
	cpu := func(r *unix.Rusage) int64 { return r.Utime.Nano() + r.Stime.Nano() }
	return float64(cpu(&after)-cpu(&before)) / float64(n), nil
}
