package netfilter

import (
	"fmt"
	"strconv"
)

// IdletimerTarget is "-j IDLETIMER --timeout SECONDS --label NAME
// [--alarm]": the kernel restarts a timer (a sysfs file named after the
// label) on each packet. Nothing packetwalk models changes: the rule
// continues. iptables keeps the first 27 bytes of the label; the kernel
// refuses a timeout of 0.
type IdletimerTarget struct {
	Timeout uint32
	Label   string
	Alarm   bool
}

func init() {
	registerTarget(&module{name: "IDLETIMER",
		opts:       []option{{name: "timeout", args: 1}, {name: "label", args: 1}, {name: "alarm"}},
		newBuilder: func(*ruleCtx) builder { return &idletimerTargetBuilder{} }})
}

type idletimerTargetBuilder struct {
	t              IdletimerTarget
	timeout, label bool
}

func (b *idletimerTargetBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	switch opt {
	case "alarm":
		b.t.Alarm = true
	case "label":
		l := args[0]
		if len(l) > 27 {
			l = l[:27]
		}
		b.t.Label, b.label = l, true
	default:
		n, ok := parseCUint(args[0], 0xffffffff)
		if !ok {
			return badValue("IDLETIMER", "--timeout", args[0], "a number of seconds (0-4294967295)")
		}
		b.t.Timeout, b.timeout = uint32(n), true
	}
	return nil
}

func (b *idletimerTargetBuilder) done(*ruleCtx) (any, error) {
	if !b.timeout {
		return nil, mustSpecify("IDLETIMER", "--timeout")
	}
	if !b.label {
		return nil, mustSpecify("IDLETIMER", "--label")
	}
	if b.t.Timeout == 0 {
		return nil, fmt.Errorf("%w: IDLETIMER --timeout 0 (the kernel refuses it)", ErrBadValue)
	}
	if b.t.Label == "" {
		// The kernel names a sysfs file after the label: an empty one is
		// refused (iptables-restore: RULE_APPEND failed (Invalid argument)).
		return nil, fmt.Errorf("%w: IDLETIMER --label \"\" (the kernel refuses an empty label)", ErrBadValue)
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *IdletimerTarget) Name() string { return "IDLETIMER" }

func (t *IdletimerTarget) appendSave(b []byte) []byte {
	b = strconv.AppendUint(append(b, " --timeout "...), uint64(t.Timeout), 10)
	b = append(append(b, " --label "...), t.Label...)
	if t.Alarm {
		b = append(b, " --alarm"...)
	}
	return b
}

func (t *IdletimerTarget) appendList(b []byte, _ bool) []byte {
	b = strconv.AppendUint(append(b, " timeout:"...), uint64(t.Timeout), 10)
	b = append(append(b, " label:"...), t.Label...)
	if t.Alarm {
		b = append(b, " alarm"...)
	}
	return b
}

func (t *IdletimerTarget) apply(*evalCtx) verdict { return vContinue }
