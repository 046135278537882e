// Package render draws a table of a netfilter ruleset as a Graphviz graph:
// one node per chain (with its policy and counters), one edge per jump or
// goto (labelled with the rule number, the rule's counters and, for
// "statistic --mode random" rules, the probability), optionally one leaf
// per non-jump target, and a packet's path from a traced Result
// highlighted. DOT returns the graph text; SVG runs Graphviz's dot on it.
// WalkDOT draws a packet's whole path across a cluster (package cluster):
// one box per hop with the addresses and what each host's rules did.
package render

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/netfilter"
)

// ErrNoDot is returned by SVG when Graphviz's dot is not installed.
var ErrNoDot = errors.New("render: Graphviz dot not found in PATH")

// ErrNoTable is returned by DOT when the ruleset lacks the table.
var ErrNoTable = errors.New("render: no such table")

// ErrNoChain is returned by DOT when a root chain does not exist.
var ErrNoChain = errors.New("render: no such chain")

// Options select what DOT draws.
type Options struct {
	// Table is the table to draw; NoTable means nat.
	Table netfilter.TableID
	// Roots limits the graph to these chains and the chains they reach;
	// empty means every chain of the table.
	Roots []string
	// Targets adds a leaf for each rule whose target is not a chain
	// (DNAT, MASQUERADE, MARK, ACCEPT, ...). Leaves on Path are drawn
	// whether or not Targets is set.
	Targets bool
	// Path is a packet's walk (Result.Trace of a tracing Host); the
	// chains, jumps and targets it went through in Table are highlighted.
	Path []netfilter.Step
	// Title labels the graph.
	Title string
}

const highlight = `color="#d62728", fontcolor="#d62728", penwidth=2.5`

// DOT returns the Graphviz DOT text of a table of rs.
func DOT(rs *netfilter.Ruleset, opt Options) ([]byte, error) {
	id := opt.Table
	if id == netfilter.NoTable {
		id = netfilter.NAT
	}
	t := rs.Table(id)
	if t == nil {
		return nil, fmt.Errorf("%w: %s", ErrNoTable, id)
	}
	keep, err := reachable(t, opt.Roots)
	if err != nil {
		return nil, err
	}
	onPath := map[string]bool{}
	stepped := map[string]bool{} // "chain#rule"
	for _, s := range opt.Path {
		if s.Table != id {
			continue
		}
		onPath[s.Chain] = true
		if s.Rule > 0 {
			stepped[ruleKey(s.Chain, s.Rule)] = true
		}
	}

	var b bytes.Buffer
	fmt.Fprintf(&b, "digraph %s {\n", quote(id.String()))
	b.WriteString("  rankdir=LR;\n")
	if opt.Title != "" {
		fmt.Fprintf(&b, "  label=%s; labelloc=t; fontname=\"Helvetica\";\n", quote(opt.Title))
	}
	b.WriteString("  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=9];\n")
	for _, c := range t.Chains() {
		if !keep[c.Name] {
			continue
		}
		var label string
		attrs := ""
		if c.Builtin() {
			label = fmt.Sprintf("%s\npolicy %s %d packets, %d bytes", c.Name, c.Policy, c.Counters.Packets, c.Counters.Bytes)
			attrs = ", style=\"rounded,filled\", fillcolor=\"#eeeeee\""
		} else {
			label = fmt.Sprintf("%s\n%d references", c.Name, t.References(c.Name))
		}
		if onPath[c.Name] {
			attrs += ", " + highlight
		}
		fmt.Fprintf(&b, "  %s [label=%s%s];\n", quote(c.Name), quote(label), attrs)
	}
	for _, c := range t.Chains() {
		if !keep[c.Name] {
			continue
		}
		for i, r := range c.Rules {
			n := i + 1
			key := ruleKey(c.Name, n)
			label := edgeLabel(n, r)
			hl := ""
			if stepped[key] {
				hl = ", " + highlight
			}
			if j, ok := r.Target.(*netfilter.JumpTarget); ok {
				style := ""
				if j.Goto {
					style = ", style=dashed"
				}
				fmt.Fprintf(&b, "  %s -> %s [label=%s%s%s];\n", quote(c.Name), quote(j.Chain), quote(label), style, hl)
				continue
			}
			if r.Target == nil || !(opt.Targets || stepped[key]) {
				continue
			}
			leaf := targetText(r)
			fmt.Fprintf(&b, "  %s [label=%s, shape=plaintext%s];\n", quote(key), quote(leaf), hl)
			fmt.Fprintf(&b, "  %s -> %s [label=%s, arrowhead=none, style=dotted%s];\n", quote(c.Name), quote(key), quote(label), hl)
		}
	}
	b.WriteString("}\n")
	return b.Bytes(), nil
}

// reachable returns the chains reachable from roots (all when empty).
func reachable(t *netfilter.Table, roots []string) (map[string]bool, error) {
	keep := map[string]bool{}
	if len(roots) == 0 {
		for _, c := range t.Chains() {
			keep[c.Name] = true
		}
		return keep, nil
	}
	queue := append([]string(nil), roots...)
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if keep[name] {
			continue
		}
		c := t.Chain(name)
		if c == nil {
			return nil, fmt.Errorf("%w: %q in table %s", ErrNoChain, name, t.ID())
		}
		keep[name] = true
		for _, r := range c.Rules {
			if j, ok := r.Target.(*netfilter.JumpTarget); ok {
				queue = append(queue, j.Chain)
			}
		}
	}
	return keep, nil
}

func ruleKey(chain string, n int) string { return chain + "#" + strconv.Itoa(n) }

// edgeLabel is "#N", the rule's counters and its random probability as
// iptables -L prints it (%.11f of the kernel's fixed-point value).
func edgeLabel(n int, r *netfilter.Rule) string {
	s := fmt.Sprintf("#%d", n)
	for _, m := range r.Matches {
		if st, ok := m.(*netfilter.StatisticMatch); ok && st.Mode == netfilter.StatisticRandom {
			p := strconv.FormatFloat(float64(st.Probability)/(1<<31), 'f', 11, 64)
			if st.Invert {
				p = "!" + p
			}
			s += " p=" + p
		}
	}
	if r.Counters.Packets > 0 {
		s += fmt.Sprintf("\n%d pkts %d B", r.Counters.Packets, r.Counters.Bytes)
	}
	return s
}

// targetText is the rule's target part as iptables-save prints it.
func targetText(r *netfilter.Rule) string {
	spec := r.String()
	if i := strings.LastIndex(spec, " -j "); i >= 0 {
		return spec[i+4:]
	}
	return r.Target.Name()
}

// quote makes s a DOT string: quoted, with quotes and backslashes escaped
// and newlines as \n.
func quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteRune(r)
		case '\n':
			b.WriteString(`\n`)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// SVG renders DOT text with `dot -Tsvg`. It returns ErrNoDot when Graphviz
// is not installed.
func SVG(ctx context.Context, dot []byte) ([]byte, error) {
	path, err := exec.LookPath("dot")
	if err != nil {
		return nil, ErrNoDot
	}
	cmd := exec.CommandContext(ctx, path, "-Tsvg")
	cmd.Stdin = bytes.NewReader(dot)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("render: dot -Tsvg: %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	return out.Bytes(), nil
}
