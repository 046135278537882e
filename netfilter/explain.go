package netfilter

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"

	"github.com/packetwalk/packetwalk/conntrack"
)

// Outcome is one possible fate of a packet and its exact probability.
type Outcome struct {
	// Probability is exact: the kernel's statistic probabilities are
	// multiples of 2^-31, so every outcome is a dyadic rational.
	Probability Probability
	// Result is the packet's fate, with its Trace (the matched rules and
	// policies of one of its paths). It is never nil; outcomes do not
	// share results. A pointer, since a cascade of 1000 endpoints has
	// 1000 outcomes and a Result is large.
	Result *Result
}

// maxExplainPaths bounds the number of paths Explain walks, so that a
// ruleset with many independent random rules cannot run away.
const maxExplainPaths = 1 << 16

// Explain returns every possible outcome of the packet with its exact
// probability, without changing the host's state (counters, connections,
// nth counters, recent lists, set counters and random sources stay as they
// are). It branches on "statistic --mode random" rules; nth counters,
// recent lists, limits and connections are read from the host's current
// state. iface is the receiving interface, or "" for a packet sent by a
// local process. Outcomes with the same fate (verdict, disposition, deciding
// rule, packet as it leaves, emitted packets) are merged; their
// probabilities sum to exactly 1, most probable first. Each outcome's
// Result.Trace lists the matched rules and policies of one of its paths,
// without the packet snapshots (Step.Packet is nil) and the ENTER steps
// of Host.Tracing.
//
// A packet Receive or Send would refuse returns its *PacketError.
func (h *Host) Explain(iface string, p Packet) ([]Outcome, error) {
	var err error
	if iface == "" {
		err = p.check(true)
	} else {
		err = h.admit(&p, iface)
	}
	if err != nil {
		return nil, err
	}
	return h.explain(&p, func(res *Result, q *Packet) {
		if iface == "" {
			h.send(res, q)
		} else {
			h.receive(res, iface, q)
		}
	})
}

// explain runs walk over every path of the packet p under the oracle and
// merges the outcomes, as Explain describes.
func (h *Host) explain(pp *Packet, walk func(res *Result, p *Packet)) ([]Outcome, error) {
	p := *pp
	o := &explainOracle{resumable: !h.referenceEval(), arena: newProbArena(), resume: -1}
	h.explaining, h.oracle = true, o
	defer func() { h.explaining, h.oracle = false, nil }()
	// NAT port choice draws from conntrack's random source: every path
	// starts from the same draws.
	ctRand := *h.ctPCG
	var m merger
	res := m.slot()
	for n := 0; ; n++ {
		if n == maxExplainPaths {
			return nil, fmt.Errorf("%w: more than %d paths", ErrNotModelled, maxExplainPaths)
		}
		o.startWalk()
		walk(res, &p)
		*h.ctPCG = ctRand
		if m.add(o.pathNode(), res) {
			res = m.slot()
		}
		if !o.next() {
			break
		}
	}
	out := make([]Outcome, len(m.acc))
	order := make([]sortKey, len(m.acc))
	for i, f := range m.acc {
		p := o.arena.sum(f.terms)
		out[i], order[i] = Outcome{Probability: p, Result: f.res}, sortKey{p.v.f, p.v.fErr, i}
	}
	// Most probable first; equal ones in the order their paths were walked,
	// which the index comparison keeps without a stable sort. The float
	// approximations decide unless they are within their errors.
	slices.SortFunc(order, func(a, b sortKey) int {
		if c, ok := approxCmp(b.f, b.err, a.f, a.err); ok {
			return c
		}
		if c := out[b.i].Probability.Cmp(out[a.i].Probability); c != 0 {
			return c
		}
		return a.i - b.i
	})
	sorted := make([]Outcome, len(order))
	for i, k := range order {
		sorted[i] = out[k.i]
	}
	return sorted, nil
}

// sortKey orders outcomes by their approximate probability.
type sortKey struct {
	f, err float64
	i      int
}

// fateKey identifies an outcome's fate for merging; emitted packets are
// compared separately, since a key holding them would be large to hash.
type fateKey struct {
	verdict     Verdict
	disposition Disposition
	reason      Reason
	where       Step
	packet      Packet
	nEmitted    int
}

// hash mixes the fields that differ between the outcomes of a packet:
// where it was decided and how it leaves.
func (k *fateKey) hash() uint64 {
	h := uint64(k.verdict)<<8 | uint64(k.disposition)
	mix := func(v uint64) { h = (h ^ v) * 0x100000001b3 }
	p := &k.packet
	for _, a := range [2]netip.Addr{p.Src, p.Dst} {
		b := a.As16()
		mix(binary.LittleEndian.Uint64(b[:8]))
		mix(binary.LittleEndian.Uint64(b[8:]))
	}
	mix(uint64(p.SrcPort)<<48 | uint64(p.DstPort)<<32 | uint64(p.Mark))
	mix(uint64(k.where.Rule)<<8 | uint64(k.where.Hook)<<4 | uint64(k.where.Table))
	mix(uint64(len(k.where.Chain))<<32 | uint64(len(p.Out))<<16 | uint64(k.nEmitted))
	return h
}

func fateOf(r *Result) fateKey {
	return fateKey{verdict: r.Verdict, disposition: r.Disposition, reason: r.Reason, where: r.Where, packet: r.Packet, nEmitted: len(r.Emitted)}
}

// merger collects the paths of each fate. Fates are found by a hash of
// the fields that tell fates apart in practice, since keys are large;
// equal hashes are confirmed by comparing the keys.
type merger struct {
	acc     []*fate
	index   map[uint64]int // the first fate of a hash, plus one
	fates   []fate         // fates and results are allocated in chunks
	results []Result
}

type fate struct {
	terms []*probNode // the paths leading to it
	one   [1]*probNode
	next  int // the next fate of the same hash, plus one
	res   *Result
}

// slot returns a Result for the next path to fill.
func (m *merger) slot() *Result {
	if len(m.results) == 0 {
		m.results = make([]Result, chunk(len(m.acc)))
	}
	r := &m.results[0]
	m.results = m.results[1:]
	return r
}

// add records the path ending in n with result r. It reports whether r
// became a new fate's result, which the merger then keeps; otherwise the
// path joined an existing fate and r may be reused.
func (m *merger) add(n *probNode, r *Result) bool {
	k := fateOf(r)
	if m.index == nil {
		m.index = map[uint64]int{}
	}
	hash := k.hash()
	first := m.index[hash]
	for i := first; i != 0; i = m.acc[i-1].next {
		if f := m.acc[i-1]; fateOf(f.res) == k && slices.Equal(f.res.Emitted, r.Emitted) {
			f.terms = append(f.terms, n)
			return false
		}
	}
	if len(m.fates) == 0 {
		m.fates = make([]fate, chunk(len(m.acc)))
	}
	f := &m.fates[0]
	m.fates = m.fates[1:]
	f.one[0] = n
	f.terms, f.next, f.res = f.one[:], first, r
	m.acc = append(m.acc, f)
	m.index[hash] = len(m.acc)
	return true
}

// explainChoice is one evaluation of a random statistic rule.
type explainChoice struct {
	stored  uint32 // lround(p·2^31): the rule matches with stored/2^31
	invert  bool
	matched bool
}

// weight is the probability of the branch this choice took, times 2^31.
func (d explainChoice) weight() uint32 {
	if d.invert != !d.matched {
		return 1<<31 - d.stored
	}
	return d.stored
}

// explainOracle answers random draws during Explain's depth-first walk of
// the paths: a walk replays the choices of the previous path up to the
// last one that took the matching branch, takes the other branch there,
// and then the matching branch of every new draw that can match.
type explainOracle struct {
	arena *probArena
	// stack holds the current path's choices; the first replay of them
	// are replayed from the previous path. nodes[i] is the path's
	// probability through stack[i].
	stack  []explainChoice
	nodes  []*probNode
	replay int
	pos    int // choices drawn so far in this walk

	// What follows lets a walk resume at the rule that draws its flipped
	// choice instead of replaying the table up to it (see runTable), which
	// makes explaining a cascade of n endpoints linear in n.
	resumable bool
	snaps     []*explainSnap // by choice index; nil where none was taken
	free      []*explainSnap // snapshots done with, for reuse
	resume    int            // the snapshot the next walk resumes at, or -1
	tables    int            // runTable calls so far in this walk
	// The position of the table being run, kept up to date by runTable.
	run explainPos

	// entries are the new connections conntrack made in the first walk,
	// by lookup order, reused by later walks (see explainLookup).
	entries []explainEntry
	tracks  int
	steps   []Step // the chunk traces are copied into
}

type explainEntry struct {
	facts    conntrack.Facts
	info     conntrack.Info
	pristine conntrack.Entry
}

// explainPos is the evaluator state runTable shares with the oracle.
type explainPos struct {
	active     bool // inside a runTable call
	clean      bool // no target with effects beyond packet and ctx ran
	pc, sp     int
	stack      []int
	ctx        *evalCtx
	entryTaken int // choices drawn before the table was entered
	traceStart int // trace steps before the table was entered
}

// explainSnap is the evaluator state at the start of the rule that drew a
// choice: enough to continue the walk from that rule in a later path whose
// earlier choices are the same. Snapshots are reused once consumed, so a
// cascade, which consumes each before taking the next, needs one.
type explainSnap struct {
	tables     int // which runTable call of the walk
	entryTaken int
	choice     int // index of the choice the rule draws
	pc         int
	stack      []int
	ctx        evalCtx
	pkt        Packet
	trace      []Step // steps of this table before the rule
}

func (o *explainOracle) startWalk() {
	o.pos, o.tables, o.tracks, o.run = 0, 0, 0, explainPos{}
}

func (o *explainOracle) parent(i int) *probNode {
	if i == 0 {
		return &o.arena.root
	}
	return o.nodes[i-1]
}

// pathNode is the probability of the path just walked.
func (o *explainOracle) pathNode() *probNode { return o.parent(o.pos) }

func (o *explainOracle) choose(stored uint32, invert bool) bool {
	i := o.pos
	o.pos++
	if i < o.replay {
		return o.stack[i].matched
	}
	d := explainChoice{stored: stored, invert: invert, matched: true}
	if d.weight() == 0 {
		d.matched = false // a branch that cannot happen is not walked
	}
	o.snapshot(i)
	o.stack = append(o.stack[:i], d)
	o.nodes = append(o.nodes[:i], o.arena.node(o.parent(i), d.weight()))
	return d.matched
}

// next prepares the walk of the next path: it flips the last choice that
// took the matching branch, if the other branch can happen, and drops the
// choices after it. It reports false when every path has been walked.
func (o *explainOracle) next() bool {
	for i := o.pos - 1; i >= 0; i-- {
		d := o.stack[i]
		if !d.matched {
			continue
		}
		d.matched = false
		if d.weight() == 0 {
			continue
		}
		o.stack = append(o.stack[:i], d)
		o.nodes = append(o.nodes[:i], o.arena.node(o.parent(i), d.weight()))
		o.replay = i + 1
		o.resume = -1
		if i < len(o.snaps) && o.snaps[i] != nil {
			o.resume = i
		}
		// Snapshots of the dropped choices are stale.
		for j := i + 1; j < len(o.snaps); j++ {
			o.release(j)
		}
		return true
	}
	return false
}

// snapshot records the state at the start of the current rule, which is
// drawing choice i for the first time.
func (o *explainOracle) snapshot(i int) {
	for len(o.snaps) <= i {
		o.snaps = append(o.snaps, nil)
	}
	o.release(i)
	r := &o.run
	if !o.resumable || !r.active || !r.clean {
		return
	}
	var s *explainSnap
	if n := len(o.free); n > 0 {
		s, o.free = o.free[n-1], o.free[:n-1]
	} else {
		s = new(explainSnap)
	}
	s.tables, s.entryTaken, s.choice, s.pc = o.tables, r.entryTaken, i, r.pc
	s.stack = append(s.stack[:0], r.stack[:r.sp]...)
	s.ctx, s.pkt = *r.ctx, *r.ctx.pkt
	s.trace = append(s.trace[:0], r.ctx.walk.trace[r.traceStart:]...)
	o.snaps[i] = s
}

// release frees the snapshot of choice i, if any, for reuse.
func (o *explainOracle) release(i int) {
	if s := o.snaps[i]; s != nil {
		o.snaps[i] = nil
		o.free = append(o.free, s)
	}
}

// enterTable is called by runTable on entry while explaining. It returns
// the snapshot to resume from when this call is the one it was taken in;
// runTable copies it out before the next snapshot is taken.
func (o *explainOracle) enterTable(c *evalCtx, stack []int) *explainSnap {
	o.tables++
	o.run = explainPos{active: true, clean: true, stack: stack, ctx: c, entryTaken: o.pos, traceStart: len(c.walk.trace)}
	if o.resume < 0 {
		return nil
	}
	s := o.snaps[o.resume]
	if s.tables != o.tables || s.entryTaken != o.pos {
		return nil
	}
	// A flipped choice is never flipped again: its snapshot is done with.
	o.release(o.resume)
	o.resume = -1
	// The choices the skipped rules would have drawn are replayed as is.
	o.pos = s.choice
	c.walk.trace = append(c.walk.trace, s.trace...)
	return s
}

// traceCopy copies a path's steps into chunks the paths share.
func (o *explainOracle) traceCopy(t []Step) []Step {
	if len(t) > cap(o.steps)-len(o.steps) {
		o.steps = make([]Step, 0, max(chunk(2*cap(o.steps)), len(t)))
	}
	n := len(o.steps)
	o.steps = append(o.steps, t...)
	return o.steps[n:len(o.steps):len(o.steps)]
}

// chunk is the size of the next chunk of an allocation in chunks, after
// n items: small for the few outcomes most packets have, growing for the
// thousand of a long cascade.
func chunk(n int) int { return min(max(8, n), 1024) }

// fresh returns the connection the first walk made for the same lookup,
// reset to how conntrack made it, so that later walks need not allocate.
func (o *explainOracle) fresh(f *conntrack.Facts) (conntrack.Info, bool) {
	i := o.tracks
	o.tracks++
	if i < len(o.entries) && o.entries[i].info.Entry != nil && o.entries[i].facts == *f {
		e := &o.entries[i]
		*e.info.Entry = e.pristine
		return e.info, true
	}
	return conntrack.Info{}, false
}

// keep records the connection conntrack made for the last lookup.
func (o *explainOracle) keep(f *conntrack.Facts, info conntrack.Info) {
	i := o.tracks - 1
	for len(o.entries) <= i {
		o.entries = append(o.entries, explainEntry{})
	}
	o.entries[i] = explainEntry{facts: *f, info: info}
	if info.Entry != nil {
		o.entries[i].pristine = *info.Entry
	}
}

// pureTarget reports whether a target's only effects are on the packet
// and the evaluation context, which a snapshot restores.
func pureTarget(a applier) bool {
	switch a.(type) {
	case *MarkTarget, *NATTarget, *NETMAPTarget, *DSCPTarget, *TOSTarget, *TTLTarget, *HLTarget, *ECNTarget, *TCPMSSTarget, *TCPOptstripTarget, *ClassifyTarget, *HMARKTarget, *NPTTarget:
		return true
	}
	return false
}

// randomMatch is how the statistic match draws: from the host's seeded
// source, or from the oracle while explaining.
func (h *Host) randomMatch(stored uint32, invert bool) bool {
	if h.oracle != nil {
		return h.oracle.choose(stored, invert)
	}
	return (h.rng.Uint32()&0x7fffffff < stored) != invert
}

// explainLookup is conntrack's view of the packet while explaining: an
// existing connection is read without updating it; otherwise a new,
// unconfirmed entry is made, which the table does not keep.
func (h *Host) explainLookup(f *conntrack.Facts) (conntrack.Info, error) {
	if e, dir, ok := h.ct.Lookup(f.Tuple); ok {
		st := conntrack.StateEstablished
		if dir == conntrack.Original && e.Status&conntrack.StatusSeenReply == 0 {
			st = conntrack.StateNew
		}
		return conntrack.Info{Entry: e, Dir: dir, State: st}, nil
	}
	o := h.oracle
	if o == nil {
		return h.ct.Track(f)
	}
	if info, ok := o.fresh(f); ok {
		return info, nil
	}
	info, err := h.ct.Track(f)
	if err == nil {
		o.keep(f, info)
	}
	return info, err
}
