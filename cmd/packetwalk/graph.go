package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/render"
)

// graphTable is the table drawn for a packet: nat when a nat rule
// matched it (where its addresses change), else the table that decided
// it, else filter.
func graphTable(res netfilter.Result) netfilter.TableID {
	for _, s := range res.Trace {
		if s.Table == netfilter.NAT && s.Rule > 0 {
			return netfilter.NAT
		}
	}
	if res.Where.Table != netfilter.NoTable {
		return res.Where.Table
	}
	return netfilter.Filter
}

// writeGraph writes the render package's graph of one table with the
// packet's path: DOT text, or SVG drawn by Graphviz.
func writeGraph(b *bytes.Buffer, nd *node, o outcome, table netfilter.TableID, svg bool) error {
	given := table != netfilter.NoTable
	if !given {
		table = graphTable(o.res)
	}
	fam := netfilter.IPv4
	if o.input.Dst.Is6() {
		fam = netfilter.IPv6
	}
	rs := nd.host.Ruleset(fam)
	if rs.Table(table) == nil {
		if !given {
			return fmt.Errorf("nothing to draw: the packet crossed no rule and the node has no %s table (give --graph-table TABLE)", table)
		}
		return fmt.Errorf("--graph-table %s: the node has no %s table", table, table)
	}
	// The built-in chains the packet entered in the table, in order;
	// without any, every chain of the table.
	var roots []string
	seen := map[string]bool{}
	for _, s := range o.res.Trace {
		if s.Table == table && s.Action.Kind == netfilter.ActionEnter && !seen[s.Chain] {
			if c := rs.Table(table).Chain(s.Chain); c != nil && c.Builtin() {
				seen[s.Chain] = true
				roots = append(roots, s.Chain)
			}
		}
	}
	dot, err := render.DOT(rs, render.Options{
		Table: table,
		Roots: roots,
		Path:  o.res.Trace,
		Title: fmt.Sprintf("packet %d: %s", o.n, describe(o.input)),
	})
	if err != nil {
		return err
	}
	if !svg {
		b.Write(dot)
		return nil
	}
	out, err := render.SVG(context.Background(), dot)
	if errors.Is(err, render.ErrNoDot) {
		return fmt.Errorf("--format svg needs Graphviz's dot in PATH (install graphviz, or use --format dot)")
	}
	if err != nil {
		return err
	}
	b.Write(out)
	return nil
}
