package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math/big"
	"strconv"

	"github.com/packetwalk/packetwalk/netfilter"
)

var explainCmd = command{
	usage: "packetwalk explain [node input] [--packets FILE] [--format text|json] [PACKET...] PACKET",
	about: `
Runs every packet but the last through the node, as trace does (so
conntrack entries, counters, nth counters and recent lists carry over),
then lists every possible fate of the last packet with its exact
probability. "statistic --mode random" rules branch: the kernel stores
their probability as lround(P·2^31), so each outcome's probability is an
exact fraction N/2^k, and the outcomes' probabilities sum to exactly 1.
Paths that end the same way (verdict, deciding rule, packet as it leaves,
emitted packets) are merged. Nothing is changed by explaining: the last
packet is not run.

Packets are written as for trace (see 'packetwalk trace --help').

In json, each outcome has "probability" (exact, "N/D"), "p" (the nearest
float), "verdict", "disposition", "where", "out", "packet" and "emitted"
as in trace's json, and "path": every rule the packet matched, in order,
as table:chain:rule:N:ACTION (N is 0 for a chain's policy).
` + nodeFlagsHelp,
	examples: `  packetwalk kube -f cluster.yaml --node-ip 192.168.10.1 > iptables-save
  packetwalk explain --rules iptables-save --addr eth0=192.168.10.1/24 \
      'in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80'
  packetwalk explain --rules iptables-save --addr eth0=192.168.10.1/24 --format json \
      'in=eth0 src=192.168.10.2 dst=10.96.0.10' 'in=eth0 src=192.168.10.2 dst=10.96.0.10 sport=50000'
`,
}

type jsonOutcome struct {
	Probability string       `json:"probability"`
	P           float64      `json:"p"`
	Verdict     string       `json:"verdict"`
	Disposition string       `json:"disposition"`
	Where       *jsonWhere   `json:"where"`
	Out         *string      `json:"out"`
	Packet      jsonPacket   `json:"packet"`
	Emitted     []jsonPacket `json:"emitted"`
	Path        []string     `json:"path"`
}

func runExplain(c *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("explain", flag.ContinueOnError)
	var ni nodeInput
	ni.register(fs)
	format := fs.String("format", "text", "output `FORMAT`: text or json")
	packets := fs.String("packets", "", "read packets from `FILE`, one per line; they run before the arguments")
	pos, err := c.parseFlags(fs, explainCmd, args)
	if err != nil {
		return err
	}
	if *format != "text" && *format != "json" {
		return usagef("unknown format %q: expected text or json", *format)
	}
	specs, err := c.collectSpecs(&ni, *packets, pos)
	if err != nil {
		return err
	}
	if len(specs) == 0 {
		return usagef("no packets: give the packet to explain as the last PACKET argument")
	}
	nd, err := c.buildNode(&ni)
	if err != nil {
		return err
	}
	prior, err := runPackets(nd, specs[:len(specs)-1])
	if err != nil {
		return err
	}
	last := &specs[len(specs)-1]
	n := len(specs)
	p, in, err := last.resolve(n, prior, nd.host)
	if err != nil {
		return fmt.Errorf("%s: %w", last.origin, err)
	}
	if last.after > 0 {
		nd.clock.Advance(last.after)
	}
	outs, err := nd.host.Explain(in, p)
	if err != nil {
		return fmt.Errorf("%s: %w", last.origin, err)
	}
	// The contract: probabilities sum to exactly 1.
	sum := new(big.Rat)
	for _, o := range outs {
		sum.Add(sum, o.Probability.Rat())
	}
	if sum.Cmp(big.NewRat(1, 1)) != 0 {
		return fmt.Errorf("internal error: outcome probabilities sum to %s, not 1", sum)
	}
	if *format == "json" {
		return writeExplainJSON(&c.out, n, in, outs)
	}
	writeExplainText(&c.out, nd, n, in, p, outs)
	return nil
}

// explainPath lists a result's matched rules as table:chain:rule:N:ACTION.
func explainPath(res netfilter.Result) []string {
	path := []string{}
	for _, s := range res.Trace {
		if s.Action.Kind == netfilter.ActionEnter {
			continue
		}
		path = append(path, s.Table.String()+":"+s.Chain+":rule:"+strconv.Itoa(s.Rule)+":"+s.Action.String())
	}
	return path
}

func outcomeJSON(n int, in string, o netfilter.Outcome) jsonOutcome {
	r := resultJSON(outcome{n: n, in: in, res: *o.Result})
	return jsonOutcome{
		Probability: o.Probability.String(),
		P:           o.Probability.Float64(),
		Verdict:     r.Verdict,
		Disposition: r.Disposition,
		Where:       r.Where,
		Out:         r.Out,
		Packet:      r.Packet,
		Emitted:     r.Emitted,
		Path:        explainPath(*o.Result),
	}
}

func writeExplainJSON(b *bytes.Buffer, n int, in string, outs []netfilter.Outcome) error {
	doc := struct {
		Outcomes []jsonOutcome `json:"outcomes"`
	}{Outcomes: make([]jsonOutcome, 0, len(outs))}
	for _, o := range outs {
		doc.Outcomes = append(doc.Outcomes, outcomeJSON(n, in, o))
	}
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// writeExplainText prints each outcome as trace's text walk, headed by its
// probability.
func writeExplainText(b *bytes.Buffer, nd *node, n int, in string, p netfilter.Packet, outs []netfilter.Outcome) {
	from := "from a local process"
	if in != "" {
		from = "in " + in
	}
	plural := "s"
	if len(outs) == 1 {
		plural = ""
	}
	fmt.Fprintf(b, "packet %d: %s, %s: %d possible outcome%s\n", n, describe(p), from, len(outs), plural)
	for i, o := range outs {
		fmt.Fprintf(b, "\noutcome %d: probability %s (%s)\n", i+1, o.Probability, strconv.FormatFloat(o.Probability.Float64(), 'g', 10, 64))
		var walk bytes.Buffer
		writeText(&walk, nd, []outcome{{n: n, in: in, input: p, res: *o.Result}})
		// Drop the walk's own "packet N:" header: the packet is the same.
		if _, rest, ok := bytes.Cut(walk.Bytes(), []byte("\n")); ok {
			b.Write(rest)
		}
	}
}
