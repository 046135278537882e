package difftest

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reuseTimeouts shortens CLOSE so that a reset connection's entry can be
// seen to expire within a test; every other timeout keeps its default.
var reuseTimeouts = conntrack.Timeouts{TCPClose: time.Second}

// reuseFlow is a TCP flow of the reuse checks: the same client tuple every
// time, masqueraded towards the server.
func reuseFlow(name string, isn uint32, wait time.Duration, steps ...flowStep) xflow {
	return xflow{From: FromClient, Src: clientIP, Dst: serverIP, Proto: "tcp", SPort: 40000, DPort: 80,
		Name: name, ISN: isn, Wait: wait, Steps: steps}
}

// Step lists of the reuse checks.
var (
	reuseHS      = []flowStep{iStep("SYN", 0), rStep("SYN,ACK", 0), iStep("ACK", 0)}
	reuseFin     = append(append([]flowStep{}, reuseHS...), iStep("PSH,ACK", 17), rStep("ACK", 0), iStep("FIN,ACK", 0), rStep("FIN,ACK", 0), iStep("ACK", 0))
	reuseRespFin = append(append([]flowStep{}, reuseHS...), rStep("FIN,ACK", 0), iStep("ACK", 0), iStep("FIN,ACK", 0), rStep("ACK", 0))
	reuseRst     = append(append([]flowStep{}, reuseHS...), iStep("PSH,ACK", 17), rStep("ACK", 0), iStep("RST", 0))
	reuseRespRst = append(append([]flowStep{}, reuseHS...), rStep("RST", 0))
	reuseRefused = []flowStep{iStep("SYN", 0), rStep("RST,ACK", 0)}
	reuseSynOnly = []flowStep{iStep("SYN", 0)}
)

// reuseCases are connections reusing a closed (or still open) one's tuple,
// each checked against the kernel's tcp_packet: a SYN in TIME_WAIT or
// CLOSE after a FIN or this side's reset kills the old entry and starts a
// new one (NF_REPEAT), whatever its sequence number; after the peer's
// reset, or on a connection still open or half closed, the SYN is ignored
// and the answering SYN/ACK resynchronises the entry; once the CLOSE
// entry expired, the SYN simply starts a new one.
var reuseCases = []struct {
	name  string
	flows []xflow
}{
	{"fin then syn", []xflow{reuseFlow("fin", 0, 0, reuseFin...), reuseFlow("again", 0, 0, reuseFin...)}},
	{"fin then higher syn", []xflow{reuseFlow("fin", 0, 0, reuseFin...), reuseFlow("again", 100000, 0, reuseHS...)}},
	{"fin then lower syn", []xflow{reuseFlow("fin", 0, 0, reuseFin...), reuseFlow("again", 1<<32-100000, 0, reuseHS...)}},
	{"fin then syn after 1s", []xflow{reuseFlow("fin", 0, 0, reuseFin...), reuseFlow("again", 7, time.Second, reuseHS...)}},
	{"resp fin then syn", []xflow{reuseFlow("resp-fin", 0, 0, reuseRespFin...), reuseFlow("again", 50, 0, reuseHS...)}},
	{"half closed then syn", []xflow{reuseFlow("half", 0, 0, reuseFin[:6]...), reuseFlow("again", 50, 0, reuseHS...)}},
	{"last ack then syn", []xflow{reuseFlow("last-ack", 0, 0, reuseFin[:8]...), reuseFlow("again", 50, 0, reuseHS...)}},
	{"rst then syn", []xflow{reuseFlow("rst", 0, 0, reuseRst...), reuseFlow("again", 0, 0, reuseHS...)}},
	{"rst then higher syn", []xflow{reuseFlow("rst", 0, 0, reuseRst...), reuseFlow("again", 100000, 0, reuseFin...)}},
	{"resp rst then syn", []xflow{reuseFlow("resp-rst", 0, 0, reuseRespRst...), reuseFlow("again", 0, 0, reuseHS...)}},
	{"resp rst then other syn", []xflow{reuseFlow("resp-rst", 0, 0, reuseRespRst...), reuseFlow("again", 100000, 0, reuseFin...)}},
	{"resp rst then syn after close", []xflow{reuseFlow("resp-rst", 0, 0, reuseRespRst...), reuseFlow("again", 100000, 1500*time.Millisecond, reuseHS...)}},
	{"refused then syn", []xflow{reuseFlow("refused", 0, 0, reuseRefused...), reuseFlow("again", 0, 0, reuseHS...)}},
	{"syn sent then other syn", []xflow{reuseFlow("syn", 0, 0, reuseSynOnly...), reuseFlow("again", 100000, 0, reuseHS...)}},
	{"established then syn", []xflow{reuseFlow("open", 0, 0, reuseHS...), reuseFlow("again", 100000, 0, reuseFin...)}},
	{"established then same syn", []xflow{reuseFlow("open", 0, 0, reuseHS...), reuseFlow("again", 0, 0, reuseHS...)}},
	{"data then syn", []xflow{reuseFlow("data", 0, 0, reuseFin[:5]...), reuseFlow("again", 1<<32-100000, 0, reuseHS...)}},
}

// TestKernelTCPReuse runs each reuse case in the lab and packetwalk, frame
// by frame, with the conntrack tables compared after every flow.
func TestKernelTCPReuse(t *testing.T) {
	lab := newXLabRequired(t)
	for _, tc := range reuseCases {
		t.Run(tc.name, func(t *testing.T) {
			c := xCase{Rules: natHead + "-A POSTROUTING -o eth1 -j MASQUERADE\nCOMMIT\n", Flows: tc.flows, Timeouts: reuseTimeouts}
			r, err := runXCase(lab, c)
			require.NoError(t, err)
			assert.Empty(t, r.res.Diffs, "%s\n%s", c, r.res.Transcript)
		})
	}
}

// TestKernelTCPIgnoredSynAck: a SYN/ACK whose ack lies more than the
// window below the SYN's is ignored (SEEN_REPLY set, still SYN_SENT); a
// RST that follows is then judged by the window, not taken for the answer
// to the SYN, whatever its ack field: the entry stays SYN_SENT when the
// RST's seq is out of window and closes when it is in. Also the node's own
// SYN reusing a SYN_SENT tuple with a lower sequence number, answered so.
func TestKernelTCPIgnoredSynAck(t *testing.T) {
	lab := newXLabRequired(t)
	st := func(resp bool, flags string, sd, ad uint32) flowStep {
		return flowStep{Resp: resp, Flags: flags, SeqDelta: sd, AckDelta: ad}
	}
	const old = 1<<32 - 100000 // 100000 below
	oldSynAck := st(true, "SYN,ACK", 0, old)
	cli := func(steps ...flowStep) []xflow {
		return []xflow{{From: FromClient, Src: clientIP, Dst: serverIP, Proto: "tcp", SPort: 33333, DPort: 80, Name: "a", Steps: steps}}
	}
	for _, tc := range []struct {
		name  string
		flows []xflow
		state string
	}{
		{"old SYN/ACK", cli(iStep("SYN", 0), oldSynAck), "SYN_SENT"},
		{"then RST in window", cli(iStep("SYN", 0), oldSynAck, iStep("RST", 0)), "CLOSE"},
		{"then RST below, ack 0", cli(iStep("SYN", 0), oldSynAck, st(false, "RST", old, 0)), "SYN_SENT"},
		{"then RST,ACK below, ack of the SYN", cli(iStep("SYN", 0), oldSynAck, st(false, "RST,ACK", old, 1<<32+1001-5000)), "SYN_SENT"},
		{"node SYN reusing a SYN_SENT tuple lower", []xflow{
			{From: FromNode, Src: nodeEth1a, Dst: serverIP, Proto: "tcp", SPort: 33333, DPort: 80, Name: "a", Steps: []flowStep{iStep("SYN", 0), iStep("SYN", 0)}},
			{From: FromNode, Src: nodeEth1a, Dst: serverIP, Proto: "tcp", SPort: 33333, DPort: 80, Name: "b", ISN: old, Steps: []flowStep{iStep("SYN", 0), rStep("SYN,ACK", 0)}},
		}, "SYN_SENT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := xCase{Rules: natHead + "-A POSTROUTING -o eth0 -j MASQUERADE\nCOMMIT\n", Flows: tc.flows}
			r, err := runXCase(lab, c)
			require.NoError(t, err)
			require.Empty(t, r.res.Diffs, "%s\n%s", c, r.res.Transcript)
			last := r.res.Kernel[len(r.res.Kernel)-1]
			require.Len(t, last, 1)
			assert.Equal(t, tc.state, strings.Fields(last[0])[2])
		})
	}
}

// TestKernelTCPInvalidReplyToSNATAddress: a SYN_SENT entry whose SYN was
// retransmitted 2^30 higher ignores the SYN/ACK answering a reused tuple's
// SYN (SEEN_REPLY set, still SYN_SENT); the client's ACKs and FIN are then
// INVALID and leave without SNAT, and so is the server's FIN (a reply FIN
// in SYN_SENT), which is not un-NATed: the node forwards it back out of
// eth1 to the SNAT address, has no neighbour there and loses it. Both
// families; the entry stays SYN_SENT throughout.
func TestKernelTCPInvalidReplyToSNATAddress(t *testing.T) {
	lab := newXLabRequired(t)
	for _, tc := range []struct {
		name     string
		v6       bool
		src, dst netip.Addr
		to       string
	}{
		{"ipv4", false, client2, serverIP, "10.244.1.100-10.244.1.103"},
		{"ipv6", true, client6b, server6, "fd00:244::100-fd00:244::103"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			flow := func(name string, steps ...flowStep) xflow {
				return xflow{From: FromClient, Src: tc.src, Dst: tc.dst, Proto: "tcp", SPort: 40000, DPort: 8080, Name: name, Steps: steps}
			}
			c := xCase{V6: tc.v6, Exact: true, Rules: natHead + "-A POSTROUTING -o eth1 -j SNAT --to-source " + tc.to + " --persistent\nCOMMIT\n",
				Flows: []xflow{
					flow("syn-only", iStep("SYN", 0), flowStep{Flags: "SYN", SeqDelta: 1 << 30}),
					flow("reuse-fin", reuseFin...),
				}}
			r, err := runXCase(lab, c)
			require.NoError(t, err)
			require.Empty(t, r.res.Diffs, "%s\n%s", c, r.res.Transcript)
			// Flow 2's server FIN (its 7th step, the 9th packet) reaches nobody.
			require.Len(t, r.res.KernelFrames, 2+7)
			assert.Empty(t, r.res.KernelFrames[2+6][0], "%s", r.res.Transcript)
			last := r.res.Kernel[len(r.res.Kernel)-1]
			require.Len(t, last, 1)
			assert.Equal(t, "SYN_SENT", strings.Fields(last[0])[2])
		})
	}
}
