package netfilter

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// A fragment is what blog posts and answers show of a node's rules: the
// lines of `iptables-save | grep SOMETHING`, with no "*table" line, no
// chain declarations and no COMMIT. Reading one means guessing the table
// of every line; this file makes the guesses that the chain names and the
// targets decide, refuses the others by line (unless a default table was
// given), declares every user chain the lines use, and reports all it
// assumed, so that nothing is taken silently.

// FragmentOptions asks Restore to read its input as a fragment
// (RestoreOptions.Fragment).
type FragmentOptions struct {
	// Table is the table of the lines whose chain names, targets and
	// matches fit more than one table; NoTable refuses such lines.
	Table TableID
	// Report, when not nil, receives what was assumed.
	Report *FragmentReport
	// lineTables holds the table a listing tells for some lines
	// (listparse.go).
	lineTables map[int]TableID
}

// FragmentReport says what reading a fragment assumed.
type FragmentReport struct {
	// Lines holds, for each command or chain line, the table it was put
	// in and why, in input order.
	Lines []FragmentLine
	// Declared lists the user chains the fragment used without
	// declaring them, which were declared empty with policy "-".
	Declared []FragmentChain
	// Unreached lists the user chains no line jumps to: a grep keeps a
	// service's chains but drops "-A PREROUTING -j KUBE-SERVICES", so
	// packets never enter them until such a line is added.
	Unreached []FragmentChain
	// Notes says what an input form cannot tell (a listing without -v
	// shows no interfaces).
	Notes []string
}

// FragmentLine is the table a fragment line was put in.
type FragmentLine struct {
	Line  int
	Table TableID
	// Why says what decided: "chain names and targets", "-t option",
	// "*table section", "default table".
	Why string
}

// FragmentChain is a user chain declared for a fragment.
type FragmentChain struct {
	Table TableID
	Chain string
	// Line is the first input line that used it.
	Line int
}

// Summary is the report for people, one line each: runs of consecutive
// lines put in the same table for the same reason, then the chains
// declared in each table.
func (r *FragmentReport) Summary() []string {
	var out []string
	for i := 0; i < len(r.Lines); {
		j := i + 1
		for j < len(r.Lines) && r.Lines[j].Table == r.Lines[i].Table && r.Lines[j].Why == r.Lines[i].Why {
			j++
		}
		first, last := r.Lines[i].Line, r.Lines[j-1].Line
		where := "line " + strconv.Itoa(first)
		if j-i > 1 {
			where = fmt.Sprintf("lines %d-%d (%d lines)", first, last, j-i)
			if last-first+1 == j-i {
				where = fmt.Sprintf("lines %d-%d", first, last)
			}
		}
		out = append(out, fmt.Sprintf("%s: table %s (%s)", where, r.Lines[i].Table, r.Lines[i].Why))
		i = j
	}
	for _, t := range saveOrder {
		var names []string
		for _, c := range r.Declared {
			if c.Table == t {
				names = append(names, c.Chain)
			}
		}
		if len(names) > 0 {
			out = append(out, fmt.Sprintf("declared in table %s: %s", t, strings.Join(names, " ")))
		}
	}
	for _, c := range r.Unreached {
		out = append(out, fmt.Sprintf("no rule jumps to %s %s (line %d): packets never enter it", c.Table, c.Chain, c.Line))
	}
	return append(out, r.Notes...)
}

// tableMask is a set of tables, bit i for TableID i.
type tableMask uint8

// inferable are the tables a fragment line may be guessed into: the
// security table (SELinux labelling) is only ever taken when named.
const inferable = tableMask(1<<Raw | 1<<Mangle | 1<<NAT | 1<<Filter)

func (m tableMask) single() (TableID, bool) {
	for t := TableID(1); t < numTables; t++ {
		if m == 1<<t {
			return t, true
		}
	}
	return NoTable, false
}

func (m tableMask) String() string {
	var names []string
	for _, t := range saveOrder {
		if m&(1<<t) != 0 {
			names = append(names, t.String())
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// saveOrder is the order iptables-save (nft) prints tables in.
var saveOrder = []TableID{Mangle, Security, Raw, Filter, NAT}

// conventionalChains are the user chains of the node agents whose table
// their name tells: kube-proxy and kubelet, ip-masq-agent, Docker,
// Flannel, Calico's NAT chains, Istio. The tables are those of the dumps
// in netfilter/testdata/golden and kubeproxy/testdata; a name in two
// tables (KUBE-SERVICES holds the REJECT rules of services without
// endpoints in filter) leaves the choice to the line's target.
var conventionalChains = map[string]tableMask{
	"KUBE-SERVICES":          1<<NAT | 1<<Filter,
	"KUBE-NODEPORTS":         1<<NAT | 1<<Filter,
	"KUBE-MARK-MASQ":         1 << NAT,
	"KUBE-MARK-DROP":         1 << NAT,
	"KUBE-POSTROUTING":       1 << NAT,
	"KUBE-FIREWALL":          1 << Filter,
	"KUBE-FORWARD":           1 << Filter,
	"KUBE-EXTERNAL-SERVICES": 1 << Filter,
	"KUBE-PROXY-FIREWALL":    1 << Filter,
	"KUBE-IPTABLES-HINT":     1 << Mangle,
	"KUBE-KUBELET-CANARY":    1<<NAT | 1<<Filter | 1<<Mangle,
	"KUBE-PROXY-CANARY":      1<<NAT | 1<<Filter | 1<<Mangle,
	"KUBE-HOSTPORTS":         1 << NAT,
	"IP-MASQ-AGENT":          1 << NAT,
	"IP-MASQ-AGENT-V2":       1 << NAT,
	"DOCKER":                 1<<NAT | 1<<Filter,
	"DOCKER-USER":            1 << Filter,
	"FLANNEL-FWD":            1 << Filter,
	"FLANNEL-POSTRTG":        1 << NAT,
	"cali-nat-outgoing":      1 << NAT,
	"cali-fip-snat":          1 << NAT,
	"cali-fip-dnat":          1 << NAT,
	"ISTIO_INBOUND":          1<<NAT | 1<<Mangle,
	"ISTIO_OUTPUT":           1 << NAT,
	"ISTIO_REDIRECT":         1 << NAT,
	"ISTIO_IN_REDIRECT":      1 << NAT,
	"ISTIO_DIVERT":           1 << Mangle,
	"ISTIO_TPROXY":           1 << Mangle,
}

// conventionalPrefixes are the per-service and per-endpoint chains.
var conventionalPrefixes = []struct {
	prefix string
	tables tableMask
}{
	{"KUBE-SVC-", 1 << NAT}, {"KUBE-SEP-", 1 << NAT}, {"KUBE-FW-", 1 << NAT},
	{"KUBE-XLB-", 1 << NAT}, {"KUBE-EXT-", 1 << NAT}, {"KUBE-SVL-", 1 << NAT},
	{"KUBE-HP-", 1 << NAT}, {"DOCKER-ISOLATION-STAGE-", 1 << Filter},
}

// chainTables is what a chain's name tells of its table, and whether it
// tells anything (a name packetwalk does not know fits every table).
func chainTables(name string) (tableMask, bool) {
	var m tableMask
	for t := TableID(1); t < numTables; t++ {
		for _, h := range tableHooks[t] {
			if h.String() == name {
				m |= 1 << t
			}
		}
	}
	if m != 0 {
		return m & inferable, true
	}
	if m, ok := conventionalChains[name]; ok {
		return m, true
	}
	for _, p := range conventionalPrefixes {
		if strings.HasPrefix(name, p.prefix) {
			return p.tables, true
		}
	}
	return inferable, false
}

// isBuiltinName reports whether name is a built-in chain of some table.
func isBuiltinName(name string) bool {
	for h := Hook(0); h < numHooks; h++ {
		if h.String() == name {
			return true
		}
	}
	return false
}

// fragLine is one command or chain line of a fragment.
type fragLine struct {
	line  int
	text  string // the line as restore input (prefixes and -t removed)
	chain string // the chain the line writes, or declares
	jump  string // the user chain it jumps to, if any
	decl  bool   // a ":CHAIN POLICY" line
	newCh bool   // a -N line
	cand  tableMask
	own   tableMask // cand before other lines narrowed it
	why   string
}

// fragmentCommand strips what a pasted command line has around the
// restore-style command: a leading "sudo", "iptables" (or one of its
// variants) and a "-t TABLE" option. It returns the table named (NoTable
// when none), and whether the line was an iptables command.
func fragmentCommand(f Family, args []string) ([]string, TableID, bool, bool, error) {
	stripped, isCmd := false, false
	if len(args) > 0 && args[0] == "sudo" {
		args, stripped = args[1:], true
	}
	if len(args) > 0 {
		switch args[0] {
		case "iptables", "iptables-nft", "iptables-legacy":
			if f == IPv6 {
				return nil, NoTable, false, false, atToken(args[0], fmt.Errorf("%w: an IPv4 command in IPv6 input", ErrSyntax))
			}
			args, stripped, isCmd = args[1:], true, true
		case "ip6tables", "ip6tables-nft", "ip6tables-legacy":
			if f == IPv4 {
				return nil, NoTable, false, false, atToken(args[0], fmt.Errorf("%w: an IPv6 command in IPv4 input", ErrSyntax))
			}
			args, stripped, isCmd = args[1:], true, true
		}
	}
	table := NoTable
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "-t" || a == "--table" || strings.HasPrefix(a, "--table=") {
			v, ok := strings.CutPrefix(a, "--table=")
			if !ok {
				if i+1 >= len(args) {
					return nil, NoTable, false, false, atToken(a, fmt.Errorf("%w: -t requires a table name", ErrMissingArgument))
				}
				i++
				v = args[i]
			}
			t, err := ParseTable(v)
			if err != nil {
				return nil, NoTable, false, false, atToken(v, err)
			}
			if table != NoTable && table != t {
				return nil, NoTable, false, false, atToken(v, fmt.Errorf("%w: two tables (%s and %s)", ErrSyntax, table, t))
			}
			table, stripped = t, true
			continue
		}
		out = append(out, a)
	}
	return out, table, stripped, isCmd, nil
}

// ruleFits is the set of tables, of those in m, in which every match and
// target of rules may run (at hook h when chain is a built-in chain).
func ruleFits(rules []*Rule, chain string, m tableMask) tableMask {
	var fit tableMask
	for t := TableID(1); t < numTables; t++ {
		if m&(1<<t) == 0 {
			continue
		}
		var mask uint8
		for _, h := range tableHooks[t] {
			if h.String() == chain {
				mask = 1 << h
			}
		}
		ok := true
		for _, r := range rules {
			for _, x := range r.Matches {
				if checkPlace(matchModules[x.Module()], t, mask) != nil {
					ok = false
				}
			}
			if r.Target == Drop && t == NAT {
				ok = false
			}
			switch r.Target.(type) {
			case nil, *JumpTarget, *VerdictTarget:
			default:
				if checkPlace(targetModules[r.Target.Name()], t, mask) != nil {
					ok = false
				}
			}
		}
		if ok {
			fit |= 1 << t
		}
	}
	return fit
}

// completeFragment turns a fragment into iptables-restore input. lines
// maps each line of the result (from 1) to the fragment line it came
// from (0 for a declaration packetwalk added).
func completeFragment(f Family, data []byte, opt FragmentOptions, lenient Lenient) ([]byte, []int, FragmentReport, error) {
	var rep FragmentReport
	if opt.Table >= numTables {
		return nil, nil, rep, fmt.Errorf("%w: default table %s", ErrBadValue, opt.Table)
	}
	var lines []*fragLine
	section := NoTable // the table of a "*table" line until its COMMIT
	sectionLine := 0
	text := string(data)
	lineNo := 0
	for len(text) > 0 {
		raw, rest, _ := strings.Cut(text, "\n")
		text = rest
		lineNo++
		raw = strings.TrimSuffix(raw, "\r")
		trimmed := strings.TrimSpace(raw)
		fail := func(err error) error { return toParseError(lineNo, raw, err) }
		switch {
		case trimmed == "" || trimmed[0] == '#':
			continue
		case trimmed[0] == '*':
			if section != NoTable {
				return nil, nil, rep, fail(fmt.Errorf("%w: table %s started before COMMIT of table %s (line %d)", ErrSyntax, trimmed[1:], section, sectionLine))
			}
			t, err := ParseTable(firstWord(trimmed[1:]))
			if err != nil {
				return nil, nil, rep, fail(atToken(trimmed[1:], err))
			}
			section, sectionLine = t, lineNo
			continue
		case trimmed == "COMMIT":
			if section == NoTable {
				return nil, nil, rep, fail(fmt.Errorf("%w: COMMIT outside a *table section", ErrSyntax))
			}
			section = NoTable
			continue
		}
		if strings.HasPrefix(trimmed, "Chain ") && strings.Contains(trimmed, " (") {
			return nil, nil, rep, fail(fmt.Errorf("%w: this is iptables -L output: read it as a listing (RestoreOptions.Listing, --listing)", ErrSyntax))
		}
		fl := &fragLine{line: lineNo, text: trimmed}
		if trimmed[0] == ':' {
			// ":CHAIN POLICY [p:b]"
			fl.decl = true
			fl.chain = firstWord(trimmed[1:])
			if fl.chain == "" {
				return nil, nil, rep, fail(fmt.Errorf("%w: chain name missing after ':'", ErrSyntax))
			}
		} else {
			body := trimmed
			if body[0] == '[' {
				end := strings.IndexByte(body, ']')
				if end < 0 {
					return nil, nil, rep, fail(fmt.Errorf("%w: bad counters %q", ErrSyntax, body))
				}
				body = body[end+1:]
			}
			args, err := appendArgs(nil, body)
			if err != nil {
				return nil, nil, rep, fail(err)
			}
			args, table, stripped, isCmd, err := fragmentCommand(f, args)
			if err != nil {
				return nil, nil, rep, fail(err)
			}
			if len(args) == 0 {
				return nil, nil, rep, fail(fmt.Errorf("%w: no command specified", ErrSyntax))
			}
			if table != NoTable {
				if section != NoTable && section != table {
					return nil, nil, rep, fail(fmt.Errorf("%w: -t %s inside the *%s section of line %d", ErrSyntax, table, section, sectionLine))
				}
				fl.cand, fl.why = 1<<table, "-t option"
			} else if isCmd {
				// An iptables command without -t works on filter.
				table = Filter
				fl.cand, fl.why = 1<<Filter, "iptables command without -t"
			}
			if stripped {
				counters := trimmed[:len(trimmed)-len(body)]
				fl.text = strings.TrimPrefix(string(appendArgsAsGiven([]byte(counters), args)), " ")
			}
			// Parse the command in every table it may be in; keep the
			// tables where it parses and its modules may run.
			var fit tableMask
			var firstErr error
			for _, t := range []TableID{Filter, NAT, Mangle, Raw, Security} {
				cmd, err := parseCommandWith(&ruleParser{lenient: lenient}, f, t, args, false)
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					continue
				}
				fl.chain = cmd.chain
				fl.newCh = cmd.op == "-N"
				for _, r := range cmd.rules {
					if j, ok := r.Target.(*JumpTarget); ok {
						fl.jump = j.Chain
					}
				}
				fit |= ruleFits(cmd.rules, cmd.chain, 1<<t)
			}
			if fit == 0 && firstErr != nil {
				return nil, nil, rep, fail(firstErr)
			}
			if fl.chain == "" && !fl.newCh && fl.cand == 0 && section == NoTable && opt.Table == NoTable {
				return nil, nil, rep, fail(fmt.Errorf("%w: a command without a chain needs its table: give a *table section, -t or a default table", ErrSyntax))
			}
			if fit == 0 {
				// Parses everywhere but runs nowhere: let restore name
				// the reason in the table the names point to.
				fit = inferable | 1<<Security
			}
			if fl.cand == 0 {
				fl.cand = fit & inferable
				if fl.cand == 0 {
					fl.cand = inferable // security-only modules: restore names them
				}
			}
		}
		if fl.decl {
			fl.cand = inferable
		}
		if section != NoTable {
			fl.cand, fl.why = 1<<section, "*table section"
		}
		if t, ok := opt.lineTables[lineNo]; ok {
			fl.cand, fl.why = 1<<t, "listing of the table"
		}
		lines = append(lines, fl)
	}
	if section != NoTable {
		return nil, nil, rep, toParseError(lineNo+1, "", fmt.Errorf("%w: COMMIT expected for the *%s section of line %d", ErrSyntax, section, sectionLine))
	}

	// What the names tell: a built-in or conventional chain, for the
	// chain written and the chain jumped to.
	unknown := map[string]tableMask{} // chains whose names tell nothing: one table each
	for _, fl := range lines {
		for _, name := range []string{fl.chain, fl.jump} {
			if name == "" {
				continue
			}
			m, known := chainTables(name)
			switch {
			case !known:
				unknown[name] = inferable | 1<<Security
			case fl.why == "":
				fl.cand &= m
			}
		}
	}
	for _, fl := range lines {
		fl.own = fl.cand
	}
	// A chain whose name tells nothing lives in one table: the tables of
	// its lines and of the lines jumping to it narrow each other down.
	propagate := func() {
		for changed := true; changed; {
			changed = false
			for _, fl := range lines {
				for _, name := range []string{fl.chain, fl.jump} {
					m, ok := unknown[name]
					if !ok {
						continue
					}
					if both := m & fl.cand; both != m || both != fl.cand {
						fl.cand, unknown[name] = both, both
						changed = true
					}
				}
			}
		}
	}
	propagate()
	if opt.Table != NoTable {
		for name, m := range unknown {
			if _, one := m.single(); !one && m&(1<<opt.Table) != 0 {
				unknown[name] = 1 << opt.Table
			}
		}
		propagate()
	}
	for _, fl := range lines {
		if t, one := fl.cand.single(); one {
			if fl.why == "" {
				fl.why = "chain names and targets"
				if opt.Table == t {
					if _, unk := unknown[fl.chain]; unk && !conventional(fl) {
						fl.why = "default table"
					}
				}
			}
			continue
		}
		if fl.cand != 0 && opt.Table != NoTable && fl.cand&(1<<opt.Table) != 0 {
			fl.cand, fl.why = 1<<opt.Table, "default table"
			continue
		}
		what := "-A " + fl.chain
		if fl.decl {
			what = ":" + fl.chain
		}
		if fl.cand == 0 {
			return nil, nil, rep, toParseError(fl.line, lineText(data, fl.line), fmt.Errorf("%w: no table fits %s: %s", ErrNotAllowed, what, conflict(lines, fl, unknown)))
		}
		return nil, nil, rep, toParseError(fl.line, lineText(data, fl.line), fmt.Errorf("%w: %s fits the tables %s: give a default table or a *table section", ErrAmbiguousTable, what, fl.cand))
	}

	// Declarations: every user chain a line writes or jumps to, unless a
	// ":" or -N line of the fragment declares it.
	declared := map[TableID]map[string]bool{}
	for _, fl := range lines {
		t, _ := fl.cand.single()
		if fl.decl || fl.newCh {
			if declared[t] == nil {
				declared[t] = map[string]bool{}
			}
			declared[t][fl.chain] = true
		}
	}
	type decl struct {
		chain string
		line  int
	}
	need := map[TableID][]decl{}
	for _, fl := range lines {
		t, _ := fl.cand.single()
		for _, name := range []string{fl.chain, fl.jump} {
			if name == "" || isBuiltinName(name) || declared[t][name] {
				continue
			}
			if declared[t] == nil {
				declared[t] = map[string]bool{}
			}
			declared[t][name] = true
			need[t] = append(need[t], decl{name, fl.line})
		}
	}
	var out []byte
	var lineMap []int
	emit := func(s string, from int) {
		out = append(out, s...)
		out = append(out, '\n')
		lineMap = append(lineMap, from)
	}
	for _, t := range saveOrder {
		var mine []*fragLine
		for _, fl := range lines {
			if tt, _ := fl.cand.single(); tt == t {
				mine = append(mine, fl)
			}
		}
		if len(mine) == 0 && len(need[t]) == 0 {
			continue
		}
		emit("*"+t.String(), 0)
		ds := need[t]
		slices.SortStableFunc(ds, func(a, b decl) int { return strings.Compare(a.chain, b.chain) })
		for _, d := range ds {
			emit(":"+d.chain+" - [0:0]", d.line)
			rep.Declared = append(rep.Declared, FragmentChain{Table: t, Chain: d.chain, Line: d.line})
		}
		for _, fl := range mine {
			if fl.decl {
				emit(fl.text, fl.line)
			}
		}
		for _, fl := range mine {
			if !fl.decl {
				emit(fl.text, fl.line)
			}
		}
		emit("COMMIT", 0)
	}
	type tc struct {
		t     TableID
		chain string
	}
	jumped := map[tc]bool{}
	for _, fl := range lines {
		t, _ := fl.cand.single()
		rep.Lines = append(rep.Lines, FragmentLine{Line: fl.line, Table: t, Why: fl.why})
		if fl.jump != "" {
			jumped[tc{t, fl.jump}] = true
		}
	}
	for _, fl := range lines {
		t, _ := fl.cand.single()
		k := tc{t, fl.chain}
		if fl.chain != "" && !isBuiltinName(fl.chain) && !jumped[k] {
			jumped[k] = true // once
			rep.Unreached = append(rep.Unreached, FragmentChain{Table: t, Chain: fl.chain, Line: fl.line})
		}
	}
	return out, lineMap, rep, nil
}

// conventional reports whether the line's chain or jump has a name that
// tells its table.
func conventional(fl *fragLine) bool {
	_, a := chainTables(fl.chain)
	_, b := chainTables(fl.jump)
	return a && fl.chain != "" || b && fl.jump != ""
}

// conflict explains why no table fits fl.
func conflict(lines []*fragLine, fl *fragLine, unknown map[string]tableMask) string {
	var parts []string
	for _, name := range []string{fl.chain, fl.jump} {
		if m, known := chainTables(name); known && name != "" {
			parts = append(parts, fmt.Sprintf("chain %s is in %s", name, m))
		}
	}
	for _, name := range []string{fl.chain, fl.jump} {
		if _, ok := unknown[name]; !ok || fl.own == 0 {
			continue
		}
		var uses []string
		for _, o := range lines {
			if o.chain == name || o.jump == name {
				uses = append(uses, fmt.Sprintf("line %d (%s)", o.line, o.own))
			}
		}
		if len(uses) > 1 {
			parts = append(parts, fmt.Sprintf("chain %s is used by lines that fit different tables: %s", name, strings.Join(uses, ", ")))
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "its target or matches run in no table its chain is in")
	}
	return strings.Join(parts, "; ")
}

// restoreFragment is Restore of a fragment: complete it, restore the
// result and name the fragment's lines in errors and placeholders.
func (rs *Ruleset) restoreFragment(data []byte, opt RestoreOptions, committed *[numTables]*validated, objs objects) error {
	fo := *opt.Fragment
	text, lineMap, rep, err := completeFragment(rs.family, data, fo, opt.Lenient)
	if err != nil {
		return err
	}
	if fo.Report != nil {
		*fo.Report = rep
	}
	opt.Fragment = nil
	err = rs.restoreLines(text, opt, committed, objs, lineMap)
	var pe *ParseError
	if errors.As(err, &pe) {
		if pe.Line >= 1 && pe.Line <= len(lineMap) {
			pe.Line = lineMap[pe.Line-1]
		} else {
			pe.Line = 0
		}
		pe.Text = lineText(data, pe.Line)
	}
	return err
}
