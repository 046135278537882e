package netfilter

import (
	"fmt"
	"net/netip"
	"slices"
)

// Routing tables with names (ip route's "table local", "main", "default").
const (
	TableDefault uint32 = 253
	TableMain    uint32 = 254
	TableLocal   uint32 = 255
)

// TableName returns a table's name as ip prints it: local, main, default,
// else the number.
func TableName(t uint32) string {
	switch t {
	case TableLocal:
		return "local"
	case TableMain:
		return "main"
	case TableDefault:
		return "default"
	}
	return fmt.Sprint(t)
}

// RuleAction is what a routing rule does when it matches.
type RuleAction uint8

// Rule actions, as ip rule names them.
const (
	// RuleLookup looks the destination up in RouteRule.Table; when the
	// table has no route (or a throw route), or the route is suppressed,
	// the next rule is tried.
	RuleLookup RuleAction = iota
	// RuleGoto goes on with the rule of priority RouteRule.Goto (a later
	// one); when there is none, the rule does nothing.
	RuleGoto
	// RuleNop does nothing.
	RuleNop
	// RuleBlackhole, RuleUnreachable and RuleProhibit end the lookup
	// with that failure (a forwarded packet is dropped; see Reason).
	RuleBlackhole
	RuleUnreachable
	RuleProhibit
)

var ruleActionNames = [...]string{RuleLookup: "lookup", RuleGoto: "goto", RuleNop: "nop",
	RuleBlackhole: "blackhole", RuleUnreachable: "unreachable", RuleProhibit: "prohibit"}

// String returns the action as ip rule prints it.
func (a RuleAction) String() string {
	if int(a) < len(ruleActionNames) {
		return ruleActionNames[a]
	}
	return fmt.Sprintf("RuleAction(%d)", int(a))
}

// UIDRange is an inclusive range of user ids (ip rule's uidrange).
type UIDRange struct{ Lo, Hi uint32 }

// RouteRule is a rule of the routing policy database (ip rule). A rule
// matches a route lookup when every selector it has matches (the zero
// value of a selector is "any"), and Not inverts the whole match; then its
// Action runs. What a lookup carries (the flow) depends on where it is made:
// see Host.AddRule.
type RouteRule struct {
	// Family is IPv4 or IPv6.
	Family Family
	// Priority orders the rules, lowest first; rules of equal priority
	// are tried in the order added. AutoPriority takes instead what ip
	// rule add gives a rule without "priority": one less than the
	// priority of the second rule in the list (32765 at first, then
	// 32764...), or 0 when that is 0.
	Priority     uint32
	AutoPriority bool
	// Not inverts the match ("not").
	Not bool
	// Src and Dst are "from" and "to"; an invalid prefix is "all".
	Src, Dst netip.Prefix
	// Mark and Mask are "fwmark MARK/MASK" when HasMark; the mask
	// defaults to 0xffffffff in ip rule.
	Mark, Mask uint32
	HasMark    bool
	// IIF and OIF are "iif" and "oif" device names. Locally generated
	// packets are looked up with iif lo. Packets in packetwalk come from
	// sockets not bound to a device, so an OIF rule never matches, as
	// for such sockets and forwarded packets in the kernel.
	IIF, OIF string
	// TOS is "tos" or "dsfield": for IPv4 it is compared with the
	// packet's TOS bits 0x1c, for IPv6 with its DSCP bits (0xfc).
	TOS uint8
	// IPProto, SPort and DPort are "ipproto", "sport" and "dport" (a
	// zero range is any port).
	IPProto      uint8
	SPort, DPort PortRange
	// UIDs is "uidrange" when HasUIDs. Forwarded packets are looked up
	// with uid 0, local ones with Packet.UID.
	UIDs    UIDRange
	HasUIDs bool
	// SuppressLen is "suppress_prefixlength N" when HasSuppress: a route
	// found with a prefix of N bits or fewer is ignored and the next
	// rule tried (wg-quick's "suppress_prefixlength 0" skips the
	// default route of main).
	SuppressLen int
	HasSuppress bool
	// Action is what the rule does; Table is the table RuleLookup looks
	// in, Goto the priority RuleGoto goes to.
	Action      RuleAction
	Table, Goto uint32
}

// defaultRules are the rules the kernel starts with (ip rule shows them):
// local, main and, for IPv4 only, default.
func defaultRules(f Family) []RouteRule {
	rs := []RouteRule{
		{Family: f, Priority: 0, Table: TableLocal},
		{Family: f, Priority: 32766, Table: TableMain},
	}
	if f == IPv4 {
		rs = append(rs, RouteRule{Family: f, Priority: 32767, Table: TableDefault})
	}
	return rs
}

func (h *Host) ruleList(f Family) []RouteRule {
	if rs := h.rpdb[famIdx(f)]; rs != nil {
		return rs
	}
	return defaultRules(f)
}

// Rules returns a copy of the routing rules of family f, in the order
// they are tried: the kernel's default rules until changed.
func (h *Host) Rules(f Family) []RouteRule { return slices.Clone(h.ruleList(f)) }

// AddRule adds a routing rule, as ip rule add does, after the rules of
// lower or equal priority.
//
// What route lookups carry, as in the kernel: for a received packet (the
// input routing after PREROUTING) its addresses, mark, TOS, protocol,
// ports and receiving interface, uid 0; for a locally generated packet
// (Host.Send) the destination, the source only when the packet was given
// one (a socket bound to it), the mark, TOS, protocol, ports, uid (Packet.UID)
// and iif lo; the reroute after OUTPUT (a mark, address or TOS changed in
// mangle OUTPUT, or a DNAT in nat OUTPUT) the packet's source too. A
// REJECT reply or ICMP error is looked up with mark 0.
func (h *Host) AddRule(r RouteRule) error {
	if err := checkRule(&r); err != nil {
		return err
	}
	i := famIdx(r.Family)
	rs := h.ruleList(r.Family)
	if r.AutoPriority {
		r.Priority, r.AutoPriority = 0, false
		if len(rs) > 1 && rs[1].Priority > 0 {
			r.Priority = rs[1].Priority - 1
		}
	}
	if r.Action == RuleGoto && r.Goto <= r.Priority {
		return fmt.Errorf("%w: rule %d: goto %d must point to a later rule", ErrBadValue, r.Priority, r.Goto)
	}
	at := len(rs)
	for j, o := range rs {
		if o.Priority > r.Priority {
			at = j
			break
		}
	}
	h.rpdb[i] = slices.Insert(slices.Clone(rs), at, r)
	return nil
}

// SetRules replaces the routing rules of family f by rules (all of that
// family), as a node's `ip rule` lists them; nil restores the defaults.
func (h *Host) SetRules(f Family, rules []RouteRule) error {
	h.rpdb[famIdx(f)] = nil
	if rules == nil {
		return nil
	}
	h.rpdb[famIdx(f)] = []RouteRule{}
	for n, r := range rules {
		if r.Family != f {
			return fmt.Errorf("%w: rule %d is not of family %s", ErrBadValue, n+1, f)
		}
		if err := h.AddRule(r); err != nil {
			return fmt.Errorf("rule %d: %w", n+1, err)
		}
	}
	if slices.Equal(h.rpdb[famIdx(f)], defaultRules(f)) {
		// The default rules as a node lists them: the host routes as the
		// kernel does without rules of its own (the compiled tables, and
		// rp_filter=0 checking only the host's addresses).
		h.rpdb[famIdx(f)] = nil
	}
	return nil
}

// DefaultRules reports whether the routing rules of family f are the
// kernel's default rules.
func (h *Host) DefaultRules(f Family) bool { return h.rpdb[famIdx(f)] == nil }

func checkRule(r *RouteRule) error {
	if r.Family != IPv4 && r.Family != IPv6 {
		return fmt.Errorf("%w: routing rule without family (IPv4 or IPv6)", ErrBadValue)
	}
	for _, p := range []netip.Prefix{r.Src, r.Dst} {
		if p.IsValid() && p.Addr().Is4() != (r.Family == IPv4) {
			return fmt.Errorf("%w: rule prefix %s is not of family %s", ErrBadValue, p, r.Family)
		}
	}
	if r.Src.IsValid() {
		r.Src = r.Src.Masked()
	}
	if r.Dst.IsValid() {
		r.Dst = r.Dst.Masked()
	}
	if r.Family == IPv4 && r.TOS&^0x1c != 0 {
		// The kernel refuses other bits: "Invalid tos", or for the two
		// low bits "ECN bits must be 0".
		return fmt.Errorf("%w: rule tos %#02x: only the bits 0x1c may be set", ErrBadValue, r.TOS)
	}
	if r.Family == IPv6 && r.TOS&3 != 0 {
		return fmt.Errorf("%w: rule dsfield %#02x: ECN bits must be 0", ErrBadValue, r.TOS)
	}
	if !r.HasMark {
		r.Mark, r.Mask = 0, 0
	}
	if r.IIF != "" {
		if err := checkDevName(r.IIF); err != nil {
			return err
		}
	}
	if r.OIF != "" {
		if err := checkDevName(r.OIF); err != nil {
			return err
		}
	}
	for _, pr := range []PortRange{r.SPort, r.DPort} {
		if pr.Lo > pr.Hi {
			return fmt.Errorf("%w: port range %d-%d", ErrBadValue, pr.Lo, pr.Hi)
		}
	}
	if r.HasUIDs && r.UIDs.Lo > r.UIDs.Hi {
		return fmt.Errorf("%w: uidrange %d-%d", ErrBadValue, r.UIDs.Lo, r.UIDs.Hi)
	}
	if r.HasSuppress && (r.SuppressLen < 0 || r.SuppressLen > 128) {
		return fmt.Errorf("%w: suppress_prefixlength %d", ErrBadValue, r.SuppressLen)
	}
	if r.Action > RuleProhibit {
		return fmt.Errorf("%w: rule action %d", ErrBadValue, r.Action)
	}
	if r.Action == RuleLookup && r.Table == 0 {
		return fmt.Errorf("%w: rule lookup without a table", ErrBadValue)
	}
	return nil
}

// flow is what a route lookup carries (the kernel's flowi): the keys the
// rules select on.
type flow struct {
	dst, src     netip.Addr // src unset: no source known yet
	mark         uint32
	iif          string
	tos          uint8
	proto        uint8
	sport, dport uint16
	uid          uint32
}

// decision is the outcome of a route lookup: the route (nil on failure),
// the rule and table that chose it, and why it failed.
type decision struct {
	r      *Route
	dst    netip.Prefix // the matched prefix (the route's, or the address's own for a local address)
	rule   int32        // priority of the deciding rule; -1 when none decided
	table  uint32
	reason Reason
}

// matchRule reports whether routing rule r selects the lookup k.
func matchRule(r *RouteRule, k *flow) bool {
	ok := true
	switch {
	case r.IIF != "" && r.IIF != k.iif:
		ok = false
	case r.OIF != "":
		ok = false // no socket is bound to a device
	case r.HasMark && (r.Mark^k.mark)&r.Mask != 0:
		ok = false
	case r.HasUIDs && (k.uid < r.UIDs.Lo || k.uid > r.UIDs.Hi):
		ok = false
	case r.IPProto != 0 && r.IPProto != k.proto:
		ok = false
	case r.SPort != PortRange{} && (k.sport < r.SPort.Lo || k.sport > r.SPort.Hi):
		ok = false
	case r.DPort != PortRange{} && (k.dport < r.DPort.Lo || k.dport > r.DPort.Hi):
		ok = false
	case r.Src.IsValid() && !r.Src.Contains(srcOrZero(k)):
		ok = false
	case r.Dst.IsValid() && !r.Dst.Contains(k.dst):
		ok = false
	case r.TOS != 0 && k.dst.Is4() && r.TOS != k.tos&0x1c:
		ok = false
	case r.TOS != 0 && !k.dst.Is4() && r.TOS != k.tos&0xfc:
		ok = false
	}
	return ok != r.Not
}

// srcOrZero is the lookup's source, the unspecified address when unset,
// which only "from all" (or a /0) matches.
func srcOrZero(k *flow) netip.Addr {
	if k.src.IsValid() {
		return k.src
	}
	if k.dst.Is4() {
		return netip.IPv4Unspecified()
	}
	return netip.IPv6Unspecified()
}

// lookup is the kernel's fib_lookup: the rules in order, each lookup in
// its table, until a route or a failure decides. With only the default
// rules (the common case) IPv4 takes the compiled table.
func (h *Host) lookup(k *flow) decision {
	fam := famIdx(familyOf(k.dst))
	rs := h.rpdb[fam]
	if rs == nil {
		if k.dst.Is4() {
			if !h.fib.valid {
				h.fib.build(h)
			}
			return h.fib.lookup4(h, k.dst)
		}
		// IPv6's default rules: local, then main.
		if d := h.tableLookup(TableLocal, k.dst); d.r != nil {
			d.rule = 0
			return d
		}
		if d := h.tableLookup(TableMain, k.dst); d.r != nil && d.r.Type != RouteThrow {
			d.rule = 32766
			return finish(d)
		}
		return decision{rule: -1, reason: ReasonNoRoute}
	}
	for i := 0; i < len(rs); i++ {
		r := &rs[i]
		if !matchRule(r, k) {
			continue
		}
		switch r.Action {
		case RuleNop:
			continue
		case RuleGoto:
			j := slices.IndexFunc(rs[i+1:], func(o RouteRule) bool { return o.Priority == r.Goto })
			if j >= 0 {
				i += j // the loop's i++ lands on the target
			}
			continue
		case RuleBlackhole:
			return decision{rule: int32(r.Priority), reason: ReasonBlackhole}
		case RuleUnreachable:
			return decision{rule: int32(r.Priority), reason: ReasonNetUnreachable}
		case RuleProhibit:
			return decision{rule: int32(r.Priority), reason: ReasonProhibited}
		}
		d := h.tableLookup(r.Table, k.dst)
		if d.r == nil || d.r.Type == RouteThrow {
			continue
		}
		// A blackhole, unreachable or prohibit route ends the lookup as
		// the error it is: only a route found is suppressed.
		if r.HasSuppress && routeFailure(d.r) == NoReason && d.dst.Bits() <= r.SuppressLen {
			continue
		}
		d.rule = int32(r.Priority)
		return finish(d)
	}
	return decision{rule: -1, reason: ReasonNoRoute}
}

// finish sets the failure a blackhole, unreachable or prohibit route
// gives.
func finish(d decision) decision {
	d.reason = routeFailure(d.r)
	return d
}

func familyOf(a netip.Addr) Family {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// tableLookup finds the longest-prefix route to dst in table t (lowest
// metric first, then the first added); the local table also holds the
// host's own addresses (and 127.0.0.0/8, ::1), which route through lo.
func (h *Host) tableLookup(t uint32, dst netip.Addr) decision {
	if t == TableLocal && h.isOwnAddr(dst) {
		return decision{r: &h.loRoute, dst: netip.PrefixFrom(dst, dst.BitLen()), table: t}
	}
	var best *Route
	for i := range h.routes {
		r := &h.routes[i]
		if r.Table != t || !r.Dst.Contains(dst) {
			continue
		}
		if best == nil || r.Dst.Bits() > best.Dst.Bits() || r.Dst.Bits() == best.Dst.Bits() && r.Metric < best.Metric {
			best = r
		}
	}
	if best == nil {
		return decision{table: t}
	}
	d := decision{r: best, dst: best.Dst, table: t}
	if best.Type == RouteLocal {
		d.r = &h.loRoute
	}
	return d
}
