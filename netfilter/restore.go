package netfilter

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// RestoreOptions are the iptables-restore flags packetwalk models.
type RestoreOptions struct {
	// NoFlush keeps the existing contents of each table named in the input
	// (iptables-restore --noflush); otherwise each named table is replaced.
	NoFlush bool
	// Counters applies the [PKTS:BYTES] counters of the input (-c).
	Counters bool
	// Lenient, when not LenientOff, loads a rule using a match or target
	// module packetwalk does not know or model as a placeholder that never
	// or always matches, printed back as given; Ruleset.Placeholders lists
	// them with their input lines (lenient.go).
	Lenient Lenient
}

// Restore applies iptables-restore input to the ruleset. Like the kernel,
// each table is replaced at its COMMIT line, whole or not at all: tables
// committed before an error stay loaded. The error is a *ParseError naming
// the input line.
func (rs *Ruleset) Restore(data []byte, opt RestoreOptions) error {
	return rs.restore(data, opt, nil)
}

// restore is Restore, leaving in committed what validating each
// committed table found, which the host then compiles without validating
// again.
func (rs *Ruleset) restore(data []byte, opt RestoreOptions, committed *[numTables]*validated) error {
	var (
		cur     *Table
		curLine int
		origin  []ruleOrigin // input line of each rule, for load errors
		lineNo  int
		args    []string // reused for every line
		scratch = ruleParser{lenient: opt.Lenient}
		lastA   *Chain // the chain of the last -A line in cur
	)
	// One string for the whole input: lines and arguments are substrings
	// of it, so a rule line costs no copy.
	for text := string(data); text != ""; {
		raw, rest, _ := strings.Cut(text, "\n")
		text = rest
		lineNo++
		raw = strings.TrimSuffix(raw, "\r")
		line := strings.TrimSpace(raw)
		fail := func(err error) error { return toParseError(lineNo, raw, err) }
		switch {
		case line == "" || line[0] == '#':
			continue
		case line[0] == '*':
			if cur != nil {
				return fail(fmt.Errorf("%w: table %s started before COMMIT of table %s (line %d)", ErrSyntax, line[1:], cur.id, curLine))
			}
			id, err := ParseTable(strings.TrimSpace(line[1:]))
			if err != nil {
				return fail(err)
			}
			if old := rs.tables[id]; old != nil && opt.NoFlush {
				cur = old.clone()
			} else {
				cur = newTable(id)
			}
			curLine, origin, lastA = lineNo, origin[:0], nil
		case line == "COMMIT":
			if cur == nil {
				return fail(fmt.Errorf("%w: COMMIT outside a table", ErrSyntax))
			}
			v, err := cur.validateChains(rs.family, cur.chainList())
			if err != nil {
				var re *ruleError
				if errors.As(err, &re) {
					if ln := originOf(origin, re.rule); ln > 0 {
						return toParseError(ln, lineText(data, ln), re.err)
					}
				}
				return fail(err)
			}
			rs.tables[cur.id] = cur
			if committed != nil {
				committed[cur.id] = v
			}
			cur, lastA = nil, nil
		case cur == nil:
			return fail(fmt.Errorf("%w: expected a \"*table\" line before %q", ErrSyntax, line))
		case line[0] == ':':
			if err := restoreChainLine(cur, line, opt); err != nil {
				return fail(err)
			}
		default:
			var cnt *Counters
			if line[0] == '[' {
				end := strings.IndexByte(line, ']')
				if end < 0 {
					return fail(fmt.Errorf("%w: bad counters %q", ErrSyntax, line))
				}
				c, err := parseCounterPair(line[:end+1])
				if err != nil {
					return fail(err)
				}
				cnt, line = &c, strings.TrimSpace(line[end+1:])
			}
			var err error
			if args, err = appendArgs(args[:0], line); err != nil {
				return fail(err)
			}
			cmd, err := parseCommandWith(&scratch, rs.family, cur.id, args, false)
			if err != nil {
				return fail(err)
			}
			if cnt != nil {
				cmd.counter = cnt
			}
			if cmd.op == "-A" && lastA != nil && lastA.Name == cmd.chain {
				// Dumps list a chain's rules together: the chain of the
				// last -A needs no lookup among 60k names.
				cmd.takeCounters(opt.Counters)
				lastA.Rules = append(lastA.Rules, cmd.rules...)
			} else {
				if err := cmd.apply(cur, opt.Counters); err != nil {
					return fail(err)
				}
				lastA = nil
				if cmd.op == "-A" {
					lastA = cur.Chain(cmd.chain)
				}
			}
			for _, r := range cmd.rules {
				origin = append(origin, ruleOrigin{r, lineNo})
			}
			if opt.Lenient != LenientOff {
				setPlaceholderLines(cmd.rules, lineNo)
			}
		}
	}
	if cur != nil {
		return toParseError(lineNo, "", fmt.Errorf("%w: COMMIT expected at line %d (table %s)", ErrSyntax, lineNo+1, cur.id))
	}
	return nil
}

// ruleOrigin is the input line a rule came from.
type ruleOrigin struct {
	rule *Rule
	line int
}

// originOf returns the input line of r, or 0. It is only needed for an
// error, so a linear search is cheaper than a map kept for every rule.
func originOf(o []ruleOrigin, r *Rule) int {
	for _, x := range o {
		if x.rule == r {
			return x.line
		}
	}
	return 0
}

func lineText(data []byte, n int) string {
	for i := 1; len(data) > 0; i++ {
		line, rest, _ := bytes.Cut(data, []byte("\n"))
		if i == n {
			return string(line)
		}
		data = rest
	}
	return ""
}

// restoreChainLine handles ":NAME POLICY [PKTS:BYTES]".
func restoreChainLine(t *Table, line string, opt RestoreOptions) error {
	f := strings.Fields(line[1:])
	if len(f) < 2 || len(f) > 3 {
		return fmt.Errorf("%w: expected \":CHAIN POLICY [PACKETS:BYTES]\", got %q", ErrSyntax, line)
	}
	name, policy := f[0], f[1]
	var cnt Counters
	if len(f) == 3 {
		var err error
		if cnt, err = parseCounterPair(f[2]); err != nil {
			return err
		}
	}
	c := t.Chain(name)
	if c != nil && c.builtin {
		switch policy {
		case "ACCEPT":
			c.Policy = PolicyAccept
		case "DROP":
			c.Policy = PolicyDrop
		default:
			return atToken(policy, fmt.Errorf("%w: invalid policy %q for built-in chain %q", ErrBadValue, policy, name))
		}
		if opt.Counters {
			c.Counters = cnt
		}
		return nil
	}
	if _, ok := hookByName(name); ok {
		return atToken(name, fmt.Errorf("%w: %q is not a built-in chain of table %s", ErrBuiltinChain, name, t.id))
	}
	if policy != "-" {
		return atToken(policy, fmt.Errorf("%w: user chain %q cannot have a policy (use \"-\")", ErrBadValue, name))
	}
	if c != nil {
		c.Rules = nil // declaring an existing chain flushes it (--noflush)
		return nil
	}
	_, err := t.NewChain(name)
	return atToken(name, err)
}

func parseCounterPair(s string) (Counters, error) {
	in, ok := strings.CutPrefix(s, "[")
	in, ok2 := strings.CutSuffix(in, "]")
	p, b, ok3 := strings.Cut(in, ":")
	if ok && ok2 && ok3 {
		pk, err1 := strconv.ParseUint(p, 10, 64)
		by, err2 := strconv.ParseUint(b, 10, 64)
		if err1 == nil && err2 == nil {
			return Counters{pk, by}, nil
		}
	}
	return Counters{}, atToken(s, fmt.Errorf("%w: bad counters %q (expected [PACKETS:BYTES])", ErrBadValue, s))
}

// ParseRestore parses iptables-restore input for family f into a new
// ruleset, applying counters.
func ParseRestore(f Family, data []byte) (*Ruleset, error) {
	rs := NewRuleset(f)
	if err := rs.Restore(data, RestoreOptions{Counters: true}); err != nil {
		return nil, err
	}
	return rs, nil
}
