package netfilter

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/packetwalk/packetwalk/internal/cnum"
)

// The address forms iptables 1.8.9 reads. For -s and -d (and iprange)
// it first tries its own dotted parser, xtables_numeric_to_ipaddr: one to
// four parts separated by ".", each a C number from 0 to 255 (0x hex,
// leading 0 octal, a leading "+" allowed), the missing ones zero at the
// right ("10.1" is 10.1.0.0, "80" is 80.0.0.0); the text is cut to 19
// bytes first. Failing that (-s, -d, conntrack's addresses), getaddrinfo
// reads the inet_aton forms, in which the last part fills the remaining
// bytes ("1.2.65535" is 1.2.255.255, "80" is 0.0.0.80). Names are not
// resolved by packetwalk. See docs/kernel-notes.md.

// parseCNumber parses s as xtables_strtoui does with base 0: optional
// leading white space and "+", then decimal, 0x hex or 0 octal digits,
// the whole string, at most max.
func parseCNumber(s string, max uint64) (uint64, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	return cnum.ParseUint(strings.TrimPrefix(s, "+"), max)
}

func digitVal(c byte) (uint64, bool) {
	switch {
	case c >= '0' && c <= '9':
		return uint64(c - '0'), true
	case c >= 'a' && c <= 'f':
		return uint64(c-'a') + 10, true
	case c >= 'A' && c <= 'F':
		return uint64(c-'A') + 10, true
	}
	return 0, false
}

// parseIPv4Dotted is xtables_numeric_to_ipaddr (mask: exactly four parts,
// as xtables_numeric_to_ipmask wants).
func parseIPv4Dotted(s string, mask bool) (netip.Addr, bool) {
	if len(s) > 19 {
		s = s[:19]
	}
	var b [4]byte
	for i := 0; i < 4; i++ {
		part, rest, found := strings.Cut(s, ".")
		if i == 3 {
			part, found = s, false
		}
		if !found && i < 3 && mask {
			return netip.Addr{}, false
		}
		v, ok := parseCNumber(part, 255)
		if !ok {
			return netip.Addr{}, false
		}
		b[i] = byte(v)
		if !found {
			break
		}
		s = rest
	}
	return netip.AddrFrom4(b), true
}

// parseIPv4Aton is glibc's exact inet_aton, which getaddrinfo applies to a
// numeric host: one to four parts, each decimal, 0x hex or 0 octal, the
// last filling the remaining bytes.
func parseIPv4Aton(s string) (netip.Addr, bool) {
	var parts [4]uint64
	n := 0
	for {
		if s == "" || s[0] < '0' || s[0] > '9' {
			return netip.Addr{}, false
		}
		base, digit := uint64(10), false
		if s[0] == '0' {
			s = s[1:]
			if s != "" && (s[0] == 'x' || s[0] == 'X') {
				base, s = 16, s[1:]
			} else {
				base, digit = 8, true
			}
		}
		var v uint64
		for s != "" {
			d, ok := digitVal(s[0])
			if !ok || d > 9 && base != 16 {
				break
			}
			if base == 8 && d >= 8 {
				return netip.Addr{}, false // "09" is no number
			}
			v = v*base + d
			if v > 0xffffffff {
				return netip.Addr{}, false
			}
			s, digit = s[1:], true
		}
		if s != "" && s[0] == '.' {
			if n > 2 || v > 0xff {
				return netip.Addr{}, false
			}
			parts[n] = v
			n++
			s = s[1:]
			continue
		}
		if s != "" || !digit || v > uint64(0xffffffff)>>(8*n) {
			return netip.Addr{}, false
		}
		u := v
		for i := 0; i < n; i++ {
			u |= parts[i] << (24 - 8*i)
		}
		return netip.AddrFrom4([4]byte{byte(u >> 24), byte(u >> 16), byte(u >> 8), byte(u)}), true
	}
}

// parseHostAddr reads one address of family f as iptables does for a
// host: for IPv4 the dotted form first when dotted is set (-s, -d), then
// inet_aton's forms, then an IPv4-mapped IPv6 address; for IPv6 the
// inet_pton form without a zone.
func parseHostAddr(f Family, s string, dotted bool) (netip.Addr, error) {
	if f == IPv4 {
		if dotted {
			if a, ok := parseIPv4Dotted(s, false); ok {
				return a, nil
			}
		}
		if a, ok := parseIPv4Aton(s); ok {
			return a, nil
		}
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Addr{}, fmt.Errorf("%w: host/network %q not found (packetwalk resolves no names)", ErrBadValue, s)
	}
	if f == IPv4 && a.Is4In6() {
		a = a.Unmap() // iptables reads "::ffff:10.1.2.3" as 10.1.2.3
	}
	if (f == IPv4) != a.Is4() {
		return netip.Addr{}, fmt.Errorf("%w: %q is not an %s address", ErrBadValue, s, f)
	}
	return a, nil
}

// parseHostMask parses one address of -s or -d, "ADDR", "ADDR/LEN" or
// "ADDR/MASK", as xtables_ipparse_multiple does: the mask follows the
// last "/", a length is a C number, and with a zero mask the address is
// not read at all ("anything/0" is 0.0.0.0/0). Host bits are cleared; a
// non-contiguous mask is returned as mask, with the masked address as a
// full-length prefix.
func parseHostMask(f Family, s string) (netip.Prefix, netip.Addr, error) {
	addrPart, maskPart, hasMask := s, "", false
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		addrPart, maskPart, hasMask = s[:i], s[i+1:], true
	}
	full := 32
	if f == IPv6 {
		full = 128
	}
	bits, mask := full, netip.Addr{}
	if hasMask {
		badMask := fmt.Errorf("%w: invalid mask %q specified", ErrBadValue, maskPart)
		var m netip.Addr
		ok := false
		if f == IPv4 {
			m, ok = parseIPv4Dotted(maskPart, true)
		} else if a, err := netip.ParseAddr(maskPart); err == nil && a.Is6() && a.Zone() == "" {
			m, ok = a, true
		}
		if ok {
			if ones, contiguous := maskOnes(m); contiguous {
				bits = ones
			} else {
				mask = m
			}
		} else {
			n, ok := parseCNumber(maskPart, uint64(full))
			if !ok {
				return netip.Prefix{}, netip.Addr{}, badMask
			}
			bits = int(n)
		}
	}
	if bits == 0 && !mask.IsValid() {
		if f == IPv4 {
			return netip.PrefixFrom(netip.IPv4Unspecified(), 0), netip.Addr{}, nil
		}
		return netip.PrefixFrom(netip.IPv6Unspecified(), 0), netip.Addr{}, nil
	}
	a, err := parseHostAddr(f, addrPart, true)
	if err != nil {
		return netip.Prefix{}, netip.Addr{}, err
	}
	if mask.IsValid() {
		return netip.PrefixFrom(andAddr(a, mask), full), mask, nil
	}
	return netip.PrefixFrom(a, bits).Masked(), netip.Addr{}, nil
}
