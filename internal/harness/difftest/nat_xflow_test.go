package difftest

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
)

// The extended NAT differential (ranges and random ports, locally
// generated flows, IPv6, expiry) runs xflows: flows of either family,
// started by one of several client addresses, the server, or the node
// itself. Unlike runFlow, each harness answers the packet as IT delivered
// it, so that a port drawn at random by the kernel and another drawn by
// packetwalk can both be followed; such ports are checked against the
// rule's allowed set and then renamed alike ("$P<n>") before comparison.

var (
	client2   = netip.MustParseAddr("192.168.10.3")
	client3   = netip.MustParseAddr("192.168.10.4")
	server2   = netip.MustParseAddr("10.244.1.6")
	client6   = netip.MustParseAddr("fd00:10::2")
	client6b  = netip.MustParseAddr("fd00:10::3")
	node6Eth0 = netip.MustParseAddr("fd00:10::1")
	node6Eth1 = netip.MustParseAddr("fd00:244::1")
	server6   = netip.MustParseAddr("fd00:244::5")
	server6b  = netip.MustParseAddr("fd00:244::6")
	service6  = netip.MustParseAddr("fd00:96::10")
	nodeEth1a = netip.MustParseAddr("10.244.1.1")
)

// newXLab is the NAT lab with a second server address, extra client
// addresses the node reaches through the client's MAC (several clients on
// one wire), and default routes of both families via the client.
func newXLab(t testing.TB) *kerneltest.Lab {
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{
		Server:  []netip.Prefix{netip.MustParsePrefix("10.244.1.5/24"), netip.MustParsePrefix("10.244.1.6/24")},
		Server6: []netip.Prefix{netip.MustParsePrefix("fd00:244::5/64"), netip.MustParsePrefix("fd00:244::6/64")},
	})
	var b strings.Builder
	fmt.Fprintf(&b, "route add default via %s dev eth0\nroute add default via %s dev eth0\n", clientIP, client6)
	for _, a := range []netip.Addr{client2, client3, client6b} {
		fmt.Fprintf(&b, "neigh replace %s lladdr %s dev eth0 nud permanent\n", a, kerneltest.ClientMAC)
	}
	if _, _, err := lab.Node().Exec(b.String(), "ip", "-batch", "-"); err != nil {
		t.Fatalf("lab routes: %v", err)
	}
	return lab
}

// xNeighbourKnown is neighbourKnown for newXLab: the node has static
// neighbours for the client addresses on eth0 (the default routes' gateway
// too) and the server addresses on eth1, and no link-local address to send
// a neighbour solicitation from. A packet for any other on-link address,
// such as an INVALID reply, which keeps the SNAT address it was sent to,
// waits for a neighbour that never answers and is dropped (about 3 s later
// the node sends an ICMP address/host unreachable, which the next step's
// Settle discards). packetwalk has no neighbour layer.
func xNeighbourKnown(p netfilter.Packet) bool {
	switch p.Out {
	case "eth0":
		if !netip.MustParsePrefix("192.168.10.0/24").Contains(p.Dst) && !netip.MustParsePrefix("fd00:10::/64").Contains(p.Dst) {
			return true // through the gateway
		}
		return slices.Contains([]netip.Addr{clientIP, client2, client3, client6, client6b}, p.Dst)
	case "eth1":
		return slices.Contains([]netip.Addr{serverIP, server2, server6, server6b}, p.Dst)
	}
	return true
}

// newXSimHost is newXLab's node in packetwalk, with timeouts to (zero
// fields: defaults).
func newXSimHost(to conntrack.Timeouts) *netfilter.Host {
	// The lab runs the kernel default route_localnet=0.
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1, ConntrackTimeouts: to, NoRouteLocalnet: true})
	mustNoErr(h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), netip.MustParsePrefix("fd00:10::1/64")))
	mustNoErr(h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24"), netip.MustParsePrefix("fd00:244::1/64")))
	mustNoErr(h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: clientIP}))
	mustNoErr(h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("::/0"), Iface: "eth0", Gateway: client6}))
	return h
}

// xflow is one connection of the extended differential.
type xflow struct {
	From         Origin // FromClient, FromServer or FromNode
	Src, Dst     netip.Addr
	Proto        string // tcp, udp, icmp (ICMPv6 for IPv6 addresses)
	SPort, DPort uint16 // SPort is the echo identifier for icmp
	Name         string
	Steps        []flowStep
	// ISN, when not zero, moves the flow's initial sequence numbers
	// (initiator 1000, responder 5000) by that much: a flow reusing an
	// earlier one's tuple starts above or below where that one ended.
	ISN uint32
	// Wait is how long both harnesses pause before the flow starts.
	Wait time.Duration
}

func (f xflow) String() string {
	// genFlow prints the steps; the source is ours.
	g := genFlow{Proto: f.Proto, Steps: f.Steps}
	_, steps, _ := strings.Cut(g.String(), ": ")
	extra := ""
	if f.ISN != 0 {
		extra += fmt.Sprintf(" isn%+d", int32(f.ISN))
	}
	if f.Wait != 0 {
		extra += fmt.Sprintf(" after %v", f.Wait)
	}
	return fmt.Sprintf("%s %s from %s %s > %s%s: %s", f.Name, f.Proto, f.From, netip.AddrPortFrom(f.Src, f.SPort), netip.AddrPortFrom(f.Dst, f.DPort), extra, steps)
}

func (f xflow) v6() bool { return f.Src.Is6() }

// echoTypes are the request and reply types of the flow's family.
func (f xflow) echoTypes() (req, rep uint8) {
	if f.v6() {
		return 128, 129
	}
	return 8, 0
}

// xpkt is a wire packet of a cross-family flow, printed without the side
// it comes from.
type xpkt struct{ wirePkt }

func (p xpkt) String() string {
	w := p.wirePkt
	w.Side = kerneltest.Client
	s := w.String()
	return strings.TrimPrefix(s, "from client: ")
}

// xResp is the far end of a flow in one harness: where the first packet
// went and how it looked there.
type xResp struct {
	side kerneltest.Side
	d    kerneltest.Summary // addresses, ports, echo id in SrcPort for icmp
}

// portRule is what an SNAT or MASQUERADE rule allows a flow's source to
// become; allows and allowsDst check a harness's choice against it.
type portRule struct {
	MinAddr, MaxAddr netip.Addr // MASQUERADE: the out interface's address
	MinPort, MaxPort uint16     // 0: no port range
	// Random is --random or --random-fully: the port is drawn even when
	// the original one is free.
	Random bool
	// Masq is MASQUERADE: the address is that of the interface towards
	// the flow's destination.
	Masq bool
	// DNAT says the rule sets the destination (address and port ranges
	// as above) instead of the source.
	DNAT bool
}

// zeroTimeouts leaves every conntrack timeout at its default.
var zeroTimeouts conntrack.Timeouts

// masqAddr is the node's address on the interface towards dst.
func masqAddr(dst netip.Addr) netip.Addr {
	switch {
	case netip.MustParsePrefix("10.244.1.0/24").Contains(dst):
		return nodeEth1a
	case netip.MustParsePrefix("fd00:244::/64").Contains(dst):
		return node6Eth1
	case dst.Is6():
		return node6Eth0
	}
	return nodeEth0
}

// xCase is a ruleset of one family and flows; Rule, when set, is the one
// source NAT rule flows may hit, whose port choice may be random.
type xCase struct {
	V6    bool
	Rules string
	Flows []xflow
	Rule  *portRule
	// Timeouts are set in the lab (sysctls) and the host alike.
	Timeouts conntrack.Timeouts
	// Exact turns off taking the kernel's random port choices into
	// packetwalk: for rules whose choice is deterministic.
	Exact bool
}

func (c xCase) String() string { return flowCaseText(c.Rules, c.Flows) }

// xRun is one case in progress: the simulated host, the renamed ports of
// each harness and what was compared.
type xRun struct {
	lab   *kerneltest.Lab
	h     *netfilter.Host
	c     xCase
	names [2]map[string]string // kernel, packetwalk: nameKey -> "$Pn"
	res   flowResult
	tr    strings.Builder
	// Checked counts port choices checked against the rule's allowed set;
	// Renamed those renamed because they were drawn at random.
	Checked, Renamed int
	pinned           bool // the current flow's entry was pinned by bind
}

// startX loads c into the lab and a fresh host. ok is false when both
// refused the ruleset (res.Skipped) or only one did (a divergence).
func startX(lab *kerneltest.Lab, c xCase) (*xRun, bool, error) {
	r := &xRun{lab: lab, c: c, names: [2]map[string]string{{}, {}}}
	r.h = newXSimHost(c.Timeouts)
	fam, rs := netfilter.IPv4, kerneltest.Ruleset{IPv4: c.Rules}
	if c.V6 {
		fam, rs = netfilter.IPv6, kerneltest.Ruleset{IPv6: c.Rules}
	}
	simErr := r.h.Restore(fam, []byte(c.Rules), netfilter.RestoreOptions{})
	o, ok, err := loaded("ruleset", lab.ResetRuleset(rs), simErr)
	if !ok {
		r.res.outcome = o
		return r, false, err
	}
	if err := setLabTimeouts(lab, c.Timeouts); err != nil {
		return r, false, err
	}
	return r, true, nil
}

// runXCase runs every flow of c and compares after each.
func runXCase(lab *kerneltest.Lab, c xCase) (*xRun, error) {
	r, ok, err := startX(lab, c)
	if err != nil || !ok {
		return r, err
	}
	for fi := range c.Flows {
		if err := r.flowCompared(fi, "after"); err != nil {
			return r, err
		}
	}
	r.finish()
	return r, nil
}

// flowCompared runs flow fi and compares the tables and counters after it;
// when says when in the transcript ("after", "again, after").
func (r *xRun) flowCompared(fi int, when string) error {
	if err := r.flow(fi, false); err != nil {
		return err
	}
	return r.compareState(fmt.Sprintf("%s flow %d", when, fi+1))
}

// finish adds the rulesets with counters to the transcript of a failed case.
func (r *xRun) finish() {
	if len(r.res.Diffs) == 0 {
		return
	}
	fam := netfilter.IPv4
	if r.c.V6 {
		fam = netfilter.IPv6
	}
	r.tr.WriteString(savesWithCounters(r.lab, r.h, fam))
	r.res.Transcript = r.tr.String()
}

// verdict is what the runner reads of a finished run.
func (r *xRun) verdict() outcome { return r.res.outcome }

func (r *xRun) diff(format string, args ...any) {
	r.res.Diffs = append(r.res.Diffs, fmt.Sprintf(format, args...))
}

// compareState compares the conntrack tables and the counters.
func (r *xRun) compareState(when string) error {
	args := []string{"-L"}
	fam := netfilter.IPv4
	if r.c.V6 {
		args = append(args, "-f", "ipv6")
		fam = netfilter.IPv6
	}
	out, _, err := r.lab.Node().Exec("", append([]string{"conntrack"}, args...)...)
	if err != nil {
		return err
	}
	var kl, sl []string
	for line := range strings.Lines(out) {
		if s := strings.TrimSpace(line); s != "" {
			kl = append(kl, s)
		}
	}
	now := r.h.Clock().Now()
	for _, e := range r.h.Conntrack().Entries() {
		if e.Original().Src.Is6() == r.c.V6 {
			sl = append(sl, string(e.AppendText(nil, now, conntrack.Format{})))
		}
	}
	kn, sn := r.normCT(kl, 0), r.normCT(sl, 1)
	r.res.Kernel, r.res.Sim = append(r.res.Kernel, kn), append(r.res.Sim, sn)
	if strings.Join(kn, "\n") != strings.Join(sn, "\n") {
		r.diff("%s: conntrack differs\n    kernel:     %s\n    packetwalk: %s", when,
			strings.Join(kn, "\n                "), strings.Join(sn, "\n                "))
	}
	_, diffs, err := counterDiffs(r.lab, r.h, fam)
	if err != nil {
		return err
	}
	for _, d := range diffs {
		r.diff("%s: %s", when, d)
	}
	return nil
}

// nameKey is how a renamed choice is looked up: the translated address
// and port (or echo id) and the peer's address and port, so that one port
// chosen for two peers stays two choices.
func nameKey(a, port, peer, peerPort string) string {
	return a + "|" + port + "|" + peer + "|" + peerPort
}

// normCT drops the timeout, squeezes spaces, renames ports drawn at
// random in the reply tuple's destination (dport, or the reply's echo id)
// and sorts.
func (r *xRun) normCT(lines []string, who int) []string {
	var out []string
	for _, l := range lines {
		fs := strings.Fields(l)
		if len(fs) >= 3 {
			fs = append(fs[:2:2], fs[3:]...)
		}
		var srcs, dsts, sports, ports []int
		for i, f := range fs {
			switch {
			case strings.HasPrefix(f, "src="):
				srcs = append(srcs, i)
			case strings.HasPrefix(f, "dst="):
				dsts = append(dsts, i)
			case strings.HasPrefix(f, "sport="):
				sports = append(sports, i)
			case strings.HasPrefix(f, "dport="), strings.HasPrefix(f, "id="):
				ports = append(ports, i)
			}
		}
		if len(srcs) == 2 && len(dsts) == 2 && len(ports) == 2 {
			k, v, _ := strings.Cut(fs[ports[1]], "=")
			peerPort := ""
			if len(sports) == 2 {
				peerPort = fs[sports[1]][6:]
			}
			if n, ok := r.names[who][nameKey(fs[dsts[1]][4:], v, fs[srcs[1]][4:], peerPort)]; ok {
				fs[ports[1]] = k + "=" + n
			}
		}
		out = append(out, strings.Join(fs, " "))
	}
	slices.Sort(out)
	return out
}

// renameKey renames, in a frame key (and the header it quotes), the
// address:port tokens and echo ids that are random choices of harness who.
func (r *xRun) renameKey(key string, who int) string {
	if len(r.names[who]) == 0 {
		return key
	}
	fs := strings.Fields(key)
	orig := slices.Clone(fs) // peers are looked up as packetwalk sent them
	trim := func(s string) string { return strings.Trim(s, "{}") }
	for i := 1; i+1 < len(fs); i++ {
		if fs[i] != ">" {
			continue
		}
		for _, x := range [2][2]int{{i - 1, i + 1}, {i + 1, i - 1}} {
			tok, peer := trim(fs[x[0]]), trim(orig[x[1]])
			pa, pp := peer, ""
			if ap, err := netip.ParseAddrPort(peer); err == nil {
				pa, pp = ap.Addr().String(), strconv.Itoa(int(ap.Port()))
			}
			if ap, err := netip.ParseAddrPort(tok); err == nil {
				if n, ok := r.names[who][nameKey(ap.Addr().String(), strconv.Itoa(int(ap.Port())), pa, pp)]; ok {
					a := ap.Addr().String()
					if ap.Addr().Is6() {
						a = "[" + a + "]"
					}
					fs[x[0]] = strings.Replace(fs[x[0]], tok, a+":"+n, 1)
				}
				continue
			}
			// An echo: "proto1 A > B type=.. code=.. ttl=.. len=.. id=N".
			for j := i + 2; j < len(fs); j++ {
				if v, ok := strings.CutPrefix(fs[j], "id="); ok {
					if n, ok := r.names[who][nameKey(tok, v, pa, pp)]; ok {
						fs[j] = "id=" + n
					}
				}
			}
		}
	}
	return strings.Join(fs, " ")
}

// flow sends flow fi's packets through both harnesses. With firstOnly,
// only its first step is sent (the expiry check's "next packet").
func (r *xRun) flow(fi int, firstOnly bool) error {
	f := r.c.Flows[fi]
	var resp [2]*xResp // kernel, packetwalk
	next := [2]uint32{1000 + f.ISN, 5000 + f.ISN}
	if f.Wait > 0 && !firstOnly {
		r.wait(f.Wait)
	}
	req, rep := f.echoTypes()
	for si, st := range f.Steps {
		if firstOnly && si > 0 {
			break
		}
		role := 0
		if st.Resp {
			role = 1
		}
		var pk [2]xpkt
		var skip bool
		for who := range 2 {
			p := xpkt{wirePkt{Proto: f.Proto, Flags: st.Flags, PayloadLen: st.PayloadLen, ICMPType: st.ICMPType, ICMPCode: st.ICMPCode}}
			if f.Proto == "icmp" && !st.ICMPError {
				p.ICMPType = map[bool]uint8{false: req, true: rep}[st.Resp]
			}
			if st.Resp {
				if resp[who] == nil {
					skip = true
					continue
				}
				d := resp[who].d
				p.Src, p.Dst, p.SPort, p.DPort = d.Dst, d.Src, d.DstPort, d.SrcPort
				if f.Proto == "icmp" {
					p.SPort, p.DPort = d.SrcPort, 0
				}
				if st.ICMPError {
					p.Proto, p.SPort, p.DPort = "icmp", 0, 0
					if f.v6() {
						p.ICMPType, p.ICMPCode = 1, 4 // port unreachable
					}
					p.Inner = &d
				}
			} else {
				p.Src, p.Dst, p.SPort, p.DPort = f.Src, f.Dst, f.SPort, f.DPort
			}
			if p.Proto == "tcp" {
				p.Seq = next[role]
				if strings.Contains(p.Flags, "ACK") {
					p.Ack = next[1-role]
				}
			}
			pk[who] = p
		}
		if skip {
			fmt.Fprintf(&r.tr, "flow %d step %d: responder step skipped (first packet not delivered to an end in both)\n", fi+1, si+1)
			continue
		}
		if pk[0].Proto == "tcp" {
			adv := uint32(pk[0].PayloadLen)
			if strings.Contains(pk[0].Flags, "SYN") || strings.Contains(pk[0].Flags, "FIN") {
				adv++
			}
			if st.SeqDelta == 0 && st.AckDelta == 0 { // a perturbed segment counts as lost
				next[role] += adv
			}
			for who := range pk {
				pk[who].Seq += st.SeqDelta
				pk[who].Ack += st.AckDelta
			}
		}
		kOut, obs, err := r.kernelSend(f, st.Resp, resp[0], pk[0])
		if err != nil {
			return fmt.Errorf("flow %d step %d (%s): %w", fi+1, si+1, pk[0], err)
		}
		from := f.From
		if st.Resp {
			from = FromClient
			if resp[1].side == kerneltest.Server {
				from = FromServer
			}
		}
		so := simRunPacket(r.h, from, pk[1].simPacket())
		so.Out = slices.DeleteFunc(so.Out, func(o netfilter.Packet) bool {
			if xNeighbourKnown(o) {
				return false
			}
			so.Notes = append(so.Notes, fmt.Sprintf("no neighbour for %s on %s: frame lost", o.Dst, o.Out))
			return true
		})
		if si == 0 {
			r.pinned = false
			resp[0], resp[1] = r.bind(fi, f, pk[0], obs, so)
			if !r.pinned && !r.c.Exact {
				if err := r.pinFromKernel(fi, f); err != nil {
					return err
				}
			}
		}
		var kk, sk []string
		for _, c := range kOut {
			kk = append(kk, r.renameKey(natKeyOfKernel(c), 0))
		}
		for _, o := range so.Out {
			sk = append(sk, r.renameKey(natKeyOfSim(o), 1))
		}
		clear(r.names[1]) // the pinned entry carries the kernel's port from now on
		slices.Sort(kk)
		slices.Sort(sk)
		r.res.KernelFrames, r.res.SimFrames = append(r.res.KernelFrames, [][]string{kk}), append(r.res.SimFrames, [][]string{sk})
		fmt.Fprintf(&r.tr, "flow %d step %d %s\n  packetwalk: %s at %s; frames %q; %s\n  kernel: frames %q\n",
			fi+1, si+1, pk[1], so.Result.Disposition, whereString(so.Result.Where), sk, strings.Join(so.Notes, "; "), kk)
		if strings.Join(kk, "\n") != strings.Join(sk, "\n") {
			r.diff("flow %d step %d: kernel frames %q, packetwalk frames %q", fi+1, si+1, kk, sk)
		}
		// As in runFlow: once a segment did not reach the peer, later
		// segments may be out of the kernel's window.
		if f.Proto == "tcp" {
			peer := kerneltest.Side(-1)
			switch {
			case st.Resp && f.From != FromNode:
				peer = sideOf(f.From)
			case !st.Resp && resp[0] != nil:
				peer = resp[0].side
			}
			if peer < 0 || !reached(obs, wirePkt{Proto: "tcp", Flags: pk[0].Flags}, peer) {
				if si+1 < len(f.Steps) && !firstOnly {
					fmt.Fprintf(&r.tr, "flow %d: stopped after step %d (segment not delivered to the peer)\n", fi+1, si+1)
				}
				break
			}
		}
	}
	return nil
}

// wait lets d pass in both harnesses: the lab sleeps, the host's clock
// moves on by as much.
func (r *xRun) wait(d time.Duration) {
	time.Sleep(d)
	if c, ok := r.h.Clock().(*netfilter.ManualClock); ok {
		c.Advance(d)
	}
}

func sideOf(o Origin) kerneltest.Side {
	if o == FromServer {
		return kerneltest.Server
	}
	return kerneltest.Client
}

// kernelSend sends p into the lab: from an end's wire, or from the node's
// raw socket for the node's own packets. It returns what arrived.
func (r *xRun) kernelSend(f xflow, isResp bool, resp *xResp, p xpkt) ([]kerneltest.Captured, kerneltest.Observation, error) {
	spec, err := p.frameSpec()
	if err != nil {
		return nil, kerneltest.Observation{}, err
	}
	if _, err := r.lab.Settle(); err != nil {
		return nil, kerneltest.Observation{}, err
	}
	if !isResp && f.From == FromNode {
		b, err := kerneltest.BuildPacket(spec)
		if err != nil {
			return nil, kerneltest.Observation{}, err
		}
		if err := r.lab.SendFromNode(b); err != nil {
			return nil, kerneltest.Observation{}, err
		}
	} else {
		side := sideOf(f.From)
		if isResp {
			side = resp.side
		}
		fr, err := r.lab.FrameFrom(side, spec)
		if err != nil {
			return nil, kerneltest.Observation{}, err
		}
		if err := r.lab.InjectFrom(side, fr); err != nil {
			return nil, kerneltest.Observation{}, err
		}
	}
	obs, err := r.lab.Settle()
	return append(slices.Clone(obs.Client), obs.Server...), obs, err
}

// pin re-keys packetwalk's entry for flow f so that its source port (or
// echo id) after SNAT is port.
func (r *xRun) pin(f xflow, port uint16) error {
	return r.rekey(f, port, func(e *conntrack.Entry) {
		reply := e.Reply()
		if f.Proto == "icmp" {
			reply.SrcPort = port
		} else {
			reply.DstPort = port
		}
		e.SetTuples(e.Original(), reply)
	})
}

// pinDst re-keys packetwalk's entry for flow f so that its destination
// port after DNAT is port.
func (r *xRun) pinDst(f xflow, port uint16) error {
	return r.rekey(f, port, func(e *conntrack.Entry) {
		reply := e.Reply()
		reply.SrcPort = port
		e.SetTuples(e.Original(), reply)
	})
}

// rekey takes packetwalk's entry for flow f out of its table, sets the
// kernel's port on it and puts it back under its new reply tuple.
func (r *xRun) rekey(f xflow, port uint16, set func(*conntrack.Entry)) error {
	tp := f.origTuple()
	ct := r.h.Conntrack()
	e, dir, ok := ct.Lookup(tp)
	if !ok || dir != conntrack.Original {
		return fmt.Errorf("packetwalk has no entry %v to take the kernel's port %d", tp, port)
	}
	ct.Remove(e)
	set(e)
	e.Status &^= conntrack.StatusDying
	setNATBits(e)
	if err := ct.Insert(e); err != nil {
		return fmt.Errorf("packetwalk cannot take the kernel's port %d: %w", port, err)
	}
	return nil
}

// setNATBits marks which halves of a re-keyed entry are translated now:
// a port packetwalk had kept may have become the kernel's other one, and
// the other way round.
func setNATBits(e *conntrack.Entry) {
	o, r := e.Original(), e.Reply()
	e.Status &^= conntrack.StatusSrcNAT | conntrack.StatusDstNAT
	srcPort := r.DstPort != o.SrcPort
	if o.IsICMP() {
		srcPort = r.SrcPort != o.SrcPort // the echo id
	}
	if r.Dst != o.Src || srcPort {
		e.Status |= conntrack.StatusSrcNAT
	}
	if r.Src != o.Dst || (!o.IsICMP() && r.SrcPort != o.DstPort) {
		e.Status |= conntrack.StatusDstNAT
	}
}

// origTuple is flow f's original tuple in packetwalk's table.
func (f xflow) origTuple() conntrack.Tuple {
	tp := conntrack.Tuple{Src: f.Src, Dst: f.Dst, Proto: protoNums[f.Proto], SrcPort: f.SPort, DstPort: f.DPort}
	if f.Proto == "icmp" {
		tp.ICMPType, _ = f.echoTypes()
		tp.DstPort = 0
		if f.v6() {
			tp.Proto = inet.ICMPv6
		}
	}
	return tp
}

// pinFromKernel handles a source port that packetwalk drew for flow f
// where no end saw it (the connection was delivered to the node, e.g.
// REDIRECTed): the kernel's choice is read from its conntrack table, both
// are checked against the class of the original port, and packetwalk's
// entry is pinned to the kernel's.
func (r *xRun) pinFromKernel(fi int, f xflow) error {
	tp := f.origTuple()
	e, dir, ok := r.h.Conntrack().Lookup(tp)
	if !ok || dir != conntrack.Original {
		return nil
	}
	simPort := e.Reply().DstPort
	if f.Proto == "icmp" {
		simPort = e.Reply().SrcPort
	}
	if simPort == f.SPort {
		return nil
	}
	args := []string{"conntrack", "-L", "-p", f.Proto, "-s", f.Src.String(), "-d", f.Dst.String()}
	if f.v6() {
		args = append(args, "-f", "ipv6")
		if f.Proto == "icmp" {
			args[3] = "icmpv6"
		}
	}
	out, _, err := r.lab.Node().Exec("", args...)
	if err != nil {
		return err
	}
	for line := range strings.Lines(out) {
		var sports, ports []string
		for _, fld := range strings.Fields(line) {
			switch k, v, _ := strings.Cut(fld, "="); k {
			case "sport":
				sports = append(sports, v)
			case "dport", "id":
				ports = append(ports, v)
			}
		}
		if len(ports) != 2 || (f.Proto != "icmp" && (len(sports) != 2 || sports[0] != strconv.Itoa(int(f.SPort)) || ports[0] != strconv.Itoa(int(f.DPort)))) {
			continue
		}
		if f.Proto == "icmp" && ports[0] != strconv.Itoa(int(f.SPort)) {
			continue
		}
		kp, err := strconv.Atoi(ports[1])
		if err != nil || kp == int(f.SPort) || kp == int(simPort) {
			return nil // kept by the kernel: a plain divergence, which the comparison reports
		}
		rule := &portRule{}
		for who, p := range [2]int{kp, int(simPort)} {
			r.Checked++
			if err := rule.allows(f, f.Src, uint16(p), f.Dst); err != nil {
				r.diff("flow %d: %s moved source port %d to %d: %v", fi+1, [2]string{"kernel", "packetwalk"}[who], f.SPort, p, err)
			}
		}
		r.Renamed++
		return r.pin(f, uint16(kp))
	}
	return nil
}

// bind finds where each harness delivered the flow's first packet and, if
// its source was translated, checks the choice against the case's rule
// and renames a port drawn at random.
func (r *xRun) bind(fi int, f xflow, p xpkt, obs kerneltest.Observation, so simOutcome) (k, s *xResp) {
	req, _ := f.echoTypes()
	want := protoNums[f.Proto]
	if f.Proto == "icmp" && f.v6() {
		want = inet.ICMPv6
	}
	for _, c := range append(slices.Clone(obs.Server), obs.Client...) {
		cs := c.Summary
		if inet.Proto(cs.Proto) != want || (f.Proto == "tcp" && cs.TCPFlags != p.Flags) || (f.Proto == "icmp" && cs.ICMPType != req) {
			continue
		}
		if f.Proto == "icmp" {
			cs.SrcPort = echoID(c.Frame)
		}
		k = &xResp{side: c.Side, d: cs}
		break
	}
	for _, o := range so.Out {
		if o.Proto != want || (f.Proto == "tcp" && o.TCPFlags != parseFlags(p.Flags)) || (f.Proto == "icmp" && o.ICMPType != req) {
			continue
		}
		d := kerneltest.Summary{Proto: uint8(o.Proto), Src: o.Src, Dst: o.Dst, SrcPort: o.SrcPort, DstPort: o.DstPort, TTL: o.TTL, IPLen: o.Length,
			TCPFlags: o.TCPFlags.String(), ID: o.ID}
		if f.v6() {
			d.Version = 6
		} else {
			d.Version = 4
		}
		if f.Proto == "icmp" {
			d.SrcPort = o.ICMPID
		}
		side := kerneltest.Client
		if o.Out == "eth1" {
			side = kerneltest.Server
		}
		s = &xResp{side: side, d: d}
		break
	}
	if k == nil || s == nil {
		return k, s
	}
	// The quoted header of an error must be the packet exactly as the
	// kernel let it out; packetwalk's own delivery is quoted in its terms,
	// with the fields it does not model taken from the kernel's.
	s.d.TTL, s.d.ID, s.d.DF, s.d.Seq, s.d.Ack = k.d.TTL, k.d.ID, k.d.DF, k.d.Seq, k.d.Ack
	rule := r.c.Rule
	if rule == nil {
		rule = &portRule{} // a null binding or an address-only rule: the port is kept or drawn from its class
	}
	sOrig := s.d // names are keyed by packetwalk's own choices
	if rule.DNAT {
		r.bindDNAT(fi, f, rule, k, s)
		// The source may still have to move off a clash: a null
		// binding, with the port drawn from its class.
		rule = &portRule{}
	}
	var changed [2]bool
	for who, x := range [2]*xResp{k, s} {
		if x.d.Src == f.Src && x.d.SrcPort == f.SPort {
			continue
		}
		changed[who] = true
		name := [2]string{"kernel", "packetwalk"}[who]
		r.Checked++
		if err := rule.allows(f, x.d.Src, x.d.SrcPort, x.d.Dst); err != nil {
			r.diff("flow %d: %s translated %s to %s: %v", fi+1, name, netip.AddrPortFrom(f.Src, f.SPort), netip.AddrPortFrom(x.d.Src, x.d.SrcPort), err)
		}
	}
	// A port drawn at random (both choices checked above) is made
	// packetwalk's too: its entry is re-keyed to the kernel's port, so
	// that everything after, clashes with later flows included, compares
	// exactly. The first frame's port is renamed for the comparison.
	portDrawn := func(x *xResp) bool { return x.d.SrcPort != f.SPort }
	if !r.c.Exact && (changed[0] || changed[1]) && (rule.Random || (portDrawn(k) && portDrawn(s))) && k.d.Src == s.d.Src {
		if err := r.pin(f, k.d.SrcPort); err != nil {
			r.diff("flow %d: %v", fi+1, err)
			return k, s
		}
		pp := ""
		if f.Proto != "icmp" {
			pp = strconv.Itoa(int(sOrig.DstPort))
		}
		r.names[1][nameKey(s.d.Src.String(), strconv.Itoa(int(s.d.SrcPort)), sOrig.Dst.String(), pp)] = strconv.Itoa(int(k.d.SrcPort))
		s.d.SrcPort = k.d.SrcPort
		r.Renamed++
		r.pinned = true
	}
	return k, s
}

// bindDNAT checks where each harness sent a flow's first packet against
// a DNAT rule and, for --random, makes the kernel's port packetwalk's: its
// entry is re-keyed and the first frame's port renamed.
func (r *xRun) bindDNAT(fi int, f xflow, rule *portRule, k, s *xResp) {
	for who, x := range [2]*xResp{k, s} {
		if x.d.Dst == f.Dst && x.d.DstPort == f.DPort {
			continue
		}
		r.Checked++
		if err := rule.allowsDst(f, x.d.Dst, x.d.DstPort); err != nil {
			r.diff("flow %d: %s translated %s to %s: %v", fi+1, [2]string{"kernel", "packetwalk"}[who],
				netip.AddrPortFrom(f.Dst, f.DPort), netip.AddrPortFrom(x.d.Dst, x.d.DstPort), err)
		}
	}
	if r.c.Exact || !rule.Random || k.d.Dst != s.d.Dst || k.d.DstPort == s.d.DstPort || f.Proto == "icmp" {
		return
	}
	if err := r.pinDst(f, k.d.DstPort); err != nil {
		r.diff("flow %d: %v", fi+1, err)
		return
	}
	r.names[1][nameKey(s.d.Dst.String(), strconv.Itoa(int(s.d.DstPort)), s.d.Src.String(), strconv.Itoa(int(s.d.SrcPort)))] = strconv.Itoa(int(k.d.DstPort))
	s.d.DstPort = k.d.DstPort
	r.Renamed++
	r.pinned = true
}

// allowsDst reports whether a translated destination lies in a DNAT
// rule's set: the address in the range, the port in the port range or,
// without one, kept.
func (pr *portRule) allowsDst(f xflow, a netip.Addr, port uint16) error {
	if pr.MinAddr.IsValid() && (a.Less(pr.MinAddr) || pr.MaxAddr.Less(a)) {
		return fmt.Errorf("address %s outside %s-%s", a, pr.MinAddr, pr.MaxAddr)
	}
	switch {
	case f.Proto == "icmp":
	case pr.MinPort != 0 && (port < pr.MinPort || port > pr.MaxPort):
		return fmt.Errorf("port %d outside %d-%d", port, pr.MinPort, pr.MaxPort)
	case pr.MinPort == 0 && port != f.DPort:
		return fmt.Errorf("port %d, want the original %d", port, f.DPort)
	}
	return nil
}

// allows reports whether a translated source, sent to dst, lies in the rule's set: the
// address in the range, the port in the port range, or else kept, or drawn
// from the kernel's class of the original port (1-511, 600-1023,
// 1024-65535); echo ids may become anything.
func (pr *portRule) allows(f xflow, a netip.Addr, port uint16, dst netip.Addr) error {
	// A kept address is a null binding that had to move the port.
	if pr.Masq && a != f.Src {
		if want := masqAddr(dst); a != want {
			return fmt.Errorf("address %s, want the out interface's %s", a, want)
		}
	}
	if pr.MinAddr.IsValid() && a != f.Src && (a.Less(pr.MinAddr) || pr.MaxAddr.Less(a)) {
		return fmt.Errorf("address %s outside %s-%s", a, pr.MinAddr, pr.MaxAddr)
	}
	if f.Proto == "icmp" {
		return nil
	}
	if pr.MinPort != 0 {
		if port < pr.MinPort || port > pr.MaxPort {
			return fmt.Errorf("port %d outside %d-%d", port, pr.MinPort, pr.MaxPort)
		}
		return nil
	}
	if port == f.SPort {
		return nil
	}
	lo, hi := uint16(1024), uint16(65535)
	switch {
	case f.SPort < 512:
		lo, hi = 1, 511
	case f.SPort < 1024:
		lo, hi = 600, 1023
	}
	if port < lo || port > hi {
		return fmt.Errorf("port %d outside the class %d-%d of the original port %d", port, lo, hi, f.SPort)
	}
	return nil
}

// setLabTimeouts writes the non-zero timeouts as sysctls of the node.
func setLabTimeouts(lab *kerneltest.Lab, to conntrack.Timeouts) error {
	var args []string
	add := func(name string, d time.Duration) {
		if s := int(d.Seconds()); s > 0 {
			args = append(args, fmt.Sprintf("net.netfilter.nf_conntrack_%s=%d", name, s))
		}
	}
	add("udp_timeout", to.UDP)
	add("udp_timeout_stream", to.UDPStream)
	add("icmp_timeout", to.ICMP)
	add("icmpv6_timeout", to.ICMPv6)
	add("tcp_timeout_syn_sent", to.TCPSynSent)
	add("tcp_timeout_syn_recv", to.TCPSynRecv)
	add("tcp_timeout_established", to.TCPEstablished)
	add("tcp_timeout_fin_wait", to.TCPFinWait)
	add("tcp_timeout_close_wait", to.TCPCloseWait)
	add("tcp_timeout_last_ack", to.TCPLastAck)
	add("tcp_timeout_time_wait", to.TCPTimeWait)
	add("tcp_timeout_close", to.TCPClose)
	if len(args) == 0 {
		return nil
	}
	_, _, err := lab.Node().Exec("", append([]string{"sysctl", "-q", "-w"}, args...)...)
	return err
}

// newXLabRequired skips or fails t without the kernel tools (see
// kerneltest.Require), then builds the lab.
func newXLabRequired(t *testing.T) *kerneltest.Lab {
	kerneltest.Require(t)
	return newXLab(t)
}
