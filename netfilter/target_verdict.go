package netfilter

// VerdictTarget is one of the standard verdicts ACCEPT, DROP and RETURN.
type VerdictTarget struct{ name string }

// The standard verdict targets.
var (
	Accept = &VerdictTarget{"ACCEPT"}
	Drop   = &VerdictTarget{"DROP"}
	Return = &VerdictTarget{"RETURN"}
)

// Name implements Target.
func (t *VerdictTarget) Name() string { return t.name }

func (t *VerdictTarget) appendSave(b []byte) []byte         { return b }
func (t *VerdictTarget) appendList(b []byte, _ bool) []byte { return b }

// JumpTarget continues evaluation in a user-defined chain: -j CHAIN, or
// -g CHAIN when Goto is set (RETURN from the chain then returns to the
// caller's caller).
type JumpTarget struct {
	Chain string
	Goto  bool
}

// Name implements Target.
func (t *JumpTarget) Name() string { return t.Chain }

func (t *JumpTarget) appendSave(b []byte) []byte         { return b }
func (t *JumpTarget) appendList(b []byte, _ bool) []byte { return b }
