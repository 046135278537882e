package kerneltest

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Side names an end of the lab's wires.
type Side int

const (
	// Client is the client namespace's c0, facing the node's eth0.
	Client Side = iota
	// Server is the server (pod) namespace's p0, facing the node's eth1.
	Server
)

// String returns "client" or "server".
func (s Side) String() string {
	switch s {
	case Client:
		return "client"
	case Server:
		return "server"
	}
	return fmt.Sprintf("Side(%d)", int(s))
}

// LabConfig holds the addresses of a [Lab]. Zero fields take the defaults of
// docs/kernel-notes.md ("Lab topology"), shown in brackets.
type LabConfig struct {
	Prefix     string         // namespace name prefix ["pw-lab"]
	Client     netip.Prefix   // client c0 [192.168.10.2/24]
	Client6    netip.Prefix   // client c0 [fd00:10::2/64]
	NodeEth0   netip.Prefix   // node eth0 [192.168.10.1/24]; the client's gateway
	NodeEth0v6 netip.Prefix   // node eth0 [fd00:10::1/64]
	NodeEth1   netip.Prefix   // node eth1 [10.244.1.1/24]; the server's gateway
	NodeEth1v6 netip.Prefix   // node eth1 [fd00:244::1/64]
	Server     []netip.Prefix // server p0 [10.244.1.5/24]; add more for several pods
	Server6    []netip.Prefix // server p0 [fd00:244::5/64]
	// ClientResponds and ServerResponds let the end namespaces' own IP
	// stacks answer what reaches them (RST for closed ports, SYN-ACK
	// answered by RST, ICMP port unreachable...). By default both ends are
	// silent wires (raw PREROUTING DROP there, after the capture tap), so
	// only the node's behaviour is observed; replies are injected
	// explicitly with InjectFrom(Server, ...).
	ClientResponds bool
	ServerResponds bool
	// SettleRounds is the number of ARP round trips of [Lab.Settle] [3]:
	// k rounds cover chains of 2k-1 hops after the injected frame.
	SettleRounds int
	// Timeout bounds the wait for one sentinel reply [2s].
	Timeout time.Duration
}

func mustPrefix(s string) netip.Prefix { return netip.MustParsePrefix(s) }

func (c LabConfig) withDefaults() LabConfig {
	def := func(p *netip.Prefix, s string) {
		if !p.IsValid() {
			*p = mustPrefix(s)
		}
	}
	if c.Prefix == "" {
		c.Prefix = "pw-lab"
	}
	def(&c.Client, "192.168.10.2/24")
	def(&c.Client6, "fd00:10::2/64")
	def(&c.NodeEth0, "192.168.10.1/24")
	def(&c.NodeEth0v6, "fd00:10::1/64")
	def(&c.NodeEth1, "10.244.1.1/24")
	def(&c.NodeEth1v6, "fd00:244::1/64")
	if len(c.Server) == 0 {
		c.Server = []netip.Prefix{mustPrefix("10.244.1.5/24")}
	}
	if len(c.Server6) == 0 {
		c.Server6 = []netip.Prefix{mustPrefix("fd00:244::5/64")}
	}
	if c.SettleRounds <= 0 {
		c.SettleRounds = 3
	}
	if c.Timeout <= 0 {
		c.Timeout = 2 * time.Second
	}
	return c
}

func (c LabConfig) validate() error {
	check := func(name string, p netip.Prefix, v6 bool) error {
		if p.Addr().Is6() != v6 {
			return fmt.Errorf("kerneltest: LabConfig.%s = %v: want an IPv%d prefix", name, p, map[bool]int{false: 4, true: 6}[v6])
		}
		return nil
	}
	errs := []error{
		check("Client", c.Client, false), check("Client6", c.Client6, true),
		check("NodeEth0", c.NodeEth0, false), check("NodeEth0v6", c.NodeEth0v6, true),
		check("NodeEth1", c.NodeEth1, false), check("NodeEth1v6", c.NodeEth1v6, true),
	}
	for i, p := range c.Server {
		errs = append(errs, check(fmt.Sprintf("Server[%d]", i), p, false))
	}
	for i, p := range c.Server6 {
		errs = append(errs, check(fmt.Sprintf("Server6[%d]", i), p, true))
	}
	return errors.Join(errs...)
}

// Lab is the three-namespace topology
//
//	client  c0 ──veth── eth0  node  eth1 ──veth── p0  server
//
// with forwarding on in the node, static neighbour entries everywhere (no
// ARP or NDP is needed) and IPv6 DAD off. Rulesets are loaded into the node.
// A Lab is meant to be reused across many cases with [Lab.Reset]; it is not
// safe for concurrent use.
type Lab struct {
	cfg                  LabConfig
	client, node, server *NS
	injClient, injServer *packetSock
	capClient, capServer *packetSock
	nodeRaw              *rawIPSock
	cpu                  int
	hasNft               bool
	setsLoaded           bool
	sentinelSeq          uint16
}

// NewLab builds a Lab for t (see [Require]) and tears it down in t.Cleanup.
func NewLab(t testing.TB, cfg LabConfig) *Lab {
	t.Helper()
	l, err := CreateLab(cfg)
	if err != nil {
		t.Fatalf("create lab: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("close lab: %v", err)
		}
	})
	return l
}

// CreateLab builds a Lab for callers without a testing.TB; they must Close
// it.
func CreateLab(cfg LabConfig) (*Lab, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := &Lab{cfg: cfg}
	if err := l.build(); err != nil {
		return nil, errors.Join(err, l.Close())
	}
	return l, nil
}

// build creates the namespaces, wires and sockets; on error the caller
// closes whatever was made.
func (l *Lab) build() (err error) {
	cfg := l.cfg
	for _, p := range []struct {
		ns   **NS
		name string
	}{{&l.client, "client"}, {&l.node, "node"}, {&l.server, "server"}} {
		if *p.ns, err = CreateNS(cfg.Prefix + "-" + p.name); err != nil {
			return err
		}
	}
	if err := l.setup(); err != nil {
		return err
	}
	if l.injClient, err = openPacketSock(l.client.name, "c0", false); err != nil {
		return err
	}
	if l.injServer, err = openPacketSock(l.server.name, "p0", false); err != nil {
		return err
	}
	if l.capClient, err = openPacketSock(l.client.name, "c0", true); err != nil {
		return err
	}
	if l.capServer, err = openPacketSock(l.server.name, "p0", true); err != nil {
		return err
	}
	if l.nodeRaw, err = openRawIPSock(l.node.name); err != nil {
		return err
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return fmt.Errorf("kerneltest: sched_getaffinity: %w", err)
	}
	l.cpu = -1
	for i := 0; i < 1024 && l.cpu < 0; i++ {
		if set.IsSet(i) {
			l.cpu = i
		}
	}
	if l.cpu < 0 {
		return errors.New("kerneltest: empty CPU affinity set")
	}
	_, nftErr := exec.LookPath("nft")
	l.hasNft = nftErr == nil
	return nil
}

// setup configures sysctls, links, addresses, routes and neighbours.
func (l *Lab) setup() error {
	c := l.cfg
	// Set before the veths exist so that new devices inherit "default".
	common := []string{
		"net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0",
		"net.ipv6.conf.default.addr_gen_mode=1", // no link-local, fewer MLD frames
		"net.ipv6.conf.default.router_solicitations=0",
		// A new address joins multicast groups, and MLD reports the join
		// twice, the second up to a second later: with 1 ms intervals both
		// leave during setup instead of during a test, where the node's
		// OUTPUT chain would count them.
		"net.ipv6.conf.default.mldv1_unsolicited_report_interval=1",
		"net.ipv6.conf.default.mldv2_unsolicited_report_interval=1",
		"net.ipv4.conf.all.rp_filter=0", "net.ipv4.conf.default.rp_filter=0",
		// ICMP errors are rate limited per peer (burst 6) and globally by
		// default; thousands of REJECT cases would lose them.
		"net.ipv4.icmp_ratelimit=0", "net.ipv4.icmp_ratemask=0",
		"net.ipv6.icmp.ratelimit=0", "net.ipv6.icmp.ratemask=",
	}
	for _, ns := range []*NS{l.client, l.node, l.server} {
		args := append([]string{"sysctl", "-q", "-w"}, common...)
		if ns == l.node {
			args = append(args, "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1",
				// Redirects would answer hairpinned traffic with ICMP
				// noise that is not netfilter's doing.
				"net.ipv4.conf.all.send_redirects=0", "net.ipv4.conf.default.send_redirects=0")
		}
		if _, _, err := ns.Exec("", args...); err != nil {
			return err
		}
	}
	if _, _, err := l.client.Exec("", "ip", "link", "add", "c0", "address", ClientMAC.String(), "type", "veth",
		"peer", "name", "eth0", "address", NodeEth0MAC.String(), "netns", l.node.name); err != nil {
		return err
	}
	if _, _, err := l.server.Exec("", "ip", "link", "add", "p0", "address", ServerMAC.String(), "type", "veth",
		"peer", "name", "eth1", "address", NodeEth1MAC.String(), "netns", l.node.name); err != nil {
		return err
	}
	var cb, nb, sb strings.Builder
	addr := func(b *strings.Builder, p netip.Prefix, dev string) {
		fmt.Fprintf(b, "addr add %s dev %s", p, dev)
		if p.Addr().Is6() {
			b.WriteString(" nodad")
		}
		b.WriteString("\n")
	}
	neigh := func(b *strings.Builder, a netip.Addr, mac net.HardwareAddr, dev string) {
		fmt.Fprintf(b, "neigh replace %s lladdr %s dev %s nud permanent\n", a, mac, dev)
	}
	cb.WriteString("link set c0 up\n")
	addr(&cb, c.Client, "c0")
	addr(&cb, c.Client6, "c0")
	fmt.Fprintf(&cb, "route add default via %s dev c0\n", c.NodeEth0.Addr())
	fmt.Fprintf(&cb, "route add default via %s dev c0\n", c.NodeEth0v6.Addr())
	neigh(&cb, c.NodeEth0.Addr(), NodeEth0MAC, "c0")
	neigh(&cb, c.NodeEth0v6.Addr(), NodeEth0MAC, "c0")

	nb.WriteString("link set eth0 up\nlink set eth1 up\n")
	addr(&nb, c.NodeEth0, "eth0")
	addr(&nb, c.NodeEth0v6, "eth0")
	addr(&nb, c.NodeEth1, "eth1")
	addr(&nb, c.NodeEth1v6, "eth1")
	neigh(&nb, c.Client.Addr(), ClientMAC, "eth0")
	neigh(&nb, c.Client6.Addr(), ClientMAC, "eth0")

	sb.WriteString("link set p0 up\n")
	for _, p := range c.Server {
		addr(&sb, p, "p0")
		neigh(&nb, p.Addr(), ServerMAC, "eth1")
	}
	for _, p := range c.Server6 {
		addr(&sb, p, "p0")
		neigh(&nb, p.Addr(), ServerMAC, "eth1")
	}
	fmt.Fprintf(&sb, "route add default via %s dev p0\n", c.NodeEth1.Addr())
	fmt.Fprintf(&sb, "route add default via %s dev p0\n", c.NodeEth1v6.Addr())
	neigh(&sb, c.NodeEth1.Addr(), NodeEth1MAC, "p0")
	neigh(&sb, c.NodeEth1v6.Addr(), NodeEth1MAC, "p0")

	for _, x := range []struct {
		ns     *NS
		script string
	}{{l.client, cb.String()}, {l.node, nb.String()}, {l.server, sb.String()}} {
		if _, _, err := x.ns.Exec(x.script, "ip", "-batch", "-"); err != nil {
			return err
		}
	}
	const silent = "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -j DROP\nCOMMIT\n"
	for _, x := range []struct {
		ns       *NS
		responds bool
	}{{l.client, c.ClientResponds}, {l.server, c.ServerResponds}} {
		if x.responds {
			continue
		}
		if err := x.ns.Restore(silent); err != nil {
			return err
		}
		if err := x.ns.Restore6(silent); err != nil {
			return err
		}
	}
	// Let the MLD reports of the new addresses leave (see the sysctls).
	time.Sleep(200 * time.Millisecond)
	return nil
}

// Close deletes the lab's sockets and namespaces.
func (l *Lab) Close() error {
	var errs []error
	for _, s := range []*packetSock{l.injClient, l.injServer, l.capClient, l.capServer} {
		if s != nil {
			errs = append(errs, s.close())
		}
	}
	if l.nodeRaw != nil {
		l.nodeRaw.close()
	}
	for _, ns := range []*NS{l.client, l.node, l.server} {
		if ns != nil {
			errs = append(errs, ns.Close())
		}
	}
	return errors.Join(errs...)
}

// Config returns the lab's configuration with defaults filled in.
func (l *Lab) Config() LabConfig { return l.cfg }

// Client returns the client namespace.
func (l *Lab) Client() *NS { return l.client }

// Node returns the node namespace, where rulesets are loaded.
func (l *Lab) Node() *NS { return l.node }

// Server returns the server (pod) namespace.
func (l *Lab) Server() *NS { return l.server }

// Ruleset is what [Lab.ResetRuleset] loads into the node. Empty fields load
// nothing.
type Ruleset struct {
	IPv4   string // iptables-restore input
	IPv6   string // ip6tables-restore input
	IPSets string // `ipset restore` input, loaded before the rules
}

// Reset replaces the node's ruleset by rules (iptables-restore input), see
// [Lab.ResetRuleset].
func (l *Lab) Reset(rules string) error { return l.ResetRuleset(Ruleset{IPv4: rules}) }

// ResetRuleset returns the node to a fresh state and loads rs: every
// iptables/ip6tables table is deleted (`nft flush ruleset`, so iptables-save
// prints only the tables rs creates, as in a new namespace), ipsets are
// destroyed and recreated, conntrack is flushed and stale captured frames
// are discarded. A restore failure is a *CommandError with the tool's stderr.
func (l *Lab) ResetRuleset(rs Ruleset) error {
	if err := l.flushRules(); err != nil {
		return err
	}
	if l.setsLoaded {
		if _, _, err := l.node.Exec("", "ipset", "destroy"); err != nil {
			return err
		}
		l.setsLoaded = false
	}
	if rs.IPSets != "" {
		l.setsLoaded = true
		if err := l.node.IPSetRestore(rs.IPSets); err != nil {
			return err
		}
	}
	if rs.IPv4 != "" {
		if err := l.node.Restore(rs.IPv4); err != nil {
			return err
		}
	}
	if rs.IPv6 != "" {
		if err := l.node.Restore6(rs.IPv6); err != nil {
			return err
		}
	}
	if err := l.FlushConntrack(); err != nil {
		return err
	}
	_, err := l.drain()
	return err
}

// flushRules deletes every table. Without nft it can only flush them and
// delete user chains, so empty tables stay visible in iptables-save.
func (l *Lab) flushRules() error {
	if l.hasNft {
		_, _, err := l.node.Exec("", "nft", "flush", "ruleset")
		return err
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		save, _, err := l.node.Exec("", tool+"-save")
		if err != nil {
			return err
		}
		for line := range strings.Lines(save) {
			if strings.HasPrefix(line, "*") {
				table := strings.TrimSpace(line[1:])
				if _, _, err := l.node.Exec("", tool, "-t", table, "-F"); err != nil {
					return err
				}
				if _, _, err := l.node.Exec("", tool, "-t", table, "-X"); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// Counters parses the node's `iptables-save -c`.
func (l *Lab) Counters() (Counters, error) {
	out, _, err := l.node.Exec("", "iptables-save", "-c")
	if err != nil {
		return Counters{}, err
	}
	return ParseSaveCounters(out)
}

// Counters6 parses the node's `ip6tables-save -c`.
func (l *Lab) Counters6() (Counters, error) {
	out, _, err := l.node.Exec("", "ip6tables-save", "-c")
	if err != nil {
		return Counters{}, err
	}
	return ParseSaveCounters(out)
}

// Conntrack returns the lines of the node's `conntrack -L` (stdout only; the
// "N flow entries have been shown." summary goes to stderr).
func (l *Lab) Conntrack() ([]string, error) {
	out, _, err := l.node.Exec("", "conntrack", "-L")
	if err != nil {
		return nil, err
	}
	var lines []string
	for line := range strings.Lines(out) {
		if s := strings.TrimRight(line, "\n"); s != "" {
			lines = append(lines, s)
		}
	}
	return lines, nil
}

// FlushConntrack deletes every conntrack entry of the node.
func (l *Lab) FlushConntrack() error {
	_, _, err := l.node.Exec("", "conntrack", "-F")
	return err
}

// MAC returns the MAC address of an end's interface (c0 or p0).
func (s Side) MAC() net.HardwareAddr {
	if s == Server {
		return ServerMAC
	}
	return ClientMAC
}

// gatewayMAC is the node interface facing side.
func (s Side) gatewayMAC() net.HardwareAddr {
	if s == Server {
		return NodeEth1MAC
	}
	return NodeEth0MAC
}

// Frame builds spec as a frame from the client's c0 to the node's eth0.
func (l *Lab) Frame(spec FrameSpec) ([]byte, error) { return l.FrameFrom(Client, spec) }

// FrameFrom builds spec as a frame sent by side to the node.
func (l *Lab) FrameFrom(side Side, spec FrameSpec) ([]byte, error) {
	return BuildFrame(side.MAC(), side.gatewayMAC(), spec)
}

// Inject writes frame onto the client's wire: it reaches the node's eth0 as
// if it came from the network.
func (l *Lab) Inject(frame []byte) error { return l.InjectFrom(Client, frame) }

// InjectFrom writes frame onto side's wire towards the node.
func (l *Lab) InjectFrom(side Side, frame []byte) error {
	s := l.injClient
	switch side {
	case Client:
	case Server:
		s = l.injServer
	default:
		return fmt.Errorf("kerneltest: InjectFrom: unknown side %d", int(side))
	}
	return onCPU(l.cpu, func() error { return s.send(frame) })
}

// SendFromNode sends an IPv4 or IPv6 packet (header included, as built by
// [BuildPacket]) from a raw socket in the node, so that it is locally
// generated: it traverses raw/mangle/nat/filter OUTPUT and POSTROUTING. The
// kernel fills in the IPv4 header checksum (and the ID when it is 0).
func (l *Lab) SendFromNode(pkt []byte) error {
	return onCPU(l.cpu, func() error { return l.nodeRaw.send(pkt) })
}

// Captured is one frame that arrived at an end of the lab.
type Captured struct {
	Side    Side
	PktType uint8 // unix.PACKET_HOST, PACKET_OTHERHOST...
	Frame   []byte
	Summary Summary
}

// Observation is what arrived at the client and the server, in arrival
// order, leaving out the harness's own ARP and all Ethernet multicast.
type Observation struct {
	Client []Captured
	Server []Captured
}

// String lists the summaries, one per line, prefixed by "client: " or
// "server: ".
func (o Observation) String() string {
	var b strings.Builder
	for _, c := range o.Client {
		fmt.Fprintf(&b, "client: %s\n", c.Summary)
	}
	for _, c := range o.Server {
		fmt.Fprintf(&b, "server: %s\n", c.Summary)
	}
	return b.String()
}

// Exchange discards stale captures, injects frames from the client, and
// returns what arrived once the kernel settled.
func (l *Lab) Exchange(frames ...[]byte) (Observation, error) {
	if _, err := l.drain(); err != nil {
		return Observation{}, err
	}
	for i, f := range frames {
		if err := l.Inject(f); err != nil {
			return Observation{}, fmt.Errorf("kerneltest: inject frame %d: %w", i, err)
		}
	}
	return l.Settle()
}

// Settle waits until everything sent so far (and everything the kernels sent
// in response, up to 2*SettleRounds-1 hops) has been processed, then returns
// the frames that arrived since the previous Settle, Exchange or Reset. See
// the package documentation for why this is exact.
func (l *Lab) Settle() (Observation, error) {
	var obs Observation
	err := onCPU(l.cpu, func() error {
		for range l.cfg.SettleRounds {
			l.sentinelSeq++
			mac := net.HardwareAddr{0x02, 0x70, 0x77, 0xff, byte(l.sentinelSeq >> 8), byte(l.sentinelSeq)}
			if err := l.injClient.send(arpProbe(mac, l.cfg.NodeEth0.Addr())); err != nil {
				return fmt.Errorf("kerneltest: send sentinel: %w", err)
			}
			deadline := time.Now().Add(l.cfg.Timeout)
			for {
				f, ok, err := l.capClient.recv(deadline)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("kerneltest: sentinel ARP reply to %s not seen within %v", mac, l.cfg.Timeout)
				}
				if isSentinelReply(f.data, mac) {
					break
				}
				obs.Client = appendCaptured(obs.Client, Client, f)
			}
		}
		return nil
	})
	if err != nil {
		return obs, err
	}
	rest, err := l.capServer.drain()
	for _, f := range rest {
		obs.Server = appendCaptured(obs.Server, Server, f)
	}
	return obs, err
}

// drain discards whatever the capture sockets hold.
func (l *Lab) drain() (int, error) {
	a, err1 := l.capClient.drain()
	b, err2 := l.capServer.drain()
	return len(a) + len(b), errors.Join(err1, err2)
}

func appendCaptured(dst []Captured, side Side, f rawFrame) []Captured {
	if f.pktType == unix.PACKET_OUTGOING || len(f.data) < 14 {
		return dst
	}
	if f.data[0]&1 != 0 { // multicast/broadcast: MLD reports, ARP requests
		return dst
	}
	if f.data[12] == 0x08 && f.data[13] == 0x06 { // ARP is the harness's
		return dst
	}
	s, _ := Decode(f.data)
	return append(dst, Captured{Side: side, PktType: f.pktType, Frame: f.data, Summary: s})
}

// arpProbe builds an ARP request with sender IP 0.0.0.0 (an RFC 5227 probe)
// for target. The kernel answers a probe for a local address directly to
// the sender MAC without creating or touching any neighbour entry, so the
// unique sender MAC identifies the reply.
func arpProbe(sender net.HardwareAddr, target netip.Addr) []byte {
	f := make([]byte, 60) // padded to the Ethernet minimum
	copy(f[0:6], NodeEth0MAC)
	copy(f[6:12], sender)
	f[12], f[13] = 0x08, 0x06
	arp := f[14:]
	arp[0], arp[1] = 0, 1 // Ethernet
	arp[2], arp[3] = 0x08, 0x00
	arp[4], arp[5] = 6, 4
	arp[6], arp[7] = 0, 1 // request
	copy(arp[8:14], sender)
	// arp[14:18] sender IP stays 0.0.0.0; arp[18:24] target MAC stays zero.
	t := target.As4()
	copy(arp[24:28], t[:])
	return f
}

func isSentinelReply(f []byte, mac net.HardwareAddr) bool {
	return len(f) >= 42 && string(f[0:6]) == string(mac) && f[12] == 0x08 && f[13] == 0x06 && f[20] == 0 && f[21] == 2
}
