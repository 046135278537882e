// Package cnum reads unsigned numbers as C's strtoul and strtoull read them
// with base 0, which is how iptables and ipset take most numeric
// arguments: "0x" or "0X" then hex digits, a leading "0" then octal
// digits, otherwise decimal.
package cnum

import (
	"strconv"
	"strings"
)

// Base splits s into the base its prefix selects and the digits after the
// prefix: (16, "ff") for "0xff", (8, "17") for "017", (10, s) otherwise. A
// lone "0" is decimal.
func Base(s string) (base int, digits string) {
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X"):
		return 16, s[2:]
	case len(s) > 1 && s[0] == '0':
		return 8, s[1:]
	}
	return 10, s
}

// ParseUint reads the whole of s as a number in the base its prefix
// selects, at most max. Unlike strtoul it takes no sign, white space or
// digit separator, and refuses a value over max instead of saturating.
func ParseUint(s string, max uint64) (uint64, bool) {
	base, digits := Base(s)
	if digits == "" || digits[0] == '+' || digits[0] == '-' || strings.ContainsRune(digits, '_') {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, base, 64)
	if err != nil || n > max {
		return 0, false
	}
	return n, true
}
