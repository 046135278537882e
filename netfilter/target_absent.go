package netfilter

import "fmt"

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
		var fams []Family
		if name == "CLUSTERIP" || name == "ULOG" {
			fams = []Family{IPv4} // libipt_ extensions: ip6tables has none
		}
		registerTarget(&module{name: name, opts: opts, families: fams,
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
