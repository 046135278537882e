package netfilter

// verdict is what a target or a chain decides.
type verdict uint8

const (
	vContinue verdict = iota // go on with the next rule (MARK, LOG, ...)
	vAccept                  // end this table; the next table of the hook runs
	vDrop                    // end the packet
	vReturn                  // leave the current chain
	vJump                    // enter a user chain, returning here
	vGoto                    // enter a user chain without returning here
)

// evalCtx is the state of one packet crossing one table. It lives inside
// the packet's walk and is reused, so evaluation does not allocate.
type evalCtx struct {
	pkt   *Packet
	hook  Hook
	table TableID
	// host is the host the packet walks, for its configuration and
	// long-lived state (conntrack, sets, recent lists, clock); walk is the
	// packet's walk, for its connection (walk.cur) and walk state.
	host *Host
	walk *walk
	rule *crule // the rule being evaluated, for per-rule state (nth)
	// matchIdx is the index of the match being evaluated in rule.
	matchIdx int

	// hotdrop is set by a match that wants the packet dropped at once.
	hotdrop bool
	// rejected is set by REJECT: the packet is dropped and a reply emitted.
	rejected bool
	reject   rejectKind
	// notrack is set by NOTRACK and CT --notrack in raw.
	notrack bool
	// tmpl is set by the other CT targets in raw: the kernel attaches a
	// conntrack template to the packet, which the rules after it see as a
	// NEW connection with zero tuples until the conntrack hook replaces it
	// (docs/kernel-notes.md). tmplMark is the mark CONNMARK gave it.
	tmpl     bool
	tmplMark uint32
	// ct describes the packet's connection, for the conntrack matches;
	// it is filled on first use (see conn), since most tables never ask.
	ct      ctInfo
	ctReady bool
	// nat is set by a NAT target for the host to bind.
	nat *natRequest
	// natReq is the storage nat points to, so NAT targets do not allocate.
	natReq natRequest
}

// conn returns the packet's connection as the conntrack matches see it.
func (c *evalCtx) conn() *ctInfo {
	if !c.ctReady {
		c.walk.fillCT(c)
	}
	return &c.ct
}

// applier is implemented by targets that act on the packet; targets that
// do not (ACCEPT, DROP, RETURN, jumps) are handled by the evaluator.
type applier interface {
	apply(c *evalCtx) verdict
}
