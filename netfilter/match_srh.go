package netfilter

import (
	"fmt"
	"math/bits"
	"net/netip"
	"strconv"
	"strings"
)

// SRHMatch is ip6tables "-m srh": tests of the IPv6 segment routing
// header (a type 4 routing header, Packet.SRH): its next header, length
// field, segments left and last entry (each equal, greater or less than
// a value), tag, and the previous, next and last segment ids under a
// prefix. The kernel's rule keeps one value per field: of
// --srh-hdr-len-eq, -gt and -lt, each given one is tested against the
// value of the last given, as iptables stores and prints it. A packet
// without the header, or whose segments left exceeds its last entry,
// never matches; --srh-psid fails when there is no previous segment
// (segments left = last entry) and --srh-nsid when there is no next one
// (segments left = 0), inverted or not. The kernel compares --srh-tag
// with the tag field as the host reads it in its own byte order: on a
// little-endian machine, as packetwalk assumes, "--srh-tag 7" matches
// the bytes 07 00 on the wire (tag 1792), not tag 7.
//
// Tests says which options are given and Inverted which of those carry
// "!"; the zero value tests nothing. SRHMatch{SegsLeft: 2, Tests:
// SRHSegsLeftGt} is "-m srh --srh-segs-left-gt 2".
type SRHMatch struct {
	NextHdr, HdrLen, SegsLeft, LastEntry uint8
	Tag                                  uint16
	PSID, NSID, LSID                     netip.Prefix
	Tests, Inverted                      SRHTests
}

// SRHTests is a set of the srh match's options, a bit each.
type SRHTests uint16

// The srh options, in the order iptables prints them (srhOpts).
const (
	SRHNextHdr SRHTests = 1 << iota
	SRHHdrLenEq
	SRHHdrLenGt
	SRHHdrLenLt
	SRHSegsLeftEq
	SRHSegsLeftGt
	SRHSegsLeftLt
	SRHLastEntryEq
	SRHLastEntryGt
	SRHLastEntryLt
	SRHTag
	SRHPSID
	SRHNSID
	SRHLSID
)

// srhOpts are the options in the order iptables prints them.
var srhOpts = []string{"next-hdr", "hdr-len-eq", "hdr-len-gt", "hdr-len-lt",
	"segs-left-eq", "segs-left-gt", "segs-left-lt", "last-entry-eq", "last-entry-gt", "last-entry-lt",
	"tag", "psid", "nsid", "lsid"}

func init() {
	opts := make([]option, len(srhOpts))
	for i, n := range srhOpts {
		opts[i] = option{name: "srh-" + n, args: 1, invert: true}
	}
	registerMatch(&module{name: "srh", opts: opts, families: []Family{IPv6},
		newBuilder: func(*ruleCtx) builder { return &SRHMatch{} }})
}

func (m *SRHMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	name := strings.TrimPrefix(opt, "srh-")
	k := indexOf(srhOpts, name)
	s := args[0]
	switch {
	case k >= 11:
		addr, bits, hasBits := strings.Cut(s, "/")
		a, err := netip.ParseAddr(addr)
		n := uint64(128)
		// An IPv4-mapped address is an IPv6 address like any other here.
		ok := err == nil && a.Is6() && a.Zone() == ""
		if ok && hasBits {
			var v uint64
			if v, ok = parseCUint(bits, 128); ok {
				n = v
			} else if m, err := netip.ParseAddr(bits); err == nil && m.Is6() && m.Zone() == "" {
				ones, contiguous := maskOnes(m)
				if !contiguous {
					// Matched with the mask, printed as /128 by ip6tables:
					// packetwalk keeps prefixes only.
					return fmt.Errorf("%w: srh --%s %s: a non-contiguous mask", ErrNotModelled, opt, s)
				}
				n, ok = uint64(ones), true
			}
		}
		if !ok {
			return badValue("srh", "--"+opt, s, "an IPv6 address with an optional /LEN or /MASK")
		}
		p := netip.PrefixFrom(a, int(n))
		switch name {
		case "psid":
			m.PSID = p
		case "nsid":
			m.NSID = p
		default:
			m.LSID = p
		}
	case k == 10:
		n, ok := parseCUint(s, 0xffff)
		if !ok {
			return badValue("srh", "--"+opt, s, "a tag 0-65535")
		}
		m.Tag = uint16(n)
	default:
		n, ok := parseCUint(s, 255)
		if !ok {
			return badValue("srh", "--"+opt, s, "a number 0-255")
		}
		switch {
		case k == 0:
			m.NextHdr = uint8(n)
		case k <= 3:
			m.HdrLen = uint8(n)
		case k <= 6:
			m.SegsLeft = uint8(n)
		default:
			m.LastEntry = uint8(n)
		}
	}
	m.Tests |= 1 << k
	if inv {
		m.Inverted |= 1 << k
	}
	return nil
}

func (m *SRHMatch) done(*ruleCtx) (any, error) { return m, nil }

// Module implements Match.
func (m *SRHMatch) Module() string { return "srh" }

func (m *SRHMatch) value(k int) string {
	switch {
	case k == 0:
		return strconv.Itoa(int(m.NextHdr))
	case k <= 3:
		return strconv.Itoa(int(m.HdrLen))
	case k <= 6:
		return strconv.Itoa(int(m.SegsLeft))
	case k <= 9:
		return strconv.Itoa(int(m.LastEntry))
	case k == 10:
		return strconv.Itoa(int(m.Tag))
	case k == 11:
		return m.PSID.String()
	case k == 12:
		return m.NSID.String()
	}
	return m.LSID.String()
}

func (m *SRHMatch) appendSave(b []byte) []byte {
	for k, n := range srhOpts {
		if m.Tests&(1<<k) == 0 {
			continue
		}
		b = appendNot(b, m.Inverted&(1<<k) != 0)
		b = append(b, " --srh-"...)
		b = append(b, n...)
		b = append(b, ' ')
		b = append(b, m.value(k)...)
	}
	return b
}

func (m *SRHMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " srh"...)
	for k, n := range srhOpts {
		if m.Tests&(1<<k) == 0 {
			continue
		}
		inv := m.Inverted&(1<<k) != 0
		if k >= 11 {
			b = fmt.Appendf(b, " %s %s %s", n, map[bool]string{true: "!", false: ""}[inv], m.value(k))
			continue
		}
		b = append(b, ' ')
		b = append(b, n...)
		b = append(b, ':')
		if inv {
			b = append(b, '!')
		}
		b = append(b, m.value(k)...)
	}
	return b
}

func (m *SRHMatch) match(c *evalCtx) bool {
	p := c.pkt
	if !p.SRH || p.RTSegsLeft > p.SRHLastEntry {
		return false
	}
	test := func(k int, ok bool) bool {
		return m.Tests&(1<<k) == 0 || ok != (m.Inverted&(1<<k) != 0)
	}
	under := func(pfx netip.Prefix, sid [16]byte) bool {
		return pfx.Contains(netip.AddrFrom16(sid))
	}
	hl, sl, le := p.RTLen, p.RTSegsLeft, p.SRHLastEntry
	if !(test(0, p.SRHNext == m.NextHdr) &&
		test(1, hl == m.HdrLen) && test(2, hl > m.HdrLen) && test(3, hl < m.HdrLen) &&
		test(4, sl == m.SegsLeft) && test(5, sl > m.SegsLeft) && test(6, sl < m.SegsLeft) &&
		test(7, le == m.LastEntry) && test(8, le > m.LastEntry) && test(9, le < m.LastEntry) &&
		test(10, bits.ReverseBytes16(p.SRHTag) == m.Tag)) {
		return false
	}
	if m.Tests&(1<<11) != 0 && (sl == le || !test(11, under(m.PSID, p.SRHPrevSID))) {
		return false
	}
	if m.Tests&(1<<12) != 0 && (sl == 0 || !test(12, under(m.NSID, p.SRHNextSID))) {
		return false
	}
	return test(13, under(m.LSID, p.SRHLastSID))
}
