package storytest

import (
	"bytes"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/examples/internal/story"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// Replay records the packets that entered one simulated node during a
// story, and the changes made to it in between, so that a kernel lab can
// replay them in the same order and the views can be compared.
type Replay struct {
	// Node is the story's name of the host the lab's node plays.
	Node string
	// Sides maps each interface of the simulated node to the lab side its
	// packets come from (and leave to).
	Sides map[string]kerneltest.Side
	// ByAddr, when set, replaces Sides for a node whose one interface (a
	// bridge) faces both lab sides: an arriving packet comes from the side
	// of its source, a forwarded one leaves to the side of its destination.
	ByAddr func(netip.Addr) kerneltest.Side
	steps  []replayStep
}

type replayStep struct {
	iface string
	in    netfilter.Packet
	res   netfilter.Result
	name  string
	do    func(*kerneltest.Lab) error
}

// Hop records h if it is a packet arriving at the node; it has the
// signature of story.Net.OnHop.
func (r *Replay) Hop(h story.Hop) {
	if h.Host == r.Node && h.Iface != "" {
		r.Receive(h.Iface, h.In, h.Result)
	}
}

// Receive records that in arrived on iface and the simulator gave res.
func (r *Replay) Receive(iface string, in netfilter.Packet, res netfilter.Result) {
	r.steps = append(r.steps, replayStep{iface: iface, in: in, res: res})
}

// Do records a change of the node (a ruleset or set update) to make in the
// kernel at this point of the replay.
func (r *Replay) Do(name string, f func(*kerneltest.Lab) error) {
	r.steps = append(r.steps, replayStep{name: name, do: f})
}

// Run loads rs into the lab's node and replays the recorded steps. After
// each packet it checks that the kernel did what the simulator did: the
// same packet (addresses, ports, flags) out of the same side, or nothing
// when the simulator dropped or delivered it. A statistic rule makes the
// kernel's choice random, so a story with one is replayed up to attempts
// times until the kernel took the simulator's path for every packet; a
// deterministic story passes attempts 1 and any difference is a bug.
func (r *Replay) Run(t *testing.T, lab *kerneltest.Lab, rs kerneltest.Ruleset, attempts int) {
	t.Helper()
	var last string
	for a := 1; a <= attempts; a++ {
		require.NoError(t, lab.ResetRuleset(rs))
		diff, err := r.once(lab)
		require.NoError(t, err)
		if diff == "" {
			t.Logf("kernel took the simulator's path on attempt %d", a)
			return
		}
		last = diff
	}
	t.Fatalf("after %d attempts the kernel never took the simulator's path; last difference:\n%s", attempts, last)
}

// Play replays the recorded steps on the lab as it is (no reset), failing
// t at the first packet the kernel treats differently from the simulator.
func (r *Replay) Play(t *testing.T, lab *kerneltest.Lab) {
	t.Helper()
	diff, err := r.once(lab)
	require.NoError(t, err)
	require.Empty(t, diff, "the kernel took another path than the simulator")
}

func (r *Replay) once(lab *kerneltest.Lab) (string, error) {
	for i, s := range r.steps {
		if s.do != nil {
			if err := s.do(lab); err != nil {
				return "", fmt.Errorf("step %d (%s): %w", i, s.name, err)
			}
			continue
		}
		side, ok := r.side(s.iface, s.in.Src)
		if !ok {
			return "", fmt.Errorf("step %d: no lab side for interface %q", i, s.iface)
		}
		f, err := lab.FrameFrom(side, Spec(s.in))
		if err != nil {
			return "", err
		}
		if err := lab.InjectFrom(side, f); err != nil {
			return "", err
		}
		obs, err := lab.Settle()
		if err != nil {
			return "", err
		}
		var want string
		if s.res.Disposition == netfilter.Forwarded {
			outSide, ok := r.side(s.res.Packet.Out, s.res.Packet.Dst)
			if !ok {
				return "", fmt.Errorf("step %d: no lab side for interface %q", i, s.res.Packet.Out)
			}
			want = fmt.Sprintf("%s: %s\n", outSide, gist(s.res.Packet))
		}
		var got strings.Builder
		for _, c := range append(obs.Client, obs.Server...) {
			fmt.Fprintf(&got, "%s: %s\n", c.Side, summaryGist(c.Summary))
		}
		if got.String() != want {
			return fmt.Sprintf("packet %d %s [%s] in on %s:\n  simulator: %q\n  kernel:    %q", i, netfiltertest.Addrs(s.in), s.in.TCPFlags, s.iface, want, got.String()), nil
		}
	}
	return "", nil
}

func (r *Replay) side(iface string, a netip.Addr) (kerneltest.Side, bool) {
	if r.ByAddr != nil {
		return r.ByAddr(a), true
	}
	s, ok := r.Sides[iface]
	return s, ok
}

func gist(p netfilter.Packet) string {
	return fmt.Sprintf("%s [%s]", netfiltertest.Addrs(p), p.TCPFlags)
}

func summaryGist(s kerneltest.Summary) string {
	return fmt.Sprintf("%s:%d → %s:%d [%s]", s.Src, s.SrcPort, s.Dst, s.DstPort, s.TCPFlags)
}

// Client and server initial sequence numbers of every replayed connection.
const clientISN, serverISN = 1000, 5000

// Spec is the frame of a simulated TCP handshake packet: its IP length is
// the packet's Length (the bytes the counters add), made of payload since
// frames carry no TCP options, with sequence numbers that keep the
// kernel's TCP window tracking satisfied (SYN, SYN-ACK, ACK of one
// connection).
func Spec(p netfilter.Packet) kerneltest.FrameSpec {
	pl := max(int(p.Length)-40, 0)
	s := kerneltest.FrameSpec{Proto: "tcp", Src: p.Src, Dst: p.Dst, SrcPort: p.SrcPort, DstPort: p.DstPort,
		TCPFlags: p.TCPFlags.String(), TTL: p.TTL, PayloadLen: pl}
	next := func(isn uint32) uint32 { return isn + 1 + uint32(pl) }
	switch {
	case p.TCPFlags&inet.SYN != 0 && p.TCPFlags&inet.ACK != 0:
		s.Seq, s.Ack = serverISN, next(clientISN)
	case p.TCPFlags&inet.SYN != 0:
		s.Seq = clientISN
	default:
		s.Seq, s.Ack = next(clientISN), next(serverISN)
	}
	return s
}

// SimRuleset is h's IPv4 ruleset and sets in iptables-save and ipset save
// form, for kerneltest.Lab.ResetRuleset.
func SimRuleset(t *testing.T, h *netfilter.Host) kerneltest.Ruleset {
	t.Helper()
	var rules, sets bytes.Buffer
	require.NoError(t, h.Ruleset(netfilter.IPv4).Save(&rules, netfilter.SaveOptions{}))
	require.NoError(t, h.Sets().Save(&sets))
	return kerneltest.Ruleset{IPv4: rules.String(), IPSets: sets.String()}
}

// NodeIP runs `ip -batch` lines (routes, neighbours) in the lab's node.
func NodeIP(t *testing.T, lab *kerneltest.Lab, lines ...string) {
	t.Helper()
	_, _, err := lab.Node().Exec(strings.Join(lines, "\n")+"\n", "ip", "-batch", "-")
	require.NoError(t, err)
}

// CompareNAT asserts that `iptables -t nat -nvL chain` prints the same in
// the kernel as in the simulator, counters included, for every chain. It
// returns the simulator's views, to check them against the golden output.
func CompareNAT(t *testing.T, lab *kerneltest.Lab, h *netfilter.Host, chains ...string) []string {
	t.Helper()
	var views []string
	for _, c := range chains {
		sim, err := h.Ruleset(netfilter.IPv4).AppendList(nil, netfilter.NAT, c, netfilter.ListOptions{Numeric: true, Verbose: true})
		require.NoError(t, err)
		kern, err := lab.Node().IPTables("-t", "nat", "-nvL", c)
		require.NoError(t, err)
		assert.Equal(t, kern, string(sim), "iptables -t nat -nvL %s", c)
		t.Logf("kernel: iptables -t nat -nvL %s\n%s", c, kern)
		views = append(views, fmt.Sprintf("$ iptables -t nat -nvL %s\n%s", c, sim))
	}
	return views
}

var timeout = regexp.MustCompile(`^(\S+\s+\d+\s+)\d+ `)

// CompareConntrack asserts that `conntrack -L args` lists the same entries
// in the kernel as the simulator's entries that f matches, in any order
// and ignoring the remaining timeouts.
func CompareConntrack(t *testing.T, lab *kerneltest.Lab, h *netfilter.Host, f conntrack.Filter, args ...string) {
	t.Helper()
	kout, _, err := lab.Node().Exec("", append([]string{"conntrack", "-L"}, args...)...)
	require.NoError(t, err)
	var kern, sim []string
	for line := range strings.Lines(kout) {
		if line = strings.TrimRight(line, "\n"); line != "" {
			kern = append(kern, timeout.ReplaceAllString(line, "${1}T "))
		}
	}
	now := h.Clock().Now()
	for _, e := range h.Conntrack().Entries() {
		if f.Match(e) {
			sim = append(sim, timeout.ReplaceAllString(string(e.AppendText(nil, now, conntrack.Format{})), "${1}T "))
		}
	}
	slices.Sort(kern)
	slices.Sort(sim)
	t.Logf("kernel: conntrack -L %s\n%s", strings.Join(args, " "), strings.Join(kern, "\n"))
	assert.Equal(t, strings.Join(kern, "\n"), strings.Join(sim, "\n"), "conntrack -L %s", strings.Join(args, " "))
	assert.NotEmpty(t, sim, "conntrack -L %s shows nothing", strings.Join(args, " "))
}

// CompareIpset asserts that `ipset list name` prints exactly the same in
// the kernel as in the simulator: the sets carry the same initval, so the
// simulator's bucket model gives the kernel's member order and "Size in
// memory".
func CompareIpset(t *testing.T, lab *kerneltest.Lab, h *netfilter.Host, names ...string) {
	t.Helper()
	for _, n := range names {
		var sim bytes.Buffer
		require.NoError(t, h.Sets().List(&sim, n))
		kern, err := lab.Node().IPSet("list", n)
		require.NoError(t, err)
		t.Logf("kernel: ipset list %s\n%s", n, kern)
		assert.Equal(t, kern, sim.String(), "ipset list %s", n)
	}
}

// InGolden asserts that each view appears in the example's golden output,
// so the test replayed the same walk as the example.
func InGolden(t *testing.T, views ...string) {
	t.Helper()
	golden := readGolden(t)
	for _, v := range views {
		assert.Contains(t, golden, v, "the test's walk differs from the example's")
	}
}

func readGolden(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "output.golden"))
	require.NoError(t, err)
	return string(b)
}
