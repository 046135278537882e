package netfilter

import "fmt"

// splitArgs splits one iptables-restore line into arguments the way
// iptables-restore does: spaces, tabs and newlines (not carriage returns)
// separate arguments; a double quote opens a
// quoted part in which a backslash escapes the next character; the closing
// quote ends the argument. Single quotes and backslashes outside double
// quotes are ordinary characters.
func splitArgs(line string) ([]string, error) {
	return appendArgs(nil, line)
}

// errUnterminated is returned for a line whose double quote never closes.
var errUnterminated = fmt.Errorf("%w: unterminated quoted string", ErrSyntax)

// appendArgs is splitArgs appending to args. Arguments are substrings of
// line wherever no escape has to be removed, so a rule line costs no
// allocation per argument (restoring 100k-rule dumps is parse-bound).
func appendArgs(args []string, line string) ([]string, error) {
	var esc []byte // an argument with escapes, being built
	start := -1    // start of the current unquoted argument, or -1
	for i := 0; i < len(line); i++ {
		switch ch := line[i]; ch {
		case ' ', '\t', '\n':
			if start >= 0 {
				args = append(args, line[start:i])
				start = -1
			}
		case '"':
			// A quoted part ends its argument; text before the quote
			// belongs to it.
			j := i + 1
			for j < len(line) && line[j] != '"' && line[j] != '\\' {
				j++
			}
			if j < len(line) && line[j] == '"' && start < 0 {
				args = append(args, line[i+1:j])
				i = j
				continue
			}
			esc = esc[:0]
			if start >= 0 {
				esc = append(esc, line[start:i]...)
				start = -1
			}
			closed := false
			for i++; i < len(line); i++ {
				c := line[i]
				if c == '\\' && i+1 < len(line) {
					i++
					esc = append(esc, line[i])
					continue
				}
				if c == '\\' {
					break // a trailing backslash escapes nothing: unterminated
				}
				if c == '"' {
					closed = true
					break
				}
				esc = append(esc, c)
			}
			if !closed {
				return nil, errUnterminated
			}
			args = append(args, string(esc))
		default:
			if start < 0 {
				start = i
			}
		}
	}
	if start >= 0 {
		args = append(args, line[start:])
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
