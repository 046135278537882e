package main

import (
	"flag"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/netfilter"
)

// The views print the ruleset as the kernel tools would after the
// packets ran: iptables-save and iptables -S / -L.

var saveCmd = command{
	usage: "packetwalk save [node input] [--packets FILE] [-c] [-t TABLE] [-6]",
	about: `
Runs the packets of --packets FILE (if any) through the node, then prints
the ruleset as iptables-save (or ip6tables-save) prints it. The header and
footer lines carry the simulated clock's time. The IPv6 tables are shown
with -6, or when only --rules6 was given.
` + nodeFlagsHelp,
	examples: `  packetwalk save --node ./node1 --packets packets.txt -c
  packetwalk save --rules iptables-save -t nat
`,
}

var listCmd = command{
	usage: "packetwalk list [node input] [--packets FILE] [-t TABLE] [-L|-S] [-n] [-v] [-x] [--line-numbers] [-6] [CHAIN [N]]",
	about: `
Runs the packets of --packets FILE (if any) through the node, then prints
a table as 'iptables -t TABLE -L' (the default) or 'iptables -t TABLE -S'
prints it, counters included. Short flags may be combined as iptables
users type them (-nvL, -nvx). The IPv6 tables are shown with -6, or when
only --rules6 was given.
` + nodeFlagsHelp,
	examples: `  packetwalk list --node ./node1 --packets packets.txt -t nat -nvL
  packetwalk list --rules iptables-save -t nat -S KUBE-SERVICES
  packetwalk list --rules iptables-save -S INPUT 2
`,
}

var combinedShort = regexp.MustCompile(`^-[nvxSLc6]{2,}$`)

// splitShortFlags turns "-nvL" into "-n -v -L" as getopt would.
func splitShortFlags(args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		if combinedShort.MatchString(a) {
			for _, r := range a[1:] {
				out = append(out, "-"+string(r))
			}
			continue
		}
		out = append(out, a)
	}
	return out
}

// viewSetup is what save and list share: the node, packets run, and the
// ruleset to print.
func (c *cmdEnv) viewSetup(ni *nodeInput, packets string, six bool) (*node, *netfilter.Ruleset, error) {
	specs, err := c.collectSpecs(ni, packets, nil)
	if err != nil {
		return nil, nil, err
	}
	nd, err := c.buildNode(ni)
	if err != nil {
		return nil, nil, err
	}
	if _, err := runPackets(nd, specs); err != nil {
		return nil, nil, err
	}
	f := netfilter.IPv4
	if six || nd.only6 {
		f = netfilter.IPv6
	}
	return nd, nd.host.Ruleset(f), nil
}

func runSave(c *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("save", flag.ContinueOnError)
	var ni nodeInput
	ni.register(fs)
	packets := fs.String("packets", "", "run the packets of `FILE` first")
	counters := fs.Bool("c", false, "print packet and byte counters")
	table := fs.String("t", "", "only `TABLE`")
	six := fs.Bool("6", false, "show the IPv6 tables (ip6tables-save)")
	pos, err := c.parseFlags(fs, saveCmd, splitShortFlags(args))
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (packets for save come from --packets FILE)", pos[0])
	}
	var only *netfilter.TableID
	if *table != "" {
		id, err := netfilter.ParseTable(*table)
		if err != nil {
			return usagef("-t: %v", err)
		}
		only = &id
	}
	nd, rs, err := c.viewSetup(&ni, *packets, *six)
	if err != nil {
		return err
	}
	opt := netfilter.SaveOptions{Counters: *counters, Time: nd.clock.Now(), Backend: netfilter.Backend(ni.backend)}
	if only != nil {
		c.out.Write(appendOneTable(nil, rs, *only, opt))
		return nil
	}
	c.out.Write(rs.AppendSave(nil, opt))
	return nil
}

// appendOneTable prints only table id of rs as iptables-save -t does.
func appendOneTable(b []byte, rs *netfilter.Ruleset, id netfilter.TableID, opt netfilter.SaveOptions) []byte {
	full := rs.AppendSave(nil, opt)
	// Each table's block runs from its "# Generated" (or "*name") line to
	// its "# Completed" (or COMMIT) line; pick the one for id.
	lines := strings.SplitAfter(string(full), "\n")
	var block []string
	var keep bool
	for _, l := range lines {
		if strings.HasPrefix(l, "# Generated") || (opt.Time.IsZero() && strings.HasPrefix(l, "*")) {
			block = block[:0]
			keep = false
		}
		block = append(block, l)
		if strings.HasPrefix(l, "*") {
			keep = strings.TrimSpace(l[1:]) == id.String()
		}
		end := strings.HasPrefix(l, "# Completed") || (opt.Time.IsZero() && l == "COMMIT\n")
		if end && keep {
			return append(b, strings.Join(block, "")...)
		}
	}
	return b
}

func runList(c *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("list", flag.ContinueOnError)
	var ni nodeInput
	ni.register(fs)
	packets := fs.String("packets", "", "run the packets of `FILE` first")
	table := fs.String("t", "filter", "`TABLE` to show")
	rulesForm := fs.Bool("S", false, "print rules as 'iptables -S' does")
	listForm := fs.Bool("L", false, "print rules as 'iptables -L' does (the default)")
	numeric := fs.Bool("n", false, "numeric output (-L)")
	verbose := fs.Bool("v", false, "verbose: counters, interfaces")
	exact := fs.Bool("x", false, "exact counters (-L)")
	lineNumbers := fs.Bool("line-numbers", false, "number the rules (-L)")
	six := fs.Bool("6", false, "show the IPv6 tables (ip6tables)")
	pos, err := c.parseFlags(fs, listCmd, splitShortFlags(args))
	if err != nil {
		return err
	}
	if *rulesForm && *listForm {
		return usagef("-S and -L are mutually exclusive")
	}
	id, err := netfilter.ParseTable(*table)
	if err != nil {
		return usagef("-t: %v", err)
	}
	var chain string
	n := 0
	switch len(pos) {
	case 0:
	case 1, 2:
		chain = pos[0]
		if len(pos) == 2 {
			n, err = strconv.Atoi(pos[1])
			if err != nil || n < 1 {
				return usagef("bad rule number %q: expected a number ≥ 1", pos[1])
			}
		}
	default:
		return usagef("unexpected argument %q: expected [CHAIN [N]]", pos[2])
	}
	_, rs, err := c.viewSetup(&ni, *packets, *six)
	if err != nil {
		return err
	}
	var out []byte
	if *rulesForm {
		out, err = rs.AppendRules(nil, id, chain, n, *verbose)
	} else {
		if n > 0 {
			return fmt.Errorf("-L CHAIN N (one rule) is %w; use -S CHAIN N", errNotYet)
		}
		out, err = rs.AppendList(nil, id, chain, netfilter.ListOptions{
			Numeric: *numeric, Verbose: *verbose, Exact: *exact, LineNumbers: *lineNumbers,
		})
	}
	if err != nil {
		return err
	}
	c.out.Write(out)
	return nil
}

var conntrackCmd = command{
	usage: "packetwalk conntrack [node input] [--packets FILE]",
	about: `
Runs the packets of --packets FILE (if any) through the node, then prints
the connection-tracking table as 'conntrack -L' does: the entries on
standard output, the "N flow entries have been shown." line on standard
error. --conntrack FILE (or a conntrack file in --node DIR) preloads it.
` + nodeFlagsHelp,
	examples: `  packetwalk conntrack --node ./node1 --packets packets.txt
`,
}

func runConntrack(c *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("conntrack", flag.ContinueOnError)
	var ni nodeInput
	ni.register(fs)
	packets := fs.String("packets", "", "run the packets of `FILE` first")
	pos, err := c.parseFlags(fs, conntrackCmd, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	nd, _, err := c.viewSetup(&ni, *packets, false)
	if err != nil {
		return err
	}
	ct := nd.host.Conntrack()
	if err := ct.Dump(&c.out, conntrack.Format{}); err != nil {
		return err
	}
	c.summary = fmt.Sprintf("conntrack v1.4.7 (conntrack-tools): %d flow entries have been shown.\n", ct.Len())
	return nil
}

var ipsetCmd = command{
	usage: "packetwalk ipset [node input] [--packets FILE] [list|save] [SET...]",
	about: `
Runs the packets of --packets FILE (if any) through the node, then prints
its sets as 'ipset list' (the default) or 'ipset save' does, all of them
or the named ones. Sets come from --ipsets FILE or ipset-save in --node
DIR; with rules loaded, 'References' counts the rules using each set.
` + nodeFlagsHelp,
	examples: `  packetwalk ipset --node ./node1 list KUBE-LOOP-BACK
  packetwalk ipset --ipsets ipset-save --rules iptables-save save
`,
}

func runIpset(c *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("ipset", flag.ContinueOnError)
	var ni nodeInput
	ni.register(fs)
	packets := fs.String("packets", "", "run the packets of `FILE` first")
	pos, err := c.parseFlags(fs, ipsetCmd, args)
	if err != nil {
		return err
	}
	verb := "list"
	if len(pos) > 0 && (pos[0] == "list" || pos[0] == "save") {
		verb, pos = pos[0], pos[1:]
	}
	nd, _, err := c.viewSetup(&ni, *packets, false)
	if err != nil {
		return err
	}
	sets := nd.host.Sets()
	if verb == "save" {
		return sets.Save(&c.out, pos...)
	}
	return sets.List(&c.out, pos...)
}
