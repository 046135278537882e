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
