package agents

import (
	"errors"
	"fmt"
)

// Sentinel errors, usable with errors.Is on any error of this package.
var (
	// ErrUnknownKey: a configuration key the agent does not know.
	ErrUnknownKey = errors.New("unknown key")
	// ErrBadValue: a key's value has the wrong type or syntax.
	ErrBadValue = errors.New("bad value")
	// ErrBadCIDR: a CIDR that does not parse or has host bits set.
	ErrBadCIDR = errors.New("bad CIDR")
	// ErrTooManyCIDRs: more nonMasqueradeCIDRs than cidrLimit allows.
	ErrTooManyCIDRs = errors.New("too many CIDRs")
	// ErrFamily: an address of the wrong family (IPv6 without IPv6
	// enabled, an IPv6 port on an IPv4 bridge, ...).
	ErrFamily = errors.New("wrong address family")
	// ErrNotModelled: a configuration the generator refuses because it
	// cannot reproduce the agent's output for it.
	ErrNotModelled = errors.New("not modelled")
)

// ConfigError reports a bad configuration value. Key names the key (for
// list items with an index, e.g. "nonMasqueradeCIDRs[2]"), Line the 1-based
// line of the key in the YAML input (0 when built from Go values).
type ConfigError struct {
	Agent string // "ip-masq-agent", "calico", "docker"
	Key   string
	Line  int
	Value string // the offending token
	Want  string // what was expected
	Err   error  // one of the sentinel errors
}

// Error names the agent, the key, its line, the offending token and what
// was expected.
func (e *ConfigError) Error() string {
	loc := ""
	if e.Line > 0 {
		loc = fmt.Sprintf(" (line %d)", e.Line)
	}
	s := fmt.Sprintf("%s: %s%s: %v %q", e.Agent, e.Key, loc, e.Err, e.Value)
	if e.Want != "" {
		s += ", want " + e.Want
	}
	return s
}

// Unwrap returns the sentinel error.
func (e *ConfigError) Unwrap() error { return e.Err }
