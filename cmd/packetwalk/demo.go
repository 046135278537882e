package main

import (
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"strings"

	"github.com/packetwalk/packetwalk/netfilter"
)

//go:embed scenarios/demo/iptables-save scenarios/demo/packets
var demoFS embed.FS

var demoCmd = command{
	usage: "packetwalk demo [--format text|json|xtables]",
	about: `
Walks a few packets through an embedded Kubernetes node: kube-proxy's
iptables rules for one service (ClusterIP 10.96.0.10:80, three pods on
this node), eth0 192.168.10.1/24 towards clients (default route via 192.168.10.254) and eth1 10.244.1.1/24
towards the pods. It prints each packet's walk, then the nat table as
'iptables -t nat -nvL' shows it afterwards.

Parts of the ruleset that use features not modelled yet are left out
with a note on standard error, so the demo always runs.
`,
	examples: `  packetwalk demo
  packetwalk demo --format json
`,
}

func runDemo(c *cmdEnv, args []string) (err error) {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	format := fs.String("format", "text", "walk `FORMAT`: text, json or xtables")
	pos, err := c.parseFlags(fs, demoCmd, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	switch *format {
	case "text", "json", "xtables":
	default:
		return usagef("unknown format %q: expected text, json or xtables", *format)
	}
	// The demo shows whatever the engine can do today; an engine bug must
	// not turn the first command people try into a stack trace.
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("internal error in the simulator: %v", r)
		}
	}()
	nd, notes := demoNode()
	for _, n := range notes {
		fmt.Fprintf(c.stderr, "%s: note: %s\n", c.name, n)
	}
	data, _ := demoFS.ReadFile("scenarios/demo/packets")
	specs, err := parsePacketsFile(data)
	if err != nil {
		return err
	}
	for i := range specs {
		specs[i].origin = fmt.Sprintf("demo packet %d", i+1)
	}
	outs, err := runPackets(nd, specs)
	if err != nil {
		return err
	}
	switch *format {
	case "json":
		return writeJSON(&c.out, outs)
	case "xtables":
		writeXtables(&c.out, outs)
		return nil
	}
	c.out.WriteString("# Node: eth0 192.168.10.1/24 (clients), eth1 10.244.1.1/24 (pods)\n")
	c.out.WriteString("# Service default/web:http: ClusterIP 10.96.0.10:80 -> pods 10.244.1.5-7:8080\n\n")
	writeText(&c.out, nd, outs)
	list, lerr := nd.host.Ruleset(netfilter.IPv4).AppendList(nil, netfilter.NAT, "", netfilter.ListOptions{Numeric: true, Verbose: true})
	if lerr == nil {
		c.out.WriteString("\n$ iptables -t nat -nvL\n")
		c.out.Write(list)
	}
	return nil
}

// demoNode builds the demo host. Each table of the embedded ruleset is
// restored on its own, so one table using an unmodelled feature does not
// keep the others out; the notes say what was left out.
func demoNode() (*node, []string) {
	clock := netfilter.NewManualClock(clockStart)
	h := netfilter.NewHost(netfilter.HostConfig{Clock: clock, Seed: 1})
	var notes []string
	must := func(err error) {
		if err != nil {
			notes = append(notes, err.Error())
		}
	}
	must(h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	must(h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	must(h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("192.168.10.254")}))
	data, _ := demoFS.ReadFile("scenarios/demo/iptables-save")
	for _, block := range splitTables(data) {
		if err := h.Restore(netfilter.IPv4, block.text, netfilter.RestoreOptions{Counters: true}); err != nil {
			msg := (&inputError{file: "demo iptables-save", err: err}).Error()
			// Line numbers in block-relative errors are shifted back to
			// the embedded file's.
			var pe *netfilter.ParseError
			if errors.As(err, &pe) {
				msg = fmt.Sprintf("demo iptables-save:%d: %s", pe.Line+block.firstLine-1,
					strings.TrimPrefix(pe.Error(), fmt.Sprintf("line %d: ", pe.Line)))
			}
			notes = append(notes, fmt.Sprintf("table %s left out: %s", block.name, msg))
		}
	}
	sys := map[string]int{}
	for k, v := range sysctlDefaults {
		sys[k] = v
	}
	return &node{host: h, clock: clock, sysctls: sys}, notes
}

type tableBlock struct {
	name      string
	firstLine int
	text      []byte
}

// splitTables cuts iptables-save text into one block per table, blank
// lines keeping the line numbers of the whole file.
func splitTables(data []byte) []tableBlock {
	var blocks []tableBlock
	lines := bytes.SplitAfter(data, []byte("\n"))
	for i, l := range lines {
		if bytes.HasPrefix(l, []byte("*")) {
			blocks = append(blocks, tableBlock{name: strings.TrimSpace(string(l[1:])), firstLine: i + 1})
		}
		if len(blocks) > 0 {
			blocks[len(blocks)-1].text = append(blocks[len(blocks)-1].text, l...)
		}
	}
	return blocks
}
