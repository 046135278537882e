package netfilter

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/ipset"
)

// setCounter handles --packets-eq/-lt/-gt and --bytes-eq/-lt/-gt. Like
// libxt_set, only one comparison per counter, and only -eq can be inverted.
func (m *SetMatch) setCounter(opt string, inv bool, arg string) error {
	counter, cmp, _ := strings.Cut(opt, "-")
	op, val := &m.PacketsOp, &m.Packets
	if counter == "bytes" {
		op, val = &m.BytesOp, &m.Bytes
	}
	if *op != ipset.CounterNone {
		return fmt.Errorf("%w: set: only one of the --%s-[eq|lt|gt] is allowed", ErrMultipleFlags, counter)
	}
	n, ok := parseCounterValue(arg)
	if !ok {
		return badValue("set", "--"+opt, arg, "a counter value (decimal, 0x hex or 0 octal, 0-18446744073709551615)")
	}
	switch {
	case cmp == "eq" && inv:
		*op = ipset.CounterNE
	case cmp == "eq":
		*op = ipset.CounterEQ
	case cmp == "lt":
		*op = ipset.CounterLT
	default:
		*op = ipset.CounterGT
	}
	*val = n
	return nil
}

// parseCounterValue reads a counter the way iptables does (strtoull with
// base 0, whole string, no sign): leading blanks and '+' are allowed, 0x
// means hex and a leading 0 octal.
func parseCounterValue(s string) (uint64, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	s = strings.TrimPrefix(s, "+")
	base := 10
	switch {
	case len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'):
		s, base = s[2:], 16
	case len(s) > 1 && s[0] == '0':
		s, base = s[1:], 8
	}
	if s == "" || strings.ContainsAny(s, "_+-") {
		return 0, false
	}
	n, err := strconv.ParseUint(s, base, 64)
	return n, err == nil
}

// appendCounterCmp prints one comparison as libxt_set does:
// "[! ]--packets-eq N".
func appendCounterCmp(b []byte, prefix, counter string, op ipset.CounterOp, v uint64) []byte {
	if op == ipset.CounterNone {
		return b
	}
	b = append(b, ' ')
	if op == ipset.CounterNE {
		b = append(b, "! "...)
	}
	b = append(b, prefix...)
	b = append(b, counter...)
	switch op {
	case ipset.CounterLT:
		b = append(b, "lt "...)
	case ipset.CounterGT:
		b = append(b, "gt "...)
	default:
		b = append(b, "eq "...)
	}
	return strconv.AppendUint(b, v, 10)
}
