package netfilter

import (
	"fmt"
	"net/netip"

	"github.com/packetwalk/packetwalk/conntrack"
)

// BridgeIn says where a frame entered one of the host's Linux bridges, for
// [Host.ReceiveBridged]: the bridge device (kubenet's cbr0, Azure CNI's
// azure0), the port it came in on and the neighbour it is addressed to at
// the link layer. The host is taken to run br_netfilter with
// net.bridge.bridge-nf-call-iptables=1, so iptables sees bridged IPv4
// frames (docs/kernel-notes.md, "Bridges and br_netfilter").
type BridgeIn struct {
	// Bridge is the bridge device, one of the host's interfaces.
	Bridge string
	// Port is the bridge port the frame arrived on (the host end of a
	// pod's veth, or an uplink); -m physdev --physdev-in sees it. It need
	// not be an interface of the host.
	Port string
	// Next is the neighbour whose link-layer address the frame carries:
	// the sender's route gateway, or the destination itself when it is on
	// link. A frame to one of the host's own addresses (the pods' default
	// gateway) goes up to the host; any other is bridged to the port
	// PortOf names.
	Next netip.Addr
	// PortOf is the bridge's forwarding database, keyed by the
	// neighbour's address rather than its MAC address: the port behind
	// which the neighbour lives. It is asked again when nat PREROUTING
	// changes a bridged frame's destination to another neighbour of the
	// bridge. Nil means no port is known.
	PortOf func(neighbour netip.Addr) (port string, ok bool)
}

// ReceiveBridged walks a frame that arrived on a port of the bridge
// in.Bridge, as br_netfilter shows it to iptables:
//
//   - addressed to one of the host's addresses, the frame goes up to the
//     host as Receive on the bridge device does (PREROUTING, routing,
//     INPUT or FORWARD and POSTROUTING, -i the bridge), with Bridged and
//     PhysIn set; a packet routed out again has no PhysOut, even back
//     out the bridge (the bridge's output is not shown to iptables);
//   - addressed to another neighbour, the frame is bridged: PREROUTING
//     (-i the bridge), FORWARD (-i and -o the bridge) and POSTROUTING with
//     PhysIn and PhysOut set, without a routing decision and without a
//     TTL change; it leaves Forwarded with Out the bridge and PhysOut the
//     port PortOf gave. When nat PREROUTING changed its destination, the
//     frame is routed again (br_nf_pre_routing_finish): to a local
//     address it is delivered through INPUT, out another device it is
//     forwarded as a routed packet, and back out the bridge it is bridged
//     to the new neighbour's port.
//
// A neighbour with no port drops the frame (ReasonNoBridgePort). The
// frame is refused as Receive describes when in.Bridge is not an
// interface of the host, and when in.Port is empty.
func (h *Host) ReceiveBridged(in BridgeIn, p Packet) Result {
	w := h.beginWalk(nil)
	res := w.res
	res.Packet = p
	if err := h.admitBridged(&res.Packet, in); err != nil {
		refuse(res, err)
	} else {
		h.bridgedWalk(w, in)
	}
	h.endWalk()
	return *res
}

// ExplainBridged is Explain for a frame arriving on a bridge port, as
// ReceiveBridged walks it.
func (h *Host) ExplainBridged(in BridgeIn, p Packet) ([]Outcome, error) {
	if err := h.admitBridged(&p, in); err != nil {
		return nil, err
	}
	return h.explain(&p, func(res *Result, q *Packet) {
		w := h.beginWalk(res)
		res.Packet = *q
		h.bridgedWalk(w, in)
		h.endWalk()
	})
}

// admitBridged checks a bridged frame and sets the fields the bridge
// gives it.
func (h *Host) admitBridged(p *Packet, in BridgeIn) error {
	if in.Port == "" {
		return &PacketError{Field: "PhysIn", Text: fmt.Sprintf("no bridge port for a frame on bridge %q", in.Bridge), Err: ErrBadPacket}
	}
	if err := h.admit(p, in.Bridge); err != nil {
		return err
	}
	p.In, p.Out, p.PhysIn, p.PhysOut, p.Bridged = in.Bridge, "", in.Port, "", true
	return nil
}

// bridgedWalk is the walk of a frame on a bridge port: up to the host, or
// across the bridge.
func (h *Host) bridgedWalk(w *walk, in BridgeIn) {
	if !in.Next.IsValid() || h.isOwnAddr(in.Next) {
		h.walk(w, false)
		return
	}
	w.trace = w.trace[:0]
	w.where = place{}
	w.cur, w.notrack, w.loopback, w.attached, w.tracing = conntrack.Info{}, false, false, false, h.Tracing || h.explaining
	res := w.res
	res.Verdict, res.Disposition, res.Reason, res.Conn, res.Trace, res.Err = VerdictAccept, 0, NoReason, nil, nil, nil
	res.Emitted, res.Via = res.Emitted[:0], netip.Addr{}
	h.walkBridged(w, in)
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

// walkBridged is the way of a bridged frame through the hooks.
func (h *Host) walkBridged(w *walk, in BridgeIn) {
	p, res := w.pkt, w.res
	dst := p.Dst
	if !h.runHook(w, Prerouting) {
		return
	}
	next, via := in.Next, netip.Addr{}
	if p.Dst != dst {
		// DNAT: the frame is routed again (br_nf_pre_routing_finish).
		k := inputFlow(p)
		d := h.decide(w, &k, Prerouting, false)
		out := d.r
		if d.reason == NoReason && out.Type == RouteLocal {
			if !h.runHook(w, Input) {
				return
			}
			res.Disposition = Delivered
			return
		}
		if d.reason != NoReason || out.Iface != in.Bridge {
			h.forwardRouted(w, d)
			return
		}
		next, via = p.Dst, out.Gateway
		if via.IsValid() {
			next = via
		}
	}
	port, ok := "", false
	if in.PortOf != nil {
		port, ok = in.PortOf(next)
	}
	if !ok {
		res.Verdict, res.Disposition, res.Reason = VerdictDrop, Dropped, ReasonNoBridgePort
		w.where = place{hook: Prerouting, action: Action{Kind: ActionRoute}}
		return
	}
	p.Out, p.PhysOut = in.Bridge, port
	if !h.runHook(w, Forward) {
		return
	}
	if !h.runHook(w, Postrouting) {
		return
	}
	res.Disposition, res.Via = Forwarded, via
}

// Lookup returns the route the host takes to dst, as `ip route get` would
// without marks: the longest-prefix route, or for one of the host's own
// addresses a local route through lo. It reports false when no route
// leads to dst.
func (h *Host) Lookup(dst netip.Addr) (Route, bool) {
	r := h.route(dst)
	if r == nil {
		return Route{}, false
	}
	out := *r
	if out.Type == RouteLocal && out.Iface == "" {
		out.Iface = "lo"
	}
	return out, true
}

// LookupLocal returns the route the host takes for p as a packet it sends
// itself, as `ip route get DST from SRC mark MARK ipproto P sport S dport
// D uid U` would: the ip rules see its source (when valid), mark, TOS,
// protocol, ports and UID, with iif lo. It reports false when the lookup
// fails (no route, or a blackhole, unreachable or prohibit route or
// rule).
func (h *Host) LookupLocal(p Packet) (Route, bool) {
	k := localFlow(&p, p.Src.IsValid())
	d := h.lookup(&k)
	if d.reason != NoReason || d.r == nil {
		return Route{}, false
	}
	out := *d.r
	if out.Type == RouteLocal && out.Iface == "" {
		out.Iface = "lo"
	}
	return out, true
}
