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
