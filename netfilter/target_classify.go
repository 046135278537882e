package netfilter

import (
	"strconv"
	"strings"
)

// ClassifyTarget is "-j CLASSIFY --set-class MAJOR:MINOR" (any table,
// OUTPUT, FORWARD and POSTROUTING): it sets the packet's Priority
// (skb->priority, a tc class) to MAJOR<<16 | MINOR and continues. Both
// numbers are hexadecimal and, as iptables reads them, only their low 16
// bits are kept.
type ClassifyTarget struct {
	Priority uint32
}

func init() {
	registerTarget(&module{name: "CLASSIFY", hooks: []Hook{Output, Forward, Postrouting},
		opts:       []option{{name: "set-class", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &classifyTargetBuilder{} }})
}

type classifyTargetBuilder struct {
	t     ClassifyTarget
	given bool
}

// scanHex reads a number as C's sscanf "%x" does: white space, an
// optional sign, an optional 0x, then hex digits (at least one), as
// strtoul reads them ("-1" is 0xffffffff; too large saturates); it returns
// the value cut to 32 bits and what follows.
func scanHex(s string) (uint32, string, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	neg := false
	if s != "" && (s[0] == '+' || s[0] == '-') {
		neg, s = s[0] == '-', s[1:]
	}
	if len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') {
		if _, ok := digitVal(s[2]); ok {
			s = s[2:]
		}
	}
	var v uint64
	i := 0
	for ; i < len(s); i++ {
		d, ok := digitVal(s[i])
		if !ok {
			break
		}
		if v > (^uint64(0)-d)/16 {
			v = ^uint64(0)
		} else if v != ^uint64(0) {
			v = v*16 + d
		}
	}
	if i == 0 {
		return 0, s, false
	}
	if neg {
		v = -v
	}
	return uint32(v), s[i:], true
}

// The class is read by sscanf(s, "%x:%x"): anything after the second
// number is ignored ("1:10zz", a CR), and each half keeps its low 16 bits
// (docs/kernel-notes.md).
func (b *classifyTargetBuilder) set(_ *ruleCtx, _ string, _ bool, args []string) error {
	a, rest, ok := scanHex(args[0])
	if ok && strings.HasPrefix(rest, ":") {
		var m uint32
		if m, _, ok = scanHex(rest[1:]); ok {
			b.t.Priority, b.given = a<<16|m&0xffff, true
			return nil
		}
	}
	return badValue("CLASSIFY", "--set-class", args[0], "MAJOR:MINOR in hexadecimal")
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
