package netfilter

import (
	"fmt"
	"net/netip"
)

// NPTTarget is ip6tables "-j DNPT" (mangle PREROUTING and OUTPUT: the
// destination) or "-j SNPT" (mangle INPUT and POSTROUTING: the source)
// with --src-pfx PREFIX --dst-pfx PREFIX: IPv6-to-IPv6 network prefix
// translation (RFC 6296). Both prefixes must have their host bits clear
// and be at most /64, as the kernel checks.
//
// The mapping is the kernel's (net/ipv6/netfilter/ip6t_NPT.c): the first
// max(src, dst) bits of the address are taken from the --dst-pfx prefix
// and one 16-bit word after them (the fourth for prefixes up to /48, else
// the first of words 4-7 that is not 0xffff) absorbs the difference of the
// prefixes' one's complement sums, so that transport checksums stay valid.
// An address whose words 4-7 are all 0xffff cannot be mapped: the kernel
// drops the packet (and sends an ICMPv6 parameter problem, which
// packetwalk does not emit). The rule continues otherwise.
type NPTTarget struct {
	Dest     bool // DNPT; false is SNPT
	Src, Dst netip.Prefix
}

// addOnes adds 16-bit words in one's complement arithmetic.
func addOnes(a, b uint32) uint32 {
	s := a + b
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return s
}

// adjustment is the one's complement of the difference of the prefixes'
// word sums, as ip6t_npt_checkentry computes it.
func (t *NPTTarget) adjustment() uint32 {
	s, d := t.Src.Addr().As16(), t.Dst.Addr().As16()
	var ss, ds uint32
	for i := 0; i < 16; i += 2 {
		ss = addOnes(ss, uint32(s[i])<<8|uint32(s[i+1]))
		ds = addOnes(ds, uint32(d[i])<<8|uint32(d[i+1]))
	}
	return addOnes(ss, ^ds&0xffff)
}

// mapNPT maps a as the kernel's ip6t_npt_map_pfx does; ok is false when
// no word can absorb the adjustment.
func (t *NPTTarget) mapNPT(a netip.Addr) (netip.Addr, bool) {
	x, d := a.As16(), t.Dst.Addr().As16()
	n := max(t.Src.Bits(), t.Dst.Bits())
	for i := range x {
		x[i] = mergeBits(x[i], d[i], n-8*i)
	}
	idx := 3
	if n > 48 {
		for idx = 4; idx < 8; idx++ {
			if x[2*idx] != 0xff || x[2*idx+1] != 0xff {
				break
			}
		}
		if idx == 8 {
			return a, false
		}
	}
	w := addOnes(uint32(x[2*idx])<<8|uint32(x[2*idx+1]), t.adjustment())
	if w == 0xffff {
		w = 0
	}
	x[2*idx], x[2*idx+1] = byte(w>>8), byte(w)
	return netip.AddrFrom16(x), true
}

func init() {
	opts := []option{{name: "src-pfx", args: 1}, {name: "dst-pfx", args: 1}}
	registerTarget(&module{name: "DNPT", tables: mangle, hooks: []Hook{Prerouting, Output}, families: []Family{IPv6},
		opts: opts, newBuilder: func(*ruleCtx) builder { return &NPTTarget{Dest: true} }})
	registerTarget(&module{name: "SNPT", tables: mangle, hooks: []Hook{Input, Postrouting}, families: []Family{IPv6},
		opts: opts, newBuilder: func(*ruleCtx) builder { return &NPTTarget{} }})
}

func (t *NPTTarget) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	p, err := netip.ParsePrefix(args[0])
	if err != nil || !p.Addr().Is6() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
		return badValue(t.Name(), "--"+opt, args[0], "an IPv6 prefix ADDR/LEN")
	}
	if p.Masked() != p || p.Bits() > 64 {
		return fmt.Errorf("%w: %s --%s %s: the kernel takes only a prefix of at most 64 bits with its host bits clear", ErrNotAllowed, t.Name(), opt, args[0])
	}
	if opt == "src-pfx" {
		t.Src = p
	} else {
		t.Dst = p
	}
	return nil
}

func (t *NPTTarget) done(*ruleCtx) (any, error) {
	if !t.Src.IsValid() {
		return nil, mustSpecify(t.Name(), "--src-pfx")
	}
	if !t.Dst.IsValid() {
		return nil, mustSpecify(t.Name(), "--dst-pfx")
	}
	return t, nil
}

// Name implements Target.
func (t *NPTTarget) Name() string {
	if t.Dest {
		return "DNPT"
	}
	return "SNPT"
}

func (t *NPTTarget) apply(c *evalCtx) verdict {
	p := c.pkt
	addr := &p.Src
	if t.Dest {
		addr = &p.Dst
	}
	m, ok := t.mapNPT(*addr)
	if !ok {
		return vDrop
	}
	*addr = m
	return vContinue
}

func (t *NPTTarget) appendSave(b []byte) []byte {
	b = t.Src.AppendTo(append(b, " --src-pfx "...))
	return t.Dst.AppendTo(append(b, " --dst-pfx "...))
}

func (t *NPTTarget) appendList(b []byte, _ bool) []byte {
	b = append(append(b, ' '), t.Name()...)
	b = t.Src.AppendTo(append(b, " src-pfx "...))
	return t.Dst.AppendTo(append(b, " dst-pfx "...))
}
