package netfilter

// runTable sends the packet of walk w through table t, in the walk's
// evaluation context (set up for the table and hook by runHook), and
// returns the table's verdict: vAccept or vDrop.
func (h *Host) runTable(w *walk, t *ctable) verdict {
	c := &w.ctx
	pc := t.entry[c.hook]
	if pc < 0 {
		return vAccept
	}
	stack := t.stack
	sp := 0
	p := c.pkt
	ex := h.oracle
	if ex != nil {
		if s := ex.enterTable(c, stack); s != nil {
			// Resume a previous path at its branch point (Explain).
			ct, ready := c.ct, c.ctReady
			*c = s.ctx
			c.pkt, c.ct, c.ctReady = p, ct, ready
			*p = s.pkt
			pc, sp = s.pc, copy(stack, s.stack)
		}
	}
	for {
		r := &t.rules[pc]
		if r.disp != nil && !t.linear {
			// Skip the rules of an indexed run that cannot match.
			pc = r.disp.next(p, pc)
			r = &t.rules[pc]
		}
		if r.end {
			if r.chain.builtin || sp == 0 {
				// A built-in chain's end, or a user chain reached by goto
				// from it: the built-in policy decides.
				if w.tracing {
					base := &t.rules[t.baseEnd[c.hook]]
					h.traceStep(w, base, policyAction(base.policy))
				}
				return h.policy(w, t, c.hook, c.table)
			}
			sp--
			pc = stack[sp]
			continue
		}
		if ex != nil {
			ex.run.pc, ex.run.sp = pc, sp
		}
		if !r.matchIP(p) || (len(r.matches) > 0 && !h.runMatches(r, c)) {
			if c.hotdrop {
				w.decide(r, Action{Kind: ActionDrop})
				return vDrop
			}
			pc++
			continue
		}
		if !h.explaining {
			r.rule.Counters.Packets++
			r.rule.Counters.Bytes += uint64(p.Length)
		}
		kind := r.kind
		if r.apply != nil {
			c.rule = r
			kind = r.apply.apply(c)
			if ex != nil && !pureTarget(r.apply) {
				ex.run.clean = false
			}
		}
		switch kind {
		case vContinue:
			h.traceStep(w, r, Action{Kind: ActionContinue})
			pc++
		case vAccept:
			h.traceStep(w, r, Action{Kind: ActionAccept})
			w.decide(r, Action{Kind: ActionAccept})
			return vAccept
		case vDrop:
			action := Action{Kind: ActionDrop}
			if c.rejected {
				action.Kind = ActionReject
			}
			h.traceStep(w, r, action)
			w.decide(r, action)
			return vDrop
		case vReturn:
			h.traceStep(w, r, Action{Kind: ActionReturn})
			if sp == 0 {
				// RETURN from a built-in chain, or from a user chain
				// entered by goto from it, applies the policy.
				pc = t.baseEnd[c.hook]
				continue
			}
			sp--
			pc = stack[sp]
		case vJump:
			if w.tracing {
				h.traceStep(w, r, r.jumpAction())
			}
			stack[sp] = pc + 1
			sp++
			pc = int(r.jump)
		case vGoto:
			if w.tracing {
				h.traceStep(w, r, r.jumpAction())
			}
			pc = int(r.jump)
		}
	}
}

// policy applies the policy of table t's built-in chain at hook hk to the
// packet of walk w: it counts it and decides.
func (h *Host) policy(w *walk, t *ctable, hk Hook, id TableID) verdict {
	base := &t.rules[t.baseEnd[hk]]
	if !h.explaining {
		base.chain.Counters.Packets++
		base.chain.Counters.Bytes += uint64(w.pkt.Length)
	}
	w.where = place{r: base, hook: hk, table: id, action: policyAction(base.policy)}
	if base.policy == PolicyDrop {
		return vDrop
	}
	return vAccept
}

func (h *Host) runMatches(r *crule, c *evalCtx) bool {
	c.rule = r
	for i, m := range r.matches {
		c.matchIdx = int(r.m0) + i
		if !m.match(c) {
			return false
		}
		if c.hotdrop {
			return false
		}
	}
	return true
}

// policyAction is the trace action of a built-in chain's policy.
func policyAction(p Policy) Action {
	if p == PolicyDrop {
		return Action{Kind: ActionPolicyDrop}
	}
	return Action{Kind: ActionPolicyAccept}
}
