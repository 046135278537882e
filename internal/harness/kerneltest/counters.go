package kerneltest

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrBadSave is wrapped by errors from [ParseSaveCounters] for input that is
// not `iptables-save -c` output.
var ErrBadSave = errors.New("kerneltest: bad iptables-save -c output")

// Counter is a packet and byte count.
type Counter struct {
	Packets uint64
	Bytes   uint64
}

// RuleCounter is one rule of a chain with its counter. Rule is the rule as
// iptables-save prints it without the counter, e.g.
// "-A FORWARD -d 10.244.1.5/32 -j DROP".
type RuleCounter struct {
	Rule string
	Counter
}

// ChainCounters is one chain of a table. Policy is "ACCEPT"/"DROP" for a
// built-in chain and "-" for a user chain (whose counter is always 0:0).
type ChainCounters struct {
	Name   string
	Policy string
	// PolicyCounter counts packets that fell off the end of a built-in chain.
	PolicyCounter Counter
	Rules         []RuleCounter // in rule order
}

// TableCounters is one table, chains in iptables-save order.
type TableCounters struct {
	Name   string
	Chains []ChainCounters
}

// Counters is the parsed `iptables-save -c`, tables in print order.
type Counters struct {
	Tables []TableCounters
}

// Chain returns the chain of table, or nil.
func (c Counters) Chain(table, chain string) *ChainCounters {
	for ti := range c.Tables {
		if c.Tables[ti].Name != table {
			continue
		}
		for ci := range c.Tables[ti].Chains {
			if c.Tables[ti].Chains[ci].Name == chain {
				return &c.Tables[ti].Chains[ci]
			}
		}
	}
	return nil
}

// Rule returns the counter of the n-th rule (1-based, as in
// `iptables -L --line-numbers`) of chain in table, and whether it exists.
func (c Counters) Rule(table, chain string, n int) (Counter, bool) {
	ch := c.Chain(table, chain)
	if ch == nil || n < 1 || n > len(ch.Rules) {
		return Counter{}, false
	}
	return ch.Rules[n-1].Counter, true
}

// Policy returns the policy counter of a built-in chain, and whether it
// exists.
func (c Counters) Policy(table, chain string) (Counter, bool) {
	ch := c.Chain(table, chain)
	if ch == nil {
		return Counter{}, false
	}
	return ch.PolicyCounter, true
}

// NonZero lists every rule and policy with a non-zero packet count as
// "table/chain#n packets" (n = 0 for the policy), a compact form for
// comparing which rules a packet hit.
func (c Counters) NonZero() []string {
	var out []string
	for _, t := range c.Tables {
		for _, ch := range t.Chains {
			for i, r := range ch.Rules {
				if r.Packets != 0 {
					out = append(out, fmt.Sprintf("%s/%s#%d %d", t.Name, ch.Name, i+1, r.Packets))
				}
			}
			if ch.PolicyCounter.Packets != 0 {
				out = append(out, fmt.Sprintf("%s/%s#0 %d", t.Name, ch.Name, ch.PolicyCounter.Packets))
			}
		}
	}
	return out
}

// ParseSaveCounters parses `iptables-save -c` (or ip6tables-save -c) output.
// "#" comment lines and blank lines are ignored.
func ParseSaveCounters(text string) (Counters, error) {
	var c Counters
	var table *TableCounters
	lineNo := 0
	for line := range strings.Lines(text) {
		lineNo++
		line = strings.TrimRight(line, "\n")
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		bad := func(format string, a ...any) error {
			return fmt.Errorf("%w: line %d %q: %s", ErrBadSave, lineNo, line, fmt.Sprintf(format, a...))
		}
		switch {
		case strings.HasPrefix(line, "*"):
			if table != nil {
				return c, bad("table %q not ended by COMMIT", table.Name)
			}
			c.Tables = append(c.Tables, TableCounters{Name: line[1:]})
			table = &c.Tables[len(c.Tables)-1]
		case line == "COMMIT":
			if table == nil {
				return c, bad("COMMIT outside a table")
			}
			table = nil
		case strings.HasPrefix(line, ":"):
			if table == nil {
				return c, bad("chain outside a table")
			}
			f := strings.Fields(line[1:])
			if len(f) != 3 {
				return c, bad("want :CHAIN POLICY [packets:bytes]")
			}
			cnt, err := parseBracketCounter(f[2])
			if err != nil {
				return c, bad("%v", err)
			}
			table.Chains = append(table.Chains, ChainCounters{Name: f[0], Policy: f[1], PolicyCounter: cnt})
		case strings.HasPrefix(line, "["):
			if table == nil {
				return c, bad("rule outside a table")
			}
			cntText, rule, ok := strings.Cut(line, " ")
			if !ok {
				return c, bad("counter without rule")
			}
			cnt, err := parseBracketCounter(cntText)
			if err != nil {
				return c, bad("%v", err)
			}
			f := strings.Fields(rule)
			if len(f) < 2 || f[0] != "-A" {
				return c, bad("want -A CHAIN after the counter")
			}
			var ch *ChainCounters
			for i := range table.Chains {
				if table.Chains[i].Name == f[1] {
					ch = &table.Chains[i]
				}
			}
			if ch == nil {
				return c, bad("chain %q not declared", f[1])
			}
			ch.Rules = append(ch.Rules, RuleCounter{Rule: rule, Counter: cnt})
		default:
			return c, bad("want *table, :chain, [counter] -A rule or COMMIT")
		}
	}
	if table != nil {
		return c, fmt.Errorf("%w: table %q not ended by COMMIT at end of input", ErrBadSave, table.Name)
	}
	return c, nil
}

// parseBracketCounter parses "[packets:bytes]".
func parseBracketCounter(s string) (Counter, error) {
	if len(s) < 5 || s[0] != '[' || s[len(s)-1] != ']' {
		return Counter{}, fmt.Errorf("counter %q: want [packets:bytes]", s)
	}
	p, b, ok := strings.Cut(s[1:len(s)-1], ":")
	if !ok {
		return Counter{}, fmt.Errorf("counter %q: want [packets:bytes]", s)
	}
	pk, err := strconv.ParseUint(p, 10, 64)
	if err != nil {
		return Counter{}, fmt.Errorf("counter %q: packets %q not a number", s, p)
	}
	by, err := strconv.ParseUint(b, 10, 64)
	if err != nil {
		return Counter{}, fmt.Errorf("counter %q: bytes %q not a number", s, b)
	}
	return Counter{Packets: pk, Bytes: by}, nil
}
