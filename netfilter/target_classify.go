package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// ClassifyTarget is "-j CLASSIFY --set-class MAJOR:MINOR" (mangle table,
// OUTPUT, FORWARD and POSTROUTING): it sets the packet's Priority
// (skb->priority, a tc class) to MAJOR<<16 | MINOR and continues. Both
// numbers are hexadecimal and, as iptables reads them, only their low 16
// bits are kept.
type ClassifyTarget struct {
	Priority uint32
}

func init() {
	registerTarget(&module{name: "CLASSIFY", tables: mangle, hooks: []Hook{Output, Forward, Postrouting},
		opts:       []option{{name: "set-class", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &classifyTargetBuilder{} }})
}

type classifyTargetBuilder struct {
	t     ClassifyTarget
	given bool
}

// parseHex16 reads a hexadecimal number as C's %x does (an optional 0x),
// keeping the low 16 bits.
func parseHex16(s string) (uint32, bool) {
	s = strings.TrimPrefix(strings.TrimPrefix(s, "0x"), "0X")
	if s == "" || len(s) > 8 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 16, 32)
	return uint32(n) & 0xffff, err == nil
}

func (b *classifyTargetBuilder) set(_ *ruleCtx, _ string, _ bool, args []string) error {
	maj, min, ok := strings.Cut(args[0], ":")
	a, ok1 := parseHex16(maj)
	m, ok2 := parseHex16(min)
	if !ok || !ok1 || !ok2 {
		return badValue("CLASSIFY", "--set-class", args[0], "MAJOR:MINOR in hexadecimal")
	}
	b.t.Priority, b.given = a<<16|m, true
	return nil
}

func (b *classifyTargetBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("CLASSIFY", "--set-class")
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *ClassifyTarget) Name() string { return "CLASSIFY" }

func appendHexPad(b []byte, v uint32, width int) []byte {
	s := strconv.FormatUint(uint64(v), 16)
	for i := len(s); i < width; i++ {
		b = append(b, '0')
	}
	return append(b, s...)
}

func (t *ClassifyTarget) appendSave(b []byte) []byte {
	b = append(b, " --set-class "...)
	b = appendHexPad(b, t.Priority>>16, 4)
	b = append(b, ':')
	return appendHexPad(b, t.Priority&0xffff, 4)
}

func (t *ClassifyTarget) appendList(b []byte, _ bool) []byte {
	b = append(b, " CLASSIFY set "...)
	b = strconv.AppendUint(b, uint64(t.Priority>>16), 16)
	b = append(b, ':')
	return strconv.AppendUint(b, uint64(t.Priority&0xffff), 16)
}

func (t *ClassifyTarget) apply(c *evalCtx) verdict {
	c.pkt.Priority = t.Priority
	return vContinue
}

// The targets below change nothing packetwalk models and continue with
// the next rule: CHECKSUM (checksums are always complete here), AUDIT (an
// audit record), IDLETIMER (a timer in sysfs), RATEEST (a rate estimator
// read by -m rateest) and CONNSECMARK (copies an SELinux mark, always 0
// without SELinux).

// ChecksumTarget is "-j CHECKSUM --checksum-fill" (mangle table): the
// kernel completes a partial checksum. It continues.
type ChecksumTarget struct{}

// AuditTarget is "-j AUDIT --type accept|drop|reject": an audit record of
// the packet. It continues.
type AuditTarget struct {
	Type string // "accept", "drop" or "reject"
}

func init() {
	registerTarget(&module{name: "CHECKSUM", tables: mangle,
		opts: []option{{name: "checksum-fill"}},
		newBuilder: func(*ruleCtx) builder {
			return &flagTargetBuilder{mod: "CHECKSUM", opt: "--checksum-fill", t: &ChecksumTarget{}}
		}})
	registerTarget(&module{name: "AUDIT",
		opts:       []option{{name: "type", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &auditTargetBuilder{} }})
}

// flagTargetBuilder builds a target whose one option is required and takes
// no argument.
type flagTargetBuilder struct {
	mod, opt string
	t        Target
	given    bool
}

func (b *flagTargetBuilder) set(*ruleCtx, string, bool, []string) error {
	b.given = true
	return nil
}

func (b *flagTargetBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify(b.mod, b.opt)
	}
	return b.t, nil
}

// Name implements Target.
func (t *ChecksumTarget) Name() string { return "CHECKSUM" }

func (t *ChecksumTarget) appendSave(b []byte) []byte { return append(b, " --checksum-fill"...) }

func (t *ChecksumTarget) appendList(b []byte, _ bool) []byte { return append(b, " CHECKSUM fill"...) }

func (t *ChecksumTarget) apply(*evalCtx) verdict { return vContinue }

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

// absentTargets are target extensions iptables 1.8.9 reads but the kernel
// (6.18, this project's reference) does not have, or refuses without
// SELinux: iptables-restore reads their options, then the rule fails with
// "RULE_APPEND failed (No such file or directory)". CLUSTERIP was removed
// in Linux 6.3 and ULOG in 3.17; LED needs a LED trigger module.
var absentTargets = map[string][]option{
	"CLUSTERIP": {{name: "new"}, {name: "hashmode", args: 1}, {name: "clustermac", args: 1},
		{name: "total-nodes", args: 1}, {name: "local-node", args: 1}, {name: "hash-init", args: 1}},
	"ULOG": {{name: "ulog-nlgroup", args: 1}, {name: "ulog-prefix", args: 1},
		{name: "ulog-cprange", args: 1}, {name: "ulog-qthreshold", args: 1}},
	"LED": {{name: "led-trigger-id", args: 1}, {name: "led-delay", args: 1}, {name: "led-always-blink"}},
	// SECMARK needs an SELinux context; the reference kernel has no SELinux.
	"SECMARK": {{name: "selctx", args: 1}},
}

// absentRequired are the options iptables insists on before the kernel
// is asked.
var absentRequired = map[string]string{"LED": "--led-trigger-id", "SECMARK": "--selctx"}

func init() {
	for name, opts := range absentTargets {
		registerTarget(&module{name: name, opts: opts,
			newBuilder: func(*ruleCtx) builder { return &absentTargetBuilder{name: name} }})
	}
}

type absentTargetBuilder struct {
	name string
	seen map[string]bool
}

func (b *absentTargetBuilder) set(_ *ruleCtx, opt string, _ bool, _ []string) error {
	if b.seen == nil {
		b.seen = map[string]bool{}
	}
	b.seen[opt] = true
	return nil
}

func (b *absentTargetBuilder) done(*ruleCtx) (any, error) {
	if req := absentRequired[b.name]; req != "" && !b.seen[req[2:]] {
		return nil, mustSpecify(b.name, req)
	}
	why := "the kernel has no " + b.name + " target (iptables: \"Extension " + b.name + " revision 0 not supported, missing kernel module?\")"
	if b.name == "SECMARK" {
		why = "the reference kernel refuses it, having no SELinux context to give (iptables-restore: RULE_APPEND failed (No such file or directory))"
	}
	return nil, fmt.Errorf("%w: %s: %s", ErrUnknownTarget, b.name, why)
}
