package ipset

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/cnum"
	"github.com/packetwalk/packetwalk/internal/services"
	"go4.org/netipx"
)

var errStop = errors.New("stop")

// maxExpansion bounds how many host elements one CIDR or range may stand
// for. It is a simulator bound, not a kernel one: the kernel walks any
// range until maxelem or an error stops it.
const maxExpansion = 1 << 22

// ErrExpansionTooBig reports a CIDR or range above maxExpansion hosts.
var ErrExpansionTooBig = errors.New("ipset (simulator): range expands to more than 4194304 elements")

var ordinals = []string{"First", "Second", "Third"}

// eachElem parses one element text and calls fn for every element it stands
// for (CIDRs on host dimensions, address ranges and port ranges expand).
func (s *Set) eachElem(text string, fn func(ekey) error) error {
	t := s.typ
	if t.kind == kindList {
		return fn(ekey{name: text})
	}
	parts := strings.Split(text, ",")
	if len(parts) < len(t.dims) {
		return syntaxError("%s element is missing from %s.", ordinals[len(parts)], text)
	}
	if len(parts) > len(t.dims) {
		return syntaxError("Elem separator in %s, but settype %s supports none.", text, t.name)
	}
	var walk func(i int, k ekey) error
	walk = func(i int, k ekey) error {
		if i == len(parts) {
			return fn(k)
		}
		return s.eachDim(t.dims[i], i, parts[i], k, func(k ekey) error { return walk(i+1, k) })
	}
	return walk(0, ekey{})
}

func (s *Set) famName() string {
	if s.family == 6 {
		return "IPv6"
	}
	return "IPv4"
}

func (s *Set) maxBits() int {
	if s.family == 6 {
		return 128
	}
	return 32
}

func (s *Set) parseAddr(txt string) (netip.Addr, error) {
	a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(txt, "["), "]"))
	// An IPv4-mapped address ("::ffff:10.1.2.3") is an IPv6 address to
	// an inet6 set, stored as its 16 bytes; an inet set refuses it.
	if err != nil || a.Zone() != "" || (s.family == 6) != a.Is6() {
		return netip.Addr{}, syntaxError("cannot parse %s: resolving to %s address failed", txt, s.famName())
	}
	return a, nil
}

func (s *Set) parseBits(txt string) (int, error) {
	n, err := strconv.Atoi(txt)
	if err != nil {
		return 0, syntaxError("'%s' is invalid as number", txt)
	}
	if n < 0 || n > s.maxBits() {
		return 0, syntaxError("'%s' is out of range 0-%d", txt, s.maxBits())
	}
	return n, nil
}

// setAddr stores a into the i-th address slot of k.
func setAddr(k *ekey, dim int, a netip.Addr, bits uint8) {
	if dim == 0 {
		k.a1, k.c1 = a, bits
	} else {
		k.a2, k.c2 = a, bits
	}
}

func (s *Set) eachDim(d dimKind, i int, txt string, k ekey, fn func(ekey) error) error {
	switch d {
	case dimIP:
		return s.eachHost(i, txt, k, fn)
	case dimHost:
		a, err := s.parseAddr(txt)
		if err != nil {
			return err
		}
		setAddr(&k, i, a, 0)
		return fn(k)
	case dimNet:
		return s.eachNet(i, txt, k, fn)
	case dimPort:
		return s.eachPort(txt, k, fn)
	case dimIface:
		name := txt
		if rest, ok := strings.CutPrefix(name, "physdev:"); ok {
			k.physdev, name = true, rest
		}
		if len(name) > 15 {
			return syntaxError("interface name '%s' is longer than 15 characters", name)
		}
		if rest, ok := strings.CutSuffix(name, "+"); ok {
			k.wildcard, name = true, rest
		}
		k.iface = name
		return fn(k)
	case dimBPort:
		return s.eachBitmapPort(txt, k, fn)
	}
	return fmt.Errorf("ipset: internal: unknown dimension %d", d)
}

// eachHost expands a host dimension: address, v4 CIDR or v4 range.
func (s *Set) eachHost(i int, txt string, k ekey, fn func(ekey) error) error {
	var lo, hi netip.Addr
	switch {
	case strings.Contains(txt, "/"):
		as, bs, _ := strings.Cut(txt, "/")
		a, err := s.parseAddr(as)
		if err != nil {
			return err
		}
		if s.family == 6 {
			return syntaxError("plain IP address must be supplied: %s", txt)
		}
		bits, err := s.parseBits(bs)
		if err != nil {
			return err
		}
		p := netip.PrefixFrom(a, bits).Masked()
		lo, hi = p.Addr(), netipx.PrefixLastIP(p)
	case strings.Contains(txt, "-") && s.family == 4:
		as, bs, _ := strings.Cut(txt, "-")
		a, b, err := s.parseAddrRange(as, bs)
		if err != nil {
			return err
		}
		lo, hi = a, b
	default:
		a, err := s.parseAddr(txt)
		if err != nil {
			return err
		}
		lo, hi = a, a
	}
	if s.typ.kind == kindBitmap && (lo.Less(s.rangeLo) || s.rangeHi.Less(hi)) {
		return ErrOutOfRange
	}
	if lo.Is4() && bitmapCount(lo, hi, 0) > maxExpansion {
		return ErrExpansionTooBig
	}
	for a := lo; ; {
		h := a
		if s.netmask != 0 {
			h = netip.PrefixFrom(a, s.netmask).Masked().Addr()
		}
		setAddr(&k, i, h, 0)
		if err := fn(k); err != nil {
			return err
		}
		if s.typ.kind == kindBitmap && s.netmask != 0 {
			// bitmap_ip_uadt steps by the block size from the unmasked
			// start: 10.0.0.1-10.0.0.2 under netmask 31 adds only
			// 10.0.0.0 (observed), where hash:ip adds 10.0.0.2 too.
			next := uint64(addr4(a)) + 1<<uint(32-s.netmask)
			if next > uint64(addr4(hi)) {
				return nil
			}
			a = netip.AddrFrom4([4]byte{byte(next >> 24), byte(next >> 16), byte(next >> 8), byte(next)})
			continue
		}
		// Step to the next netmask block.
		if s.netmask != 0 {
			a = netipx.PrefixLastIP(netip.PrefixFrom(a, s.netmask).Masked())
		}
		if a == hi || hi.Less(a) {
			return nil
		}
		a = a.Next()
	}
}

func (s *Set) eachNet(i int, txt string, k ekey, fn func(ekey) error) error {
	if strings.Contains(txt, "-") && s.family == 4 {
		as, bs, _ := strings.Cut(txt, "-")
		a, err := s.parseAddr(as)
		if err != nil {
			return err
		}
		b, err := s.parseAddr(bs)
		if err != nil {
			return err
		}
		if b.Less(a) {
			a, b = b, a
		}
		for _, p := range netipx.IPRangeFrom(a, b).Prefixes() {
			if p.Bits() == 0 {
				return ErrCIDR
			}
			setAddr(&k, i, p.Addr(), uint8(p.Bits()))
			if err := fn(k); err != nil {
				return err
			}
		}
		return nil
	}
	as, bs, hasBits := strings.Cut(txt, "/")
	a, err := s.parseAddr(as)
	if err != nil {
		return err
	}
	bits := s.maxBits()
	if hasBits {
		if bits, err = s.parseBits(bs); err != nil {
			return err
		}
	}
	if bits == 0 {
		return ErrCIDR
	}
	setAddr(&k, i, netip.PrefixFrom(a, bits).Masked().Addr(), uint8(bits))
	return fn(k)
}

// parsePortNum reads a port as ipset 7.17 does: a service name of proto
// (getservbyname, so "udp:ssh" is refused), else a number in C notation
// (strtoul base 0: 010 is 8, 0x10 is 16).
func parsePortNum(txt, proto string) (uint16, error) {
	if p, ok := services.ByName(txt, proto); ok {
		return p, nil
	}
	n, ok := cnum.ParseUint(txt, math.MaxUint64)
	if !ok {
		return 0, syntaxError("'%s' is invalid as number", txt)
	}
	if n > 65535 {
		return 0, syntaxError("'%s' is out of range 0-65535", txt)
	}
	return uint16(n), nil
}

func parsePortRange(txt, proto string) (lo, hi uint16, err error) {
	as, bs, isRange := strings.Cut(txt, "-")
	if lo, err = parsePortNum(as, proto); err != nil {
		return 0, 0, err
	}
	hi = lo
	if isRange {
		if hi, err = parsePortNum(bs, proto); err != nil {
			return 0, 0, err
		}
	}
	if hi < lo {
		lo, hi = hi, lo
	}
	return lo, hi, nil
}

func (s *Set) eachPort(txt string, k ekey, fn func(ekey) error) error {
	pname, ptxt, hasProto := strings.Cut(txt, ":")
	if !hasProto {
		pname, ptxt = "tcp", txt
	}
	proto, ok := protoByName[pname]
	if !ok {
		n, err := strconv.Atoi(pname)
		if err != nil || n < 0 || n > 255 {
			return syntaxError("cannot parse protocol '%s'", pname)
		}
		proto = inet.Proto(n)
	}
	k.proto = proto
	switch proto {
	case inet.ICMP, inet.ICMPv6:
		names, fam, label := icmpNames, 4, "ICMP"
		if proto == inet.ICMPv6 {
			names, fam, label = icmp6Names, 6, "ICMPv6"
		}
		if s.family != fam {
			famName := "inet"
			if fam == 6 {
				famName = "inet6"
			}
			return syntaxError("Protocol %s can be used with family %s only", label, famName)
		}
		tc, ok := parseICMP(names, ptxt)
		if !ok {
			return &textError{msg: fmt.Sprintf("Cannot parse %s as an %s type/code.", ptxt, label), base: ErrSyntax}
		}
		k.port = tc
		return fn(k)
	case inet.TCP, inet.UDP, inet.SCTP, inet.UDPLite:
		lo, hi, err := parsePortRange(ptxt, pname)
		if err != nil {
			return err
		}
		for p := uint32(lo); p <= uint32(hi); p++ {
			k.port = uint16(p)
			if err := fn(k); err != nil {
				return err
			}
		}
		return nil
	default:
		if ptxt != "0" {
			return syntaxError("Protocol %s can be used with pseudo port value 0 only.", pname)
		}
		k.port = 0
		return fn(k)
	}
}

func parseICMP(names []icmpName, txt string) (uint16, bool) {
	for _, n := range names {
		if strings.EqualFold(n.name, txt) {
			return ICMPPort(n.typ, n.code), true
		}
	}
	ts, cs, ok := strings.Cut(txt, "/")
	if !ok {
		return 0, false
	}
	t, err1 := strconv.ParseUint(ts, 10, 8)
	c, err2 := strconv.ParseUint(cs, 10, 8)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return ICMPPort(uint8(t), uint8(c)), true
}

func (s *Set) eachBitmapPort(txt string, k ekey, fn func(ekey) error) error {
	// A bitmap:port element may name its protocol, whose service names
	// then apply ("udp:mdns").
	proto := "tcp"
	if pname, rest, ok := strings.Cut(txt, ":"); ok {
		if pname != "tcp" && pname != "udp" {
			return syntaxError("Only protocols TCP and UDP are valid")
		}
		proto, txt = pname, rest
	}
	lo, hi, err := parsePortRange(txt, proto)
	if err != nil {
		return err
	}
	if lo < s.portLo || hi > s.portHi {
		return ErrOutOfRange
	}
	for p := uint32(lo); p <= uint32(hi); p++ {
		k.port = uint16(p)
		if err := fn(k); err != nil {
			return err
		}
	}
	return nil
}

// appendKey appends an element as ipset prints it (without extensions).
func (s *Set) appendKey(b []byte, k ekey) []byte {
	t := s.typ
	if t.kind == kindList {
		return append(b, k.name...)
	}
	for i, d := range t.dims {
		if i > 0 {
			b = append(b, ',')
		}
		switch d {
		case dimIP, dimHost, dimNet:
			a, c := k.a1, k.c1
			if i > 0 {
				a, c = k.a2, k.c2
			}
			b = inet.AppendAddr(b, a)
			if d == dimNet && int(c) != s.maxBits() {
				b = append(b, '/')
				b = strconv.AppendUint(b, uint64(c), 10)
			}
		case dimPort:
			b = appendProtoPort(b, k.proto, k.port)
		case dimIface:
			if k.physdev {
				b = append(b, "physdev:"...)
			}
			b = append(b, k.iface...)
			if k.wildcard {
				b = append(b, '+')
			}
		case dimBPort:
			b = strconv.AppendUint(b, uint64(k.port), 10)
		}
	}
	return b
}

func appendProtoPort(b []byte, proto inet.Proto, port uint16) []byte {
	if n, ok := protoNames[proto]; ok {
		b = append(b, n...)
	} else {
		b = strconv.AppendUint(b, uint64(proto), 10)
	}
	b = append(b, ':')
	if proto == inet.ICMP || proto == inet.ICMPv6 {
		names := icmpNames
		if proto == inet.ICMPv6 {
			names = icmp6Names
		}
		for _, n := range names {
			if ICMPPort(n.typ, n.code) == port {
				return append(b, n.name...)
			}
		}
		b = strconv.AppendUint(b, uint64(port>>8), 10)
		b = append(b, '/')
		return strconv.AppendUint(b, uint64(port&0xff), 10)
	}
	return strconv.AppendUint(b, uint64(port), 10)
}

// parseAddrRange parses the two ends of "A-B", swapped into order as ipset
// does.
func (s *Set) parseAddrRange(as, bs string) (netip.Addr, netip.Addr, error) {
	a, err := s.parseAddr(as)
	if err != nil {
		return a, a, err
	}
	b, err := s.parseAddr(bs)
	if err != nil {
		return a, b, err
	}
	if b.Less(a) {
		a, b = b, a
	}
	return a, b, nil
}
