package netfilter

import (
	"fmt"
	"slices"
	"strings"
)

// ruleError locates a load error at a rule, so that restore can name the
// input line the rule came from.
type ruleError struct {
	rule *Rule
	err  error
}

func (e *ruleError) Error() string { return e.err.Error() }
func (e *ruleError) Unwrap() error { return e.err }

// validate checks what the kernel checks when a table is replaced: every
// jump names an existing user chain, no chain a built-in chain reaches can
// reach itself, and every
// match and target is used only in the tables and hooks it allows.
func (t *Table) validate(f Family) error {
	_, err := t.validateChains(f, t.chainList())
	return err
}

// validated is what validating a table hands to its compilation: the
// listing it validated and, for each jump in the order the listing's
// rules hold them, the listing index of the chain jumped to. Compile then
// resolves jumps without looking 70k chain names up again.
type validated struct {
	chains []*Chain
	jumps  []int32
}

// validateChains is validate with the chains already listed (compile
// lists them too, and sorting 60k chain names is not free).
func (t *Table) validateChains(f Family, chains []*Chain) (*validated, error) {
	// Chains are numbered in listing order and the jumps kept as edges
	// between numbers, so each jump's name is looked up once: a
	// 10k-service kube-proxy table has some 60k chains and 70k jumps.
	ord := make(map[*Chain]int32, len(chains))
	for i, c := range chains {
		ord[c] = int32(i)
	}
	edgeStart := make([]int32, len(chains)+1)
	var edgeTo []int32
	var edgeRule []*Rule
	// A table uses a handful of modules over and over: look each name up
	// once.
	var mods []*module
	matchModule := func(name string) *module {
		for _, m := range mods {
			if m.name == name {
				return m
			}
		}
		m := matchModules[name]
		if m != nil {
			mods = append(mods, m)
		}
		return m
	}
	// The same pass notes, for each chain, the hooks all its modules
	// allow, and whether a rule needs the full check at the end (a table
	// restriction, a hook check that depends on options, DROP in nat):
	// reading 170k scattered rules twice costs more than the checks.
	allowed := make([]uint8, len(chains))
	slow := make([]bool, len(chains))
	var idle map[string]bool // IDLETIMER labels and their --alarm (see compile)
	for i, c := range chains {
		edgeStart[i] = int32(len(edgeTo))
		all := ^uint8(0)
		for _, r := range c.Rules {
			for _, m := range r.Matches {
				if _, ok := m.(hookChecker); ok {
					slow[i] = true
				}
				all &= placeMask(matchModule(m.Module()), t.id, &slow[i])
			}
			if r.Target == Drop && t.id == NAT {
				slow[i] = true
			}
			switch r.Target.(type) {
			case nil, *JumpTarget, *VerdictTarget:
			default:
				all &= placeMask(targetModules[r.Target.Name()], t.id, &slow[i])
				if _, ok := r.Target.(hookChecker); ok {
					slow[i] = true
				}
				if it, ok := r.Target.(*IdletimerTarget); ok {
					if err := idleLabel(&idle, it); err != nil {
						return nil, &ruleError{r, err}
					}
				}
			}
			if j, ok := r.Target.(*JumpTarget); ok {
				dst := t.chains[j.Chain]
				if dst == nil {
					return nil, &ruleError{r, atToken(j.Chain, fmt.Errorf("%w: chain %q does not exist (jump from %q)", ErrNoSuchChain, j.Chain, c.Name))}
				}
				if dst.builtin {
					return nil, &ruleError{r, atToken(j.Chain, fmt.Errorf("%w: cannot jump to built-in chain %q", ErrNotAllowed, j.Chain))}
				}
				edgeTo = append(edgeTo, ord[dst])
				edgeRule = append(edgeRule, r)
			}
		}
		allowed[i] = all
	}
	edgeStart[len(chains)] = int32(len(edgeTo))
	// Loop detection by depth-first search.
	const (
		unvisited = iota
		visiting
		done
	)
	state := make([]uint8, len(chains))
	var path []int32 // the chains being visited, shared by the recursion
	// order lists the chains callees first (depth-first post-order).
	order := make([]int32, 0, len(chains))
	var visit func(c int32) error
	visit = func(c int32) error {
		switch state[c] {
		case visiting:
			var names []string
			for _, x := range path[slices.Index(path, c):] {
				names = append(names, chains[x].Name)
			}
			return fmt.Errorf("%w: %s", ErrLoop, strings.Join(append(names, chains[c].Name), " -> "))
		case done:
			return nil
		}
		state[c] = visiting
		path = append(path, c)
		for e := edgeStart[c]; e < edgeStart[c+1]; e++ {
			if err := visit(edgeTo[e]); err != nil {
				if _, ok := err.(*ruleError); ok {
					return err
				}
				return &ruleError{edgeRule[e], err}
			}
		}
		path = path[:len(path)-1]
		state[c] = done
		order = append(order, c)
		return nil
	}
	// Only loops a built-in chain reaches are refused: nf_tables
	// validates jumps from its base chains, and iptables-nft accepts
	// chains that jump to each other out of every hook's reach
	// (docs/kernel-notes.md).
	for _, h := range tableHooks[t.id] {
		if err := visit(ord[t.chains[h.String()]]); err != nil {
			return nil, err
		}
	}
	// Hooks reaching each chain. The chains form a DAG: walking it callers
	// first hands each chain's hooks to its callees in one pass.
	reach := make([]uint8, len(chains))
	for _, h := range tableHooks[t.id] {
		reach[ord[t.chains[h.String()]]] |= 1 << h
	}
	for i := len(order) - 1; i >= 0; i-- {
		c := order[i]
		if mask := reach[c]; mask != 0 {
			for e := edgeStart[c]; e < edgeStart[c+1]; e++ {
				reach[edgeTo[e]] |= mask
			}
		}
	}
	for i, c := range chains {
		mask := reach[i]
		if !slow[i] && mask&^allowed[i] == 0 {
			continue // no rule of c can fail the checks below
		}
		for _, r := range c.Rules {
			for _, m := range r.Matches {
				if err := checkPlace(matchModule(m.Module()), t.id, mask); err != nil {
					return nil, &ruleError{r, err}
				}
				if hc, ok := m.(hookChecker); ok {
					if err := hc.checkHooks(mask); err != nil {
						return nil, &ruleError{r, err}
					}
				}
			}
			if r.Target == Drop && t.id == NAT {
				// iptables refuses DROP in the nat table.
				return nil, &ruleError{r, fmt.Errorf("%w: DROP is not allowed in the nat table", ErrNotAllowed)}
			}
			switch r.Target.(type) {
			case nil, *JumpTarget, *VerdictTarget:
				// Chains and verdicts are no extension.
			default:
				if mod := targetModules[r.Target.Name()]; mod != nil {
					if err := checkPlace(mod, t.id, mask); err != nil {
						return nil, &ruleError{r, err}
					}
				}
				if hc, ok := r.Target.(hookChecker); ok {
					if err := hc.checkHooks(mask); err != nil {
						return nil, &ruleError{r, err}
					}
				}
			}
		}
	}
	return &validated{chains: chains, jumps: edgeTo}, nil
}

// placeMask returns the hooks module m allows (all for nil or
// unrestricted), and sets *slow when m is not allowed in table t at all.
func placeMask(m *module, t TableID, slow *bool) uint8 {
	if m == nil {
		return ^uint8(0)
	}
	if m.tables != nil && !slices.Contains(m.tables, t) {
		*slow = true
	}
	if m.hooks == nil {
		return ^uint8(0)
	}
	var allowed uint8
	for _, h := range m.hooks {
		allowed |= 1 << h
	}
	return allowed
}

// checkPlace reports whether module m may run in table t at the hooks in
// mask.
func checkPlace(m *module, t TableID, mask uint8) error {
	if m == nil {
		return nil
	}
	if m.tables != nil && !slices.Contains(m.tables, t) {
		names := make([]string, len(m.tables))
		for i, x := range m.tables {
			names[i] = x.String()
		}
		return fmt.Errorf("%w: %s is only valid in the %s table, not %s", ErrNotAllowed, m.name, strings.Join(names, "/"), t)
	}
	if m.hooks == nil {
		return nil
	}
	var allowed uint8
	for _, h := range m.hooks {
		allowed |= 1 << h
	}
	if bad := mask &^ allowed; bad != 0 {
		var hs []string
		for h := Hook(0); h < numHooks; h++ {
			if bad&(1<<h) != 0 {
				hs = append(hs, h.String())
			}
		}
		return fmt.Errorf("%w: %s cannot be used in %s", ErrNotAllowed, m.name, strings.Join(hs, ", "))
	}
	return nil
}

// hookChecker is implemented by matches and targets whose allowed hooks
// depend on their options (addrtype's interface limits, physdev's output
// tests, TCPMSS --clamp-mss-to-pmtu);
// mask has bit 1<<h set for each hook h that reaches the rule.
type hookChecker interface {
	checkHooks(mask uint8) error
}

// idleLabel notes an IDLETIMER rule's label in *seen: the kernel keeps
// one timer per label and refuses a rule that wants the other kind, with
// or without --alarm (EINVAL; docs/kernel-notes.md).
func idleLabel(seen *map[string]bool, it *IdletimerTarget) error {
	if alarm, ok := (*seen)[it.Label]; ok && alarm != it.Alarm {
		return fmt.Errorf("%w: IDLETIMER --label %s: another rule's timer of that label is of the other kind (--alarm or not)", ErrNotAllowed, it.Label)
	}
	if *seen == nil {
		*seen = map[string]bool{}
	}
	(*seen)[it.Label] = it.Alarm
	return nil
}
