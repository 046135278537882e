package netfilter

// Match is one "-m NAME options" of a rule. The set of matches is closed:
// every implementation is a *...Match type of this package, built by the
// parser or by hand, and immutable once in a loaded ruleset.
type Match interface {
	// Module returns the name given to -m ("tcp", "comment").
	Module() string
	// appendSave appends the options as iptables-save prints them after
	// " -m NAME", each with a leading space.
	appendSave(b []byte) []byte
	// appendList appends the text iptables -L prints in the last column,
	// with a leading space.
	appendList(b []byte, numeric bool) []byte
	// match reports whether the packet in c matches.
	match(c *evalCtx) bool
}

// Target is what a rule does when it matches (-j or -g). The set of targets
// is closed like the set of matches.
type Target interface {
	// Name returns the target's name as given to -j ("ACCEPT", "MARK", or
	// the chain jumped to).
	Name() string
	// appendSave appends the target options as iptables-save prints them
	// after " -j NAME".
	appendSave(b []byte) []byte
	// appendList appends the target's -L text with a leading space.
	appendList(b []byte, numeric bool) []byte
}

// option describes one long option of a module.
type option struct {
	name    string // without "--"
	args    int    // number of arguments it takes
	invert  bool   // whether "!" may precede it
	aliases []string
	multi   bool // may be given more than once (policy's per-element options)
	// optional: the option takes one argument when the next word does not
	// start with '-' or '!', none otherwise (rateest's --rateest-bps1).
	optional bool
	// only6: an option of the ip6tables form of the module alone (ah's
	// --ahlen, --ahres), left out of iptables' abbreviation matching.
	only6 bool
}

// ruleCtx is what a module's parser may consult about the rule around it.
type ruleCtx struct {
	family Family
	table  TableID
	chain  string
	ip     *IPSpec
}

// builder parses one module instance's options and then yields the match
// or target.
type builder interface {
	// set handles one option. opt is the canonical name without "--".
	set(c *ruleCtx, opt string, inv bool, args []string) error
	// done checks the complete option set and returns the result, which
	// is a Match for match modules and a Target for target modules.
	done(c *ruleCtx) (any, error)
}

// module is the parser-side description of a match or target extension.
type module struct {
	name string
	opts []option
	// newBuilder starts parsing an instance.
	newBuilder func(c *ruleCtx) builder
	// families limits the module to some families; nil means both.
	families []Family
	// tables and hooks limit where the module may be used, as the kernel's
	// checkentry does; nil means anywhere. A user chain counts as being
	// in every hook from which it can be reached.
	tables []TableID
	hooks  []Hook
	// unmodelled marks a module packetwalk parses and prints but cannot
	// evaluate (its match refuses to load): a lenient restore takes it as
	// a placeholder.
	unmodelled bool
}

func (m *module) lookup(name string) (*option, bool) {
	for i := range m.opts {
		o := &m.opts[i]
		if o.name == name {
			return o, true
		}
		for _, a := range o.aliases {
			if a == name {
				return o, true
			}
		}
	}
	return nil, false
}

func (m *module) allows(f Family) bool {
	if m.families == nil {
		return true
	}
	for _, x := range m.families {
		if x == f {
			return true
		}
	}
	return false
}

// matchModules and targetModules are the extensions packetwalk models. They
// are built once and never modified.
var matchModules = map[string]*module{}
var targetModules = map[string]*module{}

// builtinTargets are the verdict targets that are not extensions.
var builtinTargets = map[string]bool{"ACCEPT": true, "DROP": true, "RETURN": true, "QUEUE": false}

func registerMatch(m *module) *module  { matchModules[m.name] = m; return m }
func registerTarget(m *module) *module { targetModules[m.name] = m; return m }
