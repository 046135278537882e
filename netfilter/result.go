package netfilter

import (
	"net/netip"

	"github.com/packetwalk/packetwalk/conntrack"
)

// Verdict is the fate netfilter gave a packet.
type Verdict uint8

// Verdicts.
const (
	VerdictAccept Verdict = iota
	VerdictDrop
	VerdictReject
	// VerdictRefused: the host refused the packet before any hook (see
	// Result.Err); netfilter gave it no verdict.
	VerdictRefused
)

// String returns "ACCEPT", "DROP", "REJECT" or "REFUSED".
func (v Verdict) String() string {
	switch v {
	case VerdictRefused:
		return "REFUSED"
	case VerdictDrop:
		return "DROP"
	case VerdictReject:
		return "REJECT"
	}
	return "ACCEPT"
}

// Disposition is where a packet ended up.
type Disposition uint8

// Dispositions.
const (
	// Delivered: the packet reached a local socket (after INPUT).
	Delivered Disposition = iota
	// Forwarded: the packet left on an interface after FORWARD and
	// POSTROUTING.
	Forwarded
	// Sent: a locally generated packet left after OUTPUT and POSTROUTING.
	Sent
	// Dropped: a rule, a policy or the routing decision dropped it.
	Dropped
	// Rejected: REJECT dropped it and emitted an error reply.
	Rejected
	// Held: a fragment conntrack's defragmentation queued before any
	// hook; it crosses the hooks only as part of the reassembled packet
	// (see FrameHost).
	Held
	// Refused: the host refused the packet before any hook, as Result.Err
	// says: an interface it does not have, or contradictory fields.
	Refused
)

var dispositionNames = []string{"delivered", "forwarded", "sent", "dropped", "rejected", "held", "refused"}

// String returns the disposition in lower case ("forwarded").
func (d Disposition) String() string {
	if int(d) < len(dispositionNames) {
		return dispositionNames[d]
	}
	return "unknown"
}

// Step is one event of a packet's walk: a rule that matched, a policy that
// applied, or the routing decision.
type Step struct {
	Hook  Hook
	Table TableID
	Chain string
	// Rule is the rule's 1-based position in Chain; 0 for a policy or a
	// routing step.
	Rule int
	// Text is the rule as iptables -S prints it ("-A CHAIN ..."), empty for
	// a policy.
	Text string
	// Action is what happened: CONTINUE, JUMP:X, GOTO:X, RETURN, ACCEPT,
	// DROP, REJECT, POLICY:ACCEPT, POLICY:DROP, ENTER for a chain entered,
	// or ROUTE for the routing decision (its String is that text).
	Action Action
	// Packet is the packet when the step happened; nil outside a trace.
	// Trace steps do not share it with anything that changes later.
	Packet *Packet
	// Placeholder says the rule holds a match or target loaded by a
	// lenient restore without being modelled (see RestoreOptions.Lenient).
	Placeholder bool
}

// RouteChoice is one routing decision: where it was made, the rule and
// table that chose the route, and the route, or why the lookup failed.
type RouteChoice struct {
	// Hook is Prerouting for the input routing decision, Output for the
	// output routing of a local packet; Reroute marks the lookup that
	// follows mangle OUTPUT (a changed mark, address or TOS) or nat
	// OUTPUT (a new destination).
	Hook    Hook
	Reroute bool
	// After is the table after whose chains a reroute came (Mangle or
	// NAT at OUTPUT).
	After TableID
	// Rule is the priority of the deciding rule, -1 when no rule
	// decided (no route); Table the table the route was found in.
	Rule  int
	Table uint32
	// Dst is the route's prefix (a host's own address as a full-length
	// prefix), Dev its device, Via its gateway, Type its type.
	Dst  netip.Prefix
	Dev  string
	Via  netip.Addr
	Type RouteType
	// Reason is why the lookup failed, NoReason when it found a route.
	Reason Reason
}

// Result is what happened to one packet.
type Result struct {
	Verdict     Verdict
	Disposition Disposition
	// Where is the deciding place: the rule or policy that dropped or
	// rejected the packet, or the last one that accepted it, with its
	// Text and Action (ACCEPT, DROP, REJECT, POLICY:ACCEPT, POLICY:DROP)
	// whether or not the host traces; Action is ROUTE or CONNTRACK for a
	// decision outside the rules (see Reason).
	Where Step
	// Packet is the packet as it leaves the host (or as it was when it
	// was dropped); its Out field names the output interface.
	Packet Packet
	// Emitted holds packets the host itself generated, such as REJECT's
	// TCP reset or ICMP error, or the ICMP time exceeded that answers a
	// ReasonTTLExceeded drop, as they left the host (Out set). A reply to
	// a packet the host sent itself is delivered back to it through lo:
	// In is "lo" and Out empty.
	Emitted []Packet
	// Trace is every step, when the host's Tracing is on.
	Trace []Step
	// Routes are the routing decisions of the packet's walk in order,
	// when the host's Tracing is on: the input routing of a received
	// packet, or the output routing of a local one and its reroutes
	// after mangle and nat OUTPUT.
	Routes []RouteChoice
	// Reason explains a drop outside the rules (see the Reason constants):
	// the routing decision (ReasonNoRoute, ReasonBlackhole, ...,
	// ReasonTTLExceeded; with HostConfig.NoRouteLocalnet
	// ReasonMartianSource and ReasonMartianDestination for 127.0.0.0/8
	// received off lo, ReasonInvalidSource for a 127.0.0.0/8 source routed
	// off the host, also after nat OUTPUT), conntrack (ReasonConntrackFull,
	// ReasonConntrackClash), or defragmentation while some rule needs
	// conntrack: a fragment given to Receive or Send is Held
	// (ReasonFragmentHeld), and FrameHost also reports a fragment that was
	// ignored or broke its queue; ReasonRefused for a refused packet, whose
	// Err says why. It is NoReason otherwise.
	Reason Reason
	// Conn is the packet's connection after the packet, or nil when the
	// packet was not tracked (no rule needs conntrack, NOTRACK, INVALID).
	Conn *conntrack.Entry
	// Via is the gateway of the route a Sent or Forwarded packet left by
	// (the neighbour it goes to, as the routing decision chose it, ip
	// rules included); it is invalid when the destination is on link,
	// for a frame bridged without a routing decision, and for every other
	// disposition.
	Via netip.Addr
	// Socket is the local socket a delivered packet reaches, when the
	// host has sockets (Host.AddSocket): the one TPROXY assigned it to,
	// else the connected socket of its addresses or the listener of its
	// destination; nil otherwise. It points into the host's sockets.
	Socket *Socket
	// Err is why the host refused the packet without walking it, with
	// Verdict VerdictRefused and Disposition Refused: a *PacketError
	// wrapping ErrUnknownInterface or ErrBadPacket. It is nil for every
	// walked packet.
	Err error
}

// place is where a packet's fate was decided, kept compact while the
// packet walks and turned into a Step only for its Result.
type place struct {
	r     *crule // the deciding rule or end marker; nil for the others
	hook  Hook
	table TableID
	// action is Step.Action: ACCEPT, DROP, REJECT or POLICY:X for the
	// rules, ROUTE or CONNTRACK for a decision outside them. A constant:
	// recording it costs no allocation.
	action Action
}

// writeStep writes w into s field by field: a Step built whole and then
// copied costs a store-forwarding stall on every packet.
func (w *place) writeStep(s *Step) {
	s.Hook, s.Table, s.Chain, s.Rule, s.Text, s.Action, s.Packet, s.Placeholder = w.hook, w.table, "", 0, "", w.action, nil, false
	if w.r != nil {
		s.Chain = w.r.chain.Name
		if !w.r.end {
			// The rule's text is formatted once per compiled rule and
			// kept, so a decided packet costs no allocation.
			t := w.r.trace()
			s.Rule, s.Text, s.Placeholder = int(w.r.num), t.text, t.placeholder
		}
	}
}

// decide records rule r of the table being run as the deciding place.
func (w *walk) decide(r *crule, action Action) {
	c := &w.ctx
	w.where = place{r: r, hook: c.hook, table: c.table, action: action}
}

// traceStep records rule r of the table being run in the walk's trace.
func (h *Host) traceStep(w *walk, r *crule, action Action) {
	if !w.tracing {
		return
	}
	c := &w.ctx
	s := Step{Hook: c.hook, Table: c.table, Chain: r.chain.Name, Action: action}
	if !r.end {
		t := r.trace()
		s.Rule, s.Text, s.Placeholder = int(r.num), t.text, t.placeholder
	} else {
		s.Chain = hookChainName(c.hook)
	}
	// Explain's paths list their steps only: copying the packet at every
	// step of a thousand paths would cost more than walking them.
	if !h.explaining {
		s.Packet = c.pkt.clone()
	}
	w.trace = append(w.trace, s)
}

func hookChainName(h Hook) string { return h.String() }
