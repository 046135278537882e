package netfilter

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
)

// instance is one module occurrence while a rule is parsed.
type instance struct {
	mod *module
	b   builder
	// seen has bit i set once option mod.opts[i] was given; options past
	// the 64th share the last bit's slot in seenMore.
	seen     uint64
	seenMore map[string]bool
}

// markSeen records that o (an element of in.mod.opts) was given and
// reports whether it had been given before.
func (in *instance) markSeen(o *option) bool {
	i := -1
	for k := range in.mod.opts {
		if &in.mod.opts[k] == o {
			i = k
			break
		}
	}
	if i >= 0 && i < 64 {
		had := in.seen&(1<<i) != 0
		in.seen |= 1 << i
		return had
	}
	if in.seenMore == nil {
		in.seenMore = map[string]bool{}
	}
	had := in.seenMore[o.name]
	in.seenMore[o.name] = true
	return had
}

// ruleParser turns the rule-spec arguments of one command into a Rule.
type ruleParser struct {
	ctx     ruleCtx
	rule    Rule
	matches []*instance
	target  *instance
	// targetAt is len(matches) when the target was loaded: its options
	// rank after those of matches loaded later.
	targetAt int
	jump     string // -j/-g argument when it is a chain, or a verdict
	isGoto   bool
	seen     ipOptSet   // IP-spec options already given
	srcs     []addrSpec // -s with several comma-separated addresses
	dsts     []addrSpec
	counter  *Counters // -c PKTS BYTES

	// Inline storage: with the parser reused, a typical rule line needs no
	// allocation for the bookkeeping below.
	instBuf   [4]instance
	instPtrs  [4]*instance
	srcBuf    [1]addrSpec
	dstBuf    [1]addrSpec
	matchBuf  [3]Match
	jumpBuf   JumpTarget
	targetBuf instance

	// lenient (set by a lenient restore, kept across rules) turns an
	// unknown or unmodelled module into a placeholder (lenient.go).
	lenient     Lenient
	placeholder *PlaceholderTarget
	// forced are modules a lenient parse found unmodelled options of: the
	// rule is parsed again with them as placeholders. lastModule is the
	// module whose option was parsed last.
	forced     []string
	lastModule string
}

// ipOptSet records which IP-spec options ("-s", "-d", "-i", "-o", "-p",
// "-f") a rule has given, so that a repeated one is refused.
type ipOptSet uint8

func ipOptBit(key string) ipOptSet {
	switch key {
	case "-s":
		return 1
	case "-d":
		return 2
	case "-i":
		return 4
	case "-o":
		return 8
	case "-p":
		return 16
	}
	return 32 // "-f"
}

// newInstance returns a fresh module instance, from the inline storage
// while it lasts.
func (p *ruleParser) newInstance(m *module) *instance {
	var in *instance
	if n := len(p.matches); n < len(p.instBuf) {
		in = &p.instBuf[n]
	} else {
		in = new(instance)
	}
	*in = instance{mod: m, b: m.newBuilder(&p.ctx)}
	return in
}

// tokenError locates an error at an argument.
type tokenError struct {
	token string
	err   error
}

func (e *tokenError) Error() string { return e.err.Error() }
func (e *tokenError) Unwrap() error { return e.err }

func atToken(tok string, err error) error {
	if err == nil {
		return nil
	}
	if _, ok := err.(*tokenError); ok {
		return err
	}
	return &tokenError{token: tok, err: err}
}

// parseRuleSpecWith parses args (everything after "-A CHAIN") into rules.
// More than one rule results when -s or -d lists several addresses, as
// iptables expands them. p, when not nil, is scratch space: iptables-restore
// reuses one parser for every rule line.
func parseRuleSpecWith(p *ruleParser, ctx ruleCtx, args []string) ([]*Rule, *Counters, error) {
	if p == nil {
		p = &ruleParser{}
	}
	var forced []string
	for {
		*p = ruleParser{ctx: ctx, lenient: p.lenient, forced: forced}
		p.ctx.ip = &p.rule.IP
		p.matches = p.instPtrs[:0]
		err := p.parse(args)
		if err == nil && (p.rule.IP.InvSrc || p.rule.IP.InvDst) && (len(p.srcs) > 1 || len(p.dsts) > 1) {
			// iptables refuses "!" on -s or -d when either lists several
			// addresses, not only the inverted one.
			return nil, nil, atToken("!", fmt.Errorf("%w: ! not allowed with multiple source or destination IP addresses", ErrIncompatibleOpts))
		}
		if err == nil {
			if err = p.finish(); err != nil {
				return nil, nil, err
			}
			// A module that parses but cannot run (TEE, TPROXY,
			// SYNPROXY, rt --rt-0-addrs...) is refused when a host loads
			// the rule; a lenient restore makes it a placeholder now.
			name := p.unmodelledModule()
			if name == "" || p.lenient == LenientOff || slices.Contains(forced, name) {
				break
			}
			forced = append(forced, name)
			continue
		}
		if p.lenient == LenientOff || !placeholderable(err) || p.lastModule == "" || slices.Contains(forced, p.lastModule) {
			return nil, nil, err
		}
		// A known module refused one of its options as unmodelled: parse
		// again with that module as a placeholder.
		forced = append(forced, p.lastModule)
	}
	if len(p.srcs) <= 1 && len(p.dsts) <= 1 {
		// The common case: one rule, allocated together with its slot,
		// its matches and its jump.
		one := &struct {
			r    Rule
			list [1]*Rule
			m    [len(p.matchBuf)]Match
			jump JumpTarget
		}{r: p.rule}
		if len(p.rule.Matches) == 0 {
			one.r.Matches = nil
		} else if &p.rule.Matches[0] == &p.matchBuf[0] {
			one.r.Matches = one.m[:copy(one.m[:], p.rule.Matches):len(p.rule.Matches)]
		}
		if p.rule.Target == &p.jumpBuf {
			one.jump = p.jumpBuf
			one.r.Target = &one.jump
		}
		if len(p.srcs) == 1 {
			one.r.IP.Src, one.r.IP.SrcMask = p.srcs[0].pfx, p.srcs[0].mask
		}
		if len(p.dsts) == 1 {
			one.r.IP.Dst, one.r.IP.DstMask = p.dsts[0].pfx, p.dsts[0].mask
		}
		one.list[0] = &one.r
		return one.list[:], p.counter, nil
	}
	srcs, dsts := p.srcs, p.dsts
	if len(srcs) == 0 {
		srcs = []addrSpec{{}}
	}
	if len(dsts) == 0 {
		dsts = []addrSpec{{}}
	}
	if len(p.rule.Matches) == 0 {
		p.rule.Matches = nil
	} else if &p.rule.Matches[0] == &p.matchBuf[0] {
		p.rule.Matches = append([]Match(nil), p.rule.Matches...)
	}
	if p.rule.Target == &p.jumpBuf {
		j := p.jumpBuf
		p.rule.Target = &j
	}
	rules := make([]*Rule, 0, len(srcs)*len(dsts))
	for _, s := range srcs {
		for _, d := range dsts {
			r := p.rule
			r.IP.Src, r.IP.SrcMask, r.IP.Dst, r.IP.DstMask = s.pfx, s.mask, d.pfx, d.mask
			rules = append(rules, &r)
		}
	}
	return rules, p.counter, nil
}

func (p *ruleParser) parse(args []string) error {
	inv := false
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if tok == "!" {
			if inv {
				return atToken(tok, fmt.Errorf("%w: multiple \"!\" flags not allowed", ErrSyntax))
			}
			inv = true
			continue
		}
		name, val, hasVal := splitOption(tok)
		if name == "" {
			return atToken(tok, fmt.Errorf("%w: unexpected argument %q", ErrSyntax, tok))
		}
		if strings.HasPrefix(name, "--") {
			name = p.expandAbbrev(name)
		} else if hasVal && val == "!" {
			// iptables 1.8.9 takes "-i!" as the interface "-i!" (its
			// old "!" handling rereads the word), which packetwalk
			// does not copy.
			return atToken(tok, fmt.Errorf("%w: %q (write \"%s !\" or \"! %s\")", ErrNotModelled, tok, name, name))
		}
		next := func() (string, error) {
			if hasVal {
				hasVal = false
				return val, nil
			}
			if i+1 >= len(args) {
				return "", atToken(tok, fmt.Errorf("%w: option %q requires an argument", ErrMissingArgument, tok))
			}
			i++
			// A "!" here is the option's argument, as getopt hands it
			// over ("-s !" names the host "!").
			return args[i], nil
		}
		var err error
		switch name {
		case "-s", "--source", "--src", "-d", "--destination", "--dst":
			var v string
			if v, err = next(); err == nil {
				err = p.setAddr(name, inv, v)
			}
		case "-i", "--in-interface", "-o", "--out-interface":
			var v string
			if v, err = next(); err == nil {
				err = p.setIface(name, inv, v)
			}
		case "-p", "--protocol":
			var v string
			if v, err = next(); err == nil {
				err = p.setProto(inv, v)
			}
		case "-f", "--fragment", "--fragments":
			err = p.setFragment(inv)
		case "-m", "--match":
			var v string
			if v, err = next(); err == nil {
				if inv {
					err = fmt.Errorf("%w: \"!\" cannot precede -m", ErrSyntax)
				} else if slices.Contains(p.forced, v) || p.lenient != LenientOff && matchModules[v] != nil && matchModules[v].unmodelled {
					i = p.addPlaceholderMatch(v, args, i+1)
				} else if err = p.addMatch(v); err != nil && p.lenient != LenientOff && placeholderable(err) {
					i, err = p.addPlaceholderMatch(v, args, i+1), nil
				}
			}
		case "-j", "--jump", "-g", "--goto":
			var v string
			if v, err = next(); err == nil {
				if inv {
					err = fmt.Errorf("%w: \"!\" cannot precede %s", ErrSyntax, name)
				} else if p.lenient != LenientOff && name != "-g" && name != "--goto" && (lenientTargets[v] && targetModules[v] == nil || slices.Contains(p.forced, v)) {
					i, err = p.setPlaceholderTarget(v, args, i+1)
				} else if err = p.setTarget(v, name == "-g" || name == "--goto"); err != nil && p.lenient != LenientOff && placeholderable(err) {
					i, err = p.setPlaceholderTarget(v, args, i+1)
				}
			}
		case "-c", "--set-counters":
			var pk, by string
			if pk, err = next(); err == nil {
				if by, err = next(); err == nil {
					err = p.setCounters(pk, by)
				}
			}
		case "-4":
			if p.ctx.family != IPv4 {
				err = fmt.Errorf("%w: -4 in an IPv6 ruleset", ErrNotAllowed)
			}
		case "-6":
			if p.ctx.family != IPv6 {
				err = fmt.Errorf("%w: -6 in an IPv4 ruleset", ErrNotAllowed)
			}
		default:
			if !strings.HasPrefix(name, "--") {
				return atToken(tok, fmt.Errorf("%w %q", ErrUnknownOption, tok))
			}
			err = p.moduleOption(tok, name[2:], inv, &i, args, val, hasVal)
			hasVal = false
		}
		if err != nil {
			return atToken(tok, err)
		}
		if hasVal {
			return atToken(tok, fmt.Errorf("%w: option %q takes no argument", ErrSyntax, name))
		}
		inv = false
	}
	if inv {
		return atToken("!", fmt.Errorf("%w: \"!\" at the end of the rule", ErrSyntax))
	}
	return nil
}

// splitOption separates "--opt=value" and attached short-option arguments
// ("-ptcp"); it returns an empty name for a non-option argument.
func splitOption(tok string) (name, val string, hasVal bool) {
	switch {
	case strings.HasPrefix(tok, "--"):
		if k, v, ok := strings.Cut(tok, "="); ok {
			return k, v, true
		}
		return tok, "", false
	case len(tok) > 2 && tok[0] == '-' && strings.ContainsRune("sdiopjgmc", rune(tok[1])):
		return tok[:2], tok[2:], true
	case len(tok) == 2 && tok[0] == '-':
		return tok, "", false
	}
	return "", "", false
}

func (p *ruleParser) once(key string) error {
	bit := ipOptBit(key)
	if p.seen&bit != 0 {
		return fmt.Errorf("%w: multiple %s flags not allowed", ErrMultipleFlags, key)
	}
	p.seen |= bit
	return nil
}

func (p *ruleParser) setAddr(name string, inv bool, v string) error {
	src := name == "-s" || name == "--source" || name == "--src"
	key := "-d"
	if src {
		key = "-s"
	}
	if err := p.once(key); err != nil {
		return err
	}
	list := p.dstBuf[:0]
	if src {
		list = p.srcBuf[:0]
	}
	for rest := v; ; {
		part, more, found := strings.Cut(rest, ",")
		pfx, mask, err := parseHostMask(p.ctx.family, part)
		if err != nil {
			return err
		}
		list = append(list, addrSpec{pfx, mask})
		if !found {
			break
		}
		rest = more
	}
	if inv && list[0].pfx.Bits() == 0 && !list[0].mask.IsValid() {
		// The kernel refuses a negated match-everything address (EINVAL).
		return fmt.Errorf("%w: \"! %s %s\" can never match", ErrBadValue, key, v)
	}
	if src {
		p.srcs, p.rule.IP.InvSrc = list, inv
	} else {
		p.dsts, p.rule.IP.InvDst = list, inv
	}
	return nil
}

// addrSpec is one address of -s or -d.
type addrSpec struct {
	pfx  netip.Prefix
	mask netip.Addr // a non-contiguous netmask, or the zero Addr
}

// parseAddrMask parses "ADDR", "ADDR/LEN" or "ADDR/MASK" as conntrack's
// address options do (getaddrinfo's forms, see parseHostAddr); host bits are cleared, as iptables-save shows. A
// non-contiguous MASK is returned as mask, with the masked address as a
// full-length prefix. An IPv4-mapped IPv6 address stays IPv6 in ip6tables,
// which matches it as the 16-byte address.
func parseAddrMask(f Family, s string) (netip.Prefix, netip.Addr, error) {
	addrPart, maskPart, hasMask := strings.Cut(s, "/")
	a, err := parseHostAddr(f, addrPart, false)
	if err != nil {
		return netip.Prefix{}, netip.Addr{}, err
	}
	bits := a.BitLen()
	if hasMask {
		n, err := strconv.Atoi(maskPart)
		switch {
		case err == nil && n >= 0 && n <= a.BitLen() && !strings.HasPrefix(maskPart, "+"):
			bits = n
		case err != nil:
			m, err := netip.ParseAddr(maskPart)
			if err != nil || m.BitLen() != a.BitLen() || m.Zone() != "" {
				return netip.Prefix{}, netip.Addr{}, fmt.Errorf("%w: invalid mask %q specified", ErrBadValue, maskPart)
			}
			ones, ok := maskOnes(m)
			if !ok {
				return netip.PrefixFrom(andAddr(a, m), a.BitLen()), m, nil
			}
			bits = ones
		default:
			return netip.Prefix{}, netip.Addr{}, fmt.Errorf("%w: invalid mask %q specified", ErrBadValue, maskPart)
		}
	}
	return netip.PrefixFrom(a, bits).Masked(), netip.Addr{}, nil
}

// andAddr returns a & m; both are of one family.
func andAddr(a, m netip.Addr) netip.Addr {
	if a.Is4() {
		x, y := a.As4(), m.As4()
		for i := range x {
			x[i] &= y[i]
		}
		return netip.AddrFrom4(x)
	}
	x, y := a.As16(), m.As16()
	for i := range x {
		x[i] &= y[i]
	}
	return netip.AddrFrom16(x)
}

// maskedEqual reports whether a & m == net, for an address a of the
// family of m (false otherwise).
func maskedEqual(a, m, net netip.Addr) bool {
	if a.Is4() != m.Is4() {
		return false
	}
	return andAddr(a, m) == net
}

// maskOnes returns the prefix length of a contiguous netmask.
func maskOnes(m netip.Addr) (int, bool) {
	b := m.AsSlice()
	n, zero := 0, false
	for _, x := range b {
		for bit := 7; bit >= 0; bit-- {
			if x&(1<<bit) != 0 {
				if zero {
					return 0, false
				}
				n++
			} else {
				zero = true
			}
		}
	}
	return n, true
}

func (p *ruleParser) setIface(name string, inv bool, v string) error {
	in := name == "-i" || name == "--in-interface"
	key := "-o"
	if in {
		key = "-i"
	}
	if err := p.once(key); err != nil {
		return err
	}
	if err := checkIfaceName(v); err != nil {
		return err
	}
	if v == "+" && !inv {
		// A bare "+" matches every name: iptables drops it (no -i in
		// iptables-save or -S, "*" in -L), while "! -i +" stays and
		// matches nothing. The option still counts as given (twice is
		// an error, -i in OUTPUT too).
		v = ""
	}
	if in {
		p.rule.IP.In, p.rule.IP.InvIn = v, inv
	} else {
		p.rule.IP.Out, p.rule.IP.InvOut = v, inv
	}
	return nil
}

// checkIfaceName applies iptables' limits on an interface name in a rule:
// not empty, shorter than IFNAMSIZ. iptables only warns about "/" and " ",
// and takes a leading "!" as part of the name ("-i !eth0").
func checkIfaceName(v string) error {
	if v == "" {
		return fmt.Errorf("%w: empty interface name", ErrBadValue)
	}
	if len(v) > 15 {
		return fmt.Errorf("%w: interface name %q must be shorter than 16 characters", ErrBadValue, v)
	}
	return nil
}

// checkDevName applies the kernel's rules for the name of a device
// (dev_valid_name): a rule's limits, and no "/" or white space; "!" is
// refused too, as a name iptables could not tell from an inversion.
func checkDevName(v string) error {
	if err := checkIfaceName(v); err != nil {
		return err
	}
	if v == "." || v == ".." || v[0] == '!' || strings.ContainsAny(v, "/ \t\n\v\f\r:") {
		return fmt.Errorf("%w: invalid interface name %q", ErrBadValue, v)
	}
	return nil
}

func (p *ruleParser) setProto(inv bool, v string) error {
	if err := p.once("-p"); err != nil {
		return err
	}
	proto, ok := inet.ParseProto(strings.ToLower(v))
	if !ok {
		return fmt.Errorf("%w: unknown protocol %q specified", ErrBadValue, v)
	}
	if proto == 0 && inv {
		return fmt.Errorf("%w: rule would never match protocol", ErrBadValue)
	}
	p.rule.IP.Proto, p.rule.IP.InvProto = proto, inv
	return nil
}

func (p *ruleParser) setFragment(inv bool) error {
	if err := p.once("-f"); err != nil {
		return err
	}
	if p.ctx.family == IPv6 {
		return fmt.Errorf("%w: -f is not available in ip6tables", ErrUnknownOption)
	}
	p.rule.IP.Fragment = OnlyFragments
	if inv {
		p.rule.IP.Fragment = NoFragments
	}
	return nil
}

func (p *ruleParser) setCounters(pk, by string) error {
	a, err1 := strconv.ParseUint(pk, 10, 64)
	b, err2 := strconv.ParseUint(by, 10, 64)
	if err1 != nil || err2 != nil {
		return fmt.Errorf("%w: -c packet counter %q or byte counter %q not numeric", ErrBadValue, pk, by)
	}
	p.counter = &Counters{Packets: a, Bytes: b}
	return nil
}

func (p *ruleParser) addMatch(name string) error {
	m, ok := matchModules[name]
	if !ok || !m.allows(p.ctx.family) {
		return fmt.Errorf("%w %q", ErrUnknownMatch, name)
	}
	return p.loadMatch(m)
}

func (p *ruleParser) loadMatch(m *module) error {
	p.matches = append(p.matches, p.newInstance(m))
	return nil
}

func (p *ruleParser) setTarget(name string, isGoto bool) error {
	if p.target != nil || p.jump != "" || p.placeholder != nil {
		return fmt.Errorf("%w: multiple -j flags not allowed", ErrMultipleFlags)
	}
	if name == "" {
		return fmt.Errorf("%w: empty target name", ErrBadValue)
	}
	if m, ok := targetModules[name]; ok && !isGoto {
		if !m.allows(p.ctx.family) {
			return fmt.Errorf("%w %q", ErrUnknownTarget, name)
		}
		p.targetBuf = instance{mod: m, b: m.newBuilder(&p.ctx)}
		p.target, p.targetAt = &p.targetBuf, len(p.matches)
		return nil
	}
	if supported, ok := builtinTargets[name]; ok {
		if !supported {
			return fmt.Errorf("%w %q", ErrUnknownTarget, name)
		}
		if isGoto {
			return fmt.Errorf("%w: goto %q: -g needs a user chain", ErrNotAllowed, name)
		}
	} else if len(name) > 28 || strings.HasPrefix(name, "-") || unmodelledTargets[name] {
		return fmt.Errorf("%w %q", ErrUnknownTarget, name)
	}
	p.jump, p.isGoto = name, isGoto
	return nil
}

// moduleOption routes a long option to the module that owns it, as
// getopt_long over iptables' merged option table does: each distinct
// module's options enter the table when it is first loaded (-m, -j, or
// the implicit protocol match), ahead of those loaded before, so the most
// recently first-loaded module owning the name wins, even when a later
// module lacks it; within that module the option goes to its latest
// instance (a repeated "-m" does not move the module's place). Failing
// all, the -p protocol's match is loaded (so "-p tcp --dport 80" loads
// "-m tcp").
func (p *ruleParser) moduleOption(tok, name string, inv bool, i *int, args []string, val string, hasVal bool) error {
	dst, opt := p.optionOwner(name)
	// iptables loads the protocol's match after "! -p udp" too; the
	// match's own check then decides (packetwalk refuses it as not
	// modelled, the kernel takes tcp and udp).
	if dst == nil && p.rule.IP.Proto != 0 {
		if m, ok := matchModules[protoModule(p.rule.IP.Proto)]; ok && m.allows(p.ctx.family) {
			if o, ok := m.lookup(name); ok {
				loaded := false
				for _, in := range p.matches {
					if in.mod == m {
						loaded = true
					}
				}
				if !loaded {
					if err := p.loadMatch(m); err != nil {
						return err
					}
					dst, opt = p.matches[len(p.matches)-1], o
				}
			}
		}
	}
	if dst == nil {
		return fmt.Errorf("%w %q", ErrUnknownOption, tok)
	}
	if inv && !opt.invert {
		return fmt.Errorf("%w: %s: option \"--%s\" cannot be inverted", ErrSyntax, dst.mod.name, opt.name)
	}
	if dst.markSeen(opt) && !opt.multi {
		return fmt.Errorf("%w: %s: option \"--%s\" can only be used once", ErrMultipleFlags, dst.mod.name, opt.name)
	}
	var vals []string
	if opt.optional {
		switch {
		case hasVal:
			vals = []string{val}
		case *i+1 < len(args) && args[*i+1] != "" && args[*i+1][0] != '-' && args[*i+1][0] != '!':
			*i++
			vals = args[*i : *i+1 : *i+1]
		}
		p.lastModule = dst.mod.name
		return dst.b.set(&p.ctx, opt.name, inv, vals)
	}
	if opt.args == 1 && !hasVal && *i+1 < len(args) {
		// One argument that is already a separate word: pass a view of
		// args rather than a copy.
		*i++
		p.lastModule = dst.mod.name
		return dst.b.set(&p.ctx, opt.name, inv, args[*i:*i+1:*i+1])
	}
	for k := 0; k < opt.args; k++ {
		if hasVal {
			vals = append(vals, val)
			hasVal = false
			continue
		}
		if *i+1 >= len(args) {
			return fmt.Errorf("%w: option \"--%s\" requires an argument", ErrMissingArgument, opt.name)
		}
		*i++
		// The first argument is getopt's and may be anything, "!"
		// included ("--comment !"); the extensions read further ones
		// themselves and refuse a "!" there ("--tcp-flags requires two
		// args").
		if k > 0 && args[*i] == "!" {
			return fmt.Errorf("%w: option \"--%s\" requires %d arguments", ErrMissingArgument, opt.name, opt.args)
		}
		vals = append(vals, args[*i])
	}
	if hasVal {
		return fmt.Errorf("%w: option \"--%s\" takes no argument", ErrSyntax, opt.name)
	}
	p.lastModule = dst.mod.name
	return dst.b.set(&p.ctx, opt.name, inv, vals)
}

// optionOwner finds the instance an option name goes to, or nil.
func (p *ruleParser) optionOwner(name string) (*instance, *option) {
	for i := len(p.matches); ; i-- {
		if p.target != nil && i == p.targetAt {
			if o, ok := p.target.mod.lookup(name); ok {
				return p.target, o
			}
		}
		if i == 0 {
			return nil, nil
		}
		in := p.matches[i-1]
		if p.firstOf(i - 1) {
			if o, ok := in.mod.lookup(name); ok {
				return p.latestOf(in.mod), o
			}
		}
	}
}

// firstOf reports whether p.matches[k] is the first instance of its module.
func (p *ruleParser) firstOf(k int) bool {
	for _, in := range p.matches[:k] {
		if in.mod == p.matches[k].mod {
			return false
		}
	}
	return true
}

// latestOf returns the last loaded instance of m.
func (p *ruleParser) latestOf(m *module) *instance {
	for k := len(p.matches) - 1; ; k-- {
		if p.matches[k].mod == m {
			return p.matches[k]
		}
	}
}

// protoModule names the match an implicit -p loads.
func protoModule(p inet.Proto) string {
	switch p {
	case inet.TCP:
		return "tcp"
	case inet.UDP:
		return "udp"
	case inet.ICMP:
		return "icmp"
	case inet.ICMPv6:
		return "icmp6"
	case inet.SCTP:
		return "sctp"
	case inet.UDPLite:
		return "udplite"
	}
	return ""
}

func (p *ruleParser) finish() error {
	if p.ctx.table == Filter || p.ctx.table == Security || p.ctx.table == Raw || p.ctx.table == Mangle || p.ctx.table == NAT {
		if h, ok := hookByName(p.ctx.chain); ok {
			if p.seen&ipOptBit("-o") != 0 && (h == Prerouting || h == Input) {
				return atToken("-o", fmt.Errorf("%w: can't use -o with %s", ErrNotAllowed, h))
			}
			if p.seen&ipOptBit("-i") != 0 && (h == Postrouting || h == Output) {
				return atToken("-i", fmt.Errorf("%w: can't use -i with %s", ErrNotAllowed, h))
			}
		}
	}
	switch {
	case len(p.matches) <= len(p.matchBuf):
		// Moved into the rule's own allocation by parseRuleSpecWith.
		p.rule.Matches = p.matchBuf[:0]
	default:
		p.rule.Matches = make([]Match, 0, len(p.matches))
	}
	for _, in := range p.matches {
		v, err := in.b.done(&p.ctx)
		if err != nil {
			return atToken("-m", fmt.Errorf("%s: %w", in.mod.name, err))
		}
		p.rule.Matches = append(p.rule.Matches, v.(Match))
	}
	switch {
	case p.placeholder != nil:
		p.rule.Target = p.placeholder
	case p.target != nil:
		v, err := p.target.b.done(&p.ctx)
		if err != nil {
			return atToken("-j", fmt.Errorf("%s: %w", p.target.mod.name, err))
		}
		p.rule.Target = v.(Target)
	case p.jump != "":
		switch p.jump {
		case "ACCEPT":
			p.rule.Target = Accept
		case "DROP":
			p.rule.Target = Drop
		case "RETURN":
			p.rule.Target = Return
		default:
			p.jumpBuf = JumpTarget{Chain: p.jump, Goto: p.isGoto}
			p.rule.Target = &p.jumpBuf
		}
	}
	return nil
}

// unmodelledTargets are xtables target extensions packetwalk does not model;
// naming them is an error rather than a jump to a missing chain.
var unmodelledTargets = map[string]bool{
	"AUDIT": true, "CHECKSUM": true, "CLASSIFY": true, "CLUSTERIP": true, "CONNSECMARK": true,
	"DSCP": true, "ECN": true, "HMARK": true, "IDLETIMER": true, "LED": true, "NETMAP": true,
	"NFQUEUE": true, "QUEUE": true, "RATEEST": true, "SECMARK": true, "SYNPROXY": true, "TCPMSS": true,
	"TCPOPTSTRIP": true, "TEE": true, "TOS": true, "TPROXY": true, "TTL": true, "ULOG": true,
}

// exactOption reports whether name is spelled out in full as an option of
// iptables itself or of a module already loaded, the common case in which
// expandAbbrev has nothing to resolve.
func (p *ruleParser) exactOption(name string) bool {
	for _, o := range mainLongOptions {
		if o == name {
			return true
		}
	}
	if p.target != nil {
		if _, ok := p.target.mod.lookup(name); ok {
			return true
		}
	}
	for _, in := range p.matches {
		if _, ok := in.mod.lookup(name); ok {
			return true
		}
	}
	return false
}

// mainLongOptions are iptables' own long options (not a module's).
var mainLongOptions = []string{"source", "src", "destination", "dst", "in-interface", "out-interface",
	"protocol", "fragments", "jump", "goto", "match", "set-counters"}

// commandLongOptions are the other long options of iptables' getopt table
// (commands and listing options, iptables 1.8.9's original_opts): they
// take part in getopt_long's abbreviation matching, so "--he" is
// ambiguous between --help and helper's --helper, and "--re" between
// --replace and --rename-chain. packetwalk refuses them in a rule.
var commandLongOptions = []string{"append", "delete", "check", "insert", "replace", "list", "list-rules",
	"flush", "zero", "new-chain", "delete-chain", "rename-chain", "policy", "table", "numeric",
	"verbose", "wait", "wait-interval", "exact", "version", "help", "line-numbers", "modprobe",
	"ipv4", "ipv6"}

// expandAbbrev resolves an abbreviated long option the way getopt_long
// does over iptables' merged option table: a unique prefix of one option
// of iptables itself or of a loaded module (or of the -p protocol's match,
// which iptables loads when an option is unknown) stands for it; an exact
// name always wins; an ambiguous or unknown prefix is left as it is and
// fails later as an unknown option.
func (p *ruleParser) expandAbbrev(name string) string {
	prefix := name[2:]
	if prefix == "" || p.exactOption(prefix) {
		return name
	}
	type cand struct{ owner, canon string }
	var found []cand
	seen := map[cand]bool{}
	add := func(owner, canon, spelled string) bool {
		if spelled == prefix {
			found, seen = []cand{{owner, canon}}, map[cand]bool{{owner, canon}: true}
			return true
		}
		c := cand{owner, canon}
		if strings.HasPrefix(spelled, prefix) && !seen[c] {
			seen[c] = true
			found = append(found, c)
		}
		return false
	}
	for _, o := range mainLongOptions {
		if add("", o, o) {
			return name
		}
	}
	for _, o := range commandLongOptions {
		if add("-", o, o) {
			return name
		}
	}
	mods := []*module{}
	if p.target != nil {
		mods = append(mods, p.target.mod)
	}
	for _, in := range p.matches {
		mods = append(mods, in.mod)
	}
	scan := func(m *module) bool {
		for _, o := range m.opts {
			if o.only6 && p.ctx.family != IPv6 {
				continue
			}
			if add(m.name, o.name, o.name) {
				return true
			}
			for _, a := range o.aliases {
				if add(m.name, o.name, a) {
					return true
				}
			}
		}
		return false
	}
	for _, m := range mods {
		if scan(m) {
			return name
		}
	}
	if len(found) == 0 && p.rule.IP.Proto != 0 {
		if m, ok := matchModules[protoModule(p.rule.IP.Proto)]; ok && scan(m) {
			return name
		}
	}
	if len(found) != 1 || found[0].owner == "-" {
		return name
	}
	for _, o := range mainLongOptions {
		if found[0].owner == "" && found[0].canon == o {
			return "--" + o
		}
	}
	return "--" + found[0].canon
}

// unmodelledModule names the rule's first module that loads but cannot
// run (see unmodelled), or returns "".
func (p *ruleParser) unmodelledModule() string {
	for _, m := range p.rule.Matches {
		if u, ok := m.(unmodelled); ok && u.unmodelled() != "" {
			return m.Module()
		}
	}
	if u, ok := p.rule.Target.(unmodelled); ok && u.unmodelled() != "" {
		return p.rule.Target.Name()
	}
	return ""
}

// needProto refuses a protocol match on a rule whose -p is another
// protocol, as the kernel's checkentry does.
func needProto(c *ruleCtx, mod string, p inet.Proto) error {
	if c.ip.Proto == p && c.ip.InvProto && (p == inet.TCP || p == inet.UDP) {
		// iptables-nft and the kernel take "! -p tcp -m tcp" (and udp);
		// the match then reads any other protocol's header as TCP or UDP
		// (and drops a packet too short for that header), which
		// packetwalk does not model.
		return fmt.Errorf("%w: %s match after \"! -p %s\"", ErrNotModelled, mod, p)
	}
	if c.ip.Proto != p || c.ip.InvProto {
		return fmt.Errorf("%w: %s match needs \"-p %s\"", ErrNotAllowed, mod, p)
	}
	return nil
}
