package netfilter

import (
	"fmt"
	"strings"
)

// TOSTarget is "-j TOS" (mangle table only, both families): it sets the
// IPv4 TOS byte or the IPv6 traffic class to (tos &^ Mask) ^ Value and
// continues. Every option form is stored as this pair, which iptables-save
// prints as --set-tos 0xVV/0xMM:
//
//	--set-tos VALUE[/MASK]  MASK defaults to 0xff
//	--set-tos SYMBOL        Minimize-Delay (0x10), Maximize-Throughput (0x08),
//	                        Maximize-Reliability (0x04), Minimize-Cost (0x02),
//	                        Normal-Service (0x00), with mask 0x3f
//	--and-tos BITS          value 0, mask ^BITS
//	--or-tos BITS           value BITS, mask BITS
//	--xor-tos BITS          value BITS, mask 0
type TOSTarget struct {
	Value, Mask uint8
}

func init() {
	registerTarget(&module{name: "TOS", tables: mangle,
		opts: []option{{name: "set-tos", args: 1}, {name: "and-tos", args: 1},
			{name: "or-tos", args: 1}, {name: "xor-tos", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &tosTargetBuilder{} }})
}

// tosSymbols are the symbolic TOS values, in the order iptables looks
// them up when printing.
var tosSymbols = []struct {
	name  string
	value uint8
}{
	{"Minimize-Delay", 0x10}, {"Maximize-Throughput", 0x08}, {"Maximize-Reliability", 0x04},
	{"Minimize-Cost", 0x02}, {"Normal-Service", 0x00},
}

type tosTargetBuilder struct {
	t   TOSTarget
	opt string
}

func (b *tosTargetBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	if b.opt != "" {
		return fmt.Errorf("%w: TOS: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, b.opt, opt)
	}
	b.opt = opt
	arg := args[0]
	if opt == "set-tos" {
		v, m, ok := parseTOSValue(arg)
		if !ok {
			return badValue("TOS", "--set-tos", arg, "VALUE[/MASK] (0-255) or a symbolic name")
		}
		b.t = TOSTarget{Value: v, Mask: m}
		return nil
	}
	n, ok := parseCUint(arg, 255)
	if !ok {
		return badValue("TOS", "--"+opt, arg, "a number 0-255")
	}
	v := uint8(n)
	switch opt {
	case "and-tos":
		b.t = TOSTarget{Value: 0, Mask: ^v}
	case "or-tos":
		b.t = TOSTarget{Value: v, Mask: v}
	default:
		b.t = TOSTarget{Value: v, Mask: 0}
	}
	return nil
}

// parseTOSValue reads VALUE[/MASK] with 8-bit numbers or a symbol name
// (case-insensitive), as iptables' TOS parser does.
func parseTOSValue(s string) (v, m uint8, ok bool) {
	vs, ms, hasMask := strings.Cut(s, "/")
	a, ok := parseCUint(vs, 255)
	if !ok {
		if hasMask {
			return 0, 0, false
		}
		for _, sym := range tosSymbols {
			if strings.EqualFold(sym.name, s) {
				return sym.value, 0x3f, true
			}
		}
		return 0, 0, false
	}
	if !hasMask {
		return uint8(a), 0xff, true
	}
	bm, ok := parseCUint(ms, 255)
	return uint8(a), uint8(bm), ok
}

func (b *tosTargetBuilder) done(*ruleCtx) (any, error) {
	if b.opt == "" {
		return nil, fmt.Errorf("%w: TOS: An action is required", ErrMissingArgument)
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *TOSTarget) Name() string { return "TOS" }

func (t *TOSTarget) appendSave(b []byte) []byte {
	b = append(b, " --set-tos "...)
	b = appendHex02(b, t.Value)
	b = append(b, '/')
	return appendHex02(b, t.Mask)
}

// appendList prints what iptables -L prints: with -n always the pair;
// otherwise a symbol when the mask is 0x3f (iptables then prints two
// spaces and no space before the name), or the operation the pair
// performs.
func (t *TOSTarget) appendList(b []byte, numeric bool) []byte {
	if !numeric {
		if t.Mask == 0x3f {
			for _, sym := range tosSymbols {
				if sym.value == t.Value {
					b = append(b, "  TOS set"...)
					return append(b, sym.name...)
				}
			}
		}
		switch {
		case t.Value == 0:
			b = append(b, " TOS and "...)
			return appendHex02(b, ^t.Mask)
		case t.Value == t.Mask:
			b = append(b, " TOS or "...)
			return appendHex02(b, t.Value)
		case t.Mask == 0:
			b = append(b, " TOS xor "...)
			return appendHex02(b, t.Value)
		}
	}
	b = append(b, " TOS set "...)
	b = appendHex02(b, t.Value)
	b = append(b, '/')
	return appendHex02(b, t.Mask)
}

func (t *TOSTarget) apply(c *evalCtx) verdict {
	c.pkt.TOS = c.pkt.TOS&^t.Mask ^ t.Value
	return vContinue
}
