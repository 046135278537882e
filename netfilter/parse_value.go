package netfilter

import (
	"errors"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/internal/cnum"
)

// The number and VALUE/MASK syntax the modules share, read as iptables
// reads it: parseCUint (xtables_strtoui), strtoul (C's strtoul, signs and
// saturation included) and parseMarkArg (xtables_parse_mark_mask).

// parseMarkArg parses "V" or "V/M" as xtables_parse_mark_mask does; the
// mask defaults to all ones.
func parseMarkArg(s string) (value, mask uint32, ok bool) {
	vs, ms, hasMask := strings.Cut(s, "/")
	v, ok := parseCUint(vs, 0xffffffff)
	if !ok {
		return 0, 0, false
	}
	mask = 0xffffffff
	if hasMask {
		m, ok := parseCUint(ms, 0xffffffff)
		if !ok {
			return 0, 0, false
		}
		mask = uint32(m)
	}
	return uint32(v), mask, true
}

// parseCUint parses an unsigned number the way strtoul with base 0 does
// for iptables (cnum.ParseUint): "0x" hex, a leading "0" octal, otherwise
// decimal; the whole string must be consumed and the value must not
// exceed max.
func parseCUint(s string, max uint64) (uint64, bool) { return cnum.ParseUint(s, max) }

// strtoul reads a number as C's strtoul with base 0 does for the option
// lists of hbh and dst: an optional sign ("-1" wraps to the largest
// value), then hex ("0x"), octal (leading "0") or decimal digits; a
// value too large saturates. The whole string must be a number.
func strtoul(s string) (uint64, bool) {
	neg := false
	if s != "" && (s[0] == '-' || s[0] == '+') {
		neg, s = s[0] == '-', s[1:]
	}
	if s == "" || s[0] == '-' || s[0] == '+' {
		return 0, false
	}
	n, ok := parseCUint(s, ^uint64(0))
	if !ok {
		// Too large, or not a number: strtoul saturates the former.
		base, digits := cnum.Base(s)
		if _, err := strconv.ParseUint(digits, base, 64); err == nil || !errors.Is(err, strconv.ErrRange) {
			return 0, false
		}
		n = ^uint64(0)
	}
	if neg {
		n = -n
	}
	return n, true
}
