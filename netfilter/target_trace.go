package netfilter

// TraceTarget is "-j TRACE": it marks the packet for tracing and continues.
// iptables-nft turns it into nft's "meta nftrace set 1", which is allowed
// in every table (iptables-legacy allows it in raw only). Host.Tracing
// records every packet's walk, so the target itself does nothing.
type TraceTarget struct{}

func init() {
	registerTarget(&module{name: "TRACE", newBuilder: func(*ruleCtx) builder { return &TraceTarget{} }})
}

func (t *TraceTarget) set(*ruleCtx, string, bool, []string) error { return nil }
func (t *TraceTarget) done(*ruleCtx) (any, error)                 { return t, nil }

// Name implements Target.
func (t *TraceTarget) Name() string { return "TRACE" }

func (t *TraceTarget) appendSave(b []byte) []byte         { return b }
func (t *TraceTarget) appendList(b []byte, _ bool) []byte { return b }
func (t *TraceTarget) apply(*evalCtx) verdict             { return vContinue }
