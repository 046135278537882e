package netfilter

import (
	"errors"
	"fmt"
	"strings"
)

var errMultipleTargets = fmt.Errorf("%w: multiple -j flags not allowed", ErrMultipleFlags)

// Lenient chooses what restoring does with a rule that uses a match or
// target module packetwalk does not know or does not model. The zero
// value refuses such a rule, as the package does everywhere else.
type Lenient uint8

const (
	// LenientOff refuses the rule (the default): the restore fails with a
	// *ParseError naming the line and the module.
	LenientOff Lenient = iota
	// LenientNeverMatch loads the rule as a placeholder that never
	// matches: packets go on to the next rule.
	LenientNeverMatch
	// LenientAlwaysMatch loads it as a placeholder whose unknown matches
	// always match and whose unknown target does nothing (the packet goes
	// on to the next rule); the rest of the rule is evaluated as usual.
	LenientAlwaysMatch
)

// String returns the CLI spelling: "off", "never-match", "always-match".
func (l Lenient) String() string {
	switch l {
	case LenientNeverMatch:
		return "never-match"
	case LenientAlwaysMatch:
		return "always-match"
	}
	return "off"
}

// ParseLenient reads "off", "never-match" or "always-match".
func ParseLenient(s string) (Lenient, error) {
	for _, l := range []Lenient{LenientOff, LenientNeverMatch, LenientAlwaysMatch} {
		if s == l.String() {
			return l, nil
		}
	}
	return 0, badValue("", "--lenient", s, "off, never-match or always-match")
}

// PlaceholderMatch stands, in a rule loaded leniently, for a match module
// packetwalk does not know or model: Name and its arguments as given. It
// prints them back as given ("-m NAME ARGS..." in iptables-save and -S;
// "[unmodelled: -m NAME ARGS...]" in -L) and matches always or never, as
// the restore's Lenient option said.
type PlaceholderMatch struct {
	Name   string
	Args   []string
	Always bool
	// Line is the input line of the rule (0 when not from a restore).
	Line int
}

// PlaceholderTarget is PlaceholderMatch for a target: "-j NAME ARGS...".
// It does nothing to the packet; with LenientNeverMatch its rule never
// matches.
type PlaceholderTarget struct {
	TargetName string
	Args       []string
	Always     bool
	Line       int
}

// Module implements Match.
func (m *PlaceholderMatch) Module() string { return m.Name }

func appendArgsAsGiven(b []byte, args []string) []byte {
	for _, a := range args {
		b = append(b, ' ')
		if a == "" || strings.ContainsAny(a, " \t\"\\") {
			b = append(b, '"')
			for i := 0; i < len(a); i++ {
				if a[i] == '"' || a[i] == '\\' {
					b = append(b, '\\')
				}
				b = append(b, a[i])
			}
			b = append(b, '"')
			continue
		}
		b = append(b, a...)
	}
	return b
}

func (m *PlaceholderMatch) appendSave(b []byte) []byte { return appendArgsAsGiven(b, m.Args) }

func (m *PlaceholderMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " [unmodelled: -m "...)
	b = append(b, m.Name...)
	b = appendArgsAsGiven(b, m.Args)
	return append(b, ']')
}

func (m *PlaceholderMatch) match(*evalCtx) bool { return m.Always }

// Name implements Target.
func (t *PlaceholderTarget) Name() string { return t.TargetName }

func (t *PlaceholderTarget) appendSave(b []byte) []byte { return appendArgsAsGiven(b, t.Args) }

func (t *PlaceholderTarget) appendList(b []byte, _ bool) []byte {
	b = append(b, " [unmodelled: -j "...)
	b = append(b, t.TargetName...)
	b = appendArgsAsGiven(b, t.Args)
	return append(b, ']')
}

func (t *PlaceholderTarget) apply(*evalCtx) verdict { return vContinue }

// neverMatch is the hidden match compile adds to a rule whose placeholder
// target must never match; it is not part of the rule, so never printed.
var neverMatch Match = &PlaceholderMatch{Name: "never"}

// placeholderBuilder yields a PlaceholderMatch already filled.
type placeholderBuilder struct{ m *PlaceholderMatch }

func (b placeholderBuilder) set(*ruleCtx, string, bool, []string) error { return nil }
func (b placeholderBuilder) done(*ruleCtx) (any, error)                 { return b.m, nil }

// addPlaceholderMatch records "-m name" and its arguments args[i:] up to
// the next boundary; it returns the index of the last argument taken.
func (p *ruleParser) addPlaceholderMatch(name string, args []string, i int) int {
	j, own := p.skipModuleArgs(args, i)
	m := &PlaceholderMatch{Name: name, Args: own, Always: p.lenient == LenientAlwaysMatch}
	mod := &module{name: name, newBuilder: func(*ruleCtx) builder { return placeholderBuilder{m} }}
	p.matches = append(p.matches, p.newInstance(mod))
	return j - 1
}

// setPlaceholderTarget records "-j name" and its arguments as
// addPlaceholderMatch does.
func (p *ruleParser) setPlaceholderTarget(name string, args []string, i int) (int, error) {
	if p.target != nil || p.jump != "" || p.placeholder != nil {
		return i, errMultipleTargets
	}
	j, own := p.skipModuleArgs(args, i)
	p.placeholder = &PlaceholderTarget{TargetName: name, Args: own, Always: p.lenient == LenientAlwaysMatch}
	return j - 1, nil
}

// Placeholder describes one placeholder in a ruleset loaded leniently.
type Placeholder struct {
	Table TableID
	Chain string
	// Rule is the rule's 1-based position in Chain.
	Rule int
	// Line is the input line the rule came from (0 when unknown).
	Line int
	// Module is the unknown match or target name; Target says which.
	Module string
	Target bool
}

// Placeholders lists every placeholder match and target of the ruleset,
// in iptables-save order: what a lenient restore loaded without modelling.
func (rs *Ruleset) Placeholders() []Placeholder {
	var out []Placeholder
	for _, t := range rs.Tables() {
		for _, c := range t.chainList() {
			for i, r := range c.Rules {
				for _, m := range r.Matches {
					if p, ok := m.(*PlaceholderMatch); ok {
						out = append(out, Placeholder{t.id, c.Name, i + 1, p.Line, p.Name, false})
					}
				}
				if p, ok := r.Target.(*PlaceholderTarget); ok {
					out = append(out, Placeholder{t.id, c.Name, i + 1, p.Line, p.TargetName, true})
				}
			}
		}
	}
	return out
}

// Placeholders lists the placeholders of the host's ruleset of family f.
func (h *Host) Placeholders(f Family) []Placeholder { return h.rules[famIdx(f)].Placeholders() }

// isPlaceholder reports whether a rule holds a placeholder.
func (r *Rule) isPlaceholder() bool {
	if _, ok := r.Target.(*PlaceholderTarget); ok {
		return true
	}
	for _, m := range r.Matches {
		if _, ok := m.(*PlaceholderMatch); ok {
			return true
		}
	}
	return false
}

// setPlaceholderLines records the input line in the placeholders of rules.
func setPlaceholderLines(rules []*Rule, line int) {
	for _, r := range rules {
		for _, m := range r.Matches {
			if p, ok := m.(*PlaceholderMatch); ok {
				p.Line = line
			}
		}
		if p, ok := r.Target.(*PlaceholderTarget); ok {
			p.Line = line
		}
	}
}

// lenientTargets are iptables 1.8.9's target extensions: in lenient mode
// "-j NAME" with one of them that packetwalk does not model loads as a
// placeholder instead of a jump to a chain that does not exist.
var lenientTargets = map[string]bool{
	"AUDIT": true, "CHECKSUM": true, "CLASSIFY": true, "CLUSTERIP": true, "CONNMARK": true, "CONNSECMARK": true,
	"CT": true, "DNAT": true, "DNPT": true, "DSCP": true, "ECN": true, "HL": true, "HMARK": true, "IDLETIMER": true,
	"LED": true, "LOG": true, "MARK": true, "MASQUERADE": true, "NETMAP": true, "NFLOG": true, "NFQUEUE": true,
	"NOTRACK": true, "RATEEST": true, "REDIRECT": true, "REJECT": true, "SECMARK": true, "SET": true, "SNAT": true,
	"SNPT": true, "SYNPROXY": true, "TCPMSS": true, "TCPOPTSTRIP": true, "TEE": true, "TOS": true, "TPROXY": true,
	"TRACE": true, "TTL": true, "ULOG": true,
}

// placeholderable reports whether a parse error is about a module that a
// lenient restore may replace by a placeholder.
func placeholderable(err error) bool {
	return errors.Is(err, ErrUnknownMatch) || errors.Is(err, ErrUnknownTarget) || errors.Is(err, ErrNotModelled)
}

// isRuleBoundary reports whether args[i] starts something other than a
// module's options: an IP-spec option, another module or the target.
func isRuleBoundary(args []string, i int) bool {
	switch args[i] {
	case "-s", "--source", "--src", "-d", "--destination", "--dst", "-i", "--in-interface",
		"-o", "--out-interface", "-p", "--protocol", "-f", "--fragment", "-m", "--match",
		"-j", "--jump", "-g", "--goto", "-c", "--set-counters", "-4", "-6":
		return true
	case "!":
		return i+1 < len(args) && isRuleBoundary(args, i+1)
	}
	return false
}

// skipModuleArgs returns the index of the first argument from i on that
// starts something else, and the arguments in between (copied). An option
// of a module already loaded, or of the -p protocol's match, ends the
// unknown module's arguments too: "-p tcp -m foo --x 1 --dport 22" keeps
// --dport for tcp.
func (p *ruleParser) skipModuleArgs(args []string, i int) (int, []string) {
	j := i
	for j < len(args) && !isRuleBoundary(args, j) && !p.knownOption(args, j) {
		j++
	}
	var own []string
	if j > i {
		own = append(own, args[i:j]...)
	}
	return j, own
}

// knownOption reports whether args[j] (or "! args[j+1]") is a long option
// of a loaded module or of the -p protocol's implicit match.
func (p *ruleParser) knownOption(args []string, j int) bool {
	a := args[j]
	if a == "!" && j+1 < len(args) {
		a = args[j+1]
	}
	name, ok := strings.CutPrefix(a, "--")
	if !ok {
		return false
	}
	name, _, _ = strings.Cut(name, "=")
	for _, in := range p.matches {
		if _, ok := in.mod.lookup(name); ok {
			return true
		}
	}
	if p.rule.IP.Proto != 0 && !p.rule.IP.InvProto {
		if m, ok := matchModules[protoModule(p.rule.IP.Proto)]; ok {
			if _, ok := m.lookup(name); ok {
				return true
			}
		}
	}
	return false
}
