package netfilter

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
)

// Counters are a rule's or a policy's packet and byte counts.
type Counters struct {
	Packets, Bytes uint64
}

// Ruleset is the model of one family's tables, as iptables-save prints them
// and iptables-restore reads them. It is plain data: the host compiles it
// before packets cross it. The zero value is not usable; call NewRuleset.
// A Ruleset is not safe for concurrent use.
type Ruleset struct {
	family Family
	tables [numTables]*Table
}

// NewRuleset returns an empty ruleset for family f: no table exists until
// something is loaded into it, as in a fresh network namespace.
func NewRuleset(f Family) *Ruleset {
	if f != IPv6 {
		f = IPv4
	}
	return &Ruleset{family: f}
}

// Family returns the ruleset's address family.
func (rs *Ruleset) Family() Family { return rs.family }

// Table returns table id, or nil when it does not exist yet.
func (rs *Ruleset) Table(id TableID) *Table {
	if id == NoTable || id >= numTables {
		return nil
	}
	return rs.tables[id]
}

// EnsureTable returns table id, creating it with its built-in chains
// (policy ACCEPT, zero counters) if needed. It returns nil for an invalid id.
func (rs *Ruleset) EnsureTable(id TableID) *Table {
	if id == NoTable || id >= numTables {
		return nil
	}
	if t := rs.tables[id]; t != nil {
		return t
	}
	t := newTable(id)
	rs.tables[id] = t
	return t
}

// Tables returns the existing tables in iptables-save order.
func (rs *Ruleset) Tables() []*Table {
	var out []*Table
	for _, t := range rs.tables {
		if t != nil {
			out = append(out, t)
		}
	}
	return out
}

// Clone returns a deep copy of the ruleset. Matches and targets are shared:
// they are immutable once parsed.
func (rs *Ruleset) Clone() *Ruleset {
	c := &Ruleset{family: rs.family}
	for i, t := range rs.tables {
		if t != nil {
			c.tables[i] = t.clone()
		}
	}
	return c
}

// Table is one table: its built-in chains and user-defined chains.
type Table struct {
	id     TableID
	chains map[string]*Chain
	// order caches the chains in listing order; nil when the set of
	// chains changed since (see chainList).
	order []*Chain
}

func newTable(id TableID) *Table {
	t := &Table{id: id, chains: map[string]*Chain{}}
	for _, h := range tableHooks[id] {
		t.chains[h.String()] = &Chain{Name: h.String(), hook: h, builtin: true}
	}
	return t
}

func (t *Table) clone() *Table {
	c := &Table{id: t.id, chains: make(map[string]*Chain, len(t.chains))}
	// The listing order is kept, as the chains' copies, so that a copy
	// of a large table does not sort its chains again.
	if t.order != nil && len(t.order) == len(t.chains) {
		c.order = make([]*Chain, 0, len(t.order))
		for _, ch := range t.order {
			c.order = append(c.order, c.cloneChain(ch))
		}
		return c
	}
	for _, ch := range t.chains {
		c.cloneChain(ch)
	}
	return c
}

// cloneChain adds a copy of ch to c and returns it.
func (c *Table) cloneChain(ch *Chain) *Chain {
	cc := *ch
	cc.Rules = make([]*Rule, len(ch.Rules))
	for i, r := range ch.Rules {
		rr := *r
		rr.Matches = slices.Clone(r.Matches)
		cc.Rules[i] = &rr
	}
	c.chains[ch.Name] = &cc
	return &cc
}

// ID returns which table this is.
func (t *Table) ID() TableID { return t.id }

// Chain returns the chain called name, or nil.
func (t *Table) Chain(name string) *Chain { return t.chains[name] }

// Chains returns the built-in chains in hook order, then the user-defined
// chains sorted by byte order, which is how iptables-save lists them.
func (t *Table) Chains() []*Chain { return slices.Clone(t.chainList()) }

// chainList is Chains without the copy, for callers that do not keep or
// change the slice. Sorting the 60k chains of a 10k-service kube-proxy
// table is not free, so the order is kept until a chain comes or goes.
func (t *Table) chainList() []*Chain {
	if t.order != nil && len(t.order) == len(t.chains) {
		return t.order
	}
	out := make([]*Chain, 0, len(t.chains))
	for _, h := range tableHooks[t.id] {
		out = append(out, t.chains[h.String()])
	}
	user := out[len(out):]
	for _, c := range t.chains {
		if !c.builtin {
			user = append(user, c)
		}
	}
	slices.SortFunc(user, func(a, b *Chain) int { return strings.Compare(a.Name, b.Name) })
	t.order = out[:len(out)+len(user)]
	return t.order
}

// chainsChanged drops the cached order after a chain came, went or was
// renamed.
func (t *Table) chainsChanged() { t.order = nil }

// NewChain creates an empty user-defined chain.
func (t *Table) NewChain(name string) (*Chain, error) {
	if err := checkChainName(name); err != nil {
		return nil, err
	}
	if _, ok := t.chains[name]; ok {
		return nil, fmt.Errorf("%w: %q", ErrChainExists, name)
	}
	c := &Chain{Name: name}
	t.chains[name] = c
	t.chainsChanged()
	return c, nil
}

// DeleteChain removes an empty user-defined chain that no rule jumps to.
func (t *Table) DeleteChain(name string) error {
	c := t.chains[name]
	switch {
	case c == nil:
		return fmt.Errorf("%w: %q", ErrNoSuchChain, name)
	case c.builtin:
		return fmt.Errorf("%w: cannot delete %q", ErrBuiltinChain, name)
	case len(c.Rules) > 0:
		return fmt.Errorf("%w: %q", ErrChainNotEmpty, name)
	case t.References(name) > 0:
		return fmt.Errorf("%w: %q", ErrChainInUse, name)
	}
	delete(t.chains, name)
	t.chainsChanged()
	return nil
}

// References counts the rules in the table that jump or go to chain name,
// the "N references" of iptables -L.
func (t *Table) References(name string) int {
	n := 0
	for _, c := range t.chains {
		for _, r := range c.Rules {
			if j, ok := r.Target.(*JumpTarget); ok && j.Chain == name {
				n++
			}
		}
	}
	return n
}

// referenceCounts returns References for every chain at once.
func (t *Table) referenceCounts() map[string]int {
	refs := map[string]int{}
	for _, c := range t.chains {
		for _, r := range c.Rules {
			if j, ok := r.Target.(*JumpTarget); ok {
				refs[j.Chain]++
			}
		}
	}
	return refs
}

// checkChainName applies iptables' rules for user chain names.
func checkChainName(name string) error {
	switch {
	case name == "":
		return fmt.Errorf("%w: empty chain name", ErrBadValue)
	case len(name) > 28:
		return fmt.Errorf("%w: chain name %q is longer than 28 characters", ErrBadValue, name)
	case strings.HasPrefix(name, "-") || strings.HasPrefix(name, "!"):
		return fmt.Errorf("%w: chain name %q must not start with '-' or '!'", ErrBadValue, name)
	case strings.ContainsAny(name, " \t\n"):
		return fmt.Errorf("%w: chain name %q contains white space", ErrBadValue, name)
	}
	if _, ok := builtinTargets[name]; ok {
		return fmt.Errorf("%w: chain name %q is a target name", ErrBadValue, name)
	}
	// A hook's name is refused only where the table has that built-in
	// chain (as an existing chain): iptables accepts a user chain called
	// FORWARD in nat, or INPUT in raw.
	return nil
}

// Chain is a built-in or user-defined chain.
type Chain struct {
	// Name is the chain's name.
	Name string
	// Policy is the verdict when a packet falls off a built-in chain.
	// It is meaningless for user chains, which return to their caller.
	Policy Policy
	// Counters counts packets that met the policy of a built-in chain.
	Counters Counters
	// Rules are the chain's rules in order.
	Rules []*Rule

	builtin bool
	hook    Hook
}

// Builtin reports whether the chain is a table's built-in chain.
func (c *Chain) Builtin() bool { return c.builtin }

// Hook returns the hook of a built-in chain.
func (c *Chain) Hook() (Hook, bool) { return c.hook, c.builtin }

// Rule is one rule: the fixed IP header fields, the matches in order, and
// the target. A rule without a target only counts packets.
type Rule struct {
	IP       IPSpec
	Matches  []Match
	Target   Target
	Counters Counters
}

// IPSpec holds the header fields every rule can test: iptables'
// -s, -d, -i, -o, -p and -f. A zero field matches everything.
type IPSpec struct {
	Src, Dst       netip.Prefix // invalid (zero) prefix: any address
	InvSrc, InvDst bool
	// SrcMask and DstMask, when valid, are a non-contiguous netmask
	// ("-s 10.0.0.0/255.0.255.0"): the rule tests addr & mask == Src's
	// address, Src then being a full-length prefix.
	SrcMask, DstMask netip.Addr
	In, Out          string // interface names; a trailing '+' is a prefix wildcard
	InvIn, InvOut    bool
	Proto            inet.Proto // 0: any protocol
	InvProto         bool
	Fragment         Fragment
}

// Fragment is the -f test on IPv4 fragments.
type Fragment uint8

const (
	// AnyFragment matches every packet (no -f).
	AnyFragment Fragment = iota
	// OnlyFragments matches second and later fragments (-f).
	OnlyFragments
	// NoFragments matches unfragmented packets and first fragments (! -f).
	NoFragments
)
