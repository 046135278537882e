package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/ipset"
	"github.com/packetwalk/packetwalk/netfilter"
)

// nodeInput holds the flags that describe the simulated node; every
// subcommand that needs a node shares them.
type nodeInput struct {
	rules, rules6  string
	ipsets, ctFile string
	nfacctFile     string
	nfacct         nfacctList
	addrsFile      string
	routesFile     string
	dir            string
	addrs          addrList
	ifaces         ifaceList
	routes         routeList
	ipRules        stringList
	ipRoutes       stringList
	sockets        stringList
	sysctls        sysctlMap
	backend        backendFlag
	seed           uint64
	lenient        lenientFlag
	fragment       bool
	listing        bool
	fragTable      tableFlag
	stdinUsed      bool // "-" may be given to one flag only
}

// lenientVerb says what a placeholder does.
func lenientVerb(l netfilter.Lenient) string {
	if l == netfilter.LenientAlwaysMatch {
		return "always matches"
	}
	return "never matches"
}

// lenientFlag is --lenient never-match|always-match|off.
type lenientFlag struct{ v netfilter.Lenient }

func (l *lenientFlag) String() string { return l.v.String() }

func (l *lenientFlag) Set(s string) error {
	v, err := netfilter.ParseLenient(s)
	if err != nil {
		return fmt.Errorf("want never-match, always-match or off")
	}
	l.v = v
	return nil
}

// tableFlag is --table TABLE, the default table of a fragment.
type tableFlag struct{ t netfilter.TableID }

func (f *tableFlag) String() string {
	if f.t == netfilter.NoTable {
		return ""
	}
	return f.t.String()
}

func (f *tableFlag) Set(s string) error {
	t, err := netfilter.ParseTable(s)
	if err != nil {
		return fmt.Errorf("unknown table %q: expected filter, nat, mangle, raw or security", s)
	}
	f.t = t
	return nil
}

// nodeFlagsHelp ends the help of subcommands that take node input.
const nodeFlagsHelp = `
Node input: --node DIR loads whichever of iptables-save, ip6tables-save,
ipset-save, ip-addr.json, ip-route.json, ip6-route.json, ip-rule.json,
ip6-rule.json, rt_tables, conntrack and nfacct-list it holds (explicit flags
win); --addr, --iface, --route, --ip-route, --ip-rule and --nfacct add to it.
ip-route.json may be 'ip -j route show table all' (every table, both
families); ip-rule.json is 'ip -j rule' and ip6-rule.json 'ip -6 -j rule'
(they replace the default rules); rt_tables is the node's
/etc/iproute2/rt_tables, for tables known by name. --ip-rule takes the
arguments of 'ip rule add' and --ip-route those of 'ip route add' verbatim
(a leading -6 for IPv6 where no address says it).
--addr also adds the connected route of its prefix (none for a /32), as the
kernel does. nfacct-list is the node's 'nfacct list' output: the extended
accounting objects that -m nfacct rules name (kube-proxy creates
ct_state_invalid_dropped_pkts and localhost_nps_accepted_pkts); a rule
naming an object that does not exist is refused, as by the kernel.
--fragment reads the rules files as a fragment, as blog posts show them
(the lines of 'iptables-save | grep X', or pasted 'iptables -t nat -A ...'
commands): no *table lines, chain declarations or COMMIT needed. The table
of each line is inferred from its chain names and target (KUBE-SVC-*,
DNAT and MASQUERADE are nat; REJECT is filter; CT is raw ...); a line that
fits several tables is refused with its line number unless
--fragment-table TABLE gives the default. The chains used are declared,
and what was assumed is printed on stderr.
--listing reads them as 'iptables -L' output ('iptables -t nat -nvL' is all
some posts show): each row is read back into its rule (the list forms of
comment, tcp/udp, mark, conntrack, state, addrtype, statistic, multiport,
iprange, recent, set and of DNAT, SNAT, MASQUERADE, REDIRECT, MARK,
REJECT), and refused with its line when the listing does not tell the rule
(another list form, or counters rounded by -v without -x that do not list
back the same).
`

func (n *nodeInput) register(fs *flag.FlagSet) {
	fs.StringVar(&n.dir, "node", "", "snapshot `DIR` (iptables-save, ip6tables-save, ipset-save, ip-addr.json, ip-route.json, conntrack, nfacct-list)")
	fs.StringVar(&n.rules, "rules", "", "iptables-save `FILE` ('-' = stdin)")
	fs.StringVar(&n.rules6, "rules6", "", "ip6tables-save `FILE` ('-' = stdin)")
	fs.StringVar(&n.ipsets, "ipsets", "", "'ipset save' `FILE`")
	fs.StringVar(&n.ctFile, "conntrack", "", "'conntrack -L' `FILE`")
	fs.StringVar(&n.addrsFile, "addrs", "", "'ip -j addr' JSON `FILE`")
	fs.StringVar(&n.routesFile, "routes", "", "'ip -j route' JSON `FILE`")
	fs.StringVar(&n.nfacctFile, "nfacct-list", "", "'nfacct list' `FILE` (the node's accounting objects)")
	fs.Var(&n.nfacct, "nfacct", "extended accounting object `NAME` that -m nfacct rules may name (repeatable), as 'nfacct add NAME'")
	fs.Var(&n.addrs, "addr", "interface address `IFACE=CIDR` (repeatable)")
	fs.Var(&n.ifaces, "iface", "interface `NAME` without address (repeatable)")
	fs.Var(&n.routes, "route", "route `CIDR=IFACE[@GATEWAY]` in the main table (repeatable)")
	fs.Var(&n.ipRoutes, "ip-route", "route given as the `ARGS` of 'ip route add', e.g. 'local 0.0.0.0/0 dev lo table 100' (repeatable)")
	fs.Var(&n.ipRules, "ip-rule", "routing rule given as the `ARGS` of 'ip rule add', e.g. 'fwmark 0x1/0x1 lookup 100 priority 100' (repeatable)")
	fs.Var(&n.sockets, "socket", "local socket `SPEC` 'PROTO ADDR:PORT [transparent] [mark N] [peer ADDR:PORT [half-open]]' that -m socket and TPROXY find (repeatable): a listener, or with peer a connection whose local end is ADDR:PORT")
	fs.Var(&n.sysctls, "sysctl", "kernel setting `KEY=VALUE` (repeatable): net.ipv4.ip_forward, net.ipv4.conf.all.route_localnet (0: 127.0.0.0/8 is a martian off lo), net.netfilter.nf_conntrack_tcp_loose (0: no mid-stream TCP pickup), all 1 by default as on a Kubernetes node; net.ipv4.conf.all.rp_filter (1 strict, 2 loose), net.ipv4.conf.all.src_valid_mark, net.ipv4.conf.all.accept_local, 0 by default; net.ipv4.conf.DEV.{rp_filter,src_valid_mark,accept_local,route_localnet,forwarding} for one interface")
	fs.Var(&n.backend, "backend", "iptables flavour `nft|legacy`")
	fs.Uint64Var(&n.seed, "seed", 0, "seed `N` of the random source (statistic, NAT ports)")
	fs.BoolVar(&n.fragment, "fragment", false, "read --rules/--rules6 as a fragment (a grep of iptables-save): infer each line's table, declare the chains used, report on stderr")
	fs.BoolVar(&n.listing, "listing", false, "read --rules/--rules6 as 'iptables -L' output (-n, -v, -x, --line-numbers as printed; several tables, each after its '$ iptables -t TABLE -nvL' line or told by its built-in chains): rows read back into rules, tables inferred as for --fragment; a row that does not list back exactly is refused with its line")
	fs.Var(&n.fragTable, "fragment-table", "with --fragment, the `TABLE` of lines whose chain names and targets fit several tables (default: refuse them)")
	fs.Var(&n.lenient, "lenient", "`MODE` never-match or always-match: load a rule whose match or target module packetwalk does not model as a placeholder that never or always matches, reported on stderr; off refuses such rules")
}

// node is a built host with what the subcommands need to know about it.
type node struct {
	host  *netfilter.Host
	clock *netfilter.ManualClock
	// only6 is set when IPv6 rules were given and IPv4 ones were not, so
	// save and list show the ip6tables view.
	only6 bool
	// sysctls are the effective kernel settings.
	sysctls map[string]int
	// placeholders report the rules --lenient loaded as placeholders,
	// one line each ("FILE:LINE: ..."); notes what --fragment assumed.
	placeholders []string
	notes        []string
	// policy is set when routing rules were given: trace then names the
	// rule and table of every routing decision.
	policy bool
}

// sysctlDefaults are the settings packetwalk knows, with a Kubernetes
// node's values.
var sysctlDefaults = map[string]int{
	"net.ipv4.ip_forward":                  1,
	"net.ipv4.conf.all.route_localnet":     1,
	"net.netfilter.nf_conntrack_tcp_loose": 1,
	"net.ipv4.conf.all.rp_filter":          0,
	"net.ipv4.conf.all.src_valid_mark":     0,
	"net.ipv4.conf.all.accept_local":       0,
}

// deviceSysctls are the per-device settings net.ipv4.conf.DEV.KEY the
// flag accepts.
var deviceSysctls = []string{"rp_filter", "src_valid_mark", "accept_local", "route_localnet", "forwarding"}

// deviceConfig gathers the net.ipv4.conf.DEV.* settings of sys.
func deviceConfig(sys map[string]int) map[string]netfilter.DeviceConfig {
	var out map[string]netfilter.DeviceConfig
	for k, v := range sys {
		dev, key, ok := splitDeviceSysctl(k)
		if !ok {
			continue
		}
		if out == nil {
			out = map[string]netfilter.DeviceConfig{}
		}
		c := out[dev]
		switch key {
		case "rp_filter":
			c.RPFilter = v
		case "src_valid_mark":
			c.SrcValidMark = v == 1
		case "accept_local":
			c.AcceptLocal = v == 1
		case "route_localnet":
			c.RouteLocalnet = v == 1
		case "forwarding":
			c.NoForwarding = v == 0
		}
		out[dev] = c
	}
	return out
}

// splitDeviceSysctl splits net.ipv4.conf.DEV.KEY (DEV not "all").
func splitDeviceSysctl(k string) (dev, key string, ok bool) {
	rest, ok := strings.CutPrefix(k, "net.ipv4.conf.")
	if !ok {
		return "", "", false
	}
	i := strings.LastIndexByte(rest, '.')
	if i <= 0 {
		return "", "", false
	}
	dev, key = rest[:i], rest[i+1:]
	if dev == "all" || dev == "default" || !slices.Contains(deviceSysctls, key) || checkIfaceName(dev) != nil {
		return "", "", false
	}
	return dev, key, true
}

// inputError is bad input in a named file.
type inputError struct {
	file string
	line int
	err  error
}

func (e *inputError) Error() string {
	var pe *netfilter.ParseError
	if errors.As(e.err, &pe) && pe.Line > 0 {
		msg := strings.TrimPrefix(pe.Error(), "line "+strconv.Itoa(pe.Line)+": ")
		return e.file + ":" + strconv.Itoa(pe.Line) + ": " + msg
	}
	var se *ipset.ParseError
	if errors.As(e.err, &se) {
		at := se.Token
		if at == "" {
			at = se.Text
		}
		return fmt.Sprintf("%s:%d: %v at %q", e.file, se.Line, se.Err, at)
	}
	var ce *conntrack.ParseError
	if errors.As(e.err, &ce) {
		return fmt.Sprintf("%s:%d: %v at %q in %q", e.file, ce.Line, ce.Err, ce.Token, ce.Text)
	}
	if e.line > 0 {
		return e.file + ":" + strconv.Itoa(e.line) + ": " + e.err.Error()
	}
	return e.file + ": " + e.err.Error()
}

func (e *inputError) Unwrap() error { return e.err }

// errNotYet marks inputs the command accepts by name but cannot use yet.
var errNotYet = errors.New("not supported yet")

// readInput reads a file named on the command line; "-" is stdin, once.
func (n *nodeInput) readInput(stdin io.Reader, name string) ([]byte, error) {
	if name == "-" {
		if n.stdinUsed {
			return nil, usagef("standard input ('-') given to more than one flag")
		}
		n.stdinUsed = true
		data, err := io.ReadAll(stdin)
		if err != nil {
			return nil, &inputError{file: "<stdin>", err: err}
		}
		return data, nil
	}
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, err // *PathError names the file
	}
	return data, nil
}

func displayName(name string) string {
	if name == "-" {
		return "<stdin>"
	}
	return name
}

// build creates the host the flags describe. Interfaces come first (a
// route needs its interface), then routes, then rules.
func (n *nodeInput) build(stdin io.Reader) (*node, error) {
	sys := map[string]int{}
	for k, v := range sysctlDefaults {
		sys[k] = v
	}
	for k, v := range n.sysctls {
		sys[k] = v
	}
	clock := netfilter.NewManualClock(clockStart)
	h := netfilter.NewHost(netfilter.HostConfig{
		Backend:      netfilter.Backend(n.backend),
		Seed:         n.seed,
		Clock:        clock,
		NoForwarding: sys["net.ipv4.ip_forward"] == 0,
		// Every sysctl the flag accepts reaches the host: none is parsed
		// and then ignored.
		NoRouteLocalnet:    sys["net.ipv4.conf.all.route_localnet"] == 0,
		ConntrackTCPStrict: sys["net.netfilter.nf_conntrack_tcp_loose"] == 0,
		RPFilter:           sys["net.ipv4.conf.all.rp_filter"],
		SrcValidMark:       sys["net.ipv4.conf.all.src_valid_mark"] == 1,
		AcceptLocal:        sys["net.ipv4.conf.all.accept_local"] == 1,
		Devices:            deviceConfig(sys),
	})
	nd := &node{host: h, clock: clock, sysctls: sys}

	// Which files to read: explicit flags win over the snapshot directory.
	rules, rules6, addrsFile, routesFile := n.rules, n.rules6, n.addrsFile, n.routesFile
	ipsets, ctFile, nfacctList := n.ipsets, n.ctFile, n.nfacctFile
	var routes6File, ruleFile, rule6File, rtTables string
	if n.dir != "" {
		st, err := os.Stat(n.dir)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			return nil, fmt.Errorf("--node %s: not a directory", n.dir)
		}
		pick := func(cur *string, base string) {
			p := filepath.Join(n.dir, base)
			if *cur == "" && fileExists(p) {
				*cur = p
			}
		}
		pick(&rules, "iptables-save")
		pick(&rules6, "ip6tables-save")
		pick(&addrsFile, "ip-addr.json")
		pick(&routesFile, "ip-route.json")
		pick(&routes6File, "ip6-route.json")
		pick(&ruleFile, "ip-rule.json")
		pick(&rule6File, "ip6-rule.json")
		pick(&rtTables, "rt_tables")
		pick(&ipsets, "ipset-save")
		pick(&ctFile, "conntrack")
		pick(&nfacctList, nfacctFile)
	}

	// Interfaces, merged by name in order of first mention.
	var order []string
	addrs := map[string][]netip.Prefix{}
	mention := func(name string, ps ...netip.Prefix) {
		if _, ok := addrs[name]; !ok {
			order = append(order, name)
			addrs[name] = nil
		}
		for _, p := range ps {
			if !slices.Contains(addrs[name], p) {
				addrs[name] = append(addrs[name], p)
			}
		}
	}
	var routes []netfilter.Route
	if addrsFile != "" {
		data, err := n.readInput(stdin, addrsFile)
		if err != nil {
			return nil, err
		}
		ifs, err := parseIPAddrJSON(data)
		if err != nil {
			return nil, &inputError{file: displayName(addrsFile), err: err}
		}
		for _, i := range ifs {
			mention(i.Name, i.Addrs...)
		}
	}
	for _, a := range n.addrs {
		mention(a.iface, a.prefix)
	}
	for _, name := range n.ifaces {
		mention(name)
	}
	type connKey struct {
		dst   netip.Prefix
		iface string
	}
	connected := map[connKey]bool{}
	for _, name := range order {
		if err := h.AddInterface(name, addrs[name]...); err != nil {
			return nil, fmt.Errorf("interface %q: %w", name, err)
		}
		for _, a := range addrs[name] {
			if a.Bits() < a.Addr().BitLen() {
				connected[connKey{a.Masked(), name}] = true
			}
		}
	}
	names := defaultTableNames()
	if rtTables != "" {
		data, err := n.readInput(stdin, rtTables)
		if err != nil {
			return nil, err
		}
		if err := parseRTTables(data, names); err != nil {
			return nil, &inputError{file: displayName(rtTables), err: err}
		}
	}
	for _, f := range []string{routesFile, routes6File} {
		if f == "" {
			continue
		}
		data, err := n.readInput(stdin, f)
		if err != nil {
			return nil, err
		}
		rs, err := parseIPRouteJSON(data, names)
		if err != nil {
			return nil, &inputError{file: displayName(f), err: err}
		}
		routes = append(routes, rs...)
	}
	for _, r := range n.routes {
		routes = append(routes, r)
	}
	for _, a := range n.ipRoutes {
		r, err := parseIPRouteArgs(a, names)
		if err != nil {
			return nil, fmt.Errorf("--ip-route %q: %v", a, err)
		}
		routes = append(routes, r)
	}
	for _, r := range routes {
		if r.Type == netfilter.RouteUnicast && !r.Gateway.IsValid() && (r.Table == 0 || r.Table == netfilter.TableMain) && connected[connKey{r.Dst, r.Iface}] {
			continue // ip route lists the connected routes AddInterface made
		}
		if r.Type == netfilter.RouteUnicast && h.Interface(r.Iface) == nil {
			return nil, fmt.Errorf("route %s: unknown interface %q (add it with --addr or --iface)", r.Dst, r.Iface)
		}
		if err := h.AddRoute(r); err != nil {
			return nil, fmt.Errorf("route %s: %w", r.Dst, err)
		}
	}
	for _, rf := range []struct {
		file string
		fam  netfilter.Family
	}{{ruleFile, netfilter.IPv4}, {rule6File, netfilter.IPv6}} {
		if rf.file == "" {
			continue
		}
		data, err := n.readInput(stdin, rf.file)
		if err != nil {
			return nil, err
		}
		rs, err := parseIPRuleJSON(data, rf.fam, names)
		if err == nil {
			err = h.SetRules(rf.fam, rs)
		}
		if err != nil {
			return nil, &inputError{file: displayName(rf.file), err: err}
		}
		nd.policy = nd.policy || !h.DefaultRules(rf.fam)
	}
	for _, a := range n.sockets {
		sk, err := parseSocketArg(a)
		if err == nil {
			err = h.AddSocket(sk)
		}
		if err != nil {
			return nil, fmt.Errorf("--socket %q: %v", a, err)
		}
	}
	for _, a := range n.ipRules {
		r, err := parseIPRuleArgs(a, names)
		if err == nil {
			err = h.AddRule(r)
		}
		if err != nil {
			return nil, fmt.Errorf("--ip-rule %q: %v", a, err)
		}
		nd.policy = true
	}

	// Sets before rules: a rule's set match needs its set to exist.
	if ipsets != "" {
		data, err := n.readInput(stdin, ipsets)
		if err != nil {
			return nil, err
		}
		if err := h.Sets().Restore(data, ipset.RestoreOptions{}); err != nil {
			return nil, &inputError{file: displayName(ipsets), err: err}
		}
	}
	if ctFile != "" {
		data, err := n.readInput(stdin, ctFile)
		if err != nil {
			return nil, err
		}
		if err := h.Conntrack().Restore(bytes.NewReader(data)); err != nil {
			return nil, &inputError{file: displayName(ctFile), err: err}
		}
	}

	// Accounting objects before rules: a rule's nfacct match needs its
	// object to exist.
	if nfacctList != "" {
		data, err := n.readInput(stdin, nfacctList)
		if err != nil {
			return nil, err
		}
		objs, err := parseNFAcctList(displayName(nfacctList), data)
		if err != nil {
			return nil, err
		}
		for _, o := range objs {
			if err := h.AddNFAcct(o.name); err != nil {
				return nil, &inputError{file: displayName(nfacctList), err: err}
			}
			if err := h.SetNFAcct(o.name, o.counters); err != nil {
				return nil, &inputError{file: displayName(nfacctList), err: err}
			}
		}
	}
	for _, name := range n.nfacct {
		if _, ok := h.NFAcct(name); ok {
			continue // also in nfacct-list, or given twice: one object
		}
		if err := h.AddNFAcct(name); err != nil {
			return nil, fmt.Errorf("--nfacct %s: %w", name, err)
		}
	}

	// Rules.
	if n.fragTable.t != netfilter.NoTable && !n.fragment && !n.listing {
		return nil, usagef("--fragment-table is the default table of --fragment or --listing: give one of them too")
	}
	if n.fragment && n.listing {
		return nil, usagef("--fragment and --listing are two input forms: give one")
	}
	load := func(f netfilter.Family, file string) error {
		data, err := n.readInput(stdin, file)
		if err != nil {
			return err
		}
		opt := netfilter.RestoreOptions{Counters: true, Lenient: n.lenient.v}
		var rep netfilter.FragmentReport
		if n.fragment || n.listing {
			opt.Fragment = &netfilter.FragmentOptions{Table: n.fragTable.t, Report: &rep}
			opt.Listing = n.listing
		}
		if err := h.Restore(f, data, opt); err != nil {
			if m := missingNFAcct(displayName(file), err); m != nil {
				return m
			}
			var pe *netfilter.ParseError
			if errors.Is(err, netfilter.ErrAmbiguousTable) && errors.As(err, &pe) {
				pe.Err = fmt.Errorf("%w (--fragment-table TABLE)", pe.Err)
			}
			return &inputError{file: displayName(file), err: err}
		}
		for _, l := range rep.Summary() {
			form := "fragment"
			if n.listing {
				form = "listing"
			}
			nd.notes = append(nd.notes, displayName(file)+": "+form+": "+l)
		}
		for _, p := range h.Placeholders(f) {
			opt := "-m "
			if p.Target {
				opt = "-j "
			}
			nd.placeholders = append(nd.placeholders, fmt.Sprintf("%s:%d: %s%s not modelled: loaded as a placeholder that %s (%s %s rule %d)",
				displayName(file), p.Line, opt, p.Module, lenientVerb(n.lenient.v), p.Table, p.Chain, p.Rule))
		}
		return nil
	}
	if rules != "" {
		if err := load(netfilter.IPv4, rules); err != nil {
			return nil, err
		}
	}
	if rules6 != "" {
		if err := load(netfilter.IPv6, rules6); err != nil {
			return nil, err
		}
	}
	nd.only6 = rules == "" && rules6 != ""
	return nd, nil
}

func fileExists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// addrList is the repeatable --addr IFACE=CIDR flag.
type addrList []struct {
	iface  string
	prefix netip.Prefix
}

func (l *addrList) String() string { return "" }

func (l *addrList) Set(s string) error {
	name, cidr, ok := strings.Cut(s, "=")
	if !ok || name == "" {
		return fmt.Errorf("expected IFACE=CIDR, e.g. eth0=192.168.10.1/24")
	}
	if err := checkIfaceName(name); err != nil {
		return err
	}
	p, err := parseAddrPrefix(cidr)
	if err != nil {
		return fmt.Errorf("bad address %q: expected ADDRESS/PREFIXLEN", cidr)
	}
	*l = append(*l, struct {
		iface  string
		prefix netip.Prefix
	}{name, p})
	return nil
}

// parseAddrPrefix parses an interface address: a CIDR keeping its host
// bits, or a bare address meaning a host prefix (/32 or /128).
func parseAddrPrefix(s string) (netip.Prefix, error) {
	if !strings.Contains(s, "/") {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return netip.Prefix{}, err
		}
		return netip.PrefixFrom(a, a.BitLen()), nil
	}
	return netip.ParsePrefix(s)
}

// checkIfaceName applies the kernel's rule: 1 to 15 bytes, no '/', no
// whitespace, not "." or "..".
func checkIfaceName(name string) error {
	if name == "" || len(name) > 15 || name == "." || name == ".." || strings.ContainsAny(name, "/: \t\n") {
		return fmt.Errorf("bad interface name %q: expected 1 to 15 characters without '/', ':' or spaces", name)
	}
	return nil
}

// ifaceList is the repeatable --iface NAME flag.
type ifaceList []string

func (l *ifaceList) String() string { return "" }

func (l *ifaceList) Set(s string) error {
	if err := checkIfaceName(s); err != nil {
		return err
	}
	*l = append(*l, s)
	return nil
}

// routeList is the repeatable --route CIDR=IFACE[@GATEWAY] flag.
type routeList []netfilter.Route

func (l *routeList) String() string { return "" }

func (l *routeList) Set(s string) error {
	r, err := parseRouteFlag(s)
	if err != nil {
		return err
	}
	*l = append(*l, r)
	return nil
}

func parseRouteFlag(s string) (netfilter.Route, error) {
	dst, via, ok := strings.Cut(s, "=")
	if !ok {
		return netfilter.Route{}, fmt.Errorf("expected CIDR=IFACE[@GATEWAY], e.g. default=eth0@192.168.10.254")
	}
	iface, gw, hasGW := strings.Cut(via, "@")
	if err := checkIfaceName(iface); err != nil {
		return netfilter.Route{}, err
	}
	r := netfilter.Route{Iface: iface}
	if hasGW {
		a, err := netip.ParseAddr(gw)
		if err != nil {
			return netfilter.Route{}, fmt.Errorf("bad gateway %q: expected an IP address", gw)
		}
		r.Gateway = a
	}
	if dst == "default" {
		if r.Gateway.Is6() {
			r.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		} else {
			r.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
		return r, nil
	}
	p, err := parseAddrPrefix(dst)
	if err != nil {
		return netfilter.Route{}, fmt.Errorf("bad destination %q: expected CIDR or default", dst)
	}
	if p != p.Masked() {
		return netfilter.Route{}, fmt.Errorf("destination %s has host bits set: expected %s", p, p.Masked())
	}
	r.Dst = p
	if r.Gateway.IsValid() && r.Gateway.Is4() != p.Addr().Is4() {
		return netfilter.Route{}, fmt.Errorf("gateway %s and destination %s are of different families", r.Gateway, p)
	}
	return r, nil
}

// stringList is a repeatable flag of strings.
type stringList []string

func (l *stringList) String() string { return "" }

func (l *stringList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// sysctlMap is the repeatable --sysctl KEY=VALUE flag.
type sysctlMap map[string]int

func (m *sysctlMap) String() string { return "" }

func (m *sysctlMap) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok {
		return fmt.Errorf("expected KEY=VALUE, e.g. net.ipv4.ip_forward=0")
	}
	_, _, perDev := splitDeviceSysctl(k)
	if _, known := sysctlDefaults[k]; !known && !perDev {
		keys := make([]string, 0, len(sysctlDefaults))
		for key := range sysctlDefaults {
			keys = append(keys, key)
		}
		sort.Strings(keys)
		return fmt.Errorf("unknown sysctl %q: expected one of %s, or net.ipv4.conf.DEV.{%s}", k, strings.Join(keys, ", "), strings.Join(deviceSysctls, ","))
	}
	if strings.HasSuffix(k, ".rp_filter") {
		if v != "0" && v != "1" && v != "2" {
			return fmt.Errorf("sysctl %s: bad value %q: expected 0, 1 or 2", k, v)
		}
	} else if v != "0" && v != "1" {
		return fmt.Errorf("sysctl %s: bad value %q: expected 0 or 1", k, v)
	}
	if *m == nil {
		*m = sysctlMap{}
	}
	(*m)[k] = int(v[0] - '0')
	return nil
}

// backendFlag is --backend nft|legacy.
type backendFlag netfilter.Backend

func (b *backendFlag) String() string {
	if netfilter.Backend(*b) == netfilter.Legacy {
		return "legacy"
	}
	return "nft"
}

func (b *backendFlag) Set(s string) error {
	switch s {
	case "nft", "nf_tables":
		*b = backendFlag(netfilter.NFTables)
	case "legacy":
		*b = backendFlag(netfilter.Legacy)
	default:
		return fmt.Errorf("unknown backend %q: expected nft or legacy", s)
	}
	return nil
}
