package netfilter

import (
	"fmt"
	"net/netip"
)

// NPTTarget is ip6tables "-j DNPT" (mangle PREROUTING and OUTPUT: the
// destination) or "-j SNPT" (mangle INPUT and POSTROUTING: the source)
// with --src-pfx PREFIX --dst-pfx PREFIX: IPv6-to-IPv6 network prefix
// translation (RFC 6296). Both prefixes must have their host bits clear
// and be at most /64, as the kernel checks. packetwalk reads and prints
// them but does not model the checksum-neutral rewrite: a host refuses to
// load them.
type NPTTarget struct {
	Dest     bool // DNPT; false is SNPT
	Src, Dst netip.Prefix
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

func (t *NPTTarget) unmodelled() string { return "network prefix translation is not modelled" }

func (t *NPTTarget) appendSave(b []byte) []byte {
	b = t.Src.AppendTo(append(b, " --src-pfx "...))
	return t.Dst.AppendTo(append(b, " --dst-pfx "...))
}

func (t *NPTTarget) appendList(b []byte, _ bool) []byte {
	b = append(append(b, ' '), t.Name()...)
	b = t.Src.AppendTo(append(b, " src-pfx "...))
	return t.Dst.AppendTo(append(b, " dst-pfx "...))
}
