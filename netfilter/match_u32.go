package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// U32Op is an operator of a u32 location.
type U32Op uint8

// u32 location operators.
const (
	U32And U32Op = iota
	U32ShiftLeft
	U32ShiftRight
	U32At
)

var u32OpText = []string{"&", "<<", ">>", "@"}

// U32Step is one "OP NUMBER" of a location; the first step of a test is
// the starting offset and its Op is ignored.
type U32Step struct {
	Op  U32Op
	Num uint32
}

// U32Range is one accepted value range MIN:MAX.
type U32Range struct{ Min, Max uint32 }

// U32Test is "LOCATION=RANGES".
type U32Test struct {
	Location []U32Step
	Values   []U32Range
}

// U32Match is "-m u32 [!] --u32 TESTS": every test, read from the packet's
// bytes starting at the IP header (Packet.Raw, or the headers built from
// the fields), must yield a value in one of its ranges (xt_u32). A read
// past the end of the packet fails the test.
type U32Match struct {
	Tests  []U32Test
	Invert bool
}

// u32MaxSize is how many tests, location steps and value ranges
// iptables 1.8.9 accepts at most.
const u32MaxSize = 10

func init() {
	registerMatch(&module{name: "u32",
		opts:       []option{{name: "u32", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &u32Builder{} }})
}

type u32Builder struct {
	m     U32Match
	given bool
}

// u32Lexer walks the --u32 text, skipping blanks.
type u32Lexer struct {
	s string
	i int
}

func (l *u32Lexer) skip() {
	for l.i < len(l.s) && strings.IndexByte(" \t\n\v\f\r", l.s[l.i]) >= 0 { // C's isspace
		l.i++
	}
}

func (l *u32Lexer) number() (uint32, error) {
	l.skip()
	j := l.i
	for j < len(l.s) && (l.s[j] >= '0' && l.s[j] <= '9' || l.s[j] >= 'a' && l.s[j] <= 'f' || l.s[j] >= 'A' && l.s[j] <= 'F' || l.s[j] == 'x' || l.s[j] == 'X') {
		j++
	}
	tok := l.s[l.i:j]
	n, ok := parseCUint(tok, 0xffffffff)
	if !ok {
		return 0, fmt.Errorf("at char %d: expected a number", l.i+1)
	}
	l.i = j
	return uint32(n), nil
}

func parseU32(s string) ([]U32Test, error) {
	l := &u32Lexer{s: s}
	var tests []U32Test
	for {
		if len(tests) >= u32MaxSize {
			return nil, fmt.Errorf("at char %d: too many \"&&\"s", l.i)
		}
		var t U32Test
		n, err := l.number()
		if err != nil {
			return nil, err
		}
		t.Location = append(t.Location, U32Step{Num: n})
		for {
			l.skip()
			if l.i >= len(l.s) {
				return nil, fmt.Errorf("abrupt end of input after location specifier")
			}
			if l.s[l.i] == '=' {
				l.i++
				break
			}
			var op U32Op
			switch {
			case strings.HasPrefix(l.s[l.i:], "<<"):
				op, l.i = U32ShiftLeft, l.i+2
			case strings.HasPrefix(l.s[l.i:], ">>"):
				op, l.i = U32ShiftRight, l.i+2
			case l.s[l.i] == '&':
				op, l.i = U32And, l.i+1
			case l.s[l.i] == '@':
				op, l.i = U32At, l.i+1
			default:
				return nil, fmt.Errorf("at char %d: operator expected (&, <<, >>, @ or =)", l.i+1)
			}
			if len(t.Location) >= u32MaxSize {
				return nil, fmt.Errorf("at char %d: too many operators", l.i)
			}
			n, err := l.number()
			if err != nil {
				return nil, err
			}
			t.Location = append(t.Location, U32Step{Op: op, Num: n})
		}
		for {
			if len(t.Values) >= u32MaxSize {
				return nil, fmt.Errorf("at char %d: too many \",\"s", l.i)
			}
			lo, err := l.number()
			if err != nil {
				return nil, err
			}
			hi := lo
			l.skip()
			if l.i < len(l.s) && l.s[l.i] == ':' {
				l.i++
				if hi, err = l.number(); err != nil {
					return nil, err
				}
			}
			t.Values = append(t.Values, U32Range{lo, hi})
			l.skip()
			if l.i < len(l.s) && l.s[l.i] == ',' {
				l.i++
				continue
			}
			break
		}
		tests = append(tests, t)
		l.skip()
		if l.i >= len(l.s) {
			return tests, nil
		}
		if !strings.HasPrefix(l.s[l.i:], "&&") {
			return nil, fmt.Errorf("at char %d: \"&&\" or end of input expected", l.i+1)
		}
		l.i += 2
	}
}

func (b *u32Builder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	tests, err := parseU32(args[0])
	if err != nil {
		return badValue("u32", "--u32", args[0], "tests LOCATION=VALUES joined by && ("+err.Error()+")")
	}
	b.m, b.given = U32Match{Tests: tests, Invert: inv}, true
	return nil
}

func (b *u32Builder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("u32", "--u32")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *U32Match) Module() string { return "u32" }

func appendHex32(b []byte, v uint32) []byte {
	b = append(b, "0x"...)
	return strconv.AppendUint(b, uint64(v), 16)
}

func (m *U32Match) appendTests(b []byte) []byte {
	b = append(b, '"')
	for i, t := range m.Tests {
		if i > 0 {
			b = append(b, "&&"...)
		}
		for k, s := range t.Location {
			if k > 0 {
				b = append(b, u32OpText[s.Op]...)
			}
			b = appendHex32(b, s.Num)
		}
		b = append(b, '=')
		for k, v := range t.Values {
			if k > 0 {
				b = append(b, ',')
			}
			b = appendHex32(b, v.Min)
			if v.Max != v.Min {
				b = append(b, ':')
				b = appendHex32(b, v.Max)
			}
		}
	}
	return append(b, '"')
}

func (m *U32Match) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --u32 "...)
	return m.appendTests(b)
}

func (m *U32Match) appendList(b []byte, _ bool) []byte {
	b = append(b, " u32 "...)
	if m.Invert {
		b = append(b, "! "...)
	}
	return m.appendTests(b)
}

func be32(s string, at uint32) uint32 {
	return uint32(s[at])<<24 | uint32(s[at+1])<<16 | uint32(s[at+2])<<8 | uint32(s[at+3])
}

// match follows xt_u32's u32_match_it.
func (m *U32Match) match(c *evalCtx) bool {
	return m.eval(c.packetBytes()) != m.Invert
}

func (m *U32Match) eval(data string) bool {
	n := uint32(len(data))
	for _, t := range m.Tests {
		pos := t.Location[0].Num
		if n < 4 || pos > n-4 {
			return false
		}
		val := be32(data, pos)
		at := uint32(0)
		for _, s := range t.Location[1:] {
			switch s.Op {
			case U32And:
				val &= s.Num
			case U32ShiftLeft:
				val <<= s.Num & 31 // the shift count as x86 takes it
			case U32ShiftRight:
				val >>= s.Num & 31
			case U32At:
				if at+val < at {
					return false
				}
				at += val
				pos = s.Num
				if at+4 < at || n < at+4 || pos > n-at-4 {
					return false
				}
				val = be32(data, at+pos)
			}
		}
		ok := false
		for _, v := range t.Values {
			if v.Min <= val && val <= v.Max {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}
