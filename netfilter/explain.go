package netfilter

import (
	"fmt"
	"math/big"
	"reflect"
	"slices"

	"github.com/packetwalk/packetwalk/conntrack"
)

// Outcome is one possible fate of a packet and its exact probability.
type Outcome struct {
	// Probability is exact: the kernel's statistic probabilities are
	// multiples of 2^-31, so every outcome is a dyadic rational.
	Probability Probability
	// Result is the packet's fate, with its Trace (every matched rule).
	Result Result
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
// probabilities sum to exactly 1, most probable first.
func (h *Host) Explain(iface string, p Packet) ([]Outcome, error) {
	saved := h.Tracing
	h.Tracing, h.explaining = true, true
	defer func() { h.Tracing, h.explaining, h.oracle = saved, false, nil }()
	ctState, err := h.ctRandState()
	if err != nil {
		return nil, err
	}

	var m merger
	var decisions []explainChoice
	// prods[i] is the product of the numerators of the first i choices of
	// the previous path; paths share prefixes, so most products carry over.
	prods := []*big.Int{big.NewInt(1)}
	var prev []explainChoice
	// One oracle for every path: it keeps the snapshots that let a path
	// resume at its branch point instead of replaying the walk up to it.
	o := &explainOracle{h: h, resumable: !h.referenceEval()}
	for n := 0; ; n++ {
		if n == maxExplainPaths {
			return nil, fmt.Errorf("%w: more than %d paths", ErrUnsupported, maxExplainPaths)
		}
		o.prefix, o.taken, o.tables, o.run = decisions, make([]explainChoice, 0, len(decisions)+8), 0, explainPos{}
		h.oracle = o
		var res Result
		if iface == "" {
			res = h.Send(p)
		} else {
			res = h.Receive(iface, p)
		}
		if err := h.restoreCTRand(ctState); err != nil {
			return nil, err
		}
		taken := h.oracle.taken
		// The walk replays decisions but for the last one, flipped: the
		// paths share len(decisions)-1 choices. The loop only checks it.
		same := 0
		if n > 0 && len(decisions) > 0 && len(taken) >= len(decisions) && len(prev) >= len(decisions) {
			same = len(decisions) - 1
		}
		for same < len(taken) && same < len(prev) && taken[same] == prev[same] {
			same++
		}
		prods = prods[:same+1]
		for _, d := range taken[same:] {
			prods = append(prods, new(big.Int).Mul(prods[len(prods)-1], d.numerator()))
		}
		prev = taken
		m.add(dyadicOutcome{num: prods[len(taken)], exp: uint(31 * len(taken)), res: res})
		// Depth-first: flip the last choice that took the matching branch.
		decisions = slices.Clone(taken)
		for len(decisions) > 0 && !decisions[len(decisions)-1].matched {
			decisions = decisions[:len(decisions)-1]
		}
		if len(decisions) == 0 {
			break
		}
		decisions[len(decisions)-1].matched = false
		o.resumeAt(len(decisions) - 1)
	}
	type keyed struct {
		o Outcome
		f float64
	}
	// Pointers are sorted, not the outcomes: a Result is large and a
	// cascade of 1000 endpoints has 1000 outcomes.
	ks := make([]*keyed, len(m.acc))
	for i, a := range m.acc {
		p := a.prob()
		ks[i] = &keyed{Outcome{Probability: p, Result: a.res}, p.Float64()}
	}
	// Most probable first; the float decides unless it ties.
	slices.SortStableFunc(ks, func(a, b *keyed) int {
		if a.f != b.f {
			if a.f > b.f {
				return -1
			}
			return 1
		}
		return b.o.Probability.Cmp(a.o.Probability)
	})
	out := make([]Outcome, len(ks))
	for i := range ks {
		out[i] = ks[i].o
	}
	return out, nil
}

// Probability is an exact probability of the form N/2^E, in lowest terms.
// The zero value is 0.
type Probability struct {
	num *big.Int
	exp uint
}

// Rat returns the probability as a big.Rat.
func (p Probability) Rat() *big.Rat {
	return new(big.Rat).SetFrac(p.numerator(), p.Denominator())
}

func (p Probability) numerator() *big.Int {
	if p.num == nil {
		return new(big.Int)
	}
	return new(big.Int).Set(p.num)
}

// Numerator returns N.
func (p Probability) Numerator() *big.Int { return p.numerator() }

// Denominator returns 2^E.
func (p Probability) Denominator() *big.Int { return new(big.Int).Lsh(big.NewInt(1), p.exp) }

// String returns "N/D", as big.Rat prints it ("1/1" for certainty).
func (p Probability) String() string {
	return p.numerator().String() + "/" + p.Denominator().String()
}

// Float64 returns the nearest float64.
func (p Probability) Float64() float64 {
	f := new(big.Float).SetInt(p.numerator())
	v, _ := f.SetMantExp(f, -int(p.exp)).Float64()
	return v
}

// Cmp compares p and q, returning -1, 0 or +1.
func (p Probability) Cmp(q Probability) int {
	x, y := p.numerator(), q.numerator()
	if p.exp < q.exp {
		x.Lsh(x, q.exp-p.exp)
	} else {
		y.Lsh(y, p.exp-q.exp)
	}
	return x.Cmp(y)
}

// dyadicOutcome accumulates an outcome's probability as num/2^exp, which
// adds without the gcd reductions of big.Rat.
type dyadicOutcome struct {
	num *big.Int
	exp uint
	res Result
}

// prob reduces num/2^exp to lowest terms, which only needs a shift.
func (d dyadicOutcome) prob() Probability {
	num := new(big.Int).Set(d.num)
	exp := d.exp
	if num.Sign() != 0 {
		tz := min(num.TrailingZeroBits(), exp)
		num.Rsh(num, tz)
		exp -= tz
	} else {
		exp = 0
	}
	return Probability{num: num, exp: exp}
}

// fateKey identifies an outcome's fate for merging.
type fateKey struct {
	verdict     Verdict
	disposition Disposition
	reason      string
	where       Step
	packet      Packet
	emitted     [2]Packet
	nEmitted    int
}

func fateOf(r *Result) (fateKey, bool) {
	k := fateKey{verdict: r.Verdict, disposition: r.Disposition, reason: r.Reason, where: r.Where, packet: r.Packet, nEmitted: len(r.Emitted)}
	if len(r.Emitted) > len(k.emitted) {
		return k, false
	}
	copy(k.emitted[:], r.Emitted)
	return k, true
}

// merger sums the probabilities of outcomes with the same fate.
type merger struct {
	acc   []dyadicOutcome
	index map[fateKey]int
}

func (m *merger) add(o dyadicOutcome) {
	k, ok := fateOf(&o.res)
	i, found := m.index[k]
	if !ok {
		found = false
		for j := range m.acc {
			if sameFate(&m.acc[j].res, &o.res) {
				i, found = j, true
				break
			}
		}
	}
	if !found {
		if m.index == nil {
			m.index = map[fateKey]int{}
		}
		if ok {
			m.index[k] = len(m.acc)
		}
		m.acc = append(m.acc, dyadicOutcome{num: new(big.Int).Set(o.num), exp: o.exp, res: o.res})
		return
	}
	a := &m.acc[i]
	x, y := new(big.Int).Set(a.num), o.num
	exp := a.exp
	switch {
	case o.exp > exp:
		x.Lsh(x, o.exp-exp)
		exp = o.exp
	case o.exp < exp:
		y = new(big.Int).Lsh(y, exp-o.exp)
	}
	a.num, a.exp = x.Add(x, y), exp
}

// explainChoice is one evaluation of a random statistic rule.
type explainChoice struct {
	stored  uint32 // lround(p·2^31): the rule matches with stored/2^31
	invert  bool
	matched bool
}

// numerator is the probability of the branch this choice took, times 2^31.
func (d explainChoice) numerator() *big.Int {
	n := int64(d.stored)
	if d.invert != !d.matched {
		n = 1<<31 - n
	}
	return big.NewInt(n)
}

// explainOracle answers random draws during an Explain walk: it replays
// the choices of prefix, then takes the matching branch of every new draw
// that can match (and the other one of a draw that cannot).
type explainOracle struct {
	prefix []explainChoice
	taken  []explainChoice

	// What follows lets a path resume where its last choice is drawn
	// (see runTable), which makes explaining a cascade of n endpoints
	// linear in n instead of quadratic.
	h         *Host
	resumable bool
	snaps     []*explainSnap // by choice index; nil where none was taken
	resume    *explainSnap   // where the next walk may resume
	tables    int            // runTable calls so far in this walk
	// The position of the table being run, kept up to date by runTable.
	run explainPos
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
// earlier choices are the same.
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

func (o *explainOracle) choose(stored uint32, invert bool) bool {
	i := len(o.taken)
	var d explainChoice
	if i < len(o.prefix) {
		d = o.prefix[i]
	} else {
		d = explainChoice{stored: stored, invert: invert, matched: true}
		if d.numerator().Sign() == 0 {
			d.matched = false // a branch that cannot happen is not walked
		}
		o.snapshot(i)
	}
	o.taken = append(o.taken, d)
	return d.matched
}

// snapshot records the state at the start of the current rule, which is
// drawing choice i for the first time.
func (o *explainOracle) snapshot(i int) {
	for len(o.snaps) <= i {
		o.snaps = append(o.snaps, nil)
	}
	o.snaps[i] = nil
	r := &o.run
	if !o.resumable || !r.active || !r.clean {
		return
	}
	o.snaps[i] = &explainSnap{
		tables: o.tables, entryTaken: r.entryTaken, choice: i, pc: r.pc,
		stack: append([]int(nil), r.stack[:r.sp]...), ctx: *r.ctx, pkt: *r.ctx.pkt,
		trace: append([]Step(nil), o.h.trace[r.traceStart:]...),
	}
}

// resumeAt prepares the next walk, whose last choice is i, to resume at
// the snapshot of choice i; snapshots of later choices are stale.
func (o *explainOracle) resumeAt(i int) {
	o.resume = nil
	if i < len(o.snaps) {
		o.resume = o.snaps[i]
		o.snaps = o.snaps[:i]
	}
}

// enterTable is called by runTable on entry while explaining. It returns
// the snapshot to resume from when this call is the one it was taken in.
func (o *explainOracle) enterTable(c *evalCtx, stack []int) *explainSnap {
	o.tables++
	o.run = explainPos{active: true, clean: true, stack: stack, ctx: c, entryTaken: len(o.taken), traceStart: len(o.h.trace)}
	s := o.resume
	if s == nil || s.tables != o.tables || s.entryTaken != len(o.taken) {
		return nil
	}
	o.resume = nil
	// The choices the skipped rules would have drawn, as the prefix says.
	o.taken = append(o.taken, o.prefix[s.entryTaken:s.choice]...)
	o.h.trace = append(o.h.trace, s.trace...)
	return s
}

// pureTarget reports whether a target's only effects are on the packet
// and the evaluation context, which a snapshot restores.
func pureTarget(a applier) bool {
	switch a.(type) {
	case *MarkTarget, *NATTarget:
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

func sameFate(a, b *Result) bool {
	return a.Verdict == b.Verdict && a.Disposition == b.Disposition && a.Reason == b.Reason &&
		reflect.DeepEqual(a.Where, b.Where) && reflect.DeepEqual(a.Packet, b.Packet) &&
		reflect.DeepEqual(a.Emitted, b.Emitted)
}

// ctRandState snapshots the conntrack table's random source, which NAT port
// choice draws from, so every explained path sees the same draws.
func (h *Host) ctRandState() ([]byte, error) { return h.ctPCG.MarshalBinary() }

func (h *Host) restoreCTRand(s []byte) error { return h.ctPCG.UnmarshalBinary(s) }

// explainLookup is conntrack's view of the packet while explaining: an
// existing connection is read without updating it; otherwise a new,
// unconfirmed entry is made, which the table does not keep.
func (h *Host) explainLookup(f conntrack.Facts) (conntrack.Info, error) {
	if e, dir, ok := h.ct.Lookup(f.Tuple); ok {
		st := conntrack.StateEstablished
		if dir == conntrack.Original && e.Status&conntrack.StatusSeenReply == 0 {
			st = conntrack.StateNew
		}
		return conntrack.Info{Entry: e, Dir: dir, State: st}, nil
	}
	return h.ct.Track(f)
}
