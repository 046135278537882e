package difftest

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
)

// runSetCase is runCase for a set case: the sets are loaded before the
// rules in both worlds, and after the packets the sets' members (with
// their counters) are compared too.
func runSetCase(lab *kerneltest.Lab, c setCase, st *caseStats) (caseResult, error) {
	var res caseResult
	h, setErr, simErr := loadSetCase(c)
	fam := c.family()
	rs := kerneltest.Ruleset{IPSets: c.Sets, IPv4: c.Rules}
	if fam == netfilter.IPv6 {
		rs = kerneltest.Ruleset{IPSets: c.Sets, IPv6: c.Rules}
	}
	// `ipset destroy` refuses while a list:set holds members (they are
	// references, as in packetwalk): empty the sets first.
	if _, _, err := lab.Node().Exec("", "ipset", "flush"); err != nil {
		return res, err
	}
	kernErr := lab.ResetRuleset(rs)
	if setErr != nil { // sets refused: both must refuse (hash:ip,mark)
		simErr = setErr
	}
	o, ok, err := loaded("case", kernErr, simErr)
	if !ok {
		res.outcome = o
		return res, err
	}
	var tr strings.Builder
	if err := sendCompared(lab, h, c.Packets, &res, st, &tr); err != nil {
		return res, err
	}
	if len(c.Later) > 0 {
		// Both worlds wait the same measured time: the kernel's entry
		// timers run on jiffies, packetwalk's on the host's clock.
		start := time.Now()
		time.Sleep(c.Wait)
		h.Clock().(*netfilter.ManualClock).Advance(time.Since(start))
		fmt.Fprintf(&tr, "waited %v\n", c.Wait)
		if err := sendCompared(lab, h, c.Later, &res, st, &tr); err != nil {
			return res, err
		}
	}
	var diffs []string
	res.KernelCounters, diffs, err = counterDiffs(lab, h, fam)
	if err != nil {
		return res, err
	}
	if fam == netfilter.IPv4 {
		// The node's own IPv6 multicast (MLD reports) crosses OUTPUT and
		// PREROUTING at times of its choosing: rule counters of IPv6
		// cases are not compared; frames and set contents are.
		res.Diffs = append(res.Diffs, diffs...)
	}
	ksets, err := lab.Node().IPSet("save")
	if err != nil {
		return res, err
	}
	psets, err := h.Sets().AppendSave(nil)
	if err != nil {
		return res, err
	}
	res.Diffs = append(res.Diffs, compareSetSaves(ksets, string(psets))...)
	if len(res.Diffs) > 0 {
		fmt.Fprintf(&tr, "%s\nkernel ipset save:\n%s\npacketwalk ipset save:\n%s", savesWithCounters(lab, h, fam), ksets, psets)
	}
	res.Transcript = tr.String()
	return res, nil
}

// compareSetSaves compares two `ipset save` outputs: create lines without
// initval (kernel-random) and member lines as sets, timeouts within 2s.
func compareSetSaves(kern, sim string) []string {
	k, s := normSetSave(kern), normSetSave(sim)
	var diffs []string
	for line, kt := range k {
		st, ok := s[line]
		switch {
		case !ok && labNoise(line):
		case !ok:
			diffs = append(diffs, "ipset: only the kernel has "+line)
		case kt >= 0 && (st < kt-2 || st > kt+2):
			diffs = append(diffs, fmt.Sprintf("ipset: %s timeout: kernel %d, packetwalk %d", line, kt, st))
		}
	}
	for line := range s {
		if _, ok := k[line]; !ok {
			diffs = append(diffs, "ipset: only packetwalk has "+line)
		}
	}
	slices.Sort(diffs)
	return diffs
}

// labNoise reports a kernel set entry that only the lab's own IPv6
// housekeeping can have added (an MLD report to ff02::16 or neighbour
// discovery, from or to link-local, multicast or the unspecified address
// ::, during a case's wait): packetwalk is not sent those packets.
func labNoise(line string) bool {
	f := strings.Fields(line)
	if len(f) < 3 || f[0] != "add" {
		return false
	}
	for _, part := range strings.Split(f[2], ",") {
		if strings.HasPrefix(part, "ff02:") || strings.HasPrefix(part, "fe80:") {
			return true
		}
		addr, _, _ := strings.Cut(part, "/")
		if a, err := netip.ParseAddr(addr); err == nil && a.IsUnspecified() && a.Is6() {
			return true
		}
	}
	return false
}

// normSetSave maps each line (initval dropped, an entry's timeout value
// replaced by "T") to its timeout, -1 when it has none.
func normSetSave(save string) map[string]int {
	out := map[string]int{}
	for line := range strings.Lines(save) {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		tmo := -1
		var keep []string
		for i := 0; i < len(f); i++ {
			switch {
			case f[0] == "create" && f[i] == "initval" && i+1 < len(f):
				i++
				continue
			case f[0] == "add" && f[i] == "timeout" && i+1 < len(f):
				tmo, _ = strconv.Atoi(f[i+1])
				keep = append(keep, "timeout", "T")
				i++
				continue
			}
			keep = append(keep, f[i])
		}
		out[strings.Join(keep, " ")] = tmo
	}
	return out
}

// TestKernelSetDifferential runs random ipsets, rules using -m set and -j
// SET, and packets through the kernel and packetwalk, and requires the same
// outcome for every packet, the same rule counters and the same set members
// and entry counters. PACKETWALK_SET_DIFF_CASES (default 1200) sets the
// number of cases, PACKETWALK_DIFF_LABS (default 4) the labs in parallel.
func TestKernelSetDifferential(t *testing.T) {
	runSuite(t, packetSuite(envInt("PACKETWALK_SET_DIFF_CASES", 1200), "set cases", drawCase(setCaseGen), runSetCase))
}
