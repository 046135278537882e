package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// NFQUEUETarget is "-j NFQUEUE": the packet is handed to a userspace
// program listening on a queue, which returns its verdict.
//
//	--queue-num N            queue N (0-65535; the default is 0)
//	--queue-balance A:B      one of the queues A to B (A < B), chosen by the
//	                         kernel by a hash of the flow (or, with
//	                         --queue-cpu-fanout, by the CPU)
//	--queue-bypass           with no program listening, the packet is
//	                         accepted as by ACCEPT (the next table of the
//	                         hook runs) instead of dropped
//	--queue-cpu-fanout       needs --queue-balance
//
// iptables 1.8.9 has no --fail-open. On a Host, the program is the
// QueueHandler set with SetQueueHandler; with none, the packet is dropped,
// or accepted with --queue-bypass, as the kernel's nf_queue does when no
// program is bound to the queue.
type NFQUEUETarget struct {
	// Num is the queue, or with Balance the first queue; Last is the last
	// queue of --queue-balance.
	Num, Last uint16
	Balance   bool
	Bypass    bool
	CPUFanout bool
}

// QueueVerdict is a QueueHandler's verdict on a queued packet.
type QueueVerdict uint8

// Queue verdicts: NF_DROP and NF_ACCEPT. An accepted packet continues with
// the next table of the hook, as after ACCEPT.
const (
	QueueDrop QueueVerdict = iota
	QueueAccept
)

// QueueHandler is the program reading the NFQUEUE queues: it is given the
// rule's target (with --queue-balance it picks the queue, since the
// kernel's choice depends on a hash seeded at boot) and the packet, which it
// may change (its Mark, say), and returns the verdict.
type QueueHandler func(t *NFQUEUETarget, p *Packet) QueueVerdict

// SetQueueHandler sets the program listening on the NFQUEUE queues; nil
// means none.
func (h *Host) SetQueueHandler(f QueueHandler) { h.queue = f }

func init() {
	registerTarget(&module{name: "NFQUEUE",
		opts: []option{{name: "queue-num", args: 1}, {name: "queue-balance", args: 1},
			{name: "queue-bypass"}, {name: "queue-cpu-fanout"}},
		newBuilder: func(*ruleCtx) builder { return &nfqueueTargetBuilder{} }})
}

type nfqueueTargetBuilder struct {
	t        NFQUEUETarget
	num, bal bool
}

func (b *nfqueueTargetBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	switch opt {
	case "queue-bypass":
		b.t.Bypass = true
		return nil
	case "queue-cpu-fanout":
		b.t.CPUFanout = true
		return nil
	}
	if b.num || b.bal {
		first, second := "queue-num", "queue-balance"
		if b.bal {
			first, second = second, first
		}
		return fmt.Errorf("%w: NFQUEUE: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, first, second)
	}
	if opt == "queue-num" {
		n, ok := parseCUint(args[0], 0xffff)
		if !ok {
			return badValue("NFQUEUE", "--queue-num", args[0], "a queue number 0-65535")
		}
		b.t.Num, b.num = uint16(n), true
		return nil
	}
	as, bs, ok := strings.Cut(args[0], ":")
	lo, ok1 := parseCUint(as, 0xffff)
	hi, ok2 := parseCUint(bs, 0xffff)
	if !ok || !ok1 || !ok2 {
		return badValue("NFQUEUE", "--queue-balance", args[0], "FIRST:LAST queue numbers (0-65535)")
	}
	if lo >= hi {
		return badValue("NFQUEUE", "--queue-balance", args[0], fmt.Sprintf("%d should be less than %d", lo, hi))
	}
	if lo == 0 && hi == 0xffff {
		// 65536 queues do not fit the kernel's 16-bit count, which wraps
		// to 0: xt_NFQUEUE refuses it (EINVAL, docs/kernel-notes.md).
		return badValue("NFQUEUE", "--queue-balance", args[0], "at most 65535 queues")
	}
	b.t.Num, b.t.Last, b.t.Balance, b.bal = uint16(lo), uint16(hi), true, true
	return nil
}

func (b *nfqueueTargetBuilder) done(*ruleCtx) (any, error) {
	if b.t.CPUFanout && !b.t.Balance {
		return nil, fmt.Errorf("%w: NFQUEUE: option \"--queue-cpu-fanout\" also requires \"--queue-balance\"", ErrMissingArgument)
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *NFQUEUETarget) Name() string { return "NFQUEUE" }

func (t *NFQUEUETarget) appendQueues(b []byte, num, bal string) []byte {
	if t.Balance {
		b = append(b, bal...)
		b = strconv.AppendUint(b, uint64(t.Num), 10)
		b = append(b, ':')
		return strconv.AppendUint(b, uint64(t.Last), 10)
	}
	b = append(b, num...)
	return strconv.AppendUint(b, uint64(t.Num), 10)
}

func (t *NFQUEUETarget) appendSave(b []byte) []byte {
	b = t.appendQueues(b, " --queue-num ", " --queue-balance ")
	if t.Bypass {
		b = append(b, " --queue-bypass"...)
	}
	if t.CPUFanout {
		b = append(b, " --queue-cpu-fanout"...)
	}
	return b
}

func (t *NFQUEUETarget) appendList(b []byte, _ bool) []byte {
	b = t.appendQueues(b, " NFQUEUE num ", " NFQUEUE balance ")
	if t.Bypass {
		b = append(b, " bypass"...)
	}
	if t.CPUFanout {
		b = append(b, " cpu-fanout"...)
	}
	return b
}

func (t *NFQUEUETarget) apply(c *evalCtx) verdict {
	h := c.host
	if h.queue == nil {
		if t.Bypass {
			return vAccept
		}
		return vDrop
	}
	if h.queue(t, c.pkt) == QueueAccept {
		return vAccept
	}
	return vDrop
}
