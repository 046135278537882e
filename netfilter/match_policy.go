package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strconv"
)

// PolicyElem is one element of an IPsec policy test (between --next).
// A field is tested only when its Has flag is set; each may be inverted.
type PolicyElem struct {
	ReqID, SPI                          uint32
	Proto                               inet.Proto // ah (51), esp (50) or ipcomp (108)
	Tunnel                              bool       // --mode tunnel (else transport)
	TunnelSrc, TunnelDst                netip.Prefix
	HasReqID, HasSPI, HasProto          bool
	HasMode, HasTunnelSrc, HasTunnelDst bool
	InvReqID, InvSPI, InvProto          bool
	InvMode, InvTunnelSrc, InvTunnelDst bool
}

// PolicyMatch is "-m policy": the IPsec policy that decapsulated the
// packet (--dir in) or will encapsulate it (--dir out). packetwalk has no
// IPsec: no packet has a policy, so "--pol none" matches every packet and
// "--pol ipsec" none, whatever the elements say (xt_policy returns "no
// policy" when the packet has no security path or transform).
type PolicyMatch struct {
	Out    bool // --dir out
	None   bool // --pol none
	Strict bool
	Elems  []PolicyElem
}

const policyMaxElems = 4 // XT_POLICY_MAX_ELEM

func init() {
	registerMatch(&module{name: "policy",
		opts: []option{
			{name: "dir", args: 1}, {name: "pol", args: 1}, {name: "strict"},
			{name: "reqid", args: 1, invert: true, multi: true}, {name: "spi", args: 1, invert: true, multi: true},
			{name: "tunnel-src", args: 1, invert: true, multi: true}, {name: "tunnel-dst", args: 1, invert: true, multi: true},
			{name: "proto", args: 1, invert: true, multi: true}, {name: "mode", args: 1, invert: true, multi: true},
			{name: "next", multi: true},
		},
		newBuilder: func(c *ruleCtx) builder {
			return &policyBuilder{m: PolicyMatch{}, elems: []PolicyElem{{}}}
		}})
}

type policyBuilder struct {
	m        PolicyMatch
	elems    []PolicyElem
	dirGiven bool
}

func (b *policyBuilder) set(c *ruleCtx, opt string, inv bool, args []string) error {
	s := ""
	if len(args) > 0 {
		s = args[0]
	}
	e := &b.elems[len(b.elems)-1]
	double := func(has bool) error {
		if has {
			return fmt.Errorf("%w: policy match: double --%s option", ErrMultipleFlags, opt)
		}
		return nil
	}
	switch opt {
	case "dir":
		switch s {
		case "in":
			b.m.Out = false
		case "out":
			b.m.Out = true
		default:
			return badValue("policy", "--dir", s, "in or out")
		}
		b.dirGiven = true
	case "pol":
		switch s {
		case "none":
			b.m.None = true
		case "ipsec":
		default:
			return badValue("policy", "--pol", s, "none or ipsec")
		}
	case "strict":
		b.m.Strict = true
	case "reqid", "spi":
		n, ok := parseCUint(s, 0xffffffff)
		if !ok {
			return badValue("policy", "--"+opt, s, "a number 0-4294967295")
		}
		if opt == "reqid" {
			if err := double(e.HasReqID); err != nil {
				return err
			}
			e.ReqID, e.HasReqID, e.InvReqID = uint32(n), true, inv
		} else {
			if err := double(e.HasSPI); err != nil {
				return err
			}
			e.SPI, e.HasSPI, e.InvSPI = uint32(n), true, inv
		}
	case "tunnel-src", "tunnel-dst":
		pfx, err := parseAddrKeepHost(c.family, s)
		if err != nil {
			return badValue("policy", "--"+opt, s, "an address[/mask]")
		}
		if opt == "tunnel-src" {
			if err := double(e.HasTunnelSrc); err != nil {
				return err
			}
			e.TunnelSrc, e.HasTunnelSrc, e.InvTunnelSrc = pfx, true, inv
		} else {
			if err := double(e.HasTunnelDst); err != nil {
				return err
			}
			e.TunnelDst, e.HasTunnelDst, e.InvTunnelDst = pfx, true, inv
		}
	case "proto":
		if err := double(e.HasProto); err != nil {
			return err
		}
		p, ok := inet.ParseProto(s)
		if !ok || p != 50 && p != 51 && p != 108 {
			return badValue("policy", "--proto", s, "ah, esp or ipcomp")
		}
		e.Proto, e.HasProto, e.InvProto = p, true, inv
	case "mode":
		if err := double(e.HasMode); err != nil {
			return err
		}
		switch s {
		case "transport":
			e.Tunnel = false
		case "tunnel":
			e.Tunnel = true
		default:
			return badValue("policy", "--mode", s, "transport or tunnel")
		}
		e.HasMode, e.InvMode = true, inv
	case "next":
		if len(b.elems) == policyMaxElems {
			return fmt.Errorf("%w: policy match: maximum policy depth (%d elements) reached", ErrBadValue, policyMaxElems)
		}
		b.elems = append(b.elems, PolicyElem{})
	}
	return nil
}

// parseAddrKeepHost reads ADDR[/LEN|/MASK] without clearing host bits, as
// iptables' XTTYPE_HOSTMASK does.
func parseAddrKeepHost(f Family, s string) (netip.Prefix, error) {
	pfx, mask, err := parseAddrMask(f, s)
	if err != nil {
		return pfx, err
	}
	if mask.IsValid() {
		return pfx, fmt.Errorf("%w: policy: a non-contiguous mask %q", ErrNotModelled, s)
	}
	addr := s
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			addr = s[:i]
			break
		}
	}
	a, err := parseHostAddr(f, addr, false) // inet_aton's forms too: "1.2.3/8" is 1.2.0.3/8
	if err != nil {
		return pfx, err
	}
	return netip.PrefixFrom(a, pfx.Bits()), nil
}

func (b *policyBuilder) done(c *ruleCtx) (any, error) {
	m := b.m
	if !b.dirGiven {
		return nil, fmt.Errorf("%w: policy match: neither --dir in nor --dir out specified", ErrMissingArgument)
	}
	if len(b.elems) > 1 && !m.Strict {
		return nil, fmt.Errorf("%w: policy: option \"--next\" also requires \"--strict\"", ErrMissingArgument)
	}
	if m.None {
		if m.Strict {
			return nil, fmt.Errorf("%w: policy match: policy none but --strict given", ErrIncompatibleOpts)
		}
		// With --pol none, iptables keeps no element: what was given for
		// the first one is dropped.
		return &m, nil
	}
	for i, e := range b.elems {
		if m.Strict && !(e.HasReqID || e.HasSPI || e.HasTunnelSrc || e.HasTunnelDst || e.HasProto || e.HasMode) {
			return nil, fmt.Errorf("%w: policy match: empty policy element %d with --strict", ErrMissingArgument, i)
		}
		if (e.HasTunnelSrc || e.HasTunnelDst) && (e.Tunnel && e.InvMode || !e.Tunnel && !e.InvMode) {
			return nil, fmt.Errorf("%w: policy match: --tunnel-src/--tunnel-dst is only valid in tunnel mode", ErrIncompatibleOpts)
		}
	}
	m.Elems = b.elems
	return &m, nil
}

// checkHooks applies xt_policy's checkentry: an input policy cannot be
// tested in POSTROUTING or OUTPUT, an output one in PREROUTING or INPUT.
func (m *PolicyMatch) checkHooks(mask uint8) error {
	if m.Out && mask&(1<<Prerouting|1<<Input) != 0 {
		return fmt.Errorf("%w: policy: output policy not valid in PREROUTING and INPUT", ErrNotAllowed)
	}
	if !m.Out && mask&(1<<Postrouting|1<<Output) != 0 {
		return fmt.Errorf("%w: policy: input policy not valid in POSTROUTING and OUTPUT", ErrNotAllowed)
	}
	return nil
}

// Module implements Match.
func (m *PolicyMatch) Module() string { return "policy" }

func appendHostMask(b []byte, p netip.Prefix) []byte {
	b = p.Addr().AppendTo(b)
	if p.Bits() != p.Addr().BitLen() {
		b = append(b, '/')
		b = strconv.AppendInt(b, int64(p.Bits()), 10)
	}
	return b
}

func (m *PolicyMatch) appendFlags(b []byte, pre string) []byte {
	b = append(b, ' ')
	b = append(b, pre...)
	if m.Out {
		b = append(b, "dir out"...)
	} else {
		b = append(b, "dir in"...)
	}
	b = append(b, ' ')
	b = append(b, pre...)
	if m.None {
		b = append(b, "pol none"...)
	} else {
		b = append(b, "pol ipsec"...)
	}
	if m.Strict {
		b = append(b, ' ')
		b = append(b, pre...)
		b = append(b, "strict"...)
	}
	return b
}

func appendPolicyElem(b []byte, e *PolicyElem, pre string, numeric bool) []byte {
	item := func(b []byte, inv bool, name string) []byte {
		b = appendNot(b, inv)
		b = append(b, ' ')
		b = append(b, pre...)
		b = append(b, name...)
		return append(b, ' ')
	}
	if e.HasReqID {
		b = item(b, e.InvReqID, "reqid")
		b = strconv.AppendUint(b, uint64(e.ReqID), 10)
	}
	if e.HasSPI {
		b = item(b, e.InvSPI, "spi")
		b = append(b, "0x"...)
		b = strconv.AppendUint(b, uint64(e.SPI), 16)
	}
	if e.HasProto {
		b = item(b, e.InvProto, "proto")
		if numeric {
			b = strconv.AppendUint(b, uint64(e.Proto), 10)
		} else {
			b = append(b, (e.Proto).String()...)
		}
	}
	if e.HasMode {
		b = item(b, e.InvMode, "mode")
		if e.Tunnel {
			b = append(b, "tunnel"...)
		} else {
			b = append(b, "transport"...)
		}
	}
	if e.HasTunnelDst {
		b = item(b, e.InvTunnelDst, "tunnel-dst")
		b = appendHostMask(b, e.TunnelDst)
	}
	if e.HasTunnelSrc {
		b = item(b, e.InvTunnelSrc, "tunnel-src")
		b = appendHostMask(b, e.TunnelSrc)
	}
	return b
}

func (m *PolicyMatch) appendSave(b []byte) []byte {
	b = m.appendFlags(b, "--")
	for i := range m.Elems {
		b = appendPolicyElem(b, &m.Elems[i], "--", false)
		if i+1 < len(m.Elems) {
			b = append(b, " --next"...)
		}
	}
	return b
}

func (m *PolicyMatch) appendList(b []byte, numeric bool) []byte {
	b = append(b, " policy match"...)
	b = m.appendFlags(b, "")
	for i := range m.Elems {
		if len(m.Elems) > 1 {
			b = append(b, " ["...)
			b = strconv.AppendInt(b, int64(i), 10)
			b = append(b, ']')
		}
		b = appendPolicyElem(b, &m.Elems[i], "", numeric)
	}
	return b
}

// match: no packet has an IPsec policy in packetwalk.
func (m *PolicyMatch) match(*evalCtx) bool { return m.None }
