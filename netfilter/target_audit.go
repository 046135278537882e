package netfilter

import "strings"

// AuditTarget is "-j AUDIT --type accept|drop|reject": an audit record of
// the packet. It continues.
type AuditTarget struct {
	Type string // "accept", "drop" or "reject"
}

func init() {
	registerTarget(&module{name: "AUDIT",
		opts:       []option{{name: "type", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &auditTargetBuilder{} }})
}

type auditTargetBuilder struct{ t AuditTarget }

func (b *auditTargetBuilder) set(_ *ruleCtx, _ string, _ bool, args []string) error {
	switch s := strings.ToLower(args[0]); s {
	case "accept", "drop", "reject":
		b.t.Type = s
		return nil
	}
	return badValue("AUDIT", "--type", args[0], "accept, drop or reject")
}

func (b *auditTargetBuilder) done(*ruleCtx) (any, error) {
	if b.t.Type == "" {
		return nil, mustSpecify("AUDIT", "--type")
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *AuditTarget) Name() string { return "AUDIT" }

func (t *AuditTarget) appendSave(b []byte) []byte {
	return append(append(b, " --type "...), t.Type...)
}

func (t *AuditTarget) appendList(b []byte, _ bool) []byte {
	return append(append(b, " AUDIT "...), t.Type...)
}

func (t *AuditTarget) apply(*evalCtx) verdict { return vContinue }
