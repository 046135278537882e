package netfilter

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// command is one parsed iptables command.
type command struct {
	op      string // "-A", "-I", "-D", "-R", "-N", "-X", "-F", "-Z", "-P", "-E"
	table   TableID
	chain   string
	num     int    // rule number for -I, -D, -R, -Z; 0 if none
	arg     string // policy for -P, new name for -E
	rules   []*Rule
	counter *Counters
}

var commandNames = map[string]string{
	"-A": "-A", "--append": "-A", "-I": "-I", "--insert": "-I", "-D": "-D", "--delete": "-D",
	"-R": "-R", "--replace": "-R", "-N": "-N", "--new-chain": "-N", "--new": "-N",
	"-X": "-X", "--delete-chain": "-X", "-F": "-F", "--flush": "-F", "-Z": "-Z", "--zero": "-Z",
	"-P": "-P", "--policy": "-P", "-E": "-E", "--rename-chain": "-E",
}

// isCommandName reports whether a names a command, looking the map up
// only for words that can be one (most arguments of a rule cannot).
func isCommandName(a string) bool {
	if len(a) < 2 || a[0] != '-' || len(a) == 2 && (a[1] < 'A' || a[1] > 'Z') {
		return false
	}
	return commandNames[a] != ""
}

// parseCommand parses the arguments of one command. allowTable permits
// "-t TABLE" (iptables), which iptables-restore refuses.
func parseCommand(f Family, table TableID, args []string, allowTable bool) (*command, error) {
	return parseCommandWith(nil, f, table, args, allowTable)
}

// parseCommandWith is parseCommand with a reusable rule parser (see
// parseRuleSpecWith); scratch may be nil.
func parseCommandWith(scratch *ruleParser, f Family, table TableID, args []string, allowTable bool) (*command, error) {
	var rest []string
	cmd := &command{table: table}
	fast := false
	if len(args) > 0 && isCommandName(args[0]) {
		// The usual "-A CHAIN ..." form: the rest is a view of args, unless
		// a second command or -t makes the loop below collect it instead.
		cmd.op, rest, fast = commandNames[args[0]], args[1:], true
		for _, a := range rest {
			if a == "-t" || a == "--table" || strings.HasPrefix(a, "--table=") || isCommandName(a) {
				cmd.op, rest, fast = "", nil, false
				break
			}
		}
	}
	for i := 0; i < len(args) && !fast; i++ {
		a := args[i]
		switch {
		case a == "-t" || a == "--table" || strings.HasPrefix(a, "--table="):
			if !allowTable {
				return nil, atToken(a, fmt.Errorf("%w: the -t option cannot be used in iptables-restore", ErrNotAllowed))
			}
			v, ok := strings.CutPrefix(a, "--table=")
			if !ok {
				if i+1 >= len(args) {
					return nil, atToken(a, fmt.Errorf("%w: -t requires a table name", ErrMissingArgument))
				}
				i++
				v = args[i]
			}
			t, err := ParseTable(v)
			if err != nil {
				return nil, atToken(v, err)
			}
			cmd.table = t
		case cmd.op == "" && commandNames[a] != "":
			cmd.op = commandNames[a]
		case cmd.op != "" && commandNames[a] != "" && !moduleOptionBefore(args[:i], a):
			return nil, atToken(a, fmt.Errorf("%w: more than one command (%s and %s)", ErrSyntax, cmd.op, a))
		default:
			rest = append(rest, a)
		}
	}
	if cmd.op == "" {
		return nil, fmt.Errorf("%w: no command specified (expected -A, -I, -D, -R, -N, -X, -F, -Z, -P or -E)", ErrSyntax)
	}
	// Positional arguments come first: chain, then a number or a name.
	pos := func() (string, bool) {
		if len(rest) == 0 || strings.HasPrefix(rest[0], "-") || rest[0] == "!" {
			return "", false
		}
		v := rest[0]
		rest = rest[1:]
		return v, true
	}
	number := func() (int, bool, error) {
		if len(rest) == 0 {
			return 0, false, nil
		}
		n, err := strconv.Atoi(rest[0])
		if err != nil {
			return 0, false, nil
		}
		if n < 1 {
			return 0, false, atToken(rest[0], fmt.Errorf("%w: invalid rule number %q", ErrBadValue, rest[0]))
		}
		rest = rest[1:]
		return n, true, nil
	}
	chain, hasChain := pos()
	cmd.chain = chain
	needChain := func() error {
		if !hasChain {
			return fmt.Errorf("%w: %s requires a chain name", ErrMissingArgument, cmd.op)
		}
		return nil
	}
	var err error
	switch cmd.op {
	case "-A", "-I", "-D", "-R":
		if err = needChain(); err != nil {
			return nil, err
		}
		var has bool
		if cmd.op != "-A" {
			if cmd.num, has, err = number(); err != nil {
				return nil, err
			}
		}
		if cmd.op == "-R" && !has {
			return nil, fmt.Errorf("%w: -R requires a rule number", ErrMissingArgument)
		}
		if cmd.op == "-D" && has {
			if len(rest) > 0 {
				return nil, atToken(rest[0], fmt.Errorf("%w: -D with a rule number takes no rule specification", ErrSyntax))
			}
			return cmd, nil
		}
		ctx := ruleCtx{family: f, table: cmd.table, chain: chain}
		cmd.rules, cmd.counter, err = parseRuleSpecWith(scratch, ctx, rest)
		if err != nil {
			return nil, err
		}
		if cmd.op == "-R" && len(cmd.rules) != 1 {
			return nil, fmt.Errorf("%w: -R takes a rule with one source and one destination", ErrSyntax)
		}
		return cmd, nil
	case "-N", "-E", "-P":
		if err = needChain(); err != nil {
			return nil, err
		}
		if cmd.op != "-N" {
			v, ok := pos()
			if !ok {
				return nil, fmt.Errorf("%w: %s requires two arguments", ErrMissingArgument, cmd.op)
			}
			cmd.arg = v
		}
	case "-Z":
		if hasChain {
			if cmd.num, _, err = number(); err != nil {
				return nil, err
			}
		}
	}
	if len(rest) > 0 {
		return nil, atToken(rest[0], fmt.Errorf("%w: unexpected argument %q after %s", ErrSyntax, rest[0], cmd.op))
	}
	return cmd, nil
}

// takeCounters gives the command's rules its [packets:bytes] prefix.
func (cmd *command) takeCounters(withCounters bool) {
	if withCounters && cmd.counter != nil {
		for _, r := range cmd.rules {
			r.Counters = *cmd.counter
		}
	}
}

// apply carries out cmd on table t (a working copy).
func (cmd *command) apply(t *Table, withCounters bool) error {
	chainOf := func(name string) (*Chain, error) {
		c := t.Chain(name)
		if c == nil {
			return nil, atToken(name, fmt.Errorf("%w: chain %q does not exist in table %s", ErrNoSuchChain, name, t.id))
		}
		return c, nil
	}
	cmd.takeCounters(withCounters)
	switch cmd.op {
	case "-A", "-I":
		c, err := chainOf(cmd.chain)
		if err != nil {
			return err
		}
		if cmd.op == "-A" {
			c.Rules = append(c.Rules, cmd.rules...)
			return nil
		}
		n := max(cmd.num, 1)
		if n > len(c.Rules)+1 {
			return fmt.Errorf("%w: index of insertion %d too big for chain %q", ErrNoSuchRule, n, c.Name)
		}
		c.Rules = slices.Insert(c.Rules, n-1, cmd.rules...)
	case "-D":
		c, err := chainOf(cmd.chain)
		if err != nil {
			return err
		}
		if cmd.num > 0 {
			if cmd.num > len(c.Rules) {
				return fmt.Errorf("%w: index of deletion %d too big for chain %q", ErrNoSuchRule, cmd.num, c.Name)
			}
			c.Rules = slices.Delete(c.Rules, cmd.num-1, cmd.num)
			return nil
		}
		for _, want := range cmd.rules {
			i := slices.IndexFunc(c.Rules, func(r *Rule) bool { return r.String() == want.String() })
			if i < 0 {
				return fmt.Errorf("%w: bad rule (does a matching rule exist in that chain?)", ErrNoSuchRule)
			}
			c.Rules = slices.Delete(c.Rules, i, i+1)
		}
	case "-R":
		c, err := chainOf(cmd.chain)
		if err != nil {
			return err
		}
		if cmd.num > len(c.Rules) {
			return fmt.Errorf("%w: index of replacement %d too big for chain %q", ErrNoSuchRule, cmd.num, c.Name)
		}
		c.Rules[cmd.num-1] = cmd.rules[0]
	case "-N":
		_, err := t.NewChain(cmd.chain)
		return err
	case "-X":
		if cmd.chain != "" {
			return t.DeleteChain(cmd.chain)
		}
		// Without a name, every user chain goes; they must all be empty.
		for _, c := range t.chainList() {
			if !c.builtin && len(c.Rules) > 0 {
				return fmt.Errorf("%w: %q", ErrChainNotEmpty, c.Name)
			}
		}
		for name, c := range t.chains {
			if !c.builtin {
				delete(t.chains, name)
			}
		}
		t.chainsChanged()
	case "-F":
		if cmd.chain != "" {
			c, err := chainOf(cmd.chain)
			if err != nil {
				return err
			}
			c.Rules = nil
			return nil
		}
		for _, c := range t.chains {
			c.Rules = nil
		}
	case "-Z":
		chains := t.chainList()
		if cmd.chain != "" {
			c, err := chainOf(cmd.chain)
			if err != nil {
				return err
			}
			if cmd.num > 0 {
				if cmd.num > len(c.Rules) {
					return fmt.Errorf("%w: index of rule %d too big for chain %q", ErrNoSuchRule, cmd.num, c.Name)
				}
				c.Rules[cmd.num-1].Counters = Counters{}
				return nil
			}
			chains = []*Chain{c}
		}
		for _, c := range chains {
			c.Counters = Counters{}
			for _, r := range c.Rules {
				r.Counters = Counters{}
			}
		}
	case "-P":
		c, err := chainOf(cmd.chain)
		if err != nil {
			return err
		}
		if !c.builtin {
			return fmt.Errorf("%w: can't set policy %q on user-defined chain %q", ErrNotAllowed, cmd.arg, c.Name)
		}
		switch cmd.arg {
		case "ACCEPT":
			c.Policy = PolicyAccept
		case "DROP":
			c.Policy = PolicyDrop
		default:
			return atToken(cmd.arg, fmt.Errorf("%w: bad policy name %q (expected ACCEPT or DROP)", ErrBadValue, cmd.arg))
		}
	case "-E":
		c, err := chainOf(cmd.chain)
		if err != nil {
			return err
		}
		if c.builtin {
			return fmt.Errorf("%w: cannot rename built-in chain %q", ErrBuiltinChain, c.Name)
		}
		if err := checkChainName(cmd.arg); err != nil {
			return err
		}
		if t.Chain(cmd.arg) != nil {
			return fmt.Errorf("%w: %q", ErrChainExists, cmd.arg)
		}
		delete(t.chains, c.Name)
		old := c.Name
		c.Name = cmd.arg
		t.chains[c.Name] = c
		t.chainsChanged()
		for _, cc := range t.chains {
			for i, r := range cc.Rules {
				if j, ok := r.Target.(*JumpTarget); ok && j.Chain == old {
					nr := *r
					nr.Target = &JumpTarget{Chain: c.Name, Goto: j.Goto}
					cc.Rules[i] = &nr
				}
			}
		}
	}
	return nil
}

// Exec runs one iptables command line, such as
// "-t nat -A KUBE-SERVICES -d 10.0.0.1/32 -p tcp --dport 80 -j KUBE-SVC-X".
// A leading "iptables" or "ip6tables" word is allowed. Like iptables, it
// changes the table as a whole or not at all: the table is validated
// (jumps, loops, where targets may be used) before the change takes effect.
func (rs *Ruleset) Exec(line string) error {
	args, err := splitArgs(line)
	if err != nil {
		return &ParseError{Text: line, Err: err}
	}
	if len(args) > 0 && (args[0] == "iptables" || args[0] == "ip6tables") {
		args = args[1:]
	}
	if err := rs.ExecArgs(args); err != nil {
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.Text = line
			return pe
		}
		return err
	}
	return nil
}

// ExecArgs runs one iptables command given as separate arguments.
func (rs *Ruleset) ExecArgs(args []string) error {
	cmd, err := parseCommand(rs.family, Filter, args, true)
	if err != nil {
		return toParseError(0, "", err)
	}
	t := rs.Table(cmd.table)
	var work *Table
	if t == nil {
		work = newTable(cmd.table)
	} else {
		work = t.clone()
	}
	if err := cmd.apply(work, true); err != nil {
		return toParseError(0, "", err)
	}
	if err := work.validate(rs.family); err != nil {
		return toParseError(0, "", err)
	}
	rs.tables[cmd.table] = work
	return nil
}

// MustExec is like Exec but panics on error. It is meant for tests and
// examples that build rulesets from literal strings.
func (rs *Ruleset) MustExec(lines ...string) *Ruleset {
	for _, l := range lines {
		if err := rs.Exec(l); err != nil {
			panic(err)
		}
	}
	return rs
}

func toParseError(line int, text string, err error) error {
	var pe *ParseError
	if errors.As(err, &pe) {
		return err
	}
	e := &ParseError{Line: line, Text: text, Err: err}
	var te *tokenError
	if errors.As(err, &te) {
		e.Token = te.token
		e.Err = te.err
	}
	return e
}

// moduleOptionBefore reports whether a long option a is an option of a
// module or target named earlier in args (-m NAME, -j NAME): such an
// option wins over a command of the same name, as in iptables, where
// CLUSTERIP's --new is not --new-chain.
func moduleOptionBefore(args []string, a string) bool {
	name, ok := strings.CutPrefix(a, "--")
	if !ok {
		return false
	}
	for i := 0; i+1 < len(args); i++ {
		var m *module
		switch args[i] {
		case "-m", "--match":
			m = matchModules[args[i+1]]
		case "-j", "--jump":
			m = targetModules[args[i+1]]
		}
		if m != nil {
			if o, ok := m.lookup(name); ok && o.name == name {
				return true
			}
		}
	}
	return false
}
