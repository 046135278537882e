package netfilter

import (
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// ctStats sums the counters of `conntrack -S` over the CPUs.
func ctStats(t *testing.T, ns *kerneltest.NS) map[string]uint64 {
	t.Helper()
	out, _, err := ns.Exec("", "conntrack", "-S")
	require.NoError(t, err)
	sum := map[string]uint64{}
	for line := range strings.Lines(out) {
		for _, f := range strings.Fields(line) {
			k, v, ok := strings.Cut(f, "=")
			if !ok || k == "cpu" {
				continue
			}
			n, err := strconv.ParseUint(v, 10, 64)
			require.NoError(t, err, "conntrack -S: %q", line)
			sum[k] += n
		}
	}
	return sum
}

func ctCount(t *testing.T, ns *kerneltest.NS) int {
	t.Helper()
	out, _, err := ns.Exec("", "conntrack", "-C")
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(out))
	require.NoError(t, err)
	return n
}

func readSysctlInt(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc/sys/net/netfilter", name))
	require.NoError(t, err)
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return n
}

// fillEntry is the i-th filler connection: an assured TCP connection in
// ESTABLISHED, or an unreplied UDP flow, both for an hour.
func fillEntry(i int, assured bool, now time.Time) (*conntrack.Entry, string) {
	src := netip.AddrFrom4([4]byte{10, byte(64 + i>>16), byte(i >> 8), byte(i)})
	sport := uint16(1024 + i%60000)
	if assured {
		tp := conntrack.TupleFrom(inet.TCP, netip.AddrPortFrom(src, sport), netip.MustParseAddrPort("10.8.0.1:80"))
		e := conntrack.NewEntry(tp, tp.Reverse())
		e.TCPState, e.Status = conntrack.TCPEstablished, conntrack.StatusSeenReply|conntrack.StatusAssured
		e.SetExpires(now.Add(time.Hour))
		return e, fmt.Sprintf("-I -p tcp -s %s -d 10.8.0.1 --sport %d --dport 80 --state ESTABLISHED -t 3600 -u SEEN_REPLY,ASSURED\n", src, sport)
	}
	tp := conntrack.TupleFrom(inet.UDP, netip.AddrPortFrom(src, sport), netip.MustParseAddrPort("10.8.0.1:53"))
	e := conntrack.NewEntry(tp, tp.Reverse())
	e.SetExpires(now.Add(time.Hour))
	return e, fmt.Sprintf("-I -p udp -s %s -d 10.8.0.1 --sport %d --dport 53 -t 3600\n", src, sport)
}

// TestKernelConntrackTableFull fills the node's conntrack table to
// nf_conntrack_max (262144 here) with `conntrack -R` and sends new
// connections through it, in the kernel and in a Host with the same
// nf_conntrack_max and nf_conntrack_buckets. nf_conntrack_max can only be
// written in the initial namespace and applies to every namespace, so the
// test fills the table instead of lowering the limit. Compared: which
// SYNs get through, which entries survive, `conntrack -S` drop and
// early_drop, `conntrack -C`. The kernel's hash is seeded at random, so
// where early drop lands differs; what must agree is stated per case.
func TestKernelConntrackTableFull(t *testing.T) {
	kerneltest.Require(t)
	ctMax, buckets := readSysctlInt(t, "nf_conntrack_max"), readSysctlInt(t, "nf_conntrack_buckets")
	if ctMax > 1<<20 {
		t.Skipf("nf_conntrack_max is %d: filling the table would take too long", ctMax)
	}
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-ctfull"})
	cfg := lab.Config()
	rules := "*filter\n:FORWARD ACCEPT [0:0]\n-A FORWARD -m conntrack --ctstate NEW,ESTABLISHED -j ACCEPT\nCOMMIT\n"
	server := cfg.Server[0].Addr()
	dir := t.TempDir()

	// The order matters: after a refused connection the kernel's garbage
	// collector also evicts unassured entries of a table more than 95%
	// full, at its next pass (gc_worker, early_drop); the case with only
	// unassured entries runs first, the one gc cannot touch last.
	for _, tc := range []struct {
		name      string
		unassured func(i int) bool // which fillers are unassured
		syns      int
		dropped   bool
	}{
		{name: "unassured", unassured: func(int) bool { return true }, syns: 20},
		{name: "eight-unassured", unassured: func(i int) bool { return i%(ctMax/8) == 0 }, syns: 2, dropped: true},
		{name: "assured", unassured: func(int) bool { return false }, syns: 3, dropped: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, lab.Reset(rules))
			node := lab.Node()
			n := ctMax - ctCount(t, node)
			inserted := ctStats(t, node)
			h := NewHost(HostConfig{ConntrackMax: ctMax, ConntrackBuckets: buckets})
			require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0))
			require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1))
			require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
			var fillText strings.Builder
			for i := range n {
				e, line := fillEntry(i, !tc.unassured(i), h.Clock().Now())
				fillText.WriteString(line)
				require.NoError(t, h.Conntrack().Insert(e))
			}
			file := filepath.Join(dir, tc.name+".ct")
			require.NoError(t, os.WriteFile(file, []byte(fillText.String()), 0o644))
			_, _, err := node.Exec("", "conntrack", "-R", file)
			require.NoError(t, err)
			require.Equal(t, ctMax, ctCount(t, node))
			before := ctStats(t, node)
			before["insert"] = inserted["insert"]

			frames := make([][]byte, 0, tc.syns)
			for i := range tc.syns {
				f, err := lab.Frame(kerneltest.FrameSpec{Proto: "tcp", Src: cfg.Client.Addr(), Dst: server,
					SrcPort: uint16(40000 + i), DstPort: 80, TCPFlags: "SYN"})
				require.NoError(t, err)
				frames = append(frames, f)
			}
			// One SYN at a time, to see how many entries each early drop
			// removes: every droppable entry of the bucket it stops at.
			var obs kerneltest.Observation
			kMost, last := uint64(0), before["early_drop"]
			for _, f := range frames {
				o, err := lab.Exchange(f)
				require.NoError(t, err)
				obs.Server = append(obs.Server, o.Server...)
				ed := ctStats(t, node)["early_drop"]
				kMost, last = max(kMost, ed-last), ed
			}
			after := ctStats(t, node)
			kDrop, kEarly := after["drop"]-before["drop"], after["early_drop"]-before["early_drop"]
			kCount := ctCount(t, node)
			t.Logf("kernel: %d of %d SYNs forwarded, drop +%d, early_drop +%d (at most %d at once), count %d",
				len(obs.Server), tc.syns, kDrop, kEarly, kMost, kCount)

			forwarded, most := 0, uint64(0)
			for i := range tc.syns {
				ed := h.Conntrack().Stats().EarlyDrop
				p := Packet{Proto: inet.TCP, Src: cfg.Client.Addr(), Dst: server, SrcPort: uint16(40000 + i), DstPort: 80,
					TCPFlags: inet.SYN, TTL: 64, Length: 40, Window: 64240}
				res := h.Receive("eth0", p)
				most = max(most, h.Conntrack().Stats().EarlyDrop-ed)
				if res.Disposition == Forwarded {
					forwarded++
				} else {
					assert.Equal(t, ReasonConntrackFull, res.Reason)
				}
			}
			st := h.Conntrack().Stats()
			t.Logf("packetwalk: %d of %d SYNs forwarded, drop %d, early_drop %d (at most %d at once), count %d",
				forwarded, tc.syns, st.Drop, st.EarlyDrop, most, h.Conntrack().Len())

			assert.Equal(t, uint64(n), after["insert"]-before["insert"], "kernel: conntrack -I counts in insert, a confirmation does not")
			assert.Equal(t, uint64(n), st.Insert)
			if tc.dropped {
				assert.Empty(t, obs.Server, "kernel forwarded a SYN")
				assert.Equal(t, uint64(tc.syns), kDrop)
				assert.Zero(t, kEarly)
				assert.Equal(t, ctMax, kCount)
				assert.Zero(t, forwarded)
				assert.Equal(t, conntrack.Stats{Insert: uint64(n), Drop: uint64(tc.syns)}, st)
				assert.Equal(t, ctMax, h.Conntrack().Len())
				return
			}
			// Every SYN got room by dropping at least one unassured entry;
			// none was refused, and every assured entry survived.
			assert.Len(t, obs.Server, tc.syns)
			assert.Zero(t, kDrop)
			assert.GreaterOrEqual(t, kEarly, uint64(tc.syns))
			assert.Equal(t, ctMax-int(kEarly)+tc.syns, kCount)
			assert.Equal(t, tc.syns, forwarded)
			assert.Zero(t, st.Drop)
			assert.GreaterOrEqual(t, st.EarlyDrop, uint64(tc.syns))
			assert.Equal(t, ctMax-int(st.EarlyDrop)+tc.syns, h.Conntrack().Len())
			// With two tuples per bucket on average, some early drop
			// removes several entries (the chance that 20 SYNs never meet
			// a bucket holding two is about 1e-4).
			assert.Greater(t, kMost, uint64(1))
			assert.Greater(t, most, uint64(1))

			// conntrack -I at the limit early-drops too (from bucket 0,
			// ctnetlink having no packet hash): refill to the limit and one
			// more; the last insert succeeds by dropping, counting no drop.
			extra, modelExtra := ctMax-kCount+1, ctMax-h.Conntrack().Len()+1
			var more strings.Builder
			for i := range max(extra, modelExtra) {
				e, line := fillEntry(n+i, false, h.Clock().Now())
				if i < extra {
					more.WriteString(line)
				}
				if i < modelExtra {
					require.NoError(t, h.Conntrack().Insert(e), "packetwalk insert %d of %d", i+1, modelExtra)
				}
			}
			require.NoError(t, os.WriteFile(file, []byte(more.String()), 0o644))
			before = ctStats(t, node)
			_, _, err = node.Exec("", "conntrack", "-R", file)
			require.NoError(t, err)
			after = ctStats(t, node)
			t.Logf("kernel: %d more inserts, insert +%d, early_drop +%d, drop +%d, count %d", extra,
				after["insert"]-before["insert"], after["early_drop"]-before["early_drop"], after["drop"]-before["drop"], ctCount(t, node))
			assert.Equal(t, uint64(extra), after["insert"]-before["insert"])
			assert.GreaterOrEqual(t, after["early_drop"]-before["early_drop"], uint64(1))
			assert.Zero(t, after["drop"]-before["drop"])
			assert.Greater(t, h.Conntrack().Stats().EarlyDrop, st.EarlyDrop)
			assert.Equal(t, st.Drop, h.Conntrack().Stats().Drop)
		})
	}
}
