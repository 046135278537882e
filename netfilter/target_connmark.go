package netfilter

import (
	"fmt"
	"strconv"
)

// ConnmarkMode is the operation of a CONNMARK target.
type ConnmarkMode uint8

// CONNMARK operations.
const (
	// ConnmarkSet sets ctmark = (ctmark &^ CTMask) ^ CTMark.
	ConnmarkSet ConnmarkMode = iota
	// ConnmarkSave copies the packet mark into the connection mark:
	// ctmark = (ctmark &^ CTMask) ^ (mark & NFMask).
	ConnmarkSave
	// ConnmarkRestore copies the connection mark into the packet mark:
	// mark = (mark &^ NFMask) ^ (ctmark & CTMask).
	ConnmarkRestore
)

// ConnmarkTarget is "-j CONNMARK" (revision 2): it sets, saves or restores
// the connection mark and continues with the next rule. Packets without a
// connection are left alone.
type ConnmarkTarget struct {
	Mode           ConnmarkMode
	CTMark, CTMask uint32
	NFMask         uint32
	// ShiftRight and ShiftBits shift the copied (or, for ConnmarkSet, the
	// new) mark by ShiftBits bits, right when ShiftRight is set and left
	// otherwise (--left-shift-mark, --right-shift-mark).
	ShiftRight bool
	ShiftBits  uint8
}

func init() {
	registerTarget(&module{name: "CONNMARK", opts: append(xmarkOptions(),
		option{name: "save-mark"}, option{name: "restore-mark"},
		option{name: "mask", args: 1}, option{name: "nfmask", args: 1}, option{name: "ctmask", args: 1},
		option{name: "left-shift-mark", args: 1}, option{name: "right-shift-mark", args: 1}),
		newBuilder: func(*ruleCtx) builder {
			return &connmarkTargetBuilder{t: ConnmarkTarget{CTMask: 0xffffffff, NFMask: 0xffffffff}}
		}})
}

type connmarkTargetBuilder struct {
	t    ConnmarkTarget
	op   string // the operation option given
	mask string // the mask option given (mask, nfmask or ctmask)
}

func (b *connmarkTargetBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	excl := func(prev *string) error {
		if *prev != "" {
			return fmt.Errorf("%w: CONNMARK: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, *prev, opt)
		}
		*prev = opt
		return nil
	}
	// Options apply in command-line order, as libxt_CONNMARK does: a later
	// --mask overrides the mask an operation set.
	switch opt {
	case "save-mark", "restore-mark":
		if err := excl(&b.op); err != nil {
			return err
		}
		b.t.Mode = ConnmarkSave
		if opt == "restore-mark" {
			b.t.Mode = ConnmarkRestore
		}
	case "mask", "nfmask", "ctmask":
		if opt == "mask" || b.mask == "mask" {
			if err := excl(&b.mask); err != nil {
				return err
			}
		} else {
			b.mask = opt
		}
		n, ok := parseCUint(args[0], 0xffffffff)
		if !ok {
			return badValue("CONNMARK", "--"+opt, args[0], "a 32-bit number (0-4294967295)")
		}
		switch opt {
		case "mask":
			b.t.NFMask, b.t.CTMask = uint32(n), uint32(n)
		case "nfmask":
			b.t.NFMask = uint32(n)
		default:
			b.t.CTMask = uint32(n)
		}
	case "left-shift-mark", "right-shift-mark":
		n, err := strconv.ParseUint(args[0], 10, 8)
		if err != nil || n > 32 {
			return badValue("CONNMARK", "--"+opt, args[0], "a number of bits 0-32")
		}
		if n == 32 {
			// libxt_CONNMARK takes 0-32, the kernel's checkentry only 0-31.
			return badValue("CONNMARK", "--"+opt, args[0], "a number of bits 0-31 (the kernel refuses 32)")
		}
		b.t.ShiftRight, b.t.ShiftBits = opt == "right-shift-mark", uint8(n)
	default: // set-xmark, set-mark, and-mark, or-mark, xor-mark
		if err := excl(&b.op); err != nil {
			return err
		}
		v, m, err := parseXMark("CONNMARK", opt, args[0])
		if err != nil {
			return err
		}
		b.t.Mode, b.t.CTMark, b.t.CTMask = ConnmarkSet, v, m
	}
	return nil
}

func (b *connmarkTargetBuilder) done(*ruleCtx) (any, error) {
	if b.op == "" {
		return nil, fmt.Errorf("%w: CONNMARK target: no operation specified", ErrMissingArgument)
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *ConnmarkTarget) Name() string { return "CONNMARK" }

func (t *ConnmarkTarget) appendSave(b []byte) []byte {
	switch t.Mode {
	case ConnmarkSet:
		b = append(b, " --set-xmark "...)
		b = appendHexPair(b, t.CTMark, t.CTMask)
	default:
		if t.Mode == ConnmarkSave {
			b = append(b, " --save-mark --nfmask "...)
		} else {
			b = append(b, " --restore-mark --nfmask "...)
		}
		b = appendHex(b, t.NFMask)
		b = append(b, " --ctmask "...)
		b = appendHex(b, t.CTMask)
	}
	return t.appendShift(b, " --")
}

func (t *ConnmarkTarget) appendShift(b []byte, prefix string) []byte {
	if t.ShiftBits == 0 {
		return b
	}
	b = append(b, prefix...)
	if t.ShiftRight {
		b = append(b, "right-shift-mark "...)
	} else {
		b = append(b, "left-shift-mark "...)
	}
	return strconv.AppendUint(b, uint64(t.ShiftBits), 10)
}

func (t *ConnmarkTarget) appendList(b []byte, _ bool) []byte {
	const all = 0xffffffff
	switch t.Mode {
	case ConnmarkSet:
		b = appendXMarkList(b, " CONNMARK", t.CTMark, t.CTMask)
	case ConnmarkSave:
		b = append(b, " CONNMARK save"...)
		switch {
		case t.NFMask == all && t.CTMask == all:
		case t.NFMask == t.CTMask:
			b = append(b, " mask "...)
			b = appendHex(b, t.NFMask)
		default:
			b = append(b, " nfmask "...)
			b = appendHex(b, t.NFMask)
			b = append(b, " ctmask ~"...)
			b = appendHex(b, t.CTMask)
		}
	case ConnmarkRestore:
		b = append(b, " CONNMARK restore"...)
		switch {
		case t.NFMask == all && t.CTMask == all:
		case t.NFMask == t.CTMask:
			b = append(b, " mask "...)
			b = appendHex(b, t.CTMask)
		default:
			b = append(b, " ctmask "...)
			b = appendHex(b, t.CTMask)
			b = append(b, " nfmask ~"...)
			b = appendHex(b, t.NFMask)
		}
	}
	return t.appendShift(b, " ")
}

func (t *ConnmarkTarget) shift(v uint32) uint32 {
	if t.ShiftRight {
		return v >> t.ShiftBits
	}
	return v << t.ShiftBits
}

func (t *ConnmarkTarget) apply(c *evalCtx) verdict {
	c.conn()
	if !c.ct.tracked {
		return vContinue
	}
	switch t.Mode {
	case ConnmarkSet:
		if v := t.shift((c.ct.mark &^ t.CTMask) ^ t.CTMark); v != c.ct.mark {
			c.setCTMark(v)
		}
	case ConnmarkSave:
		if v := (c.ct.mark &^ t.CTMask) ^ t.shift(c.pkt.Mark&t.NFMask); v != c.ct.mark {
			c.setCTMark(v)
		}
	case ConnmarkRestore:
		c.pkt.Mark = (c.pkt.Mark &^ t.NFMask) ^ t.shift(c.ct.mark&t.CTMask)
	}
	return vContinue
}
