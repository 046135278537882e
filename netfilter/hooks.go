package netfilter

import (
	"net/netip"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
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
	if hk == Postrouting && w.hasOut {
		p.Out = w.out.r.Iface // a reroute in OUTPUT (rerouteAfter)
	}
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
				if hk == Output && !h.rerouteAfter(w, NAT) {
					return false
				}
				continue
			}
		}
		if t == nil || t.entry[hk] < 0 {
			continue
		}
		if id == Mangle && hk == Output {
			w.keys = rerouteKeysOf(p)
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
				if e, ok := h.rejectReply(p, c.reject, w.routedLocal(hk)); ok {
					if out, ok := h.sendEmitted(w, e); ok {
						res.Emitted = append(res.Emitted, out)
					}
				}
			}
			return false
		}
		if (id == NAT || id == Mangle) && hk == Output && !h.rerouteAfter(w, id) {
			return false
		}
	}
	return true
}

// rerouteKeys are what mangle OUTPUT compares before and after its
// chains to decide whether a local packet is routed again.
type rerouteKeys struct {
	src, dst netip.Addr
	mark     uint32
	tos, ttl uint8
}

func rerouteKeysOf(p *Packet) rerouteKeys {
	return rerouteKeys{src: p.Src, dst: p.Dst, mark: p.Mark, tos: p.TOS, ttl: p.TTL}
}

// rerouteAfter is the reroute of a local packet that follows mangle
// OUTPUT when its addresses, mark or TOS changed (ipt_mangle_out; for
// IPv6 also the hop limit), and nat OUTPUT when its destination changed
// (nf_nat_ipv4_local_fn): ip_route_me_harder, a lookup with the packet's
// addresses and mark as they are now. A failed lookup drops the packet
// (the sender's call fails). With route_localnet=0 a 127.0.0.0/8
// source may not leave through another device than lo, so a localhost
// NodePort DNATed to a pod is dropped here, before filter OUTPUT (the
// sender's sendto fails with EINVAL). It reports whether the packet
// survives.
func (h *Host) rerouteAfter(w *walk, id TableID) bool {
	p, res := w.pkt, w.res
	if !w.hasOut {
		return true
	}
	now := rerouteKeysOf(p)
	switch {
	case id == Mangle && (now.src != w.keys.src || now.dst != w.keys.dst || now.mark != w.keys.mark || now.tos != w.keys.tos ||
		p.Family == IPv6 && now.ttl != w.keys.ttl):
	case id == NAT && p.Dst != w.outDst:
	default:
		return true
	}
	k := localFlow(p, true)
	d := h.decide(w, &k, Output, true)
	if w.tracing {
		w.routes[len(w.routes)-1].After = id
	}
	reason := d.reason
	if reason == NoReason && d.r.Type != RouteLocal && h.localnetRefused(p.Src, d.r.Iface) {
		reason = reasonInvalidSource
	}
	if reason != NoReason {
		res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, reason
		w.where = place{hook: Output, table: id, action: Action{Kind: ActionRoute}}
		return false
	}
	// The new device shows from POSTROUTING on (runHook): the OUTPUT
	// hook's state->out is fixed when the hook starts, so the tables
	// after the reroute still match -o against the first decision's
	// device (docs/kernel-notes.md, "Policy routing").
	w.out, w.outDst = d, p.Dst
	return true
}

// routedLocal reports whether the packet of w, at hook hk, was routed to
// the host itself (the kernel's RTCF_LOCAL): received and delivered
// (INPUT), or sent to one of the host's addresses (OUTPUT).
func (w *walk) routedLocal(hk Hook) bool {
	switch hk {
	case Input:
		return true
	case Output:
		return w.hasOut && w.out.r.Type == RouteLocal
	}
	return false
}

// decide makes a route lookup for the packet of w, recording it when
// the walk is traced.
func (h *Host) decide(w *walk, k *flow, hk Hook, reroute bool) decision {
	d := h.lookup(k)
	if w.tracing {
		c := RouteChoice{Hook: hk, Reroute: reroute, Rule: int(d.rule), Table: d.table, Dst: d.dst, Reason: d.reason}
		if d.r != nil {
			c.Dev, c.Via, c.Type = d.r.Iface, d.r.Gateway, d.r.Type
		}
		w.routes = append(w.routes, c)
	}
	return d
}

// inputFlow is the lookup of the input routing decision for a received
// packet (ip_route_input_slow): uid 0, the receiving interface.
func inputFlow(p *Packet) flow {
	return flow{dst: p.Dst, src: p.Src, mark: p.Mark, iif: p.In, tos: p.TOS, proto: uint8(p.Proto), sport: p.SrcPort, dport: p.DstPort}
}

// localFlow is the lookup for a locally generated packet: from lo, with
// the socket's uid; the source only when known (withSrc: the socket was
// bound to it, or the reroute, which reads the header).
func localFlow(p *Packet, withSrc bool) flow {
	k := flow{dst: p.Dst, mark: p.Mark, iif: "lo", tos: p.TOS, proto: uint8(p.Proto), sport: p.SrcPort, dport: p.DstPort, uid: p.UID}
	if withSrc {
		k.src = p.Src
	}
	return k
}

// validSource is the reverse-path check of the input routing decision
// (fib_validate_source) for a packet received on p.In that is delivered
// locally (oif "") or forwarded out of oif. It returns why the packet is
// dropped, or NoReason. IPv4 only: IPv6 has no rp_filter.
func (h *Host) validSource(p *Packet, oif string) Reason {
	if p.Family != IPv4 || p.In == "lo" {
		return NoReason
	}
	dc := h.cfg.Devices[p.In]
	rpf := max(h.cfg.RPFilter, dc.RPFilter)
	acceptLocal := h.cfg.AcceptLocal || dc.AcceptLocal
	if rpf == 0 {
		if acceptLocal {
			return NoReason
		}
		if !h.customRouting() {
			// Without policy routing the kernel only refuses the host's
			// own addresses as source.
			if h.hasIfaceAddr(p.Src) {
				return ReasonMartianSource
			}
			return NoReason
		}
	}
	// The lookup back: from the forward route's device (lo when
	// delivered), with the mark only under src_valid_mark.
	k := flow{dst: p.Src, src: p.Dst, iif: oif, tos: p.TOS, proto: uint8(p.Proto), sport: p.DstPort, dport: p.SrcPort}
	if k.iif == "" {
		k.iif = "lo"
	}
	if h.cfg.SrcValidMark || dc.SrcValidMark {
		k.mark = p.Mark
	}
	d := h.lookup(&k)
	if d.reason != NoReason {
		// No way back, or a blackhole, unreachable or prohibit one (the
		// lookup fails): dropped under rp_filter, even loose, accepted
		// without.
		if rpf != 0 {
			return ReasonReversePath
		}
		return NoReason
	}
	switch d.r.Type {
	case RouteUnicast:
	case RouteLocal:
		if !acceptLocal {
			return ReasonMartianSource
		}
	default:
		return ReasonMartianSource // a broadcast route back
	}
	if d.r.Iface == p.In || rpf != 1 || d.r.Type == RouteLocal && h.ifaceHolds(p.In, p.Src) {
		return NoReason
	}
	return ReasonReversePath
}

// hasIfaceAddr reports whether a is assigned to an interface (lo has
// 127.0.0.1), as inet_lookup_ifaddr_rcu finds it.
func (h *Host) hasIfaceAddr(a netip.Addr) bool {
	if a == netip.AddrFrom4([4]byte{127, 0, 0, 1}) {
		return true
	}
	for _, i := range h.ifaces {
		for _, p := range i.Addrs {
			if p.Addr() == a {
				return true
			}
		}
	}
	return false
}

// customRouting reports whether the host has IPv4 routing rules of its
// own or local routes added by hand, which make the kernel check the
// source of every received packet with a full lookup.
func (h *Host) customRouting() bool {
	if h.rpdb[0] != nil {
		return true
	}
	for i := range h.routes {
		if r := &h.routes[i]; r.Type == RouteLocal && r.Dst.Addr().Is4() {
			return true
		}
	}
	return false
}

// Reasons of the routing decision under route_localnet=0.
const (
	reasonMartianSource = ReasonMartianSource
	reasonMartianDest   = ReasonMartianDestination
	reasonInvalidSource = ReasonInvalidSource
)

// localnetRefused reports whether a is in 127.0.0.0/8 while
// route_localnet is 0 for device dev (and for all), so that it is routed
// only on the loopback device.
func (h *Host) localnetRefused(a netip.Addr, dev string) bool {
	return h.cfg.NoRouteLocalnet && a.Is4() && a.As4()[0] == 127 && !h.cfg.Devices[dev].RouteLocalnet
}

// martian names why the input routing decision (ip_route_input_slow)
// refuses a packet received on a device other than lo: a 127.0.0.0/8
// destination, else source, under route_localnet=0. It returns NoReason when the
// packet may be routed.
func (h *Host) martian(p *Packet) Reason {
	switch {
	case p.In == "lo":
	case h.localnetRefused(p.Dst, p.In):
		return reasonMartianDest
	case h.localnetRefused(p.Src, p.In):
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
	res.Where, res.Emitted, res.Trace, res.Conn, res.Via, res.Socket = Step{}, nil, nil, nil, netip.Addr{}, nil
}

// walk sends w.res.Packet through the host and writes what happened into
// the other fields of w.res.
func (h *Host) walk(w *walk, local bool) {
	w.trace = w.trace[:0]
	w.where = place{}
	// Explain's outcomes list their paths' steps whatever Tracing says.
	w.cur, w.notrack, w.loopback, w.attached, w.tracing = conntrack.Info{}, false, false, false, h.Tracing || h.explaining
	w.routes, w.hasOut, w.sock, w.dup = w.routes[:0], false, nil, false
	res := w.res
	res.Verdict, res.Disposition, res.Reason, res.Conn, res.Trace, res.Err, res.Socket = VerdictAccept, 0, NoReason, nil, nil, nil, nil
	res.Via = netip.Addr{}
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
	res.Routes = nil
	if w.tracing {
		res.Trace = h.traceCopy(w.trace)
		res.Routes = append([]RouteChoice(nil), w.routes...)
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
		k := localFlow(p, p.Src.IsValid())
		d := h.decide(w, &k, Output, false)
		reason := d.reason
		if reason == NoReason && d.r.Type != RouteLocal && h.localnetRefused(p.Src, d.r.Iface) {
			reason = reasonInvalidSource // a socket bound to 127.0.0.1 cannot reach off the host
		}
		if reason != NoReason {
			res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, reason
			w.where = place{hook: Output, action: Action{Kind: ActionRoute}}
			return
		}
		p.Out = d.r.Iface
		if !p.Src.IsValid() {
			p.Src = h.sourceFor(d.r, p.Dst)
		}
		w.out, w.outDst, w.hasOut = d, p.Dst, true
		if !h.runHook(w, Output) {
			return
		}
		if !h.runHook(w, Postrouting) {
			return
		}
		if w.out.r.Type == RouteLocal {
			// Through the loopback device and back in: PREROUTING and
			// INPUT on "lo". The packet keeps its connection, so conntrack
			// does not look it up again and nat does not run again.
			p.In, p.Out = "lo", ""
			w.loopback = true
			if !h.runHook(w, Prerouting) || !h.runHook(w, Input) {
				return
			}
			res.Disposition = Delivered
			h.deliverToSocket(w)
			return
		}
		res.Disposition, res.Via = Sent, w.out.r.Gateway
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
	k := inputFlow(p)
	d := h.decide(w, &k, Prerouting, false)
	out := d.r
	if d.reason == NoReason && out.Type == RouteLocal {
		if reason := h.validSource(p, ""); reason != NoReason {
			res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, reason
			w.where = place{hook: Prerouting, action: Action{Kind: ActionRoute}}
			return
		}
		if !h.runHook(w, Input) {
			return
		}
		res.Disposition = Delivered
		h.deliverToSocket(w)
		return
	}
	if w.sock != nil && d.reason == NoReason {
		// ip_forward drops a packet that TPROXY assigned to a local
		// socket, before FORWARD (docs/kernel-notes.md).
		res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, ReasonSocketNotLocal
		w.where = place{hook: Prerouting, action: Action{Kind: ActionRoute}}
		return
	}
	h.forwardRouted(w, d)
}

// deliverToSocket names the local socket a delivered packet reaches
// (Result.Socket): the one TPROXY assigned it to, else the transport's
// lookup, a connected socket first, then a listener of its destination
// (which need not be transparent). It is left nil when the host has no
// sockets, or none fits.
func (h *Host) deliverToSocket(w *walk) {
	if w.sock != nil {
		w.res.Socket = w.sock
		return
	}
	p := w.pkt
	if len(h.sockets) == 0 || p.Proto != inet.TCP && p.Proto != inet.UDP {
		return
	}
	w.res.Socket = h.lookupSocket(p.Proto, p.Src, p.SrcPort, p.Dst, p.DstPort)
}

// forwardRouted forwards a received packet the input routing decision d
// did not deliver locally: the forwarding checks (per-device forwarding,
// rp_filter, TTL), then FORWARD and POSTROUTING. Bridged frames whose
// destination nat PREROUTING changed come here too (bridge.go).
func (h *Host) forwardRouted(w *walk, d decision) {
	p, res := w.pkt, w.res
	out := d.r
	reason := d.reason
	forwarding := !h.cfg.NoForwarding && !h.cfg.Devices[p.In].NoForwarding
	switch {
	case reason != NoReason && !forwarding:
		reason = ReasonForwardingDisabled // and no ICMP error (ip_error)
	case reason != NoReason:
		res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, reason
		w.where = place{hook: Prerouting, action: Action{Kind: ActionRoute}}
		if e, ok := h.unreachableReply(p, reason); ok {
			if out, ok := h.sendEmitted(w, e); ok {
				res.Emitted = append(res.Emitted, out)
			}
		}
		return
	case !forwarding:
		reason = ReasonForwardingDisabled
	default:
		reason = h.validSource(p, out.Iface)
	}
	if reason == NoReason && p.TTL <= 1 {
		reason = ReasonTTLExceeded
	}
	if reason != NoReason {
		res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, reason
		w.where = place{hook: Prerouting, action: Action{Kind: ActionRoute}}
		if reason == ReasonTTLExceeded {
			// ip_forward and ip6_forward answer with an ICMP time
			// exceeded, sent like REJECT's replies (icmp_send).
			if e, ok := h.timeExceededReply(p); ok {
				if out, ok := h.sendEmitted(w, e); ok {
					res.Emitted = append(res.Emitted, out)
				}
			}
		}
		return
	}
	p.Out = out.Iface
	p.TTL--
	if !h.runHook(w, Forward) {
		return
	}
	if !h.runHook(w, Postrouting) {
		return
	}
	res.Disposition, res.Via = Forwarded, out.Gateway
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
	// The reply's lookup has mark 0 (fwmark_reflect is off) and no
	// socket.
	r.Mark = 0
	k := localFlow(&r, true)
	k.uid = 0
	if r.Proto.IsICMP() && r.Src != w.pkt.Dst {
		// icmp_send looks an error about a packet not addressed to the
		// host up without a source (rules "from X" do not match it); the
		// route gives the source.
		k.src = netip.Addr{}
	}
	d := h.lookup(&k)
	if d.reason != NoReason {
		return Packet{}, false
	}
	return h.sendRouted(w, r, d, false)
}

// sendRouted sends a generated packet r out by route d, as sendEmitted
// says; dup marks TEE's copy, which is untracked (the kernel gives it the
// untracked conntrack) and not copied again by a TEE it meets.
func (h *Host) sendRouted(w *walk, r Packet, d decision, dup bool) (Packet, bool) {
	g := h.beginWalk(nil)
	defer h.endWalk()
	p := g.pkt
	*p = r
	p.In, p.Out = "", d.r.Iface
	// The reply is a new local packet, even when the packet it answers
	// came in through lo: without a connection to attach to, conntrack
	// looks it up in OUTPUT. It inherits the offending packet's notrack.
	// The kernel does not trace generated packets (they do not inherit
	// nftrace); neither does the walk.
	g.cur, g.notrack, g.loopback, g.attached, g.tracing = conntrack.Info{}, w.notrack || dup, false, false, false
	g.trace, g.where = g.trace[:0], place{}
	g.routes, g.out, g.outDst, g.hasOut, g.sock, g.dup = g.routes[:0], d, p.Dst, true, nil, dup
	if e := w.cur.Entry; e != nil && !dup {
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
	if !h.runHook(g, Postrouting) {
		return Packet{}, false
	}
	if g.out.r.Type == RouteLocal {
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
