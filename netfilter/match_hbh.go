package netfilter

import (
	"strconv"
	"strings"
)

// OptsMatch is ip6tables "-m hbh [!] --hbh-len N [--hbh-opts
// TYPE[:LEN],...]" (the hop-by-hop header) or "-m dst [!] --dst-len N
// [--dst-opts TYPE[:LEN],...]" (the first destination options header).
// A packet without the header never matches. As the kernel's ip6t_hbh
// tests them, the length is the header's length in bytes
// ((field+1)*8), and the options are compared in order with the first
// options of the header: each listed type must be the type of the
// option at that place, and its length, when given, that option's
// length (a Pad1 option has none).
//
// Every field is exported: OptsMatch{Len: 8, HasLen: true} is "-m hbh
// --hbh-len 8", and with Dst set "-m dst --dst-len 8".
type OptsMatch struct {
	Len            uint32
	HasLen, InvLen bool
	// Opts are the listed options: the type in the high byte and the
	// length, or 0xff for any, in the low byte, as the kernel stores them.
	Opts []uint16
	// Dst makes it the dst match (the first destination options header);
	// false is the hbh match (the hop-by-hop header).
	Dst bool
}

// maxIPv6Opts is IP6T_OPTS_OPTSNR, the most options a rule may list.
const maxIPv6Opts = 16

func init() {
	for _, name := range []string{"hbh", "dst"} {
		dst := name == "dst"
		registerMatch(&module{name: name,
			opts: []option{
				{name: name + "-len", args: 1, invert: true},
				{name: name + "-opts", args: 1},
			},
			families:   []Family{IPv6},
			newBuilder: func(*ruleCtx) builder { return &OptsMatch{Dst: dst} }})
	}
}

func (m *OptsMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	mod := m.Module()
	if strings.HasSuffix(opt, "-len") {
		n, ok := parseCUint(args[0], 0xffffffff)
		if !ok {
			return badValue(mod, "--"+opt, args[0], "a length 0-4294967295")
		}
		m.Len, m.HasLen, m.InvLen = uint32(n), true, inv
		return nil
	}
	m.Opts = m.Opts[:0]
	for _, item := range strings.Split(args[0], ",") {
		if len(m.Opts) == maxIPv6Opts {
			return badValue(mod, "--"+opt, args[0], "at most 16 options")
		}
		t, l, hasLen := strings.Cut(item, ":")
		// ip6tables refuses a length on the last of the 16 places, and on
		// type 0 (Pad1, which has none; "256" is type 0 too) before it
		// reads the length (docs/kernel-notes.md).
		if hasLen && len(m.Opts) == maxIPv6Opts-1 {
			return badValue(mod, "--"+opt, args[0], "at most 15 options when the last has a length")
		}
		typ, ok := strtoul(t)
		if ok && hasLen && uint8(typ) == 0 {
			return badValue(mod, "--"+opt, item, "no length for type 0 (Pad1)")
		}
		ln := uint64(0xff)
		if ok && hasLen {
			ln, ok = strtoul(l)
		}
		if !ok {
			return badValue(mod, "--"+opt, item, "TYPE[:LEN] with numbers")
		}
		// Only the low byte of each number is kept, as iptables keeps it:
		// "256" is type 0, "1:-1" length 255 (any).
		m.Opts = append(m.Opts, uint16(uint8(typ))<<8|uint16(uint8(ln)))
	}
	return nil
}

func (m *OptsMatch) done(*ruleCtx) (any, error) { return m, nil }

// Module implements Match.
func (m *OptsMatch) Module() string {
	if m.Dst {
		return "dst"
	}
	return "hbh"
}

func (m *OptsMatch) appendOpts(b []byte) []byte {
	for i, o := range m.Opts {
		if i > 0 {
			b = append(b, ',')
		}
		b = strconv.AppendUint(b, uint64(o>>8), 10)
		if o&0xff != 0xff {
			b = append(b, ':')
			b = strconv.AppendUint(b, uint64(o&0xff), 10)
		}
	}
	return b
}

func (m *OptsMatch) appendSave(b []byte) []byte {
	mod := m.Module()
	if m.HasLen {
		b = appendNot(b, m.InvLen)
		b = append(b, " --"...)
		b = append(b, mod...)
		b = append(b, "-len "...)
		b = strconv.AppendUint(b, uint64(m.Len), 10)
	}
	if len(m.Opts) > 0 {
		b = append(b, " --"...)
		b = append(b, mod...)
		b = append(b, "-opts "...)
		b = m.appendOpts(b)
	}
	return b
}

func (m *OptsMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, ' ')
	b = append(b, m.Module()...)
	if m.HasLen {
		b = append(b, " length:"...)
		if m.InvLen {
			b = append(b, '!')
		}
		b = strconv.AppendUint(b, uint64(m.Len), 10)
	}
	if len(m.Opts) > 0 {
		b = append(b, " opts "...)
		b = m.appendOpts(b)
	}
	return b
}

func (m *OptsMatch) match(c *evalCtx) bool {
	p := c.pkt
	bit, lenField, opts := ExtHopByHop, p.HBHLen, p.HBHOpts[:min(int(p.NumHBHOpts), len(p.HBHOpts))]
	if m.Dst {
		bit, lenField, opts = ExtDstOpts, p.DstLen, p.DstOpts[:min(int(p.NumDstOpts), len(p.DstOpts))]
	}
	if p.IPv6Exts&bit == 0 {
		return false
	}
	if m.HasLen && ((uint32(lenField)+1)*8 == m.Len) == m.InvLen {
		return false
	}
	if len(m.Opts) > len(opts) {
		return false
	}
	for i, want := range m.Opts {
		o := opts[i]
		if o.Type != uint8(want>>8) {
			return false
		}
		if o.Type != 0 && want&0xff != 0xff && o.Len != uint8(want) {
			return false
		}
	}
	return true
}
