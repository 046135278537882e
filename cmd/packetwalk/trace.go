package main

import (
	"flag"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/netfilter"
)

// clockStart is where every run's clock starts, so output is stable.
var clockStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

var traceCmd = command{
	usage: "packetwalk trace [node input] [--packets FILE] [--format text|json|xtables|dot|svg] PACKET...",
	about: `
Runs the packets in order through one simulated node and prints what
netfilter did to each: every rule that matched, the verdict, and the packet
as it leaves. Packets run through the same host, so counters, conntrack
entries and NAT bindings, nth counters and recent lists carry over from one
packet to the next.

A PACKET is one argument of space-separated key=value tokens:
  proto=tcp|udp|icmp|icmpv6|sctp|udplite|N   (default tcp)
  src=ADDR dst=ADDR sport=N dport=N          (defaults sport=40000+n, dport=80;
                        a port may be an /etc/services name of the protocol,
                        dport=https, dport=domain)
  type=N|echo-request|echo-reply code=N id=N (ICMP; id defaults to n)
  in=IFACE | in=local   the receiving interface; omitted or local = sent by a
                        local process through OUTPUT
  flags=S|SA|A|FA|R|PA|none   TCP flags as letters (default S)
  mark=N  len=PAYLOAD  ttl=N (default 64)  after=SECONDS (advance the clock)
  seq=N ack=N win=N   TCP sequence and acknowledgement numbers (0-4294967295)
            and window (0-65535). Defaults: seq continues the latest earlier
            segment of the same direction of the flow (its seq plus payload,
            plus 1 for SYN and 1 for FIN), else 1000, or 5000 for reply=N;
            ack, only when flags has A, acknowledges all of the latest
            earlier segment of the other direction as it left the node
            (packet N for reply=N), else 0; win 64240. So flags=S, reply=1,
            flags=A passes conntrack's window check.
  reply=N   the reply to packet N as it left: addresses and ports swapped,
            echo request turned into echo reply, SA answering S and A
            otherwise, arriving on N's out interface; other keys override
--packets FILE reads one packet per line ('#' and blank lines skipped);
they run before the packets given as arguments.

Formats: text (a walk for people; below a rule whose target changed the
packet, what it did: "DNAT --to-destination 10.244.1.5:8080: packet is now
10.0.0.4:34567 -> 10.244.1.5:8080", or "mark is now 0x4000"), json (one
object per packet per line), xtables (the 'xtables-monitor --trace' form;
rule handles are the rule's position in its chain, not the kernel's handle
numbers), dot (a Graphviz graph of one table, from the built-in chains the
last packet entered, with its path in red and the rules' counters after
all packets; --graph-table picks the table, by default nat when the packet
crossed a nat rule, else the table that decided it), svg (the same drawn
by Graphviz's dot, which must be installed).
` + nodeFlagsHelp,
	examples: `  packetwalk trace --rules iptables-save --addr eth0=192.168.10.1/24 \
      'in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80'
  packetwalk trace --node ./node1 --format json \
      'in=eth0 src=192.168.10.2 dst=192.168.10.1 dport=22' 'reply=1'
  iptables-save | packetwalk trace --rules - --addr eth0=10.0.0.1/24 \
      --format xtables 'proto=icmp src=10.0.0.2 dst=10.0.0.1 in=eth0'
`,
}

func runTrace(c *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("trace", flag.ContinueOnError)
	var ni nodeInput
	ni.register(fs)
	format := fs.String("format", "text", "output `FORMAT`: text, json, xtables, dot or svg")
	var graphTable tableFlag
	fs.Var(&graphTable, "graph-table", "with --format dot or svg, the `TABLE` to draw")
	packets := fs.String("packets", "", "read packets from `FILE`, one per line")
	pos, err := c.parseFlags(fs, traceCmd, args)
	if err != nil {
		return err
	}
	switch *format {
	case "text", "json", "xtables", "dot", "svg":
	default:
		return usagef("unknown format %q: expected text, json, xtables, dot or svg", *format)
	}
	if graphTable.t != netfilter.NoTable && *format != "dot" && *format != "svg" {
		return usagef("--graph-table goes with --format dot or svg")
	}
	specs, err := c.collectSpecs(&ni, *packets, pos)
	if err != nil {
		return err
	}
	if len(specs) == 0 {
		return usagef("no packets: give at least one PACKET argument or --packets FILE")
	}
	nd, err := c.buildNode(&ni)
	if err != nil {
		return err
	}
	outs, err := runPackets(nd, specs)
	if err != nil {
		return err
	}
	switch *format {
	case "dot", "svg":
		return writeGraph(&c.out, nd, outs[len(outs)-1], graphTable.t, *format == "svg")
	case "json":
		return writeJSON(&c.out, outs)
	case "xtables":
		writeXtables(&c.out, outs)
	default:
		writeText(&c.out, nd, outs)
	}
	return nil
}

// buildNode builds the host and reports snapshot files it had to ignore.
func (c *cmdEnv) buildNode(ni *nodeInput) (*node, error) {
	nd, err := ni.build(c.stdin)
	if err == nil {
		// Each rule --lenient loaded without modelling it is reported.
		for _, l := range nd.notes {
			fmt.Fprintf(c.stderr, "%s: %s\n", c.name, l)
		}
		for _, l := range nd.placeholders {
			fmt.Fprintf(c.stderr, "%s: %s\n", c.name, l)
		}
	}
	return nd, err
}

// collectSpecs parses --packets FILE and then the packet arguments.
func (c *cmdEnv) collectSpecs(ni *nodeInput, file string, args []string) ([]packetSpec, error) {
	var specs []packetSpec
	if file != "" {
		data, err := ni.readInput(c.stdin, file)
		if err != nil {
			return nil, err
		}
		fs, err := parsePacketsFile(data)
		if err != nil {
			le := err.(*lineError)
			return nil, &inputError{file: displayName(file), line: le.line, err: le.err}
		}
		for i := range fs {
			fs[i].origin = displayName(file) + ":" + strconv.Itoa(fs[i].sourceLine)
		}
		specs = fs
	}
	for _, a := range args {
		s, err := parseSpec(a)
		n := len(specs) + 1
		if err != nil {
			return nil, fmt.Errorf("packet %d (%q): %w", n, a, err)
		}
		s.origin = "packet " + strconv.Itoa(n) + " (" + strconv.Quote(a) + ")"
		specs = append(specs, s)
	}
	return specs, nil
}

// runPackets sends the packets in order through the node's host.
func runPackets(nd *node, specs []packetSpec) ([]outcome, error) {
	nd.host.Tracing = true
	outs := make([]outcome, 0, len(specs))
	for i := range specs {
		s := &specs[i]
		n := i + 1
		p, in, err := s.resolve(n, outs, nd.host)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.origin, err)
		}
		if s.after > 0 {
			nd.clock.Advance(s.after)
		}
		var res netfilter.Result
		if in != "" {
			res = nd.host.Receive(in, p)
		} else {
			res = nd.host.Send(p)
		}
		if res.Err != nil {
			// The spec checks should have refused it already.
			return nil, fmt.Errorf("%s: %w", s.origin, res.Err)
		}
		outs = append(outs, outcome{n: n, spec: *s, in: in, input: p, res: res, ct: conntrackText(nd.host, p, res)})
	}
	return outs, nil
}

// whereAction finds the action of the deciding step in the trace.
func whereAction(res netfilter.Result) string {
	w := res.Where
	if w.Action.Kind == netfilter.ActionRoute {
		return w.Action.String()
	}
	for i := len(res.Trace) - 1; i >= 0; i-- {
		s := res.Trace[i]
		if s.Action.Kind != netfilter.ActionEnter && s.Hook == w.Hook && s.Table == w.Table && s.Chain == w.Chain && s.Rule == w.Rule {
			return s.Action.String()
		}
	}
	return ""
}

// decided reports whether any table or the routing decided the packet.
func decided(res netfilter.Result) bool {
	return res.Where.Chain != "" || res.Where.Action.Kind == netfilter.ActionRoute
}

// conntrackText is the packet's conntrack entry right after the packet, as
// conntrack -L prints it, or "" when the packet is untracked (as in the
// kernel, when no rule needs conntrack).
func conntrackText(h *netfilter.Host, p netfilter.Packet, res netfilter.Result) string {
	if !p.Src.IsValid() {
		// A local packet's source is chosen by the host; the walk's first
		// step holds it.
		for _, s := range res.Trace {
			p.Src = s.Packet.Src
			break
		}
	}
	var tp conntrack.Tuple
	switch {
	case p.Proto.IsICMP():
		tp = conntrack.ICMPTuple(p.Src, p.Dst, p.ICMPType, p.ICMPCode, p.ICMPID)
	case p.Proto.HasPorts():
		tp = conntrack.TupleFrom(p.Proto, netip.AddrPortFrom(p.Src, p.SrcPort), netip.AddrPortFrom(p.Dst, p.DstPort))
	default:
		tp = conntrack.Tuple{Src: p.Src, Dst: p.Dst, Proto: p.Proto}
	}
	e, _, ok := h.Conntrack().Lookup(tp)
	if !ok {
		return ""
	}
	return string(e.AppendText(nil, h.Clock().Now(), conntrack.Format{}))
}
