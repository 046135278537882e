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
// jump names an existing user chain, no chain can reach itself, and every
// match and target is used only in the tables and hooks it allows.
func (t *Table) validate(f Family) error {
	for _, c := range t.Chains() {
		for _, r := range c.Rules {
			if j, ok := r.Target.(*JumpTarget); ok {
				dst := t.chains[j.Chain]
				if dst == nil {
					return &ruleError{r, atToken(j.Chain, fmt.Errorf("%w: chain %q does not exist (jump from %q)", ErrNoSuchChain, j.Chain, c.Name))}
				}
				if dst.builtin {
					return &ruleError{r, atToken(j.Chain, fmt.Errorf("%w: cannot jump to built-in chain %q", ErrNotAllowed, j.Chain))}
				}
			}
		}
	}
	// Hooks reaching each chain, with loop detection by depth-first search.
	reach := map[string]uint8{}
	const (
		unvisited = iota
		visiting
		done
	)
	state := map[string]int{}
	var visit func(c *Chain, path []string) error
	visit = func(c *Chain, path []string) error {
		switch state[c.Name] {
		case visiting:
			i := slices.Index(path, c.Name)
			return fmt.Errorf("%w: %s", ErrLoop, strings.Join(append(path[i:], c.Name), " -> "))
		case done:
			return nil
		}
		state[c.Name] = visiting
		for _, r := range c.Rules {
			if j, ok := r.Target.(*JumpTarget); ok {
				if err := visit(t.chains[j.Chain], append(path, c.Name)); err != nil {
					if _, ok := err.(*ruleError); ok {
						return err
					}
					return &ruleError{r, err}
				}
			}
		}
		state[c.Name] = done
		return nil
	}
	for _, c := range t.Chains() {
		if err := visit(c, nil); err != nil {
			return err
		}
	}
	var spread func(c *Chain, mask uint8)
	spread = func(c *Chain, mask uint8) {
		if reach[c.Name]|mask == reach[c.Name] && reach[c.Name] != 0 {
			return
		}
		reach[c.Name] |= mask
		for _, r := range c.Rules {
			if j, ok := r.Target.(*JumpTarget); ok {
				spread(t.chains[j.Chain], mask)
			}
		}
	}
	for _, h := range tableHooks[t.id] {
		spread(t.chains[h.String()], 1<<h)
	}
	for _, c := range t.Chains() {
		mask := reach[c.Name]
		for _, r := range c.Rules {
			for _, m := range r.Matches {
				if err := checkPlace(matchModules[m.Module()], t.id, mask); err != nil {
					return &ruleError{r, err}
				}
				if hc, ok := m.(hookChecker); ok {
					if err := hc.checkHooks(mask); err != nil {
						return &ruleError{r, err}
					}
				}
			}
			if r.Target == Drop && t.id == NAT {
				// iptables refuses DROP in the nat table.
				return &ruleError{r, fmt.Errorf("%w: DROP is not allowed in the nat table", ErrNotAllowed)}
			}
			if r.Target != nil {
				if mod := targetModules[r.Target.Name()]; mod != nil {
					if err := checkPlace(mod, t.id, mask); err != nil {
						return &ruleError{r, err}
					}
				}
			}
		}
	}
	return nil
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

// hookChecker is implemented by matches whose allowed hooks depend on
// their options (addrtype's interface limits, physdev's output tests);
// mask has bit 1<<h set for each hook h that reaches the rule.
type hookChecker interface {
	checkHooks(mask uint8) error
}
