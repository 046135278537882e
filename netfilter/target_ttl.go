package netfilter

import (
	"fmt"
	"strconv"
)

// TTLMode is the operation of the TTL and HL targets.
type TTLMode uint8

// TTL and HL target operations.
const (
	TTLSet TTLMode = iota
	TTLInc
	TTLDec
)

// TTLTarget is "-j TTL" (IPv4, mangle table only): --ttl-set N (0-255),
// --ttl-dec N or --ttl-inc N (1-255). Decrementing stops at 0 and
// incrementing at 255, as the kernel's ttl_tg does; the rule continues.
type TTLTarget struct {
	Mode  TTLMode
	Value uint8
}

func init() {
	registerTarget(&module{name: "TTL", tables: mangle, families: []Family{IPv4},
		opts:       []option{{name: "ttl-set", args: 1}, {name: "ttl-dec", args: 1}, {name: "ttl-inc", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &ttlTargetBuilder{mod: "TTL", prefix: "ttl"} }})
	registerTarget(&module{name: "HL", tables: mangle, families: []Family{IPv6},
		opts:       []option{{name: "hl-set", args: 1}, {name: "hl-dec", args: 1}, {name: "hl-inc", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &ttlTargetBuilder{mod: "HL", prefix: "hl"} }})
}

type ttlTargetBuilder struct {
	mod, prefix string
	opt         string
	mode        TTLMode
	value       uint8
}

func (b *ttlTargetBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	if b.opt != "" {
		return fmt.Errorf("%w: %s: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, b.mod, b.opt, opt)
	}
	b.opt = opt
	low, want := uint64(1), "a number 1-255"
	switch opt[len(b.prefix)+1:] {
	case "set":
		b.mode, low, want = TTLSet, 0, "a number 0-255"
	case "inc":
		b.mode = TTLInc
	default:
		b.mode = TTLDec
	}
	n, ok := parseCUint(args[0], 255)
	if !ok || n < low {
		return badValue(b.mod, "--"+opt, args[0], want)
	}
	b.value = uint8(n)
	return nil
}

func (b *ttlTargetBuilder) done(*ruleCtx) (any, error) {
	if b.opt == "" {
		return nil, fmt.Errorf("%w: %s: You must specify an action", ErrMissingArgument, b.mod)
	}
	if b.mod == "HL" {
		return &HLTarget{Mode: b.mode, Value: b.value}, nil
	}
	return &TTLTarget{Mode: b.mode, Value: b.value}, nil
}

var ttlModeWords = [...]struct{ opt, list string }{
	TTLSet: {"set", "set to"}, TTLInc: {"inc", "increment by"}, TTLDec: {"dec", "decrement by"},
}

func appendTTLSave(b []byte, prefix string, m TTLMode, v uint8) []byte {
	b = append(b, " --"...)
	b = append(b, prefix...)
	b = append(b, '-')
	b = append(b, ttlModeWords[m].opt...)
	b = append(b, ' ')
	return strconv.AppendUint(b, uint64(v), 10)
}

func appendTTLList(b []byte, name string, m TTLMode, v uint8) []byte {
	b = append(b, ' ')
	b = append(b, name...)
	b = append(b, ' ')
	b = append(b, ttlModeWords[m].list...)
	b = append(b, ' ')
	return strconv.AppendUint(b, uint64(v), 10)
}

// newTTL is the kernel's arithmetic: saturating at 0 and 255.
func newTTL(m TTLMode, v, ttl uint8) uint8 {
	switch m {
	case TTLSet:
		return v
	case TTLInc:
		if int(ttl)+int(v) > 255 {
			return 255
		}
		return ttl + v
	}
	if v > ttl {
		return 0
	}
	return ttl - v
}

// Name implements Target.
func (t *TTLTarget) Name() string { return "TTL" }

func (t *TTLTarget) appendSave(b []byte) []byte { return appendTTLSave(b, "ttl", t.Mode, t.Value) }

func (t *TTLTarget) appendList(b []byte, _ bool) []byte {
	return appendTTLList(b, "TTL", t.Mode, t.Value)
}

func (t *TTLTarget) apply(c *evalCtx) verdict {
	c.pkt.TTL = newTTL(t.Mode, t.Value, c.pkt.TTL)
	return vContinue
}
