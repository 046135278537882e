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
	// Fragment, when not nil, reads the input as a fragment of a dump
	// (the lines of `iptables-save | grep X`): tables inferred from chain
	// names and targets, user chains declared where used, "*table"
	// sections and COMMIT optional; fragment.go says how, and
	// FragmentOptions.Report receives what was assumed.
	Fragment *FragmentOptions
	// Listing reads the input as iptables -L output (with or without -n,
	// -v, -x, --line-numbers; listparse.go): each row is read back into
	// its rule, tables and chains as for a fragment (Fragment, when set,
	// gives the default table and the report), and the input is refused,
	// naming the line, unless every chain read lists back as given.
	// Counters are always taken from a -v listing.
	Listing bool
}

// Restore applies iptables-restore input to the ruleset. Like the kernel,
// each table is replaced at its COMMIT line, whole or not at all: tables
// committed before an error stay loaded. The error is a *ParseError naming
// the input line.
func (rs *Ruleset) Restore(data []byte, opt RestoreOptions) error {
	return rs.restore(data, opt, nil, nil)
}

// restore is Restore, leaving in committed what validating each
// committed table found, which the host then compiles without validating
// again. objs, when not nil, tells which ipsets and nfacct objects exist:
// as iptables-restore looks each set up while it parses the rule naming
// it, and the kernel refuses a rule naming a missing accounting object, a
// missing one is refused at that line.
func (rs *Ruleset) restore(data []byte, opt RestoreOptions, committed *[numTables]*validated, objs objects) error {
	if opt.Listing {
		return rs.restoreListing(data, opt, committed, objs)
	}
	if opt.Fragment != nil {
		return rs.restoreFragment(data, opt, committed, objs)
	}
	return rs.restoreLines(data, opt, committed, objs, nil)
}

// restoreLines is restore; lineMap, when not nil, maps each line of data
// to the line of the user's input it came from, for placeholders.
func (rs *Ruleset) restoreLines(data []byte, opt RestoreOptions, committed *[numTables]*validated, objs objects, lineMap []int) error {
	var (
		cur     *Table
		curLine int
		curUsed bool         // cur has a chain line or a command
		origin  []ruleOrigin // input line of each rule, for load errors
		lineNo  int
		args    []string // reused for every line
		scratch = ruleParser{lenient: opt.Lenient}
		lastA   *Chain // the chain of the last -A line in cur
	)
	// One string for the whole input: lines and arguments are substrings
	// of it, so a rule line costs no copy.
	text := string(data)
	for off := 0; off < len(text); {
		// iptables-restore reads with fgets into a 10240-byte buffer: a
		// longer line is cut into pieces, each handled (and counted) as a
		// line of its own.
		chunk := text[off:]
		if nl := strings.IndexByte(chunk, '\n'); nl >= 0 {
			chunk = chunk[:nl+1]
		}
		if len(chunk) > restoreLineMax {
			chunk = chunk[:restoreLineMax]
		}
		off += len(chunk)
		lineNo++
		raw := strings.TrimSuffix(chunk, "\n")
		fail := func(err error) error { return toParseError(lineNo, raw, err) }
		// Only an empty line or one starting with '#' is skipped, and the
		// line's first byte decides what it is: no white space is
		// trimmed (docs/kernel-notes.md).
		switch {
		case chunk[0] == '\n' || chunk[0] == '#':
			continue
		case cur != nil && (raw == "COMMIT"):
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
			switch {
			case curUsed:
				rs.tables[cur.id] = cur
			case !opt.NoFlush:
				// A table block that declares no chain and runs no
				// command flushes the table away: iptables-nft deletes
				// it and creates none.
				rs.tables[cur.id] = nil
				v = nil
			}
			if committed != nil {
				committed[cur.id] = v
			}
			cur, lastA = nil, nil
		case chunk[0] == '*' && cur == nil:
			// The name is the first word after '*'; more words are
			// ignored, as iptables-restore does.
			name := firstWord(raw[1:])
			if name == "" {
				return fail(fmt.Errorf("%w: table name missing after '*'", ErrSyntax))
			}
			id, err := ParseTable(name)
			if err != nil {
				return fail(atToken(name, err))
			}
			if old := rs.tables[id]; old != nil && opt.NoFlush {
				cur = old.clone()
			} else {
				cur = newTable(id)
			}
			curLine, curUsed, origin, lastA = lineNo, false, origin[:0], nil
		case cur == nil:
			if raw == "COMMIT" {
				return fail(fmt.Errorf("%w: COMMIT outside a table", ErrSyntax))
			}
			return fail(fmt.Errorf("%w: expected a \"*table\" line before %q", ErrSyntax, raw))
		case chunk[0] == ':':
			curUsed = true
			if err := restoreChainLine(cur, raw, opt); err != nil {
				return fail(err)
			}
		default:
			line := raw
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
				cnt, line = &c, line[end+1:]
			}
			var err error
			if args, err = appendArgs(args[:0], line); err != nil {
				return fail(err)
			}
			if len(args) == 0 {
				return fail(fmt.Errorf("%w: no command specified", ErrSyntax))
			}
			if trimmed := strings.TrimLeft(raw, " \t"); trimmed != raw || strings.TrimSpace(raw) == "COMMIT" {
				switch {
				case trimmed != "" && (trimmed[0] == '#' || trimmed[0] == ':' || trimmed[0] == '*'):
					return fail(fmt.Errorf("%w: %q must start the line (iptables-restore trims no blanks)", ErrSyntax, trimmed[:1]))
				case strings.TrimSpace(raw) == "COMMIT":
					return fail(fmt.Errorf("%w: COMMIT must be alone on its line, without blanks", ErrSyntax))
				}
			}
			if strings.HasPrefix(args[0], "*") {
				return fail(atToken(args[0], fmt.Errorf("%w: table %s started before COMMIT of table %s (line %d)", ErrSyntax, args[0][1:], cur.id, curLine)))
			}
			cmd, err := parseCommandWith(&scratch, rs.family, cur.id, args, false)
			if err != nil {
				return fail(err)
			}
			// Flushing, zeroing or deleting every chain creates no
			// table in iptables-nft; any other command does.
			if !(cmd.chain == "" && (cmd.op == "-F" || cmd.op == "-Z" || cmd.op == "-X")) {
				curUsed = true
			}
			if objs != nil {
				if err := checkObjects(cmd.rules, objs); err != nil {
					return fail(err)
				}
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
				ln := lineNo
				if lineMap != nil && ln <= len(lineMap) {
					ln = lineMap[ln-1]
				}
				setPlaceholderLines(cmd.rules, ln)
			}
		}
	}
	if cur != nil {
		// iptables-restore names the line after the last one.
		return toParseError(lineNo+1, "", fmt.Errorf("%w: COMMIT expected at line %d (table %s)", ErrSyntax, lineNo+1, cur.id))
	}
	return nil
}

// restoreLineMax is the longest line iptables-restore reads at once (its
// fgets buffer of 10240 bytes, less the terminating NUL).
const restoreLineMax = 10239

// objects tells which named kernel objects outside the ruleset exist.
type objects interface {
	// setUsable refuses a set that does not exist or is of the other
	// family.
	setUsable(name string) error
	hasNFAcct(name string) bool
}

// checkObjects refuses the first ipset or nfacct object the rules name
// that does not exist (or, for a set, is of the other family).
func checkObjects(rules []*Rule, objs objects) error {
	for _, r := range rules {
		for _, m := range r.Matches {
			switch m := m.(type) {
			case *SetMatch:
				if err := objs.setUsable(m.Name); err != nil {
					return atToken(m.Name, err)
				}
			case *NFAcctMatch:
				if !objs.hasNFAcct(m.Name) {
					return atToken(m.Name, fmt.Errorf("%w: nfacct object %q (RULE_APPEND failed (No such file or directory))", ErrNoSuchNFAcct, m.Name))
				}
			}
		}
		if st, ok := r.Target.(*SetTarget); ok {
			for _, n := range []string{st.Add.Name, st.Del.Name} {
				if n == "" {
					continue
				}
				if err := objs.setUsable(n); err != nil {
					return atToken(n, err)
				}
			}
		}
	}
	return nil
}

// setUsable is the check iptables makes of a set a rule of family f names:
// it exists, and unless its type has no family (list:set, bitmap:port,
// hash:mac), it is of f ("The protocol family of set X is IPv4, which is
// not applicable"; bitmap:ip is IPv4 only).
func (h *Host) setUsable(f Family, n string) error {
	s := h.sets.Get(n)
	if s == nil {
		return fmt.Errorf("%w: set %s doesn't exist", ErrNoSuchSet, n)
	}
	switch s.TypeName() {
	case "list:set", "bitmap:port", "hash:mac":
		return nil
	}
	if fam := s.Family(); (fam == 6) != (f == IPv6) {
		return fmt.Errorf("%w: the protocol family of set %s is IPv%d, which is not applicable", ErrNotAllowed, n, fam)
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

// firstWord returns the first word of s, words being separated by spaces
// and tabs.
func firstWord(s string) string {
	s = strings.TrimLeft(s, " \t")
	if i := strings.IndexAny(s, " \t"); i >= 0 {
		return s[:i]
	}
	return s
}

// restoreChainLine handles ":NAME POLICY [PKTS:BYTES]". As in
// iptables-restore, words after the counters are ignored; a user chain
// takes any policy word and no counters; a built-in chain's counters are
// read only with -c.
func restoreChainLine(t *Table, line string, opt RestoreOptions) error {
	f := strings.FieldsFunc(line[1:], func(r rune) bool { return r == ' ' || r == '\t' })
	if len(f) == 0 {
		return fmt.Errorf("%w: chain name missing after ':'", ErrSyntax)
	}
	name := f[0]
	if len(f) < 2 {
		return atToken(name, fmt.Errorf("%w: policy missing for chain %q (expected \":CHAIN POLICY [PACKETS:BYTES]\")", ErrSyntax, name))
	}
	policy := f[1]
	c := t.Chain(name)
	if c != nil && c.builtin {
		var p Policy
		switch policy {
		case "ACCEPT":
			p = PolicyAccept
		case "DROP":
			p = PolicyDrop
		default:
			return atToken(policy, fmt.Errorf("%w: invalid policy %q for built-in chain %q", ErrBadValue, policy, name))
		}
		if opt.Counters {
			// With -c, iptables-restore requires the counters.
			if len(f) < 3 {
				return atToken(name, fmt.Errorf("%w: invalid policy counters for chain %q (expected [PACKETS:BYTES])", ErrBadValue, name))
			}
			cnt, err := parseCounterPair(f[2])
			if err != nil {
				return err
			}
			c.Counters = cnt
		}
		c.Policy = p
		return nil
	}
	if c != nil {
		c.Rules = nil // declaring an existing chain flushes it
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
