package netfilter

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
)

// Reading `iptables -L` output back. Some posts show nothing else of a
// node than `iptables -t nat -nvL`. A listing is read row by row into the
// restore form of each rule (the list form of the common matches and
// targets turned back into their options), the rows become a fragment
// (fragment.go: tables inferred where the listing does not say, chains
// declared), and every chain read is listed again with the same flags:
// a row that does not list back exactly as given is refused with its
// line, since the listing did not tell the rule. What is read is thus
// what the listing shows, never a guess.

// ErrListing reports a listing row or header that cannot be read back.
var ErrListing = errors.New("listing cannot be read back")

// listBlock is one table's listing in the input: a run of chains.
type listBlock struct {
	table  TableID // NoTable: each line's table is inferred
	opt    ListOptions
	chains []*listChain
	// numericKnown says whether a row told -n from its absence.
	numericKnown bool
}

type listChain struct {
	name  string
	line  int
	refs  bool // a user chain's "(N references)" header
	text  string
	title string // the column titles line
	rows  []listRow
}

type listRow struct {
	line int
	text string
}

// listingToFragment turns a listing into fragment text with one line per
// input line (so line numbers carry over), and the table of each line the
// listing tells.
func listingToFragment(f Family, data []byte) ([]byte, map[int]TableID, []*listBlock, error) {
	var out strings.Builder
	tables := map[int]TableID{}
	var blocks []*listBlock
	var cur *listBlock
	var ch *listChain
	promptTable := NoTable
	hasPrompt := false
	lines := strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	newBlock := func() {
		cur = &listBlock{table: promptTable}
		if !hasPrompt {
			cur.table = NoTable
		}
		blocks = append(blocks, cur)
		hasPrompt = false
	}
	for i, raw := range lines {
		n := i + 1
		raw = strings.TrimSuffix(raw, "\r")
		fail := func(err error) error { return toParseError(n, raw, err) }
		trimmed := strings.TrimSpace(raw)
		switch {
		case trimmed == "":
			ch = nil
			out.WriteString("\n")
			continue
		case strings.HasPrefix(trimmed, "$ ") || strings.HasPrefix(trimmed, "# iptables") || strings.HasPrefix(trimmed, "# ip6tables") ||
			strings.HasPrefix(trimmed, "iptables ") || strings.HasPrefix(trimmed, "sudo "):
			// The command that printed what follows: its -t names the
			// table (filter without one, as iptables does).
			args := strings.Fields(strings.TrimPrefix(strings.TrimPrefix(trimmed, "$ "), "# "))
			promptTable, hasPrompt = Filter, true
			for j := 0; j < len(args); j++ {
				if (args[j] == "-t" || args[j] == "--table") && j+1 < len(args) {
					t, err := ParseTable(args[j+1])
					if err != nil {
						return nil, nil, nil, fail(atToken(args[j+1], err))
					}
					promptTable = t
				}
			}
			cur, ch = nil, nil
			out.WriteString("\n")
			continue
		case strings.HasPrefix(trimmed, "# table "):
			// The form of packetwalk's own golden listings.
			t, err := ParseTable(strings.TrimSpace(trimmed[len("# table "):]))
			if err != nil {
				return nil, nil, nil, fail(err)
			}
			promptTable, hasPrompt = t, true
			cur, ch = nil, nil
			out.WriteString("\n")
			continue
		case trimmed[0] == '#':
			out.WriteString("\n")
			continue
		case strings.HasPrefix(raw, "Chain "):
			c, builtin, line, err := listChainHeader(raw)
			if err != nil {
				return nil, nil, nil, fail(err)
			}
			// iptables lists the built-in chains first: a built-in
			// chain after a user chain, or a chain seen before, starts
			// another table's listing.
			if cur == nil || hasPrompt {
				newBlock()
			} else {
				for _, o := range cur.chains {
					if o.name == c.name || builtin && o.refs {
						newBlock()
						break
					}
				}
			}
			c.line = n
			cur.chains = append(cur.chains, c)
			ch = c
			out.WriteString(line + "\n")
			continue
		case ch == nil && (trimmed[0] == '*' || trimmed[0] == ':' || strings.HasPrefix(trimmed, "-A ")):
			return nil, nil, nil, fail(fmt.Errorf("%w: this is iptables-save or -S output, not a listing: read it without Listing (a fragment of it with Fragment, --fragment)", ErrListing))
		case ch == nil:
			return nil, nil, nil, fail(fmt.Errorf("%w: expected a \"Chain NAME (...)\" line before %q", ErrListing, trimmed))
		case ch.title == "":
			o, err := listTitle(raw)
			if err != nil {
				return nil, nil, nil, fail(err)
			}
			if prev := cur.opt; len(cur.chains) > 1 && (o.Verbose != prev.Verbose || o.Exact != prev.Exact || o.LineNumbers != prev.LineNumbers) {
				return nil, nil, nil, fail(fmt.Errorf("%w: the column titles differ from those of chain %s: one listing's flags per table", ErrListing, cur.chains[0].name))
			}
			o.Numeric = cur.opt.Numeric
			cur.opt, ch.title = o, raw
			out.WriteString("\n")
			continue
		}
		numeric, known, line, err := listRowToRule(f, ch.name, raw, cur.opt)
		if err != nil {
			return nil, nil, nil, fail(err)
		}
		if known {
			if cur.numericKnown && cur.opt.Numeric != numeric {
				return nil, nil, nil, fail(fmt.Errorf("%w: rows with and without -n in one listing", ErrListing))
			}
			cur.opt.Numeric, cur.numericKnown = numeric, true
		}
		ch.rows = append(ch.rows, listRow{n, raw})
		out.WriteString(line + "\n")
	}
	// The table of a block: named by its command, else told by the set of
	// its built-in chains (PREROUTING and POSTROUTING without FORWARD is
	// nat, all five mangle, ...); filter and security have the same ones,
	// filter is taken.
	for _, b := range blocks {
		if b.table == NoTable {
			var set uint8
			for _, c := range b.chains {
				for h := Hook(0); h < numHooks; h++ {
					if h.String() == c.name {
						set |= 1 << h
					}
				}
			}
			for _, t := range []TableID{Filter, NAT, Mangle, Raw} {
				var want uint8
				for _, h := range tableHooks[t] {
					want |= 1 << h
				}
				if set == want {
					b.table = t
				}
			}
		}
		if b.table == NoTable {
			continue
		}
		for _, c := range b.chains {
			tables[c.line] = b.table
			for _, r := range c.rows {
				tables[r.line] = b.table
			}
		}
	}
	return []byte(out.String()), tables, blocks, nil
}

// listChainHeader reads "Chain NAME (policy P [N packets, M bytes])" or
// "Chain NAME (N references)" into a chain line of restore input.
func listChainHeader(raw string) (*listChain, bool, string, error) {
	rest := strings.TrimPrefix(raw, "Chain ")
	name, paren, ok := strings.Cut(rest, " (")
	if !ok || name == "" || !strings.HasSuffix(paren, ")") {
		return nil, false, "", fmt.Errorf("%w: expected \"Chain NAME (policy P)\" or \"Chain NAME (N references)\"", ErrListing)
	}
	paren = strings.TrimSuffix(paren, ")")
	c := &listChain{name: name, text: raw}
	if pol, ok := strings.CutPrefix(paren, "policy "); ok {
		f := strings.Fields(pol)
		cnt := "[0:0]"
		switch {
		case len(f) == 1:
		case len(f) == 5 && f[2] == "packets," && f[4] == "bytes":
			p, err := parseListNum(f[1])
			if err != nil {
				return nil, false, "", err
			}
			by, err := parseListNum(f[3])
			if err != nil {
				return nil, false, "", err
			}
			cnt = fmt.Sprintf("[%d:%d]", p, by)
		default:
			return nil, false, "", fmt.Errorf("%w: bad policy %q", ErrListing, paren)
		}
		if f[0] != "ACCEPT" && f[0] != "DROP" {
			return nil, false, "", atToken(f[0], fmt.Errorf("%w: policy %q", ErrListing, f[0]))
		}
		return c, true, ":" + name + " " + f[0] + " " + cnt, nil
	}
	refs, ok := strings.CutSuffix(paren, " references")
	if _, err := strconv.Atoi(refs); !ok || err != nil {
		return nil, false, "", fmt.Errorf("%w: expected \"(N references)\" after the chain name", ErrListing)
	}
	c.refs = true
	return c, false, ":" + name + " - [0:0]", nil
}

// listTitle tells the flags of a listing from its column titles.
func listTitle(raw string) (ListOptions, error) {
	var o ListOptions
	s := raw
	if rest, ok := strings.CutPrefix(s, "num  "); ok {
		o.LineNumbers, s = true, rest
	}
	switch {
	case strings.HasPrefix(s, "    pkts      bytes "):
		o.Verbose, o.Exact = true, true
	case strings.HasPrefix(s, " pkts bytes "):
		o.Verbose = true
	}
	var want []byte
	want = appendListHeader(want, 0, &Chain{Name: "X"}, o)
	_, title, _ := strings.Cut(string(want), "\n")
	if strings.TrimRight(title, "\n ") != strings.TrimRight(raw, " ") {
		return o, fmt.Errorf("%w: expected the column titles of iptables -L", ErrListing)
	}
	return o, nil
}

// parseListNum reads a counter as -L prints it: digits, with a K, M, G
// or T unit without -x (rounded, read as the unit's multiple).
func parseListNum(s string) (uint64, error) {
	mult := uint64(1)
	if s != "" {
		switch s[len(s)-1] {
		case 'K':
			mult = 1e3
		case 'M':
			mult = 1e6
		case 'G':
			mult = 1e9
		case 'T':
			mult = 1e12
		}
		if mult > 1 {
			s = s[:len(s)-1]
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, atToken(s, fmt.Errorf("%w: bad counter %q", ErrListing, s))
	}
	return n * mult, nil
}

// listFields splits a row into its words, keeping the start of each.
func listFields(s string) (words []string, starts []int) {
	for i := 0; i < len(s); {
		for i < len(s) && s[i] == ' ' {
			i++
		}
		if i >= len(s) {
			break
		}
		j := i
		for j < len(s) && s[j] != ' ' {
			j++
		}
		words, starts = append(words, s[i:j]), append(starts, i)
		i = j
	}
	return words, starts
}

// listRowToRule turns one row into "[p:b] -A CHAIN ..." and says whether
// the row tells -n (numeric) from its absence.
func listRowToRule(f Family, chain, raw string, o ListOptions) (numeric, known bool, line string, err error) {
	s := raw
	pos := 0
	words, starts := listFields(s)
	w := 0
	next := func(what string) (string, error) {
		if w >= len(words) {
			return "", fmt.Errorf("%w: row ends before its %s column", ErrListing, what)
		}
		w++
		pos = starts[w-1] + len(words[w-1])
		return words[w-1], nil
	}
	var args []string
	counters := ""
	if o.LineNumbers {
		if _, err := next("num"); err != nil {
			return false, false, "", err
		}
	}
	if o.Verbose {
		p, err := next("pkts")
		if err != nil {
			return false, false, "", err
		}
		by, err := next("bytes")
		if err != nil {
			return false, false, "", err
		}
		pn, err := parseListNum(p)
		if err != nil {
			return false, false, "", err
		}
		bn, err := parseListNum(by)
		if err != nil {
			return false, false, "", err
		}
		counters = fmt.Sprintf("[%d:%d] ", pn, bn)
	}
	// The target column starts right after the line number (padded to
	// 4) or the counters, each followed by one blank; it is empty when
	// that column holds a blank.
	target := ""
	at := 0
	switch {
	case o.Verbose:
		at = pos + 1
	case o.LineNumbers:
		at = starts[0] + max(len(words[0]), 4) + 1
	}
	if at < len(s) && s[at] != ' ' {
		target, _ = next("target")
	}
	prot, err := next("prot")
	if err != nil {
		return false, false, "", err
	}
	if p, ok := strings.CutPrefix(prot, "!"); ok {
		args = append(args, "!")
		prot = p
	}
	switch prot {
	case "0", "all":
		if len(args) > 0 {
			return false, false, "", atToken(prot, fmt.Errorf("%w: inverted protocol all", ErrListing))
		}
	default:
		// A number is printed with and without -n for a protocol
		// /etc/protocols does not name; a name tells no -n.
		if _, err := strconv.Atoi(prot); err != nil {
			if _, ok := inet.ParseProto(prot); ok {
				known = true
			}
		}
		args = append(args, "-p", prot)
	}
	if prot == "0" {
		numeric, known = true, true
	} else if prot == "all" {
		known = true
	}
	opt, err := next("opt")
	if err != nil {
		return false, false, "", err
	}
	switch opt {
	case "--":
	case "-f":
		args = append(args, "-f")
	case "!f":
		args = append(args, "!", "-f")
	default:
		return false, false, "", atToken(opt, fmt.Errorf("%w: opt column %q", ErrListing, opt))
	}
	if o.Verbose {
		for _, flag := range []string{"-i", "-o"} {
			v, err := next("interface")
			if err != nil {
				return false, false, "", err
			}
			inv := false
			if x, ok := strings.CutPrefix(v, "!"); ok {
				inv, v = true, x
			}
			if v == "*" || v == "any" {
				continue
			}
			if inv {
				args = append(args, "!")
			}
			args = append(args, flag, v)
		}
	}
	for _, flag := range []string{"-s", "-d"} {
		v, err := next("address")
		if err != nil {
			return false, false, "", err
		}
		inv := false
		if x, ok := strings.CutPrefix(v, "!"); ok {
			inv, v = true, x
		}
		switch v {
		case "0.0.0.0/0", "::/0":
			numeric, known = true, true
			continue
		case "anywhere":
			known = true
			continue
		}
		if a, ok := listNameAddr(v); ok {
			v = a
		}
		if inv {
			args = append(args, "!")
		}
		args = append(args, flag, v)
	}
	opts := ""
	if pos < len(s) {
		opts = strings.TrimLeft(s[pos:], " ")
	}
	gotoJump := false
	if rest, ok := strings.CutPrefix(opts, "[goto] "); ok {
		gotoJump, opts = true, rest
	}
	more, err := listOptions(f, target, opts)
	if err != nil {
		return false, false, "", err
	}
	args = append(args, more.matches...)
	switch {
	case target == "":
		if len(more.target) > 0 {
			return false, false, "", fmt.Errorf("%w: target options without a target", ErrListing)
		}
	case gotoJump:
		args = append(args, "-g", target)
	default:
		name := target
		if name == "CT" && len(more.target) == 0 {
			name = "NOTRACK" // NOTRACK lists as CT
		}
		args = append(args, "-j", name)
		args = append(args, more.target...)
	}
	b := []byte(counters + "-A " + chain)
	return numeric, known, string(appendArgsAsGiven(b, args)), nil
}

// listNameAddr turns the names -L prints without -n back into addresses.
func listNameAddr(v string) (string, bool) {
	name, mask, hasMask := strings.Cut(v, "/")
	for a, n := range listHostNames {
		if n == name {
			name = a.String()
			if !hasMask {
				return name, true
			}
			return name + "/" + mask, true
		}
	}
	for a, n := range listNetworkNames {
		if n == name {
			name = a.String()
			if !hasMask {
				return name, true
			}
			return name + "/" + mask, true
		}
	}
	return "", false
}

type listOpts struct{ matches, target []string }

// listOptions reads the options part of a row: the matches' list forms
// and the target's, back into options.
func listOptions(f Family, target, s string) (listOpts, error) {
	var out listOpts
	var words []string
	// Comments hold blanks: one word each.
	for s != "" {
		s = strings.TrimLeft(s, " ")
		if s == "" {
			break
		}
		if rest, ok := strings.CutPrefix(s, "/* "); ok {
			end := strings.Index(rest, " */")
			if end < 0 {
				return out, fmt.Errorf("%w: comment without its closing */", ErrListing)
			}
			words = append(words, "/* "+rest[:end]+" */")
			s = rest[end+3:]
			continue
		}
		i := strings.IndexByte(s, ' ')
		if i < 0 {
			i = len(s)
		}
		words = append(words, s[:i])
		s = s[i:]
	}
	i := 0
	peek := func(k int) string {
		if i+k < len(words) {
			return words[i+k]
		}
		return ""
	}
	unread := func() error {
		return atToken(words[i], fmt.Errorf("%w: %q is not a list form packetwalk reads back (comment, tcp/udp ports and flags, mark, ctstate and the conntrack options, state, addrtype, statistic, multiport, match-set; DNAT, SNAT, MASQUERADE, REDIRECT, MARK, REJECT): give iptables-save or iptables -S output", ErrListing, strings.Join(words[i:], " ")))
	}
	isTarget := func() bool {
		switch target {
		case "DNAT", "SNAT":
			return strings.HasPrefix(words[i], "to:")
		case "MASQUERADE", "REDIRECT":
			return words[i] == "masq" || words[i] == "redir" || words[i] == "random" || words[i] == "random-fully" || words[i] == "persistent"
		case "MARK":
			return words[i] == "MARK"
		case "REJECT":
			return words[i] == "reject-with"
		}
		return false
	}
	for i < len(words) {
		wd := words[i]
		inv := false
		if wd == "!" && i+1 < len(words) {
			inv = true
			i++
			wd = words[i]
		}
		not := func() []string {
			if inv {
				return []string{"!"}
			}
			return nil
		}
		switch {
		case !inv && isTarget():
			t, n, err := listTarget(target, words[i:])
			if err != nil {
				return out, err
			}
			out.target = t
			i += n
			if i < len(words) {
				return out, unread()
			}
		case strings.HasPrefix(wd, "/* "):
			if inv {
				return out, unread()
			}
			out.matches = append(out.matches, "-m", "comment", "--comment", strings.TrimSuffix(strings.TrimPrefix(wd, "/* "), " */"))
			i++
		case !inv && (wd == "tcp" || wd == "udp" || wd == "udplite" || wd == "sctp" || wd == "dccp"):
			m := []string{"-m", wd}
			i++
			for i < len(words) {
				k, v, ok := strings.Cut(words[i], ":")
				if !ok {
					break
				}
				opt := ""
				switch k {
				case "spt", "spts":
					opt = "--sport"
				case "dpt", "dpts":
					opt = "--dport"
				case "flags":
					if wd != "tcp" {
						return out, unread()
					}
					inv := false
					if x, ok := strings.CutPrefix(v, "!"); ok {
						inv, v = true, x
					}
					mask, cmp, ok := strings.Cut(v, "/")
					if !ok {
						return out, unread()
					}
					mask, cmp = listFlagNames(mask), listFlagNames(cmp)
					if inv {
						m = append(m, "!")
					}
					m = append(m, "--tcp-flags", mask, cmp)
					i++
					continue
				}
				if opt == "" {
					break
				}
				if x, ok := strings.CutPrefix(v, "!"); ok {
					m = append(m, "!")
					v = x
				}
				m = append(m, opt, v)
				i++
			}
			out.matches = append(out.matches, m...)
		case wd == "mark" && peek(1) == "match":
			i += 2
			if peek(0) == "!" {
				inv = true
				i++
			}
			if i >= len(words) {
				return out, fmt.Errorf("%w: mark match without its value", ErrListing)
			}
			out.matches = append(out.matches, "-m", "mark")
			out.matches = append(out.matches, not()...)
			out.matches = append(out.matches, "--mark", words[i])
			i++
		case strings.HasPrefix(wd, "ct") && ctListOption(wd):
			// The conntrack match lists its options as iptables-save
			// does without the dashes; consecutive ones are one match.
			m := []string{"-m", "conntrack"}
			for {
				m = append(m, not()...)
				m = append(m, "--"+wd)
				i++
				if i >= len(words) {
					return out, fmt.Errorf("%w: %s without its value", ErrListing, wd)
				}
				m = append(m, words[i])
				i++
				inv = false
				if i < len(words) && words[i] == "!" && i+1 < len(words) && ctListOption(words[i+1]) {
					inv = true
					i++
				}
				if i >= len(words) || !ctListOption(words[i]) {
					break
				}
				wd = words[i]
			}
			out.matches = append(out.matches, m...)
		case wd == "state":
			i++
			if i >= len(words) {
				return out, fmt.Errorf("%w: state without its states", ErrListing)
			}
			out.matches = append(out.matches, "-m", "state")
			out.matches = append(out.matches, not()...)
			out.matches = append(out.matches, "--state", words[i])
			i++
		case wd == "ADDRTYPE" && peek(1) == "match" && !inv:
			i += 2
			m := []string{"-m", "addrtype"}
			for i < len(words) {
				switch words[i] {
				case "src-type", "dst-type":
					if i+1 >= len(words) {
						return out, fmt.Errorf("%w: %s without its type", ErrListing, words[i])
					}
					v := words[i+1]
					opt := "--" + words[i]
					if x, ok := strings.CutPrefix(v, "!"); ok {
						m = append(m, "!")
						v = x
					}
					m = append(m, opt, v)
					i += 2
					continue
				case "limit-in", "limit-out":
					m = append(m, "--limit-iface-"+strings.TrimPrefix(words[i], "limit-"))
					i++
					continue
				}
				break
			}
			out.matches = append(out.matches, m...)
		case wd == "statistic" && peek(1) == "mode" && !inv:
			mode := peek(2)
			i += 3
			m := []string{"-m", "statistic", "--mode", mode}
			if peek(0) == "!" {
				m = append(m, "!")
				i++
			}
			switch mode {
			case "random":
				if peek(0) != "probability" || i+1 >= len(words) {
					return out, unread()
				}
				m = append(m, "--probability", words[i+1])
				i += 2
			case "nth":
				if peek(0) != "every" || i+1 >= len(words) {
					return out, unread()
				}
				m = append(m, "--every", words[i+1])
				i += 2
				if peek(0) == "packet" && i+1 < len(words) {
					m = append(m, "--packet", words[i+1])
					i += 2
				}
			default:
				return out, unread()
			}
			out.matches = append(out.matches, m...)
		case wd == "multiport" && !inv:
			dir := peek(1)
			i += 2
			m := []string{"-m", "multiport"}
			switch dir {
			case "sports", "dports", "ports":
			default:
				return out, unread()
			}
			if i >= len(words) {
				return out, unread()
			}
			ports := words[i]
			if x, ok := strings.CutPrefix(ports, "!"); ok {
				m = append(m, "!")
				ports = x
			}
			m = append(m, "--"+dir, ports)
			i++
			out.matches = append(out.matches, m...)
		case (wd == "source" || wd == "destination") && peek(1) == "IP" && peek(2) == "range" && !inv:
			// iprange: "source IP range [!] A-B", once per direction.
			m := []string{"-m", "iprange"}
			for (peek(0) == "source" || peek(0) == "destination") && peek(1) == "IP" && peek(2) == "range" {
				opt := "--src-range"
				if peek(0) == "destination" {
					opt = "--dst-range"
				}
				i += 3
				if peek(0) == "!" {
					m = append(m, "!")
					i++
				}
				if i >= len(words) {
					return out, fmt.Errorf("%w: IP range without its addresses", ErrListing)
				}
				m = append(m, opt, words[i])
				i++
			}
			out.matches = append(out.matches, m...)
		case wd == "recent:":
			i++
			mode := ""
			for _, mn := range recentModeNames {
				if mn[1] == peek(0) {
					mode = mn[0]
				}
			}
			if mode == "" {
				return out, unread()
			}
			m := []string{"-m", "recent"}
			m = append(m, not()...)
			m = append(m, "--"+mode)
			i++
			side := "--rsource"
			for i < len(words) {
				switch peek(0) {
				case "seconds:", "hit_count:", "name:", "mask:", "side:":
					if i+1 >= len(words) {
						return out, unread()
					}
					v := words[i+1]
					switch peek(0) {
					case "seconds:":
						m = append(m, "--seconds", v)
					case "hit_count:":
						m = append(m, "--hitcount", v)
					case "name:":
						m = append(m, "--name", v)
					case "mask:":
						m = append(m, "--mask", v)
					case "side:":
						side = "--r" + v
					}
					i += 2
					continue
				case "reap":
					m = append(m, "--reap")
					i++
					continue
				case "TTL-Match":
					m = append(m, "--rttl")
					i++
					continue
				}
				break
			}
			out.matches = append(out.matches, append(m, side)...)
		case wd == "match-set":
			if i+2 >= len(words) {
				return out, fmt.Errorf("%w: match-set without its set and flags", ErrListing)
			}
			m := []string{"-m", "set"}
			m = append(m, not()...)
			m = append(m, "--match-set", words[i+1], words[i+2])
			i += 3
			out.matches = append(out.matches, m...)
		default:
			if inv {
				i--
			}
			return out, unread()
		}
	}
	return out, nil
}

// ctListOption reports whether w is an option name of the conntrack
// match as it lists it.
func ctListOption(w string) bool {
	switch w {
	case "ctstate", "ctproto", "ctorigsrc", "ctorigdst", "ctreplsrc", "ctrepldst", "ctorigsrcport", "ctorigdstport",
		"ctreplsrcport", "ctrepldstport", "ctstatus", "ctexpire", "ctdir":
		return true
	}
	return false
}

// listFlagNames turns "0x17" into "FIN,SYN,RST,ACK"; names stay.
func listFlagNames(v string) string {
	x, ok := strings.CutPrefix(v, "0x")
	if !ok {
		return v
	}
	n, err := strconv.ParseUint(x, 16, 8)
	if err != nil {
		return v
	}
	var names []string
	for _, fl := range []struct {
		bit  uint64
		name string
	}{{1, "FIN"}, {2, "SYN"}, {4, "RST"}, {8, "PSH"}, {16, "ACK"}, {32, "URG"}, {64, "ECE"}, {128, "CWR"}} {
		if n&fl.bit != 0 {
			names = append(names, fl.name)
		}
	}
	if len(names) == 0 {
		return "NONE"
	}
	return strings.Join(names, ",")
}

// listTarget reads a target's list form; it returns the options and the
// number of words used.
func listTarget(target string, w []string) ([]string, int, error) {
	bad := func() ([]string, int, error) {
		return nil, 0, atToken(w[0], fmt.Errorf("%w: %s target options %q", ErrListing, target, strings.Join(w, " ")))
	}
	var opts []string
	i := 0
	switch target {
	case "DNAT", "SNAT":
		opt := "--to-destination"
		if target == "SNAT" {
			opt = "--to-source"
		}
		opts = append(opts, opt, strings.TrimPrefix(w[0], "to:"))
		i = 1
	case "MASQUERADE", "REDIRECT":
		if len(w) >= 3 && (w[0] == "masq" && w[1] == "ports:" || w[0] == "redir" && w[1] == "ports") {
			opts = append(opts, "--to-ports", w[2])
			i = 3
		}
	case "MARK":
		if len(w) < 3 {
			return bad()
		}
		switch w[1] {
		case "and":
			opts = append(opts, "--and-mark", w[2])
		case "or":
			opts = append(opts, "--or-mark", w[2])
		case "xor":
			opts = append(opts, "--xor-mark", w[2])
		case "set":
			opts = append(opts, "--set-mark", w[2])
		case "xset":
			opts = append(opts, "--set-xmark", w[2])
		default:
			return bad()
		}
		return opts, 3, nil
	case "REJECT":
		if len(w) < 2 {
			return bad()
		}
		return []string{"--reject-with", w[1]}, 2, nil
	}
	for i < len(w) {
		switch w[i] {
		case "random", "random-fully", "persistent":
			opts = append(opts, "--"+w[i])
			i++
		default:
			return opts, i, nil
		}
	}
	return opts, i, nil
}

// restoreListing is Restore of a listing: read into a fragment, restored
// into a copy, and kept only when every chain read lists back as given.
func (rs *Ruleset) restoreListing(data []byte, opt RestoreOptions, committed *[numTables]*validated, objs objects) error {
	text, tables, blocks, err := listingToFragment(rs.family, data)
	if err != nil {
		return err
	}
	fo := FragmentOptions{}
	if opt.Fragment != nil {
		fo = *opt.Fragment
	}
	fo.lineTables = tables
	opt.Fragment, opt.Listing = &fo, false
	opt.Counters = true
	work := rs.Clone()
	var rep FragmentReport
	if fo.Report == nil {
		fo.Report = &rep
	}
	if err := work.restoreFragment(text, opt, committed, objs); err != nil {
		if committed != nil {
			*committed = [numTables]*validated{}
		}
		var pe *ParseError
		if errors.As(err, &pe) {
			pe.Text = lineText(data, pe.Line)
		}
		return err
	}
	// Each chain lists back as given.
	lineTable := map[int]TableID{}
	for _, l := range fo.Report.Lines {
		lineTable[l.Line] = l.Table
	}
	for _, b := range blocks {
		for _, c := range b.chains {
			t := lineTable[c.line]
			got, err := work.AppendList(nil, t, c.name, b.opt)
			if err != nil {
				return toParseError(c.line, c.text, err)
			}
			gl := strings.Split(strings.TrimSuffix(string(got), "\n"), "\n")
			if !c.refs && gl[0] != c.text {
				if committed != nil {
					*committed = [numTables]*validated{}
				}
				return toParseError(c.line, c.text, fmt.Errorf("%w: lists back as %q", ErrListing, gl[0]))
			}
			for k, r := range c.rows {
				if k+2 >= len(gl) || gl[k+2] != r.text {
					back := ""
					if k+2 < len(gl) {
						back = gl[k+2]
					}
					if committed != nil {
						*committed = [numTables]*validated{}
					}
					return toParseError(r.line, r.text, fmt.Errorf("%w: the row reads back as %q: the listing does not tell this rule (give iptables-save or iptables -S output)", ErrListing, back))
				}
			}
		}
	}
	for _, b := range blocks {
		if !b.opt.Verbose && len(b.chains) > 0 {
			fo.Report.Notes = append(fo.Report.Notes, fmt.Sprintf("line %d: a listing without -v shows no interfaces: its rules were read without -i and -o (list with -v to keep them)", b.chains[0].line))
		}
	}
	rs.tables = work.tables
	return nil
}
