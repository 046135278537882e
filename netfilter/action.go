package netfilter

import "strconv"

// ActionKind is what happened at a Step: the kind of its Action.
type ActionKind uint8

// Action kinds. The comments give the text Action.String prints.
const (
	// ActionNone is the zero Step's action: "".
	ActionNone ActionKind = iota
	// ActionEnter: "ENTER", a table's chain entered at a hook (traces only).
	ActionEnter
	// ActionContinue: "CONTINUE", a rule whose target let the packet go on.
	ActionContinue
	// ActionJump: "JUMP:CHAIN".
	ActionJump
	// ActionGoto: "GOTO:CHAIN".
	ActionGoto
	// ActionReturn: "RETURN".
	ActionReturn
	// ActionAccept: "ACCEPT".
	ActionAccept
	// ActionDrop: "DROP".
	ActionDrop
	// ActionReject: "REJECT".
	ActionReject
	// ActionPolicyAccept: "POLICY:ACCEPT", a built-in chain's policy.
	ActionPolicyAccept
	// ActionPolicyDrop: "POLICY:DROP".
	ActionPolicyDrop
	// ActionRoute: "ROUTE", the routing decision (Result.Reason says why
	// it dropped the packet).
	ActionRoute
	// ActionConntrack: "CONNTRACK", a drop by conntrack outside the rules.
	ActionConntrack
)

var actionNames = [...]string{ActionNone: "", ActionEnter: "ENTER", ActionContinue: "CONTINUE",
	ActionJump: "JUMP:", ActionGoto: "GOTO:", ActionReturn: "RETURN", ActionAccept: "ACCEPT",
	ActionDrop: "DROP", ActionReject: "REJECT", ActionPolicyAccept: "POLICY:ACCEPT",
	ActionPolicyDrop: "POLICY:DROP", ActionRoute: "ROUTE", ActionConntrack: "CONNTRACK"}

// Action is what happened at a Step: a kind and, for a jump or goto, the
// chain jumped to. It is comparable: Action{Kind: ActionJump, Chain: "X"}.
type Action struct {
	Kind  ActionKind
	Chain string // the target chain of ActionJump and ActionGoto
}

// String returns the action as traces print it: "ACCEPT", "JUMP:KUBE-SERVICES",
// "POLICY:DROP", "ROUTE"... ("" for the zero Action).
func (a Action) String() string {
	if int(a.Kind) >= len(actionNames) {
		return "Action(" + strconv.Itoa(int(a.Kind)) + ")"
	}
	if a.Kind == ActionJump || a.Kind == ActionGoto {
		return actionNames[a.Kind] + a.Chain
	}
	return actionNames[a.Kind]
}

// Reason is why a packet was dropped outside the rules (Result.Reason):
// by the routing decision, by conntrack, by defragmentation, or refused
// before its walk. Its String is the text packetwalk has always reported.
type Reason uint8

// Reasons. The comments give the text Reason.String prints.
const (
	// NoReason: "", a packet the rules decided (or that went through).
	NoReason Reason = iota
	// ReasonNoRoute: "no route to host".
	ReasonNoRoute
	// ReasonBlackhole: "blackhole", a blackhole route.
	ReasonBlackhole
	// ReasonUnreachable: "unreachable", an unreachable route.
	ReasonUnreachable
	// ReasonProhibited: "prohibited", a prohibit route.
	ReasonProhibited
	// ReasonForwardingDisabled: "forwarding disabled" (HostConfig.NoForwarding).
	ReasonForwardingDisabled
	// ReasonTTLExceeded: "TTL exceeded", a forwarded packet with TTL <= 1,
	// answered with an ICMP time exceeded (Result.Emitted).
	ReasonTTLExceeded
	// ReasonMartianSource: "martian source", a 127.0.0.0/8 source received
	// off lo with route_localnet=0, or one of the host's addresses as
	// source off lo without accept_local.
	ReasonMartianSource
	// ReasonMartianDestination: "martian destination", the same for a
	// 127.0.0.0/8 destination.
	ReasonMartianDestination
	// ReasonInvalidSource: "invalid source", a 127.0.0.0/8 source routed
	// off the host (also after nat OUTPUT).
	ReasonInvalidSource
	// ReasonConntrackFull: "conntrack table full".
	ReasonConntrackFull
	// ReasonConntrackClash: "conntrack clash".
	ReasonConntrackClash
	// ReasonFragmentHeld: the fragment waits for the rest of its packet
	// (Disposition Held).
	ReasonFragmentHeld
	// ReasonFragmentDuplicate: a duplicate fragment, ignored.
	ReasonFragmentDuplicate
	// ReasonFragmentOverlap: a fragment overlapping another; the queue is
	// discarded.
	ReasonFragmentOverlap
	// ReasonFragmentInconsistent: a fragment whose length or end disagrees
	// with its queue; the queue is discarded.
	ReasonFragmentInconsistent
	// ReasonReassembledTooLong: the reassembled packet exceeds 65535 bytes.
	ReasonReassembledTooLong
	// ReasonTooManyFragments: too many fragment queues held at once.
	ReasonTooManyFragments
	// ReasonRefused: "refused", the host refused the packet without
	// walking it; Result.Err says why.
	ReasonRefused
	// ReasonNoBridgePort: "no bridge port", a bridged frame to a
	// neighbour no port of the bridge leads to (Host.ReceiveBridged).
	ReasonNoBridgePort
	// ReasonNetUnreachable: "network unreachable", a routing rule of
	// action unreachable (an unreachable route is ReasonUnreachable).
	ReasonNetUnreachable
	// ReasonReversePath: "reverse path filter", dropped by rp_filter
	// (HostConfig.RPFilter): the route back to the source fails the
	// check.
	ReasonReversePath
	// ReasonSocketNotLocal: "assigned to a local socket, not forwarded":
	// a packet TPROXY gave to a local socket that the routing decision
	// would forward (no local route for its mark, say), dropped before
	// FORWARD.
	ReasonSocketNotLocal
)

var reasonNames = [...]string{
	NoReason:                   "",
	ReasonNoRoute:              "no route to host",
	ReasonBlackhole:            "blackhole",
	ReasonUnreachable:          "unreachable",
	ReasonProhibited:           "prohibited",
	ReasonForwardingDisabled:   "forwarding disabled",
	ReasonTTLExceeded:          "TTL exceeded",
	ReasonMartianSource:        "martian source",
	ReasonMartianDestination:   "martian destination",
	ReasonInvalidSource:        "invalid source",
	ReasonConntrackFull:        "conntrack table full",
	ReasonConntrackClash:       "conntrack clash",
	ReasonFragmentHeld:         "fragment held for reassembly (conntrack defragments before the hooks)",
	ReasonFragmentDuplicate:    "duplicate fragment: ignored",
	ReasonFragmentOverlap:      "fragment overlaps another: reassembly queue discarded",
	ReasonFragmentInconsistent: "fragment inconsistent with its queue (length or end): reassembly queue discarded",
	ReasonReassembledTooLong:   "reassembled packet longer than 65535 bytes: discarded",
	ReasonTooManyFragments:     "too many fragments queued: dropped",
	ReasonRefused:              "refused",
	ReasonNoBridgePort:         "no bridge port",
	ReasonNetUnreachable:       "network unreachable",
	ReasonReversePath:          "reverse path filter",
	ReasonSocketNotLocal:       "assigned to a local socket, not forwarded",
}

// String returns the reason's text ("TTL exceeded", "martian source"...),
// "" for NoReason.
func (r Reason) String() string {
	if int(r) < len(reasonNames) {
		return reasonNames[r]
	}
	return "Reason(" + strconv.Itoa(int(r)) + ")"
}
