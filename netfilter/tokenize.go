package netfilter

import (
	"fmt"
	"strings"
)

// splitArgs splits one iptables-restore line into arguments the way
// iptables-restore does: blanks separate arguments; a double quote opens a
// quoted part in which a backslash escapes the next character; the closing
// quote ends the argument. Single quotes and backslashes outside double
// quotes are ordinary characters.
func splitArgs(line string) ([]string, error) {
	var args []string
	var cur strings.Builder
	inArg, quoted, escaped := false, false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		if quoted {
			switch {
			case escaped:
				cur.WriteByte(ch)
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				quoted = false
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			default:
				cur.WriteByte(ch)
			}
			continue
		}
		switch ch {
		case '"':
			quoted, inArg = true, true
		case ' ', '\t', '\n', '\r':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteByte(ch)
			inArg = true
		}
	}
	if quoted {
		return nil, fmt.Errorf("%w: unterminated quoted string", ErrSyntax)
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, nil
}

// appendQuoted appends s the way iptables-save writes a string option
// (xtables_save_string): bare when it is made only of letters, digits,
// '-' and '_', otherwise in double quotes with '"', '\\' and '\” escaped.
func appendQuoted(b []byte, s string) []byte {
	plain := s != ""
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			plain = false
			break
		}
	}
	if plain {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '\'':
			b = append(b, '\\', c)
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
