package netfilter

import (
	"fmt"
	"net/netip"
)

// maxNFTDepth is how many user chains iptables-nft lets a base chain nest:
// the kernel refuses a deeper jump at load with EMLINK ("Too many links",
// NFT_JUMP_STACK_SIZE is 16 levels including the base chain). Legacy
// iptables has no such limit.
const maxNFTDepth = 15

// crule is one compiled rule, or the end marker of a chain. It is kept
// small (a 10k-service ruleset compiles 170k of them): what few rules
// need lives behind extra.
type crule struct {
	rule    *Rule
	chain   *Chain
	apply   applier // extension target, or nil
	matches []Match // the matches to evaluate, from index m0 of the rule's (see matchBounds)
	// src and dst are copies for the fast path.
	src, dst netip.Prefix
	// disp, when set, indexes the run of rules this one belongs to.
	disp  *dispatch
	extra *cruleExtra // nil for most rules
	num   int32       // 1-based position in its chain; 0 for an end marker
	jump  int32       // start index of the chain jumped to
	m0    int32
	end   bool
	kind  verdict // for verdict and jump targets
	// policy is the policy of a built-in chain, at its end marker.
	policy Policy
}

// cruleExtra is the part of a compiled rule that few rules need.
type cruleExtra struct {
	// state holds per-rule mutable state (nth counters), indexed by match.
	state []uint32
	// ext holds per-rule state larger than a uint32 (limit's token
	// bucket), indexed by match; nil when no match of the rule needs it.
	ext []any
	// traced caches what traces print of the rule, made on first use.
	traced *ruleTrace
	// small holds state for rules of up to four matches (kube-proxy's
	// statistic rules), saving an allocation for each.
	small [4]uint32
}

// more returns r.extra, made on first use.
func (r *crule) more() *cruleExtra {
	if r.extra == nil {
		r.extra = &cruleExtra{}
	}
	return r.extra
}

// ctable is a table compiled to a flat rule array with resolved jumps.
type ctable struct {
	id      TableID
	model   *Table
	rules   []crule
	entry   [numHooks]int // first rule of each built-in chain; -1 if none
	baseEnd [numHooks]int // end marker of each built-in chain
	// empty marks the built-in chains without rules, where only the
	// policy applies.
	empty [numHooks]bool
	depth int   // deepest nesting of user chains below a base chain
	stack []int // return addresses, sized by depth, reused
	// linear turns the dispatch maps off: the reference evaluator that
	// tests compare the indexed one with.
	linear bool
}

// program is a compiled ruleset.
type program struct {
	family Family
	tables [numTables]*ctable
	// conntrack is set when some rule needs connection tracking; without
	// such a rule the kernel tracks nothing and nat never runs
	// (docs/kernel-notes.md, "Conntrack is off until a rule needs it").
	conntrack bool
	// sets and nfacct name the ipsets and nfacct objects the rules use,
	// once per use.
	sets, nfacct []string
	// hashlimits are the hashlimit rules' handles, bound to the host's
	// named tables when the program is loaded.
	hashlimits []hashlimitBinding
	// readsBytes is set when a rule reads the packet's bytes (string,
	// u32, bpf), for FrameHost to fill Packet.Raw.
	readsBytes bool
}

// hashlimitBinding is one hashlimit match of a compiled rule and its
// handle.
type hashlimitBinding struct {
	m   *HashlimitMatch
	ref *hashlimitRef
}

// unmodelled is implemented by targets packetwalk reads and prints but
// cannot run (TEE, TPROXY, SYNPROXY...), or not in every form (HMARK's
// ct tuple), and by matches whose test, with some options, reads state
// the model has no source for: a non-empty answer makes a host refuse to
// load the rule, naming what is missing.
type unmodelled interface {
	unmodelled() string
}

// needsConntrack reports whether a module's checkentry takes a conntrack
// reference in the kernel (nf_ct_netns_get).
func needsConntrack(module string) bool {
	switch module {
	case "conntrack", "state", "connmark", "CONNMARK", "CT", "NOTRACK",
		"DNAT", "SNAT", "MASQUERADE", "REDIRECT", "NETMAP", "CONNSECMARK", "SYNPROXY", "helper",
		"connlimit", "connbytes", "connlabel", "cluster":
		return true
	}
	return false
}

// compile turns a ruleset into a program, validating the tables that
// checked holds nothing for (the others were validated by the caller a
// moment ago).
func compile(rs *Ruleset, checked [numTables]*validated) (*program, error) {
	p := &program{family: rs.family}
	// idle holds the IDLETIMER labels seen, with their --alarm: the
	// kernel keeps one timer per label and refuses a rule that wants the
	// other kind (EINVAL; docs/kernel-notes.md).
	var idle map[string]bool
	for _, t := range rs.Tables() {
		chains := t.chainList()
		v := checked[t.id]
		if v == nil || !sameListing(v.chains, chains) {
			var err error
			if v, err = t.validateChains(rs.family, chains); err != nil {
				return nil, err
			}
		}
		ct := &ctable{id: t.id, model: t}
		for i := range ct.entry {
			ct.entry[i], ct.baseEnd[i] = -1, -1
		}
		// Where each chain starts, by listing index: jumps are resolved
		// through validation's listing indexes, not by name.
		start := make([]int32, len(chains))
		n := 0
		for i, c := range chains {
			start[i] = int32(n)
			n += len(c.Rules) + 1
		}
		jumps := v.jumps
		ct.rules = make([]crule, 0, n)
		for ci, c := range chains {
			for i, r := range c.Rules {
				// Built in place: 170k rules are worth not copying.
				m0, m1 := matchBounds(r.Matches)
				ct.rules = append(ct.rules, crule{rule: r, chain: c, num: int32(i + 1), kind: vContinue, src: r.IP.Src, dst: r.IP.Dst,
					matches: r.Matches[m0:m1:m1], m0: int32(m0)})
				cr := &ct.rules[len(ct.rules)-1]
				if r.IP.SrcMask.IsValid() {
					cr.src = netip.Prefix{} // matchIP tests the mask
				}
				if r.IP.DstMask.IsValid() {
					cr.dst = netip.Prefix{}
				}
				if it, ok := r.Target.(*IdletimerTarget); ok {
					// Across tables too (validate sees one table).
					if err := idleLabel(&idle, it); err != nil {
						return nil, &ruleError{r, err}
					}
				}
				switch tg := r.Target.(type) {
				case nil:
				case *VerdictTarget:
					switch tg {
					case Accept:
						cr.kind = vAccept
					case Drop:
						cr.kind = vDrop
					case Return:
						cr.kind = vReturn
					}
				case *JumpTarget:
					if len(jumps) == 0 {
						// Cannot be: validation listed every jump.
						return nil, fmt.Errorf("%w: jump to %q from chain %q not validated", ErrNotModelled, tg.Chain, c.Name)
					}
					cr.kind, cr.jump = vJump, start[jumps[0]]
					jumps = jumps[1:]
					if tg.Goto {
						cr.kind = vGoto
					}
				case *PlaceholderTarget:
					cr.apply = tg
					if !tg.Always {
						// A placeholder that never matches: a hidden match
						// keeps the rule from matching.
						cr.matches = append(cr.matches[:len(cr.matches):len(cr.matches)], neverMatch)
					}
				default:
					// Some targets are read and printed but their
					// effect (or some form of it) is not modelled;
					// they say why.
					if u, ok := tg.(unmodelled); ok && u.unmodelled() != "" {
						return nil, fmt.Errorf("%w: target %s: %s", ErrNotModelled, tg.Name(), u.unmodelled())
					}
					a, ok := tg.(applier)
					if !ok {
						return nil, fmt.Errorf("%w: target %s cannot run", ErrNotModelled, tg.Name())
					}
					cr.apply = a
				}
				if r.Target != nil && needsConntrack(r.Target.Name()) {
					p.conntrack = true
				}
				for k, m := range r.Matches {
					if needsConntrack(m.Module()) {
						p.conntrack = true
					}
					if u, ok := m.(unmodelled); ok {
						if why := u.unmodelled(); why != "" {
							return nil, &ruleError{r, fmt.Errorf("%w: -m %s in table %s chain %s rule %d: %s", ErrNotModelled, m.Module(), t.id, c.Name, i+1, why)}
						}
					}
					switch m := m.(type) {
					case *SetMatch:
						p.sets = append(p.sets, m.Name)
					case *NFAcctMatch:
						p.nfacct = append(p.nfacct, m.Name)
					case *StringMatch, *U32Match, *BPFMatch:
						p.readsBytes = true
					}
					if s, ok := m.(stateful); ok {
						// Only rules with state get the slice: most have
						// none, and a 10k-service table has 170k rules.
						x := cr.more()
						if x.state == nil {
							if x.state = x.small[:]; len(r.Matches) > len(x.small) {
								x.state = make([]uint32, len(r.Matches))
							}
							x.state = x.state[:len(r.Matches)]
						}
						x.state[k] = s.initialState()
					}
					if s, ok := m.(extStateful); ok {
						x := cr.more()
						if x.ext == nil {
							x.ext = make([]any, len(r.Matches))
						}
						x.ext[k] = s.newState()
						if hm, ok := m.(*HashlimitMatch); ok {
							p.hashlimits = append(p.hashlimits, hashlimitBinding{hm, x.ext[k].(*hashlimitRef)})
						}
					}
					if r, ok := m.(refuser); ok {
						if err := r.refuse(); err != nil {
							return nil, err
						}
					}
				}
				if st, ok := r.Target.(*SetTarget); ok {
					for _, n := range []string{st.Add.Name, st.Del.Name} {
						if n != "" {
							p.sets = append(p.sets, n)
						}
					}
				}
			}
			buildDispatch(ct, len(ct.rules)-len(c.Rules), len(ct.rules))
			end := crule{chain: c, end: true, policy: c.Policy}
			if h, ok := c.Hook(); ok {
				ct.entry[h] = int(start[ci])
				ct.baseEnd[h] = len(ct.rules)
				ct.empty[h] = len(c.Rules) == 0
			}
			ct.rules = append(ct.rules, end)
		}
		if len(jumps) != 0 {
			return nil, fmt.Errorf("%w: table %s has fewer jumps than validated", ErrNotModelled, t.id)
		}
		ct.depth = chainDepth(ct)
		ct.stack = make([]int, ct.depth+1)
		p.tables[t.id] = ct
	}
	return p, nil
}

// sameListing reports whether a and b are the same listing of chains:
// the cached one, unchanged since validation.
func sameListing(a, b []*Chain) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// matchBounds returns the range of ms left when leading and trailing
// comment matches, which always match, are dropped.
func matchBounds(ms []Match) (int, int) {
	i, j := 0, len(ms)
	for i < j && isComment(ms[i]) {
		i++
	}
	for j > i && isComment(ms[j-1]) {
		j--
	}
	return i, j
}

func isComment(m Match) bool {
	_, ok := m.(*CommentMatch)
	return ok
}

// chainDepth returns the longest chain of jumps below a base chain of
// ct, which validation has proven free of loops. It follows the resolved jump
// indexes, so it needs no lookup by name.
func chainDepth(ct *ctable) int {
	memo := make([]int32, len(ct.rules)) // by chain start; 0 = not yet, else depth+1
	var depth func(start int) int
	depth = func(start int) int {
		if d := memo[start]; d > 0 {
			return int(d - 1)
		}
		d := 0
		for i := start; !ct.rules[i].end; i++ {
			if k := ct.rules[i].kind; k == vJump || k == vGoto {
				d = max(d, 1+depth(int(ct.rules[i].jump)))
			}
		}
		memo[start] = int32(d + 1)
		return d
	}
	// From the base chains only: chains out of their reach may loop, and
	// nest as deep as they like (iptables-nft accepts both).
	d := 0
	for _, e := range ct.entry {
		if e >= 0 {
			d = max(d, depth(e))
		}
	}
	return d
}

// stateful is implemented by matches with per-rule state, such as
// statistic's nth counter.
type stateful interface {
	initialState() uint32
}

// refuser is implemented by matches packetwalk can parse and print but
// not evaluate: refuse says why, and the host refuses to load the rule.
type refuser interface {
	refuse() error
}

// extStateful is implemented by matches whose per-rule state does not fit
// a uint32; newState returns a fresh state for one compiled rule.
type extStateful interface {
	newState() any
}

// matchIP is the fixed header test every rule starts with.
func (r *crule) matchIP(p *Packet) bool {
	ip := &r.rule.IP
	if r.src.IsValid() && r.src.Contains(p.Src) == ip.InvSrc {
		return false
	}
	if r.dst.IsValid() && r.dst.Contains(p.Dst) == ip.InvDst {
		return false
	}
	if ip.SrcMask.IsValid() && maskedEqual(p.Src, ip.SrcMask, ip.Src.Addr()) == ip.InvSrc {
		return false
	}
	if ip.DstMask.IsValid() && maskedEqual(p.Dst, ip.DstMask, ip.Dst.Addr()) == ip.InvDst {
		return false
	}
	if ip.In != "" && ifaceMatch(ip.In, p.In) == ip.InvIn {
		return false
	}
	if ip.Out != "" && ifaceMatch(ip.Out, p.Out) == ip.InvOut {
		return false
	}
	if ip.Proto != 0 && (ip.Proto == p.Proto) == ip.InvProto {
		return false
	}
	switch ip.Fragment {
	case OnlyFragments:
		return p.FragOffset != 0
	case NoFragments:
		return p.FragOffset == 0
	}
	return true
}

// ifaceMatch compares an interface name with a rule's pattern, where a
// trailing '+' matches any suffix.
func ifaceMatch(pattern, name string) bool {
	if n := len(pattern); n > 0 && pattern[n-1] == '+' {
		return len(name) >= n-1 && name[:n-1] == pattern[:n-1]
	}
	return pattern == name
}

// ruleTrace is what a trace step prints of a rule: its -S form and, for
// a jump or goto, its action.
type ruleTrace struct {
	text        string
	action      Action
	placeholder bool // the rule holds a lenient-mode placeholder
}

func (r *crule) trace() *ruleTrace {
	x := r.more()
	if x.traced == nil {
		b := appendSRule(nil, r.chain, r.rule, false)
		t := &ruleTrace{text: string(b[:len(b)-1]), placeholder: r.rule.isPlaceholder()}
		switch r.kind {
		case vJump:
			t.action = Action{Kind: ActionJump, Chain: r.rule.Target.Name()}
		case vGoto:
			t.action = Action{Kind: ActionGoto, Chain: r.rule.Target.Name()}
		}
		x.traced = t
	}
	return x.traced
}

// jumpAction returns the jump or goto action of a rule that jumps.
func (r *crule) jumpAction() Action { return r.trace().action }
