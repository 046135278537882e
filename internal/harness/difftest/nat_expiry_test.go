package difftest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// expiryTimeout is every conntrack timeout of the expiry check, in the
// lab's sysctls and the host's config alike. Short, so that a run waits a
// few seconds; long enough that a batch of flows runs well within it.
const expiryTimeout = 3 * time.Second

// The phases of an expiry case, from the end of the first pass of flows:
// the keep-alive flow is touched at expiryTouch (more than two seconds
// after its first packets, so UDP counts it as a stream), and the tables
// are compared at expiryCheck, after every other entry timed out and
// before the touched one does.
const (
	expiryTouch = 2500 * time.Millisecond
	expiryCheck = 3800 * time.Millisecond
)

func expiryTimeouts() conntrack.Timeouts {
	d := expiryTimeout
	return conntrack.Timeouts{TCPSynSent: d, TCPSynRecv: d, TCPEstablished: d, TCPFinWait: d, TCPCloseWait: d, TCPLastAck: d,
		TCPTimeWait: d, TCPClose: d, TCPUnacknowledged: d, UDP: d, UDPStream: d, ICMP: d, ICMPv6: d}
}

// keepAlive is the flow the expiry check touches while the others time out.
var keepAlive = xflow{From: FromClient, Src: client3, Dst: server2, Proto: "udp", SPort: 45000, DPort: 53, Name: "keep-alive",
	Steps: []flowStep{iStep("", 10), rStep("", 40), iStep("", 10)}}

// genExpiryCase is a range case (clashing sources, SNAT choices) with a
// larger batch of flows and the keep-alive flow last.
func genExpiryCase(t *rapid.T) xCase {
	c := genRangeCase(t)
	c.Flows = append(distinctFlows(t, 6, 12, genRangeFlow), keepAlive)
	c.Timeouts = expiryTimeouts()
	return c
}

// expiryRun drives the host's clock along the wall clock from the case's
// start, so that both tables age alike.
type expiryRun struct {
	*xRun
	clock *netfilter.ManualClock
	base  time.Time // the host's time at start
	start time.Time // wall time at start
}

func (e *expiryRun) sync() {
	want := e.base.Add(time.Since(e.start))
	if d := want.Sub(e.clock.Now()); d > 0 {
		e.clock.Advance(d)
	}
}

// runExpiryCase runs every flow, waits until all but the keep-alive flow
// (touched meanwhile) timed out, compares the tables, and runs the flows
// again in reverse order: each now starts a new connection, with a new NAT
// choice where the clashes are gone, and bumps the nat counters again.
func runExpiryCase(lab *kerneltest.Lab, c xCase) (*xRun, error) {
	r, ok, err := startX(lab, c)
	if err != nil || !ok {
		return r, err
	}
	clock, isManual := r.h.Clock().(*netfilter.ManualClock)
	if !isManual {
		return r, fmt.Errorf("host clock %T, want *netfilter.ManualClock", r.h.Clock())
	}
	e := &expiryRun{xRun: r, clock: clock, base: clock.Now(), start: time.Now()}
	ka := len(c.Flows) - 1
	for fi := range c.Flows {
		e.sync()
		if err := r.flowCompared(fi, "after"); err != nil {
			return r, err
		}
	}
	endA := time.Now()
	time.Sleep(time.Until(endA.Add(expiryTouch)))
	e.sync()
	fmt.Fprintf(&r.tr, "-- %v later: the keep-alive flow's request again\n", expiryTouch)
	if err := r.flow(ka, true); err != nil {
		return r, err
	}
	time.Sleep(time.Until(endA.Add(expiryCheck)))
	e.sync()
	fmt.Fprintf(&r.tr, "-- %v after the flows: every other entry has timed out\n", expiryCheck)
	if err := r.compareState("after the timeouts"); err != nil {
		return r, err
	}
	// The keep-alive entry goes in both (it would time out during the
	// second pass), so that the second pass starts from empty tables.
	if _, _, err := lab.Node().Exec("", "conntrack", "-D", "-p", "udp", "--orig-port-src", "45000"); err != nil && !strings.Contains(err.Error(), "0 flow entries") {
		return r, err
	}
	r.h.Conntrack().Delete(conntrack.Filter{Proto: inet.UDP, OrigSrcPort: 45000})
	fmt.Fprintf(&r.tr, "-- again, in reverse order\n")
	for fi := ka - 1; fi >= 0; fi-- {
		e.sync()
		if err := r.flowCompared(fi, "again, after"); err != nil {
			return r, err
		}
	}
	r.finish()
	return r, nil
}

// TestKernelNATExpiry: with every conntrack timeout at 3 s in the lab's
// namespace (sysctls) and in the host (HostConfig.ConntrackTimeouts),
// entries time out alike on the host's clock, a flow refreshed meanwhile
// survives as an ASSURED UDP stream, and flows sent again start new
// connections, NAT choices and nat counters included.
// PACKETWALK_NAT_EXPIRY_CASES (default 4: one per lab, run in parallel,
// about 6 s in all).
func TestKernelNATExpiry(t *testing.T) {
	runSuite(t, xSuite("expiry", envInt("PACKETWALK_NAT_EXPIRY_CASES", 4), genExpiryCase, runExpiryCase))
}

// TestKernelNATExpiryNewChoice: two clients' flows from one source port
// clash on the SNAT address, so the second is moved to another port; once
// the first has timed out, the second's new connection keeps its port.
func TestKernelNATExpiryNewChoice(t *testing.T) {
	lab := newXLabRequired(t)
	req := []flowStep{iStep("", 10)}
	c := xCase{
		Rules:    natHead + "-A POSTROUTING -o eth1 -j SNAT --to-source 10.244.1.1\nCOMMIT\n",
		Rule:     &portRule{MinAddr: nodeEth1a, MaxAddr: nodeEth1a},
		Timeouts: expiryTimeouts(),
		Flows: []xflow{
			{From: FromClient, Src: clientIP, Dst: serverIP, Proto: "udp", SPort: 40000, DPort: 53, Name: "a", Steps: req},
			{From: FromClient, Src: client2, Dst: serverIP, Proto: "udp", SPort: 40000, DPort: 53, Name: "b", Steps: req},
			keepAlive,
		},
	}
	r, err := runExpiryCase(lab, c)
	require.NoError(t, err)
	require.Empty(t, r.res.Diffs, "%s", r.res.Transcript)
	// Steps: a, b, the keep-alive flow's three, its touch, then b and a.
	frames := r.res.KernelFrames
	require.Len(t, frames, 2+3+1+2)
	kept := []string{"server: udp 10.244.1.1:40000 > 10.244.1.5:53 ttl=63 len=38"}
	assert.Equal(t, kept, frames[0][0], "a keeps its port")
	assert.NotEqual(t, kept, frames[1][0], "b clashes with a")
	assert.Equal(t, kept, frames[6][0], "b again: a has timed out")
	assert.NotEqual(t, kept, frames[7][0], "a again: now it clashes with b")
	assert.Equal(t, []string{"udp 17 src=192.168.10.4 dst=10.244.1.6 sport=45000 dport=53 src=10.244.1.6 dst=10.244.1.1 sport=53 dport=45000 [ASSURED] mark=0 use=1"},
		r.res.Kernel[3], "only the keep-alive flow is left, a stream now")
}
