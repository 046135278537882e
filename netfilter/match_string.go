package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// StringMatch is "-m string": the pattern must occur in the packet's
// bytes, counted from the IP header, starting at or after From and
// ending at or before To (xt_string with skb_find_text). Algo is the
// kernel's text search ("bm" or "kmp"; both find the same occurrences
// in a linear packet). The bytes are Packet.Raw, or the headers built
// from the packet's fields (see Packet.Raw).
type StringMatch struct {
	Pattern  string
	Algo     string
	From, To uint16
	ICase    bool
	Invert   bool
}

const stringMaxPattern = 128 // XT_STRING_MAX_PATTERN_SIZE

func init() {
	registerMatch(&module{name: "string",
		opts: []option{
			{name: "from", args: 1}, {name: "to", args: 1}, {name: "algo", args: 1},
			{name: "string", args: 1, invert: true}, {name: "hex-string", args: 1, invert: true},
			{name: "icase"},
		},
		newBuilder: func(*ruleCtx) builder { return &stringBuilder{m: StringMatch{To: 0xffff}} }})
}

type stringBuilder struct {
	m          StringMatch
	patternSet string
}

// parseHexString reads --hex-string's mix of text and |hex| blocks.
func parseHexString(s string) (string, error) {
	var out []byte
	inHex := false
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == '|':
			inHex = !inHex
		case ch == '\\' && i+1 < len(s) && !inHex:
			i++
			out = append(out, s[i])
		case inHex && ch == ' ':
		case inHex:
			if i+1 >= len(s) {
				return "", fmt.Errorf("odd number of hex digits")
			}
			v, err := strconv.ParseUint(s[i:i+2], 16, 8)
			if err != nil {
				return "", fmt.Errorf("invalid hex char %q", s[i:i+2])
			}
			out = append(out, byte(v))
			i++
		default:
			out = append(out, ch)
		}
	}
	if inHex {
		return "", fmt.Errorf("unterminated |hex| block")
	}
	return string(out), nil
}

func (b *stringBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	s := ""
	if len(args) > 0 {
		s = args[0]
	}
	switch opt {
	case "from", "to":
		n, ok := parseCUint(s, 0xffff)
		if !ok {
			return badValue("string", "--"+opt, s, "an offset 0-65535")
		}
		if opt == "from" {
			b.m.From = uint16(n)
		} else {
			b.m.To = uint16(n)
		}
	case "algo":
		if len(s) > 15 {
			return badValue("string", "--algo", s, "an algorithm name (bm or kmp)")
		}
		b.m.Algo = s
	case "string", "hex-string":
		if b.patternSet != "" {
			return fmt.Errorf("%w: string: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, opt, b.patternSet)
		}
		pat := s
		if opt == "hex-string" {
			var err error
			if pat, err = parseHexString(s); err != nil {
				return badValue("string", "--hex-string", s, "text with |hex| blocks ("+err.Error()+")")
			}
		}
		if len(pat) > stringMaxPattern {
			return badValue("string", "--"+opt, s, "a pattern of at most 128 bytes")
		}
		b.patternSet, b.m.Pattern, b.m.Invert = opt, pat, inv
	case "icase":
		b.m.ICase = true
	}
	return nil
}

func (b *stringBuilder) done(*ruleCtx) (any, error) {
	m := b.m
	switch {
	case b.patternSet == "":
		return nil, fmt.Errorf("%w: string: you must specify \"--string\" or \"--hex-string\"", ErrMissingArgument)
	case m.Algo == "":
		return nil, mustSpecify("string", "--algo")
	case m.Algo != "bm" && m.Algo != "kmp":
		// The kernel has no such text search (RULE_APPEND: No such file
		// or directory); "fsm" exists but takes no plain pattern.
		return nil, badValue("string", "--algo", m.Algo, "bm or kmp")
	case m.Pattern == "" || m.From > m.To:
		return nil, fmt.Errorf("%w: string: empty pattern or --from after --to (the kernel refuses the rule)", ErrBadValue)
	}
	return &m, nil
}

// Module implements Match.
func (m *StringMatch) Module() string { return "string" }

// printable reports whether iptables shows the pattern as --string.
func (m *StringMatch) printable() bool {
	for i := 0; i < len(m.Pattern); i++ {
		if c := m.Pattern[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	return true
}

func (m *StringMatch) appendPattern(b []byte) []byte {
	b = append(b, '"')
	if m.printable() {
		for i := 0; i < len(m.Pattern); i++ {
			if c := m.Pattern[i]; c == '"' || c == '\\' {
				b = append(b, '\\')
			}
			b = append(b, m.Pattern[i])
		}
		return append(b, '"')
	}
	b = append(b, '|')
	for i := 0; i < len(m.Pattern); i++ {
		b = append(b, "0123456789abcdef"[m.Pattern[i]>>4], "0123456789abcdef"[m.Pattern[i]&15])
	}
	return append(b, '|', '"')
}

func (m *StringMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	if m.printable() {
		b = append(b, " --string "...)
	} else {
		b = append(b, " --hex-string "...)
	}
	b = m.appendPattern(b)
	b = append(b, " --algo "...)
	b = append(b, m.Algo...)
	if m.From != 0 {
		b = append(b, " --from "...)
		b = strconv.AppendUint(b, uint64(m.From), 10)
	}
	if m.To != 0xffff {
		b = append(b, " --to "...)
		b = strconv.AppendUint(b, uint64(m.To), 10)
	}
	if m.ICase {
		b = append(b, " --icase"...)
	}
	return b
}

func (m *StringMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " STRING match "...)
	if m.Invert {
		b = append(b, '!')
	}
	b = append(b, ' ')
	b = m.appendPattern(b)
	b = append(b, " ALGO name "...)
	b = append(b, m.Algo...)
	if m.From != 0 {
		b = append(b, " FROM "...)
		b = strconv.AppendUint(b, uint64(m.From), 10)
	}
	if m.To != 0xffff {
		b = append(b, " TO "...)
		b = strconv.AppendUint(b, uint64(m.To), 10)
	}
	if m.ICase {
		b = append(b, " ICASE"...)
	}
	return b
}

func (m *StringMatch) match(c *evalCtx) bool {
	data := c.packetBytes()
	to := int(m.To)
	if to > len(data) {
		to = len(data)
	}
	from := int(m.From)
	found := false
	if from < to {
		win := data[from:to]
		if m.ICase {
			found = indexFold(win, m.Pattern) >= 0
		} else {
			found = strings.Contains(win, m.Pattern)
		}
	}
	return found != m.Invert
}

// indexFold is strings.Index ignoring ASCII case, as the kernel's
// TS_IGNORECASE does; it does not allocate.
func indexFold(s, pat string) int {
	n := len(pat)
	for i := 0; i+n <= len(s); i++ {
		j := 0
		for ; j < n; j++ {
			a, b := s[i+j], pat[j]
			if 'a' <= a && a <= 'z' {
				a -= 'a' - 'A'
			}
			if 'a' <= b && b <= 'z' {
				b -= 'a' - 'A'
			}
			if a != b {
				break
			}
		}
		if j == n {
			return i
		}
	}
	return -1
}
