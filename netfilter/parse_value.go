package netfilter

import (
	"errors"
	"strconv"
	"strings"
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
// for iptables: "0x" hex, a leading "0" octal, otherwise decimal; the whole
// string must be consumed and the value must not exceed max.
func parseCUint(s string, max uint64) (uint64, bool) {
	base := 10
	digits := s
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		base, digits = 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		base, digits = 8, s[1:]
	}
	if digits == "" || digits[0] == '+' || digits[0] == '-' || strings.ContainsRune(digits, '_') {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, base, 64)
	if err != nil || n > max {
		return 0, false
	}
	return n, true
}

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
		base, digits := 10, s
		switch {
		case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
			base, digits = 16, s[2:]
		case len(s) > 1 && s[0] == '0':
			base, digits = 8, s[1:]
		}
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
