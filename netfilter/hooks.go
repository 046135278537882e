package netfilter

import (
	"net/netip"

	"github.com/packetwalk/packetwalk/conntrack"
)

// Registrations at a hook besides the tables: the conntrack lookup and
// the confirmation that makes a new connection visible.
const (
	regTrack   TableID = numTables + iota
	regConfirm TableID = numTables + iota
)

// hookTables lists what runs at a hook, in the kernel's priority order.
// nat appears where its destination (PREROUTING, OUTPUT) or source (INPUT,
// POSTROUTING) part runs.
func (h *Host) hookTables(hk Hook) []TableID {
	switch hk {
	case Prerouting:
		return []TableID{Raw, regTrack, Mangle, NAT}
	case Input:
		if h.cfg.Backend == Legacy {
			return []TableID{Mangle, Filter, Security, NAT, regConfirm}
		}
		return []TableID{Mangle, Filter, NAT, Security, regConfirm}
	case Forward:
		return []TableID{Mangle, Filter, Security}
	case Output:
		return []TableID{Raw, regTrack, Mangle, NAT, Filter, Security}
	case Postrouting:
		return []TableID{Mangle, NAT, regConfirm}
	}
	return nil
}

// runHook sends the packet of walk w through everything registered at
// hook hk. It reports whether the packet survives.
func (h *Host) runHook(w *walk, hk Hook) bool {
	p, res := w.pkt, w.res
	prog := h.progs[famIdx(p.Family)]
	if prog == nil {
		return true
	}
	c := &w.ctx
	for _, id := range h.hookOrder[hk] {
		switch id {
		case regTrack:
			if !prog.conntrack || w.notrack || w.loopback || w.attached {
				continue
			}
			var info conntrack.Info
			var err error
			f := &w.facts
			fillFacts(f, p)
			if h.explaining {
				info, err = h.explainLookup(f)
			} else {
				info, err = h.ct.Track(f)
			}
			if err != nil {
				res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, ReasonConntrackFull
				w.where = place{hook: hk, action: Action{Kind: ActionConntrack}}
				return false
			}
			w.cur = info
			continue
		case regConfirm:
			// Only packets of the original direction confirm (a REJECT
			// reply attached to a new connection does not).
			if w.cur.Entry != nil && !w.cur.Entry.Confirmed() && w.cur.Dir == conntrack.Original && !h.explaining {
				if err := h.ct.Confirm(w.cur.Entry); err != nil {
					res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, ReasonConntrackClash
					w.where = place{hook: hk, action: Action{Kind: ActionConntrack}}
					return false
				}
			}
			continue
		}
		t := prog.tables[id]
		if id == NAT {
			if t == nil || w.cur.Entry == nil {
				continue
			}
			// ICMP errors RELATED to a connection are only translated
			// (nf_nat_icmp_reply_translation); they never cross nat chains.
			related := w.cur.State == conntrack.StateRelated && conntrack.IsICMPError(p.Proto, p.ICMPType)
			if related || !w.natApplies(hk) {
				w.translate(hk)
				if hk == Output && !h.rerouteLocalnet(w) {
					return false
				}
				continue
			}
		}
		if t == nil || t.entry[hk] < 0 {
			continue
		}
		if t.empty[hk] && id != NAT && !w.tracing {
			// An empty built-in chain (mangle on most nodes): only its
			// policy applies, and nothing needs an evaluation context.
			if h.policy(w, t, hk, id) == vDrop {
				res.Verdict, res.Disposition = VerdictDrop, Dropped
				return false
			}
			continue
		}
		// The context is reset field by field: it is large, and most of
		// it (ct, natReq) is only read once set.
		c.pkt, c.hook, c.table, c.rule, c.matchIdx = p, hk, id, nil, 0
		c.hotdrop, c.rejected, c.reject, c.notrack, c.tmpl, c.ctReady, c.nat = false, false, 0, false, false, false, nil
		if w.tracing && !h.explaining {
			w.trace = append(w.trace, Step{Hook: hk, Table: id, Chain: hk.String(), Action: Action{Kind: ActionEnter}, Packet: p.clone()})
		}
		v := h.runTable(w, t)
		if id == Raw && c.notrack {
			w.notrack = true
		}
		if id == NAT && v != vDrop {
			if !h.bindNAT(w, hk, c.nat) {
				v = vDrop
			} else {
				w.translate(hk)
			}
		}
		if v == vDrop {
			res.Verdict = VerdictDrop
			res.Disposition = Dropped
			if c.rejected {
				res.Verdict, res.Disposition = VerdictReject, Rejected
				if c.reject == RejectTCPReset && !h.explaining {
					h.ct.SetClosing(w.cur.Entry)
				}
				if e, ok := h.rejectReply(p, c.reject); ok {
					if out, ok := h.sendEmitted(w, e); ok {
						res.Emitted = append(res.Emitted, out)
					}
				}
			}
			return false
		}
		if id == NAT && hk == Output && !h.rerouteLocalnet(w) {
			return false
		}
	}
	return true
}

// rerouteLocalnet is the reroute that follows nat OUTPUT
// (nf_nat_ipv4_local_fn, ip_route_me_harder): with route_localnet=0 a
// 127.0.0.0/8 source may not leave through another device than lo, so a
// localhost NodePort DNATed to a pod is dropped here, before filter OUTPUT
// (the sender's sendto fails with EINVAL). It reports whether the packet
// survives.
func (h *Host) rerouteLocalnet(w *walk) bool {
	p, res := w.pkt, w.res
	if !h.localnetRefused(p.Src) {
		return true
	}
	if r := h.route(p.Dst); r != nil && r.Type == RouteLocal {
		return true
	}
	res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, reasonInvalidSource
	w.where = place{hook: Output, table: NAT, action: Action{Kind: ActionRoute}}
	return false
}

// Reasons of the routing decision under route_localnet=0.
const (
	reasonMartianSource = ReasonMartianSource
	reasonMartianDest   = ReasonMartianDestination
	reasonInvalidSource = ReasonInvalidSource
)

// localnetRefused reports whether a is in 127.0.0.0/8 while
// route_localnet is 0, so that it is routed only on the loopback device.
func (h *Host) localnetRefused(a netip.Addr) bool {
	return h.cfg.NoRouteLocalnet && a.Is4() && a.As4()[0] == 127
}

// martian names why the input routing decision (ip_route_input_slow)
// refuses a packet received on a device other than lo: a 127.0.0.0/8
// destination, else source, under route_localnet=0. It returns NoReason when the
// packet may be routed.
func (h *Host) martian(p *Packet) Reason {
	switch {
	case p.In == "lo":
	case h.localnetRefused(p.Dst):
		return reasonMartianDest
	case h.localnetRefused(p.Src):
		return reasonMartianSource
	}
	return NoReason
}

// Receive sends a packet that arrived on interface iface through
// PREROUTING, the routing decision, and INPUT or FORWARD and POSTROUTING.
// The packet's In and Out are set by the walk. A packet the host cannot
// walk is refused (Result.Err, Disposition Refused): iface is not one of
// the host's interfaces (lo always is), the source or destination is
// unset, the addresses are of different families or contradict Family
// (an unset Family is taken from them), or fields belong to another
// protocol (ports on ICMP, TCPFlags on UDP). TCP, UDP and ICMP build
// packets with sane defaults.
func (h *Host) Receive(iface string, p Packet) Result { return *h.receive(nil, iface, &p) }

// Send sends a packet from a local process: routing, OUTPUT, rerouting and
// POSTROUTING. An unset source address is chosen like the kernel does, from
// the output interface. A packet with contradictory fields is refused as
// Receive describes.
func (h *Host) Send(p Packet) Result { return *h.send(nil, &p) }

// ReceiveTo is Receive writing the result into res, for loops that send
// many packets: it copies the packet once and the result not at all, where
// Receive copies both (about a sixth of an established packet's cost).
// res.Emitted's storage is reused, so a slice kept from an earlier result
// in res is overwritten; Trace is always a new slice. The host keeps a
// pointer to res until its next packet.
func (h *Host) ReceiveTo(res *Result, iface string, p *Packet) { h.receive(res, iface, p) }

// SendTo is Send writing the result into res, as ReceiveTo does.
func (h *Host) SendTo(res *Result, p *Packet) { h.send(res, p) }

// receive and send walk a copy of *p in a walk of their own, writing the
// result into res, or into the walk's own Result when res is nil (Receive
// and Send, which copy it out; Explain passes its slots), and return the
// result. It must not move while the packet walks: evaluation keeps
// pointers to its Packet, the packet being walked. They stay out of
// Receive and Send so that those are inlined, and the result copied once.
func (h *Host) receive(res *Result, iface string, p *Packet) *Result {
	w := h.beginWalk(res)
	res = w.res
	res.Packet = *p
	res.Packet.In, res.Packet.Out = iface, ""
	if err := h.admit(&res.Packet, iface); err != nil {
		refuse(res, err)
	} else {
		h.walk(w, false)
	}
	h.endWalk()
	return res
}

func (h *Host) send(res *Result, p *Packet) *Result {
	w := h.beginWalk(res)
	res = w.res
	res.Packet = *p
	res.Packet.In = ""
	if err := res.Packet.check(true); err != nil {
		refuse(res, err)
	} else {
		h.walk(w, true)
	}
	h.endWalk()
	return res
}

// admit checks a received packet: its interface and its fields.
func (h *Host) admit(p *Packet, iface string) error {
	if !h.hasIface(iface) {
		return h.unknownIface(iface)
	}
	return p.check(false)
}

// refuse writes the result of a packet the host refused to walk.
func refuse(res *Result, err error) {
	res.Verdict, res.Disposition, res.Reason, res.Err = VerdictRefused, Refused, ReasonRefused, err
	res.Where, res.Emitted, res.Trace, res.Conn = Step{}, nil, nil, nil
}

// walk sends w.res.Packet through the host and writes what happened into
// the other fields of w.res.
func (h *Host) walk(w *walk, local bool) {
	w.trace = w.trace[:0]
	w.where = place{}
	// Explain's outcomes list their paths' steps whatever Tracing says.
	w.cur, w.notrack, w.loopback, w.attached, w.tracing = conntrack.Info{}, false, false, false, h.Tracing || h.explaining
	res := w.res
	res.Verdict, res.Disposition, res.Reason, res.Conn, res.Trace, res.Err = VerdictAccept, 0, NoReason, nil, nil, nil
	res.Emitted = res.Emitted[:0]
	p := w.pkt
	if p.FragOffset != 0 && h.defragging(p.Family) {
		res.Verdict, res.Disposition, res.Reason = VerdictDrop, Held, reasonHeld
	} else {
		h.walkHooks(w, local)
	}
	w.where.writeStep(&res.Where)
	if e := w.cur.Entry; e != nil && e.Confirmed() {
		res.Conn = e
	}
	if w.tracing {
		res.Trace = h.traceCopy(w.trace)
	}
	if len(res.Emitted) == 0 {
		res.Emitted = nil
	}
}

// traceCopy returns a walk's steps in a slice of their own.
func (h *Host) traceCopy(t []Step) []Step {
	if o := h.oracle; o != nil {
		return o.traceCopy(t)
	}
	return append([]Step(nil), t...)
}

// walkHooks is the packet's way through the hooks; it stops where the
// packet does.
func (h *Host) walkHooks(w *walk, local bool) {
	p, res := w.pkt, w.res
	if local {
		out := h.route(p.Dst)
		reason := routeFailure(out)
		if reason == NoReason && out.Type != RouteLocal && h.localnetRefused(p.Src) {
			reason = reasonInvalidSource // a socket bound to 127.0.0.1 cannot reach off the host
		}
		if reason != NoReason {
			res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, reason
			w.where = place{hook: Output, action: Action{Kind: ActionRoute}}
			return
		}
		p.Out = out.Iface
		if !p.Src.IsValid() {
			p.Src = h.sourceFor(out, p.Dst)
		}
		if !h.runHook(w, Output) {
			return
		}
		if out2 := h.route(p.Dst); out2 != nil {
			p.Out = out2.Iface // DNAT or a mark may have changed the route
		}
		if !h.runHook(w, Postrouting) {
			return
		}
		if h.isLocal(p.Dst) {
			// Through the loopback device and back in: PREROUTING and
			// INPUT on "lo". The packet keeps its connection, so conntrack
			// does not look it up again and nat does not run again.
			p.In, p.Out = "lo", ""
			w.loopback = true
			if !h.runHook(w, Prerouting) || !h.runHook(w, Input) {
				return
			}
			res.Disposition = Delivered
			return
		}
		res.Disposition = Sent
		return
	}
	if !h.runHook(w, Prerouting) {
		return
	}
	if reason := h.martian(p); reason != NoReason {
		res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, reason
		w.where = place{hook: Prerouting, action: Action{Kind: ActionRoute}}
		return
	}
	out := h.route(p.Dst)
	if out != nil && out.Type == RouteLocal {
		if !h.runHook(w, Input) {
			return
		}
		res.Disposition = Delivered
		return
	}
	if reason := routeFailure(out); reason != NoReason {
		res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, reason
		w.where = place{hook: Prerouting, action: Action{Kind: ActionRoute}}
		return
	}
	h.forwardRouted(w, out)
}

// sendEmitted sends a packet netfilter generated while walking w (a REJECT
// reply) out the way the kernel does (nf_send_reset, icmp_send): through
// OUTPUT and POSTROUTING, attached to the offending packet's connection as
// RELATED (nf_ct_attach), so it is counted there and NATed as a reply; one
// to a local address then crosses PREROUTING and INPUT on lo. It returns
// the packet as it leaves (or, back through lo, as it is delivered), or
// false when a rule dropped it or no route leads back. The packet walks
// in a walk of its own, so w is left as it was.
func (h *Host) sendEmitted(w *walk, r Packet) (Packet, bool) {
	out := h.route(r.Dst)
	if routeFailure(out) != NoReason {
		return Packet{}, false
	}
	g := h.beginWalk(nil)
	defer h.endWalk()
	p := g.pkt
	*p = r
	p.In, p.Out = "", out.Iface
	// The reply is a new local packet, even when the packet it answers
	// came in through lo: without a connection to attach to, conntrack
	// looks it up in OUTPUT. It inherits the offending packet's notrack.
	// The kernel does not trace generated packets (they do not inherit
	// nftrace); neither does the walk.
	g.cur, g.notrack, g.loopback, g.attached, g.tracing = conntrack.Info{}, w.notrack, false, false, false
	g.trace, g.where = g.trace[:0], place{}
	if e := w.cur.Entry; e != nil {
		dir := conntrack.Reply
		if w.cur.Dir == conntrack.Reply {
			dir = conntrack.Original
		}
		g.cur = conntrack.Info{Entry: e, Dir: dir, State: conntrack.StateRelated}
		// nf_ct_attach needs the offending packet's conntrack; an INVALID
		// one has none (nf_conntrack_in cleared it), so its reply is
		// looked up like any local packet: a reset can close the entry.
		g.attached = true
	}
	if !h.runHook(g, Output) {
		return Packet{}, false
	}
	if out2 := h.route(p.Dst); out2 != nil {
		p.Out = out2.Iface
	}
	if !h.runHook(g, Postrouting) {
		return Packet{}, false
	}
	if out.Type == RouteLocal {
		// The reply to a packet the host sent itself comes back in
		// through lo, keeping its connection, as any local packet to a
		// local address does (docs/kernel-notes.md).
		p.In, p.Out = "lo", ""
		g.loopback = true
		if !h.runHook(g, Prerouting) || !h.runHook(g, Input) {
			return Packet{}, false
		}
	}
	return *p, true
}
