package netfilter

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/ipset"
)

// Clock is the host's source of time; conntrack timeouts, recent entries
// and the limit match read it.
type Clock interface {
	Now() time.Time
}

// ManualClock is a Clock that only moves when told to. The zero value
// starts at the Unix epoch.
type ManualClock struct{ t time.Time }

// NewManualClock returns a clock that reads t until advanced.
func NewManualClock(t time.Time) *ManualClock { return &ManualClock{t: t} }

// Now implements Clock.
func (c *ManualClock) Now() time.Time {
	if c.t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return c.t
}

// Advance moves the clock forward by d.
func (c *ManualClock) Advance(d time.Duration) { c.t = c.Now().Add(d) }

// HostConfig configures a Host.
type HostConfig struct {
	// Backend picks the iptables flavour: the security table's priority
	// differs between them. The zero value is NFTables.
	Backend Backend
	// Seed seeds the host's random source (statistic --mode random, NAT
	// port choice). The same seed gives the same run.
	Seed uint64
	// Clock is the host's time; nil means a ManualClock at the Unix epoch.
	Clock Clock
	// NoForwarding turns IP forwarding off (net.ipv4.ip_forward=0);
	// forwarding is on by default, as on a Kubernetes node.
	NoForwarding bool
	// ConntrackTimeouts are the net.netfilter.nf_conntrack_*_timeout*
	// sysctls of the host's network namespace; zero fields keep the kernel
	// defaults. Like the sysctls, they apply when an entry's timer is next
	// restarted.
	ConntrackTimeouts conntrack.Timeouts
	// ConntrackTCPStrict refuses to pick up TCP connections mid-stream
	// (net.netfilter.nf_conntrack_tcp_loose=0): only a SYN creates an
	// entry. The zero value is the kernel default, loose.
	ConntrackTCPStrict bool
	// NoRouteLocalnet is net.ipv4.conf.all.route_localnet=0, the kernel
	// default: 127.0.0.0/8 is routed only on the loopback device, so a
	// packet received elsewhere with such a source or destination (after
	// PREROUTING's DNAT) is a martian, and a local packet with such a
	// source rerouted off the host (OUTPUT DNAT) is dropped. The zero
	// value is route_localnet=1, as kubelet sets it on a Kubernetes node.
	NoRouteLocalnet bool
	// KernelTZMinutesWest is the kernel's timezone (sys_tz, set with
	// settimeofday) in minutes west of Greenwich, which -m time
	// --kerneltz reads. The zero value is UTC, the kernel's default.
	KernelTZMinutesWest int
	// RPFilter is net.ipv4.conf.all.rp_filter: 0 (the zero value, the
	// kernel default) no reverse-path check, 1 strict (the route back to
	// the source must leave through the receiving interface), 2 loose
	// (some unicast route back must exist). A device's own value counts
	// when higher (DeviceConfig.RPFilter). IPv4 only, as in the kernel.
	RPFilter int
	// SrcValidMark is net.ipv4.conf.all.src_valid_mark: the reverse-path
	// lookup sees the packet's mark (else mark 0).
	SrcValidMark bool
	// AcceptLocal is net.ipv4.conf.all.accept_local: a packet received on
	// a device other than lo with one of the host's addresses as source is
	// accepted rather than dropped as a martian.
	AcceptLocal bool
	// Devices holds per-device IPv4 settings (net.ipv4.conf.DEV.*), by
	// interface name, combined with the "all" settings above as the
	// kernel combines them (see DeviceConfig).
	Devices map[string]DeviceConfig
}

// DeviceConfig holds the per-device IPv4 settings of one interface.
type DeviceConfig struct {
	// RPFilter is conf.DEV.rp_filter; the higher of it and
	// HostConfig.RPFilter applies to packets received on the device.
	RPFilter int
	// SrcValidMark, AcceptLocal and RouteLocalnet are conf.DEV.*; each
	// is on when either the device's or the "all" value is.
	SrcValidMark, AcceptLocal, RouteLocalnet bool
	// NoForwarding is conf.DEV.forwarding=0: packets received on the
	// device are not forwarded (the kernel reads the receiving device's
	// value; writing net.ipv4.ip_forward sets every device's).
	NoForwarding bool
}

// Interface is a network interface of the host with its addresses.
type Interface struct {
	Name  string
	Addrs []netip.Prefix
	// Group is the device group (ip link set DEV group N, -m devgroup);
	// 0, the default group, unless set.
	Group uint32
	// MTU is the device MTU; 0 means 1500 (65536 for lo), the kernel's
	// defaults. TCPMSS --clamp-mss-to-pmtu reads it through the routes.
	MTU int
}

// RouteType is the kind of a route, as ip route prints it.
type RouteType uint8

// Route types.
const (
	RouteUnicast RouteType = iota
	RouteLocal
	RouteBroadcast
	RouteBlackhole
	RouteUnreachable
	RouteProhibit
	// RouteThrow ends the lookup in its table: the rule lookup goes on
	// with the next rule, as if the table had no route.
	RouteThrow
)

var routeTypeNames = [...]string{RouteUnicast: "unicast", RouteLocal: "local", RouteBroadcast: "broadcast",
	RouteBlackhole: "blackhole", RouteUnreachable: "unreachable", RouteProhibit: "prohibit", RouteThrow: "throw"}

// String returns the type as ip route prints it.
func (t RouteType) String() string {
	if int(t) < len(routeTypeNames) {
		return routeTypeNames[t]
	}
	return "RouteType(" + strconv.Itoa(int(t)) + ")"
}

// Route is an entry of one of the host's routing tables.
type Route struct {
	Dst     netip.Prefix
	Iface   string
	Gateway netip.Addr
	Type    RouteType
	// MTU is the route's mtu attribute ("ip route ... mtu N"); 0 means the
	// device's.
	MTU int
	// Table is the routing table (TableMain, TableLocal, TableDefault or
	// any other number up to 2^32-1). 0 means what ip route add takes
	// without "table": local for a local or broadcast route, else main.
	// AddRoute stores the table it chose.
	Table uint32
	// Src is the preferred source address ("src ADDR"), which a local
	// packet sent without a bound address takes; unset means the
	// output device's address (see Host.Send).
	Src netip.Addr
	// Metric is the route's priority ("metric N"): of two routes to the
	// same prefix in a table, the lower metric wins.
	Metric uint32
}

// Host is a simulated Linux host: interfaces, routes, a ruleset per family
// and the netfilter hooks between them. A Host is not safe for concurrent
// use; independent hosts may run in parallel.
type Host struct {
	cfg    HostConfig
	clock  Clock
	rng    *rand.Rand
	ifaces []*Interface
	byName map[string]*Interface
	routes []Route
	rules  [2]*Ruleset // IPv4, IPv6
	progs  [2]*program
	ct     *conntrack.Table
	sets   *ipset.Registry
	// queue is the program reading the NFQUEUE queues (SetQueueHandler).
	queue QueueHandler
	// explaining suppresses every state change while Explain walks; oracle
	// answers its random draws.
	explaining bool
	oracle     *explainOracle
	ctPCG      *rand.PCG // conntrack's random source, snapshotted by Explain
	// recent holds the recent match's lists, by family and name.
	recent map[recentKey]*recentList
	// sockets are the listening sockets -m socket finds (AddSocket).
	sockets []Socket
	// scratch holds the headers built for the string, u32 and bpf
	// matches when a packet has no Raw bytes; reused.
	scratch []byte
	// hashlimit holds the hashlimit match's named tables, by family and
	// name; they outlive a reload as long as some rule names them.
	hashlimit map[hashlimitKey]*hashlimitTable
	hlScratch hashlimitEntry // Explain's copy of a bucket
	// nfacct holds the extended accounting objects (nfacct add).
	nfacct map[string]*Counters
	// setRefs are the set references each family's rules hold.
	setRefs [2][]string
	// Tracing records every step of each packet in Result.Trace.
	Tracing bool
	// walks[:depth] are the walks of the packets walking now: the one
	// given to the host, then those generated while it walks (walk.go).
	// Walks are kept for the next packets, so walking allocates nothing.
	walks []*walk
	depth int
	// hookOrder is what runs at each hook (hookTables), fixed by the
	// backend.
	hookOrder [numHooks][]TableID
	// loRoute is what route returns for the host's own addresses.
	loRoute Route
	// failRoutes stand for a rule's failing action where a *Route is
	// expected (Host.route): blackhole, unreachable, prohibit.
	failRoutes [3]Route
	fib        fib
	// rpdb holds each family's routing rules (rules.go); nil means the
	// kernel's default rules.
	rpdb [2][]RouteRule
}

// NewHost returns a host with no interfaces, no routes and empty rulesets.
func NewHost(cfg HostConfig) *Host {
	h := &Host{cfg: cfg, clock: cfg.Clock}
	if h.clock == nil {
		h.clock = &ManualClock{}
	}
	h.rng = rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	h.rules[0], h.rules[1] = NewRuleset(IPv4), NewRuleset(IPv6)
	h.loRoute = Route{Iface: "lo", Type: RouteLocal}
	h.failRoutes = [3]Route{{Type: RouteBlackhole}, {Type: RouteUnreachable}, {Type: RouteProhibit}}
	for hk := range Hook(numHooks) {
		h.hookOrder[hk] = h.hookTables(hk)
	}
	h.ctPCG = rand.NewPCG(cfg.Seed^0x5bd1e995, cfg.Seed^0xc2b2ae35)
	h.ct = conntrack.NewTable(conntrack.Config{Clock: h.clock, Rand: rand.New(h.ctPCG), Timeouts: cfg.ConntrackTimeouts.WithDefaults(), TCPStrict: cfg.ConntrackTCPStrict})
	h.sets = ipset.NewRegistry(h.clock, rand.New(rand.NewPCG(cfg.Seed, 0x1b873593)))
	return h
}

// AddNFAcct creates an extended accounting object, as `nfacct add NAME`
// does on a node; rules may name it with -m nfacct once it exists.
func (h *Host) AddNFAcct(name string) error {
	if name == "" || len(name) > maxNFAcctNameLen {
		return fmt.Errorf("%w: nfacct object name %q must have 1 to %d characters", ErrBadValue, name, maxNFAcctNameLen)
	}
	if h.nfacct == nil {
		h.nfacct = map[string]*Counters{}
	}
	if h.nfacct[name] != nil {
		return fmt.Errorf("%w: nfacct object %q", ErrChainExists, name)
	}
	h.nfacct[name] = &Counters{}
	return nil
}

// NFAcct returns the counters of accounting object name.
func (h *Host) NFAcct(name string) (Counters, bool) {
	if o := h.nfacct[name]; o != nil {
		return *o, true
	}
	return Counters{}, false
}

// Sets returns the host's ipset registry, which the set match reads.
func (h *Host) Sets() *ipset.Registry { return h.sets }

// Conntrack returns the host's connection-tracking table.
func (h *Host) Conntrack() *conntrack.Table { return h.ct }

// Clock returns the host's clock.
func (h *Host) Clock() Clock { return h.clock }

// AddInterface adds an interface with its addresses. Like the kernel, each
// address with a prefix shorter than the full length also adds the
// connected route of its network on the interface.
func (h *Host) AddInterface(name string, addrs ...netip.Prefix) error {
	if err := checkDevName(name); err != nil {
		return err
	}
	if h.Interface(name) != nil {
		return fmt.Errorf("interface %q already exists", name)
	}
	for _, a := range addrs {
		if !a.IsValid() {
			return fmt.Errorf("%w: invalid address on interface %q", ErrBadValue, name)
		}
	}
	i := &Interface{Name: name, Addrs: slices.Clone(addrs)}
	h.ifaces = append(h.ifaces, i)
	if h.byName == nil {
		h.byName = map[string]*Interface{}
	}
	h.byName[name] = i
	h.fib.valid = false
	for _, a := range addrs {
		if a.Bits() < a.Addr().BitLen() {
			h.routes = append(h.routes, Route{Dst: a.Masked(), Iface: name, Table: TableMain})
		}
	}
	return nil
}

// AddAddress adds an address to an existing interface, after those it has,
// as `ip address add` does; like AddInterface it adds the connected route.
// The order of an interface's addresses matters where the kernel takes
// "the first address" (REDIRECT, the preferred source). As for ip, adding
// an IPv4 address the interface has with the same prefix length, or an
// IPv6 address it has at all, is an error.
func (h *Host) AddAddress(iface string, addr netip.Prefix) error {
	i := h.Interface(iface)
	if i == nil {
		return fmt.Errorf("%w: address %s on unknown interface %q", ErrBadValue, addr, iface)
	}
	if !addr.IsValid() {
		return fmt.Errorf("%w: invalid address on interface %q", ErrBadValue, iface)
	}
	for _, a := range i.Addrs {
		if a.Addr() == addr.Addr() && (a.Bits() == addr.Bits() || addr.Addr().Is6()) {
			return fmt.Errorf("%w: interface %q already has address %s", ErrBadValue, iface, addr.Addr())
		}
	}
	i.Addrs = append(i.Addrs, addr)
	h.fib.valid = false
	if addr.Bits() < addr.Addr().BitLen() {
		h.routes = append(h.routes, Route{Dst: addr.Masked(), Iface: iface, Table: TableMain})
	}
	return nil
}

// Interface returns the interface called name, or nil. It is the host's
// own: add addresses with AddInterface or AddAddress, not by changing its
// Addrs, which the host's compiled routing table would not see, and do not
// rename it.
func (h *Host) Interface(name string) *Interface { return h.byName[name] }

// hasIface reports whether a packet may arrive on name: one of the
// host's interfaces, or the loopback device every host has.
func (h *Host) hasIface(name string) bool {
	return name == "lo" || h.byName[name] != nil
}

// unknownIface is the error for a packet received on name.
func (h *Host) unknownIface(name string) error {
	text := "unknown interface " + strconv.Quote(name) + " (the host has lo"
	for _, i := range h.ifaces {
		if i.Name != "lo" {
			text += ", " + i.Name
		}
	}
	text += "; add it with AddInterface)"
	if name == "" {
		text = "no receiving interface (Send sends a local packet)"
	}
	return &PacketError{Field: "In", Text: text, Err: ErrUnknownInterface}
}

// AddRoute adds a route to its table (Route.Table). A unicast route
// needs one of the host's interfaces; a gateway or preferred source must
// be of the destination's family.
func (h *Host) AddRoute(r Route) error {
	if !r.Dst.IsValid() {
		return fmt.Errorf("%w: route without destination", ErrBadValue)
	}
	if r.Type > RouteThrow {
		return fmt.Errorf("%w: route %s of unknown type %d", ErrBadValue, r.Dst, r.Type)
	}
	if r.Type == RouteUnicast && h.Interface(r.Iface) == nil && r.Iface != "lo" {
		return fmt.Errorf("%w: route %s via unknown interface %q", ErrBadValue, r.Dst, r.Iface)
	}
	if r.Gateway.IsValid() && r.Gateway.Is4() != r.Dst.Addr().Is4() {
		return fmt.Errorf("%w: route %s: gateway %s is of another family", ErrBadValue, r.Dst, r.Gateway)
	}
	if r.Src.IsValid() && r.Src.Is4() != r.Dst.Addr().Is4() {
		return fmt.Errorf("%w: route %s: src %s is of another family", ErrBadValue, r.Dst, r.Src)
	}
	if r.Table == 0 {
		r.Table = TableMain
		if r.Type == RouteLocal || r.Type == RouteBroadcast {
			r.Table = TableLocal // as ip route add chooses
		}
	}
	r.Dst = r.Dst.Masked()
	h.routes = append(h.routes, r)
	h.fib.valid = false
	return nil
}

// Routes returns a copy of the routes added to the host (by AddRoute and
// as the connected routes of addresses), in the order added. The local
// routes of the host's own addresses are implied, not listed.
func (h *Host) Routes() []Route { return slices.Clone(h.routes) }

// Ruleset returns a copy of the host's ruleset for family f, with the
// counters as they are at the call. Changing the copy does not change the
// host: its rules change only through Exec, Restore or Load (which may
// load an edited copy). Each call copies the whole ruleset, so read a
// large one's counters from one copy rather than one call per rule. The
// copy's rules are new, but their Matches and Target values are the
// host's: replace them (or use Exec) rather than change them in place.
func (h *Host) Ruleset(f Family) *Ruleset { return h.rules[famIdx(f)].Clone() }

func famIdx(f Family) int {
	if f == IPv6 {
		return 1
	}
	return 0
}

// Load installs a copy of rs as the host's ruleset for its family: later
// changes to rs do not reach the host, and the host's packets count in its
// own copy, which Ruleset returns, not in rs.
func (h *Host) Load(rs *Ruleset) error { return h.load(rs.Clone(), [numTables]*validated{}) }

// load is Load with the tables in checked already validated.
func (h *Host) load(rs *Ruleset, checked [numTables]*validated) error {
	p, err := compile(rs, checked)
	if err != nil {
		return err
	}
	if h.cfg.Backend == Legacy {
		if err := checkTCPMSSLegacy(rs); err != nil {
			return err
		}
	}
	if h.cfg.Backend == NFTables {
		for _, t := range p.tables {
			if t != nil && t.depth > maxNFTDepth {
				return fmt.Errorf("%w: table %s nests %d user chains; iptables-nft allows %d (Too many links)", ErrTooDeep, t.id, t.depth, maxNFTDepth)
			}
		}
	}
	for _, n := range p.nfacct {
		if h.nfacct[n] == nil {
			return fmt.Errorf("%w: nfacct object %q (RULE_APPEND failed (No such file or directory))", ErrNoSuchNFAcct, n)
		}
	}
	for _, n := range p.sets {
		if err := h.setUsable(rs.family, n); err != nil {
			return err
		}
	}
	i := famIdx(rs.family)
	// Rules hold references on their sets, which ipset list shows and
	// which keep a set from being destroyed.
	for _, n := range h.setRefs[i] {
		_ = h.sets.Unref(n)
	}
	for _, n := range p.sets {
		_, _ = h.sets.Ref(n)
	}
	h.setRefs[i] = p.sets
	h.bindHashlimit(p)
	h.rules[i], h.progs[i] = rs, p
	return nil
}

// hostObjects are the sets and nfacct objects of a host, which its rules
// may name.
type hostObjects struct {
	h *Host
	f Family
}

func (o hostObjects) setUsable(name string) error { return o.h.setUsable(o.f, name) }
func (o hostObjects) hasNFAcct(name string) bool  { return o.h.nfacct[name] != nil }

// Restore applies iptables-restore input to the host's IPv4 ruleset, or to
// the IPv6 one when f is IPv6.
func (h *Host) Restore(f Family, data []byte, opt RestoreOptions) error {
	rs := h.rules[famIdx(f)].Clone()
	var committed [numTables]*validated
	err := rs.restore(data, opt, &committed, hostObjects{h, f})
	// Tables committed before an error stay, as in the kernel.
	if lerr := h.load(rs, committed); lerr != nil && err == nil {
		err = lerr
	}
	return err
}

// Exec runs an iptables command line against the host's ruleset of the
// family the line names ("iptables" or "ip6tables"; IPv4 by default).
func (h *Host) Exec(line string) error {
	f := IPv4
	if len(line) >= 9 && line[:9] == "ip6tables" {
		f = IPv6
	}
	rs := h.rules[famIdx(f)].Clone()
	if err := rs.Exec(line); err != nil {
		return err
	}
	return h.load(rs, [numTables]*validated{})
}

// routeMTU is the MTU of the route a packet to dst takes (the kernel's
// dst_mtu): the route's own, else its device's; 0 when there is no route.
func (h *Host) routeMTU(dst netip.Addr) int {
	r := h.route(dst)
	if r == nil || routeFailure(r) != NoReason {
		return 0
	}
	if r.MTU != 0 {
		return r.MTU
	}
	if i := h.byName[r.Iface]; i != nil && i.MTU != 0 {
		return i.MTU
	}
	if r.Iface == "lo" || r == &h.loRoute {
		return 65536
	}
	return 1500
}
