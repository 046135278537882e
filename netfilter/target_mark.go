package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// MarkTarget is "-j MARK": it sets the packet mark to
// (mark &^ Mask) ^ Value and continues with the next rule. Every option
// form (--set-mark, --and-mark, --or-mark, --xor-mark) is stored as this
// pair, which iptables-save prints as --set-xmark VALUE/MASK.
type MarkTarget struct {
	Value, Mask uint32
}

func init() {
	registerTarget(&module{name: "MARK", opts: xmarkOptions(),
		newBuilder: func(*ruleCtx) builder { return &markTargetBuilder{} }})
}

// xmarkOptions are the options MARK and CONNMARK share.
func xmarkOptions() []option {
	return []option{
		{name: "set-xmark", args: 1}, {name: "set-mark", args: 1},
		{name: "and-mark", args: 1}, {name: "or-mark", args: 1}, {name: "xor-mark", args: 1},
	}
}

type markTargetBuilder struct {
	t  MarkTarget
	op string // the option that set t, for the exclusion error
}

// parseXMark turns one of the xmark options into the (value, mask) pair
// the kernel applies as (mark &^ mask) ^ value.
func parseXMark(mod, opt, arg string) (value, mask uint32, err error) {
	switch opt {
	case "set-xmark", "set-mark":
		v, m, hasMask, ok := parseValueMask(arg)
		if !ok {
			return 0, 0, badValue(mod, "--"+opt, arg, "VALUE[/MASK] with 32-bit numbers")
		}
		if !hasMask {
			m = 0xffffffff
		}
		if opt == "set-mark" {
			m |= v // --set-mark V/M sets the bits of V even outside M
		}
		return v, m, nil
	}
	n, ok := parseCUint(arg, 0xffffffff)
	if !ok {
		return 0, 0, badValue(mod, "--"+opt, arg, "a 32-bit number (0-4294967295)")
	}
	v := uint32(n)
	switch opt {
	case "and-mark":
		return 0, ^v, nil
	case "or-mark":
		return v, v, nil
	default: // xor-mark
		return v, 0, nil
	}
}

// parseValueMask parses "VALUE[/MASK]" with numbers in strtoul's base 0.
func parseValueMask(s string) (v, m uint32, hasMask, ok bool) {
	vs, ms, hasMask := strings.Cut(s, "/")
	a, ok1 := parseCUint(vs, 0xffffffff)
	if !ok1 {
		return 0, 0, false, false
	}
	if !hasMask {
		return uint32(a), 0, false, true
	}
	b, ok2 := parseCUint(ms, 0xffffffff)
	return uint32(a), uint32(b), true, ok2
}

func (b *markTargetBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	if b.op != "" {
		return fmt.Errorf("%w: MARK: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, b.op, opt)
	}
	v, m, err := parseXMark("MARK", opt, args[0])
	if err != nil {
		return err
	}
	b.t, b.op = MarkTarget{Value: v, Mask: m}, opt
	return nil
}

func (b *markTargetBuilder) done(*ruleCtx) (any, error) {
	if b.op == "" {
		return nil, fmt.Errorf("%w: MARK: one of the --set-xmark, --{and,or,xor,set}-mark options is required", ErrMissingArgument)
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *MarkTarget) Name() string { return "MARK" }

func (t *MarkTarget) appendSave(b []byte) []byte {
	b = append(b, " --set-xmark "...)
	return appendHexPair(b, t.Value, t.Mask)
}

// appendHexPair appends "0xV/0xM".
func appendHexPair(b []byte, v, m uint32) []byte {
	b = appendHex(b, v)
	b = append(b, '/')
	return appendHex(b, m)
}

func appendHex(b []byte, v uint32) []byte {
	b = append(b, "0x"...)
	return strconv.AppendUint(b, uint64(v), 16)
}

func (t *MarkTarget) appendList(b []byte, _ bool) []byte {
	return appendXMarkList(b, " MARK", t.Value, t.Mask)
}

// appendXMarkList names the operation a value/mask pair performs, as the
// -L output of MARK and CONNMARK does ("MARK or 0x4000").
func appendXMarkList(b []byte, prefix string, v, m uint32) []byte {
	b = append(b, prefix...)
	switch {
	case v == 0:
		b = append(b, " and "...)
		return appendHex(b, ^m)
	case v == m:
		b = append(b, " or "...)
		return appendHex(b, v)
	case m == 0:
		b = append(b, " xor "...)
		return appendHex(b, v)
	case m == 0xffffffff:
		b = append(b, " set "...)
		return appendHex(b, v)
	}
	b = append(b, " xset "...)
	return appendHexPair(b, v, m)
}

func (t *MarkTarget) apply(c *evalCtx) verdict {
	c.pkt.Mark = (c.pkt.Mark &^ t.Mask) ^ t.Value
	return vContinue
}
