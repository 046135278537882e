// Command packetwalk pushes packets through a simulated Linux node — its
// iptables rules, interfaces and routes — and prints what netfilter does
// to them, in forms people who debug nodes already read: a walk for
// people, the xtables-monitor --trace form, JSON for tools, and the
// iptables-save / iptables -S views of the state afterwards.
//
// Usage:
//
//	packetwalk demo
//	packetwalk trace [node input] [--format text|json|xtables] PACKET...
//	packetwalk save  [node input] [--packets FILE] [-c]
//	packetwalk list  [node input] [--packets FILE] [-t TABLE] [-S] [-v] [CHAIN [N]]
//	packetwalk conntrack [node input] [--packets FILE]
//	packetwalk ipset [node input] [--packets FILE] [list|save] [SET...]
//	packetwalk explain [node input] [--format text|json] [PACKET...] PACKET
//	packetwalk kube -f CLUSTER.yaml [--layout current|legacy] [--node-name N] [--node-ip IP]...
//	packetwalk pcap [node input] -r IN.pcap|IN.pcapng [--in IFACE] -w OUT_PREFIX
//	packetwalk cluster trace|explain [--format text|json] FILE PACKET...
//
// A PACKET is one argument of space-separated key=value tokens, for
// example "in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80".
//
// # Capturing a node snapshot
//
// Run these on the node (as root) in an empty directory, then pass the
// directory with --node DIR; every file is optional:
//
//	iptables-save -c > iptables-save
//	ip6tables-save -c > ip6tables-save
//	ipset save > ipset-save
//	ip -j addr > ip-addr.json
//	ip -j route show table all > ip-route.json
//	ip -j rule > ip-rule.json
//	ip -6 -j rule > ip6-rule.json
//	conntrack -L > conntrack
//
// Exit status: 0 on success, 1 on bad input (the message names the file,
// line and token), 2 on a usage error. Output is buffered and written only
// when the whole command succeeded, so nothing half-written is left.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// snapshotCommands are the commands that capture a node for --node.
const snapshotCommands = `iptables-save -c > iptables-save
ip6tables-save -c > ip6tables-save
ipset save > ipset-save
ip -j addr > ip-addr.json
ip -j route show table all > ip-route.json
ip -j rule > ip-rule.json
ip -6 -j rule > ip6-rule.json
conntrack -L > conntrack
`

// subcommand is one verb of the command line.
type subcommand struct {
	name    string
	summary string
	run     func(c *cmdEnv, args []string) error
}

// cmdEnv is what a subcommand works with: input, buffered output, and its
// name for messages.
type cmdEnv struct {
	name   string
	stdin  io.Reader
	out    bytes.Buffer // written to stdout only on success
	stderr io.Writer
	// summary is written to stderr after out, on success (the tools'
	// "N entries have been shown." lines).
	summary string
}

func subcommands() []subcommand {
	return []subcommand{
		{"trace", "run packets through the node and show each one's walk", runTrace},
		{"save", "print iptables-save output after running packets", runSave},
		{"list", "print iptables -S (or -L) output after running packets", runList},
		{"conntrack", "print conntrack -L output after running packets", runConntrack},
		{"ipset", "print ipset list or save output after running packets", runIpset},
		{"explain", "list every possible outcome of a packet with its exact probability", runExplain},
		{"kube", "print the iptables-save text kube-proxy writes for a cluster", runKube},
		{"pcap", "run a pcap or pcapng capture through the node and write what leaves", runPcap},
		{"cluster", "follow packets across nodes, pods, bridges, routers and load balancers", runCluster},
		{"demo", "walk a few packets through an embedded Kubernetes node", runDemo},
	}
}

// planned names subcommands of the command-line contract that are not
// built yet, so they are refused by name rather than as unknown.
var planned = map[string]bool{}

// usageError is a mistake in the command line itself: exit status 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

// errHelp reports that --help was given and the help was written.
var errHelp = errors.New("help requested")

func run(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, mainUsage())
		return 2
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help", "help":
		if name == "help" && len(args) > 1 {
			return run([]string{args[1], "--help"}, stdin, stdout, stderr)
		}
		fmt.Fprint(stdout, mainUsage())
		return 0
	}
	for _, sc := range subcommands() {
		if sc.name != name {
			continue
		}
		env := &cmdEnv{name: "packetwalk " + name, stdin: stdin, stderr: stderr}
		err := sc.run(env, args[1:])
		var ue *usageError
		switch {
		case err == nil || errors.Is(err, errHelp):
			if _, werr := stdout.Write(env.out.Bytes()); werr != nil {
				fmt.Fprintf(stderr, "%s: %v\n", env.name, werr)
				return 1
			}
			fmt.Fprint(stderr, env.summary)
			return 0
		case errors.As(err, &ue):
			fmt.Fprintf(stderr, "%s: %s\nRun '%s --help' for usage.\n", env.name, oneLine(ue.msg), env.name)
			return 2
		default:
			fmt.Fprintf(stderr, "%s: %s\n", env.name, oneLine(err.Error()))
			return 1
		}
	}
	if planned[name] {
		fmt.Fprintf(stderr, "packetwalk %s: not implemented yet\n", name)
		return 1
	}
	fmt.Fprintf(stderr, "packetwalk: unknown command %q\nRun 'packetwalk --help' for usage.\n", name)
	return 2
}

// oneLine keeps an error message on one line, as promised to scripts.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", " ")
}

func mainUsage() string {
	var b strings.Builder
	b.WriteString("packetwalk simulates a Linux node's netfilter: it walks packets through\n")
	b.WriteString("iptables rules, interfaces and routes and prints what happens.\n\n")
	b.WriteString("Usage:\n  packetwalk COMMAND [flags] [arguments]\n\nCommands:\n")
	for _, sc := range subcommands() {
		fmt.Fprintf(&b, "  %-9s %s\n", sc.name, sc.summary)
	}
	b.WriteString("\nRun 'packetwalk COMMAND --help' for a command's flags and examples.\n\n")
	b.WriteString("Capture a node snapshot for --node DIR with:\n")
	for _, l := range strings.Split(strings.TrimSuffix(snapshotCommands, "\n"), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}

// command describes a subcommand's help text.
type command struct {
	usage    string // the synopsis after "Usage: "
	about    string
	examples string
}

// parseFlags parses a subcommand's flags, allowing positional arguments
// between flags (packets usually come last, but need not). It writes the
// help to the buffered output for --help.
func (c *cmdEnv) parseFlags(fs *flag.FlagSet, cmd command, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	var pos []string
	for {
		err := fs.Parse(args)
		if errors.Is(err, flag.ErrHelp) {
			c.out.Reset()
			c.writeHelp(fs, cmd)
			return nil, errHelp
		}
		if err != nil {
			return nil, usagef("%v", err)
		}
		rest := fs.Args()
		consumedDashes := len(args) > len(rest) && args[len(args)-len(rest)-1] == "--"
		if consumedDashes || len(rest) == 0 {
			return append(pos, rest...), nil
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
}

// writeFlags lists the flags as users type them: --long, -x for
// iptables-style single letters.
func writeFlags(b *bytes.Buffer, fs *flag.FlagSet) {
	type row struct{ left, usage string }
	var rows []row
	width := 0
	fs.VisitAll(func(f *flag.Flag) {
		arg, usage := flag.UnquoteUsage(f)
		left := "--" + f.Name
		if len(f.Name) == 1 {
			left = "-" + f.Name
		}
		if arg != "" {
			left += " " + arg
		}
		if d := f.DefValue; d != "" && d != "false" && d != "0" {
			usage += " (default " + d + ")"
		}
		rows = append(rows, row{left, usage})
		width = max(width, len(left))
	})
	for _, r := range rows {
		fmt.Fprintf(b, "  %-*s  %s\n", width, r.left, r.usage)
	}
}

func (c *cmdEnv) writeHelp(fs *flag.FlagSet, cmd command) {
	fmt.Fprintf(&c.out, "Usage: %s\n\n%s\n", cmd.usage, strings.TrimSpace(cmd.about))
	fmt.Fprintf(&c.out, "\nFlags:\n")
	writeFlags(&c.out, fs)
	if cmd.examples != "" {
		fmt.Fprintf(&c.out, "\nExamples:\n%s", cmd.examples)
	}
}
