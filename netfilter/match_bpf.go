package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// BPFInsn is one classic BPF instruction (struct sock_filter).
type BPFInsn struct {
	Code   uint16
	Jt, Jf uint8
	K      uint32
}

// BPFMatch is "-m bpf --bytecode 'N,CODE JT JF K,...'": a classic BPF
// program run over the packet's bytes from the IP header on (Packet.Raw or
// the headers built from the fields), matching when it returns non-zero
// (xt_bpf, mode BYTECODE). Pinned eBPF programs (--object-pinned) are
// refused by name.
type BPFMatch struct {
	Program []BPFInsn
}

const bpfMaxInsns = 64 // XT_BPF_MAX_NUM_INSTR

func init() {
	registerMatch(&module{name: "bpf",
		opts:       []option{{name: "bytecode", args: 1}, {name: "object-pinned", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &bpfBuilder{} }})
}

type bpfBuilder struct {
	m     BPFMatch
	given bool
}

func (b *bpfBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	if opt == "object-pinned" {
		return fmt.Errorf("%w: bpf --object-pinned (a pinned eBPF program is outside the model)", ErrNotModelled)
	}
	if b.given {
		return fmt.Errorf("%w: bpf: --bytecode given twice", ErrMultipleFlags)
	}
	s := args[0]
	bad := func(why string) error {
		return badValue("bpf", "--bytecode", s, "\"N,CODE JT JF K,...\" as nfbpf_compile prints it ("+why+")")
	}
	parts := strings.Split(s, ",")
	if len(parts) > 1 && strings.TrimSpace(parts[len(parts)-1]) == "" {
		parts = parts[:len(parts)-1] // iptables ignores a trailing comma
	}
	n, err := strconv.Atoi(strings.TrimSpace(parts[0]))
	if err != nil || n < 1 || n > bpfMaxInsns {
		return bad("a count of 1 to 64 instructions first")
	}
	if len(parts)-1 != n {
		return bad(fmt.Sprintf("%d instructions announced, %d given", n, len(parts)-1))
	}
	for _, p := range parts[1:] {
		f := strings.Fields(p)
		if len(f) != 4 {
			return bad("each instruction is CODE JT JF K")
		}
		var v [4]uint64
		lims := []int{16, 8, 8, 32}
		for i, x := range f {
			if v[i], err = strconv.ParseUint(x, 10, lims[i]); err != nil {
				return bad("decimal CODE JT JF K")
			}
		}
		b.m.Program = append(b.m.Program, BPFInsn{uint16(v[0]), uint8(v[1]), uint8(v[2]), uint32(v[3])})
	}
	if err := bpfCheck(b.m.Program); err != nil {
		return fmt.Errorf("%w: bpf: %v (the kernel refuses the program)", ErrBadValue, err)
	}
	b.given = true
	return nil
}

func (b *bpfBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, fmt.Errorf("%w: bpf: you must specify \"--bytecode\"", ErrMissingArgument)
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *BPFMatch) Module() string { return "bpf" }

func (m *BPFMatch) appendProgram(b []byte, sep byte) []byte {
	for i, in := range m.Program {
		if i > 0 {
			b = append(b, sep)
		}
		b = strconv.AppendUint(b, uint64(in.Code), 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(in.Jt), 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(in.Jf), 10)
		b = append(b, ' ')
		b = strconv.AppendUint(b, uint64(in.K), 10)
	}
	return b
}

func (m *BPFMatch) appendSave(b []byte) []byte {
	b = append(b, " --bytecode \""...)
	b = strconv.AppendInt(b, int64(len(m.Program)), 10)
	b = append(b, ',')
	b = m.appendProgram(b, ',')
	return append(b, '"')
}

// appendList prints as libxt_bpf 1.8.9 does: no space before "match",
// and a NUL byte after the program (its separator after the last
// instruction).
func (m *BPFMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, "match bpf "...)
	b = m.appendProgram(b, ',')
	return append(b, 0)
}

// Classic BPF opcodes (linux/filter.h).
const (
	bpfLD, bpfLDX, bpfST, bpfSTX, bpfALU, bpfJMP, bpfRET, bpfMISC = 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07
	bpfW, bpfH, bpfB                                              = 0x00, 0x08, 0x10
	bpfIMM, bpfABS, bpfIND, bpfMEM, bpfLEN, bpfMSH                = 0x00, 0x20, 0x40, 0x60, 0x80, 0xa0
	bpfK, bpfX                                                    = 0x00, 0x08
	bpfA                                                          = 0x10
)

// bpfCheck applies the kernel's bpf_check_classic to the program: every
// jump inside it, memory slots 0..15, a return at the end, known opcodes.
func bpfCheck(prog []BPFInsn) error {
	n := len(prog)
	for i, in := range prog {
		cls := in.Code & 7
		switch cls {
		case bpfJMP:
			op := in.Code & 0xf0
			if op == 0x00 { // JA
				if uint64(i)+1+uint64(in.K) >= uint64(n) {
					return fmt.Errorf("instruction %d jumps out of the program", i)
				}
				continue
			}
			if op != 0x10 && op != 0x20 && op != 0x30 && op != 0x40 {
				return fmt.Errorf("instruction %d: unknown jump 0x%x", i, in.Code)
			}
			if i+1+int(in.Jt) >= n || i+1+int(in.Jf) >= n {
				return fmt.Errorf("instruction %d jumps out of the program", i)
			}
		case bpfST, bpfSTX:
			if in.K >= 16 {
				return fmt.Errorf("instruction %d: memory slot %d", i, in.K)
			}
		case bpfLD, bpfLDX:
			if in.Code&0xe0 == bpfMEM && in.K >= 16 {
				return fmt.Errorf("instruction %d: memory slot %d", i, in.K)
			}
			if cls == bpfLD && in.Code&0xe0 == bpfMSH || cls == bpfLDX && in.Code != 0x01 && in.Code != 0x61 && in.Code != 0x81 && in.Code != 0xb1 {
				return fmt.Errorf("instruction %d: unknown load 0x%x", i, in.Code)
			}
		case bpfALU:
			if op := in.Code & 0xf0; op > 0xa0 {
				return fmt.Errorf("instruction %d: unknown ALU op 0x%x", i, in.Code)
			} else if (op == 0x30 || op == 0x90) && in.Code&bpfX == 0 && in.K == 0 {
				return fmt.Errorf("instruction %d divides by zero", i)
			}
		}
	}
	if n == 0 || prog[n-1].Code&7 != bpfRET {
		return fmt.Errorf("the program does not end with a return")
	}
	return nil
}

// match runs the classic BPF program as the kernel's interpreter does for
// a socket filter over the packet's bytes: a load out of the packet
// returns 0 (no match).
func (m *BPFMatch) match(c *evalCtx) bool {
	return bpfRun(m.Program, c.packetBytes()) != 0
}

func bpfLoad(data string, off uint32, size int) (uint32, bool) {
	if uint64(off)+uint64(size) > uint64(len(data)) {
		return 0, false
	}
	switch size {
	case 4:
		return be32(data, off), true
	case 2:
		return uint32(data[off])<<8 | uint32(data[off+1]), true
	}
	return uint32(data[off]), true
}

func bpfRun(prog []BPFInsn, data string) uint32 {
	var a, x uint32
	var mem [16]uint32
	size := func(code uint16) int {
		switch code & 0x18 {
		case bpfH:
			return 2
		case bpfB:
			return 1
		}
		return 4
	}
	for pc := 0; pc < len(prog); pc++ {
		in := prog[pc]
		switch in.Code & 7 {
		case bpfLD:
			switch in.Code & 0xe0 {
			case bpfIMM:
				a = in.K
			case bpfABS, bpfIND:
				off := in.K
				if in.Code&0xe0 == bpfIND {
					off += x
				}
				v, ok := bpfLoad(data, off, size(in.Code))
				if !ok {
					return 0
				}
				a = v
			case bpfMEM:
				a = mem[in.K&15]
			case bpfLEN:
				a = uint32(len(data))
			}
		case bpfLDX:
			switch in.Code & 0xe0 {
			case bpfIMM:
				x = in.K
			case bpfMEM:
				x = mem[in.K&15]
			case bpfLEN:
				x = uint32(len(data))
			case bpfMSH:
				v, ok := bpfLoad(data, in.K, 1)
				if !ok {
					return 0
				}
				x = (v & 0xf) << 2
			}
		case bpfST:
			mem[in.K&15] = a
		case bpfSTX:
			mem[in.K&15] = x
		case bpfALU:
			v := in.K
			if in.Code&bpfX != 0 {
				v = x
			}
			switch in.Code & 0xf0 {
			case 0x00:
				a += v
			case 0x10:
				a -= v
			case 0x20:
				a *= v
			case 0x30:
				if v == 0 {
					return 0
				}
				a /= v
			case 0x40:
				a |= v
			case 0x50:
				a &= v
			case 0x60:
				a <<= v & 31
			case 0x70:
				a >>= v & 31
			case 0x80:
				a = -a
			case 0x90:
				if v == 0 {
					return 0
				}
				a %= v
			case 0xa0:
				a ^= v
			}
		case bpfJMP:
			v := in.K
			if in.Code&bpfX != 0 {
				v = x
			}
			var cond bool
			switch in.Code & 0xf0 {
			case 0x00:
				pc += int(in.K)
				continue
			case 0x10:
				cond = a == v
			case 0x20:
				cond = a > v
			case 0x30:
				cond = a >= v
			case 0x40:
				cond = a&v != 0
			}
			if cond {
				pc += int(in.Jt)
			} else {
				pc += int(in.Jf)
			}
		case bpfRET:
			if in.Code&0x18 == bpfA {
				return a
			}
			return in.K
		case bpfMISC:
			if in.Code&0xf8 == 0 { // TAX
				x = a
			} else { // TXA
				a = x
			}
		}
	}
	return 0
}
