package netfilter

import "fmt"

// ConnsecmarkTarget is "-j CONNSECMARK --save|--restore" (mangle and
// security tables): it copies the SELinux security mark between the packet
// and its connection. Without SELinux both marks stay 0, so the rule
// changes nothing and continues; it takes a conntrack reference.
type ConnsecmarkTarget struct {
	Restore bool // --restore; false is --save
}

func init() {
	registerTarget(&module{name: "CONNSECMARK", tables: []TableID{Mangle, Security},
		opts:       []option{{name: "save"}, {name: "restore"}},
		newBuilder: func(*ruleCtx) builder { return &connsecmarkTargetBuilder{} }})
}

type connsecmarkTargetBuilder struct {
	t   ConnsecmarkTarget
	opt string
}

func (b *connsecmarkTargetBuilder) set(_ *ruleCtx, opt string, _ bool, _ []string) error {
	if b.opt != "" && b.opt != opt {
		return fmt.Errorf("%w: CONNSECMARK: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, b.opt, opt)
	}
	b.opt, b.t.Restore = opt, opt == "restore"
	return nil
}

func (b *connsecmarkTargetBuilder) done(*ruleCtx) (any, error) {
	if b.opt == "" {
		return nil, fmt.Errorf("%w: CONNSECMARK target: parameter required", ErrMissingArgument)
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *ConnsecmarkTarget) Name() string { return "CONNSECMARK" }

func (t *ConnsecmarkTarget) word() string {
	if t.Restore {
		return "restore"
	}
	return "save"
}

func (t *ConnsecmarkTarget) appendSave(b []byte) []byte {
	return append(append(b, " --"...), t.word()...)
}

func (t *ConnsecmarkTarget) appendList(b []byte, _ bool) []byte {
	return append(append(b, " CONNSECMARK "...), t.word()...)
}

func (t *ConnsecmarkTarget) apply(*evalCtx) verdict { return vContinue }
