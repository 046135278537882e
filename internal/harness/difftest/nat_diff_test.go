package difftest

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
)

// The NAT labs route everything else out of eth0 via the client, as a
// node's default route would: without it a packet to a service address
// that no rule DNATs has no route, and the kernel's answer to that
// (ip_error's ICMP unreachable) is rate limited per peer, so it cannot be
// compared over thousands of cases.
var defaultGW = clientIP

func newNATLab(t testing.TB) *kerneltest.Lab {
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{})
	if _, _, err := lab.Node().Exec("", "ip", "route", "add", "default", "via", defaultGW.String(), "dev", "eth0"); err != nil {
		t.Fatalf("default route: %v", err)
	}
	return lab
}

func newNATSimHost() *netfilter.Host {
	h := newSimHost()
	mustNoErr(h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: defaultGW}))
	return h
}

// wirePkt is one packet of a flow in both harnesses' terms.
type wirePkt struct {
	Side               kerneltest.Side
	Proto              string
	Src, Dst           netip.Addr
	SPort, DPort       uint16 // the echo identifier in SPort for icmp
	Flags              string
	Seq, Ack           uint32
	ICMPType, ICMPCode uint8
	PayloadLen         int
	// Inner is the packet an ICMP error quotes, as the responder got it.
	Inner *kerneltest.Summary
}

func (p wirePkt) String() string {
	s := fmt.Sprintf("from %s: %s %s:%d > %s:%d", p.Side, p.Proto, p.Src, p.SPort, p.Dst, p.DPort)
	switch {
	case p.Proto == "tcp":
		s += fmt.Sprintf(" [%s] seq=%d ack=%d", p.Flags, p.Seq, p.Ack)
	case p.Inner != nil:
		s += fmt.Sprintf(" type=%d code=%d quoting {%s}", p.ICMPType, p.ICMPCode, p.Inner)
	case p.Proto == "icmp":
		s += fmt.Sprintf(" type=%d", p.ICMPType)
	}
	return s + fmt.Sprintf(" payload=%d", p.PayloadLen)
}

// quoted rebuilds the start of the packet an ICMP error quotes from its
// summary: the IP header and 8 transport bytes (28 bytes for IPv4, 48 for
// IPv6).
func quoted(s *kerneltest.Summary) ([]byte, error) {
	spec := kerneltest.FrameSpec{Proto: protoNameOf(inet.Proto(s.Proto)), Src: s.Src, Dst: s.Dst, SrcPort: s.SrcPort, DstPort: s.DstPort,
		TCPFlags: s.TCPFlags, Seq: s.Seq, Ack: s.Ack, TTL: s.TTL}
	n := 48
	if s.Version != 6 && s.Src.Is4() {
		n, spec.ID, spec.DF = 28, s.ID, s.DF
	}
	spec.PayloadLen = max(0, s.IPLen-n)
	b, err := kerneltest.BuildPacket(spec)
	if err != nil {
		return nil, err
	}
	return b[:n], nil
}

func protoNameOf(p inet.Proto) string {
	switch p {
	case inet.TCP:
		return "tcp"
	case inet.UDP:
		return "udp"
	}
	return "icmp"
}

// frameSpec is the packet for the lab, IPv4 or IPv6 as its addresses
// are; the header an ICMP error quotes is rebuilt from its summary.
func (p wirePkt) frameSpec() (kerneltest.FrameSpec, error) {
	s := kerneltest.FrameSpec{Proto: p.Proto, Src: p.Src, Dst: p.Dst, SrcPort: p.SPort, DstPort: p.DPort,
		TCPFlags: p.Flags, Seq: p.Seq, Ack: p.Ack, ICMPType: p.ICMPType, ICMPCode: p.ICMPCode, PayloadLen: p.PayloadLen, ID: 7}
	if p.Proto == "icmp" {
		s.SrcPort, s.DstPort = 0, 0
		if p.Inner != nil {
			q, err := quoted(p.Inner)
			if err != nil {
				return s, err
			}
			s.Payload = q
		} else {
			s.ICMPID, s.ICMPSeq = p.SPort, 1
		}
	}
	return s, nil
}

// simPacket is the simulator's view of p, lengths as the lab's frame has
// them.
func (p wirePkt) simPacket() netfilter.Packet {
	v6 := p.Src.Is6()
	sp := netfilter.Packet{Family: netfilter.IPv4, Proto: protoNums[p.Proto], Src: p.Src, Dst: p.Dst, TTL: 64, ID: 7}
	hdr := 20
	if v6 {
		sp.Family, sp.ID, hdr = netfilter.IPv6, 0, 40
		if p.Proto == "icmp" {
			sp.Proto = inet.ICMPv6
		}
	}
	switch p.Proto {
	case "tcp":
		sp.SrcPort, sp.DstPort, sp.TCPFlags = p.SPort, p.DPort, parseFlags(p.Flags)
		// The window tracker must see what the lab's frame carries; the
		// frame builder's window is 64240.
		sp.Seq, sp.Ack, sp.Window = p.Seq, p.Ack, 64240
		sp.Length = hdr + 20 + p.PayloadLen
	case "udp":
		sp.SrcPort, sp.DstPort = p.SPort, p.DPort
		sp.Length = hdr + 8 + p.PayloadLen
	default:
		sp.ICMPType, sp.ICMPCode = p.ICMPType, p.ICMPCode
		sp.Length = hdr + 8 + p.PayloadLen
		if p.Inner != nil {
			in := p.Inner
			sp.Inner = netfilter.InnerHeader{Proto: inet.Proto(in.Proto), Src: in.Src, Dst: in.Dst, SrcPort: in.SrcPort, DstPort: in.DstPort}
			sp.Length = 2*hdr + 16
		} else {
			sp.ICMPID = p.SPort
		}
	}
	return sp
}

// icmpExtra is what the frame keys of the NAT suites add for ICMP and
// ICMPv6: the echo identifier, or the header an error quotes.
func icmpExtra(proto inet.Proto, typ uint8, id uint16, inner *kerneltest.Summary) string {
	var echo bool
	switch proto {
	case inet.ICMP:
		echo = typ == 0 || typ == 8
	case inet.ICMPv6:
		echo = typ == 128 || typ == 129
	default:
		return ""
	}
	if echo {
		return fmt.Sprintf(" id=%d", id)
	}
	if inner == nil {
		return " quoting nothing"
	}
	return fmt.Sprintf(" quoting {proto%d %s > %s}", inner.Proto, netip.AddrPortFrom(inner.Src, inner.SrcPort), netip.AddrPortFrom(inner.Dst, inner.DstPort))
}

func natKeyOfSim(p netfilter.Packet) string {
	side := "client"
	if p.Out == "eth1" {
		side = "server"
	}
	var in *kerneltest.Summary
	if p.Inner.Proto != 0 {
		in = &kerneltest.Summary{Proto: uint8(p.Inner.Proto), Src: p.Inner.Src, Dst: p.Inner.Dst, SrcPort: p.Inner.SrcPort, DstPort: p.Inner.DstPort}
	}
	return keyOfSim(p, side) + icmpExtra(p.Proto, p.ICMPType, p.ICMPID, in)
}

// echoID reads the echo identifier of a captured ICMP or ICMPv6 frame.
func echoID(frame []byte) uint16 {
	if len(frame) < 15 {
		return 0
	}
	hdr := int(frame[14]&0x0f) * 4
	if frame[14]>>4 == 6 {
		hdr = 40
	}
	if len(frame) < 14+hdr+6 {
		return 0
	}
	return binary.BigEndian.Uint16(frame[14+hdr+4:])
}

func natKeyOfKernel(c kerneltest.Captured) string {
	s := c.Summary
	return keyOfKernel(c) + icmpExtra(inet.Proto(s.Proto), s.ICMPType, echoID(c.Frame), s.Inner)
}

// flowResult is the comparison of one natCase.
type flowResult struct {
	outcome
	// Kernel and Sim are, per flow, the normalised conntrack lines.
	Kernel, Sim [][]string
	// KernelFrames and SimFrames are the frame keys, per flow and packet.
	KernelFrames, SimFrames [][][]string
	// Masked counts conntrack lines whose SNAT port was masked.
	Masked int
}

// runNATCase loads c into the lab and a fresh simulated host and runs its
// flows through both, comparing per packet the frames that come out
// (addresses, ports, echo ids, quoted headers), and after each flow every
// counter and the conntrack table.
func runNATCase(lab *kerneltest.Lab, c natCase) (flowResult, error) {
	var res flowResult
	h := newNATSimHost()
	simErr := h.Restore(netfilter.IPv4, []byte(c.Rules), netfilter.RestoreOptions{})
	o, ok, err := loaded("ruleset", lab.Reset(c.Rules), simErr)
	if !ok {
		res.outcome = o
		return res, err
	}
	var tr strings.Builder
	for fi, f := range c.Flows {
		kf, sf, err := runFlow(lab, h, f, fi, &res, &tr)
		if err != nil {
			return res, fmt.Errorf("flow %d (%s): %w", fi+1, f, err)
		}
		res.KernelFrames, res.SimFrames = append(res.KernelFrames, kf), append(res.SimFrames, sf)
		kl, err := lab.Conntrack()
		if err != nil {
			return res, err
		}
		var sl []string
		now := h.Clock().Now()
		for _, e := range h.Conntrack().Entries() {
			sl = append(sl, string(e.AppendText(nil, now, conntrack.Format{})))
		}
		kn, _ := normalizeConntrack(kl)
		sn, sm := normalizeConntrack(sl)
		res.Masked += sm
		res.Kernel, res.Sim = append(res.Kernel, kn), append(res.Sim, sn)
		if strings.Join(kn, "\n") != strings.Join(sn, "\n") {
			res.Diffs = append(res.Diffs, fmt.Sprintf("after flow %d: conntrack differs\n    kernel:     %s\n    packetwalk: %s",
				fi+1, strings.Join(kn, "\n                "), strings.Join(sn, "\n                ")))
		}
		_, diffs, err := counterDiffs(lab, h, netfilter.IPv4)
		if err != nil {
			return res, err
		}
		for _, x := range diffs {
			res.Diffs = append(res.Diffs, fmt.Sprintf("after flow %d: %s", fi+1, x))
		}
	}
	if len(res.Diffs) > 0 {
		tr.WriteString(savesWithCounters(lab, h, netfilter.IPv4))
	}
	res.Transcript = tr.String()
	return res, nil
}

// responder is the far end of a flow as the kernel delivered its first
// packet there.
type responder struct {
	side      kerneltest.Side
	delivered kerneltest.Summary
	id        uint16
}

// runFlow sends f's packets. The responder's packets answer the first
// packet as the kernel delivered it (so a kernel-chosen port or address is
// answered as a real peer would); when the kernel delivered it nowhere
// (dropped, rejected, or delivered to the node itself, whose stack
// answers), the responder's steps are skipped.
func runFlow(lab *kerneltest.Lab, h *netfilter.Host, f genFlow, fi int, res *flowResult, tr *strings.Builder) (kf, sf [][]string, err error) {
	initSide, initAddr := kerneltest.Client, clientIP
	if f.From == FromServer {
		initSide, initAddr = kerneltest.Server, serverIP
	}
	var resp *responder
	next := [2]uint32{1000, 5000} // next sequence number of initiator, responder
	for si, st := range f.Steps {
		p := wirePkt{Proto: f.Proto, Flags: st.Flags, PayloadLen: st.PayloadLen, ICMPType: st.ICMPType, ICMPCode: st.ICMPCode}
		role := 0
		if st.Resp {
			if resp == nil {
				fmt.Fprintf(tr, "flow %d step %d: responder step skipped (first packet delivered nowhere)\n", fi+1, si+1)
				continue
			}
			role = 1
			d := resp.delivered
			p.Side, p.Src, p.Dst, p.SPort, p.DPort = resp.side, d.Dst, d.Src, d.DstPort, d.SrcPort
			if f.Proto == "icmp" {
				p.SPort, p.DPort = resp.id, 0
			}
			if st.ICMPError {
				p.Proto = "icmp"
				p.SPort, p.DPort = 0, 0
				p.Inner = &d
			}
		} else {
			p.Side, p.Src, p.Dst, p.SPort, p.DPort = initSide, initAddr, f.Dst, f.SPort, f.DPort
		}
		if p.Proto == "tcp" {
			p.Seq = next[role]
			if strings.Contains(p.Flags, "ACK") {
				p.Ack = next[1-role]
			}
			adv := uint32(p.PayloadLen)
			if strings.Contains(p.Flags, "SYN") || strings.Contains(p.Flags, "FIN") {
				adv++
			}
			if st.SeqDelta == 0 && st.AckDelta == 0 { // a perturbed segment counts as lost
				next[role] += adv
			}
			p.Seq, p.Ack = p.Seq+st.SeqDelta, p.Ack+st.AckDelta
		}
		obs, err := injectWire(lab, p)
		if err != nil {
			return kf, sf, fmt.Errorf("step %d (%s): %w", si+1, p, err)
		}
		var kk []string
		for _, c := range append(slices.Clone(obs.Client), obs.Server...) {
			kk = append(kk, natKeyOfKernel(c))
		}
		slices.Sort(kk)
		from := FromClient
		if p.Side == kerneltest.Server {
			from = FromServer
		}
		so := simRunPacket(h, from, p.simPacket())
		var sk []string
		for _, o := range so.Out {
			if neighbourKnown(o) {
				sk = append(sk, natKeyOfSim(o))
			}
		}
		slices.Sort(sk)
		kf, sf = append(kf, kk), append(sf, sk)
		fmt.Fprintf(tr, "flow %d step %d %s\n  packetwalk: %s at %s; frames %q; %s\n  kernel: frames %q\n",
			fi+1, si+1, p, so.Result.Disposition, whereString(so.Result.Where), sk, strings.Join(so.Notes, "; "), kk)
		if strings.Join(kk, "\n") != strings.Join(sk, "\n") {
			res.Diffs = append(res.Diffs, fmt.Sprintf("flow %d step %d: kernel frames %q, packetwalk frames %q", fi+1, si+1, kk, sk))
		}
		if si == 0 {
			resp = findDelivered(obs, p)
		}
		// The kernel tracks TCP windows and packetwalk does not: once a
		// segment did not reach the peer, later segments' numbers are no
		// longer ones a real peer would send, and the kernel may find
		// them out of window. The flow stops there.
		if p.Proto == "tcp" && (resp == nil || !reached(obs, p, peerOf(st.Resp, resp.side, initSide))) {
			if si+1 < len(f.Steps) {
				fmt.Fprintf(tr, "flow %d: stopped after step %d (segment not delivered to the peer)\n", fi+1, si+1)
			}
			break
		}
	}
	return kf, sf, nil
}

func peerOf(fromResp bool, respSide, initSide kerneltest.Side) kerneltest.Side {
	if fromResp {
		return initSide
	}
	return respSide
}

// reached reports whether the kernel let TCP segment p out towards side.
func reached(obs kerneltest.Observation, p wirePkt, side kerneltest.Side) bool {
	cs := obs.Client
	if side == kerneltest.Server {
		cs = obs.Server
	}
	for _, c := range cs {
		if inet.Proto(c.Summary.Proto) == inet.TCP && c.Summary.TCPFlags == p.Flags {
			return true
		}
	}
	return false
}

// findDelivered finds the initiator's first packet among the frames the
// kernel let out: same protocol and flags (REJECT's and the stack's
// answers have others).
func findDelivered(obs kerneltest.Observation, p wirePkt) *responder {
	for _, c := range append(slices.Clone(obs.Server), obs.Client...) {
		s := c.Summary
		if inet.Proto(s.Proto) != protoNums[p.Proto] {
			continue
		}
		switch p.Proto {
		case "tcp":
			if s.TCPFlags != p.Flags {
				continue
			}
		case "icmp":
			if s.ICMPType != 8 {
				continue
			}
		}
		return &responder{side: c.Side, delivered: s, id: echoID(c.Frame)}
	}
	return nil
}

func injectWire(lab *kerneltest.Lab, p wirePkt) (kerneltest.Observation, error) {
	spec, err := p.frameSpec()
	if err != nil {
		return kerneltest.Observation{}, err
	}
	f, err := lab.FrameFrom(p.Side, spec)
	if err != nil {
		return kerneltest.Observation{}, err
	}
	if _, err := lab.Settle(); err != nil {
		return kerneltest.Observation{}, err
	}
	if err := lab.InjectFrom(p.Side, f); err != nil {
		return kerneltest.Observation{}, err
	}
	return lab.Settle()
}

// normalizeConntrack prepares `conntrack -L` lines for comparison: the
// timeout goes (the kernel's clock runs, the simulator's does not), runs
// of spaces become one, and the lines are sorted (the kernel lists in hash
// order). Where the reply tuple's destination differs from the original
// source address AND port, the connection was source-NATed onto another
// port: the kernel draws that port at random (nf_nat_l4proto_unique_tuple
// uses get_random_u16 for SNAT), so it is masked as "dport=*" (or "id=*"
// for ICMP). The mask applies to both sides, so a port changed by one
// side only still shows: the other side's line keeps its port. masked
// counts masked lines.
func normalizeConntrack(lines []string) (out []string, masked int) {
	for _, l := range lines {
		fs := strings.Fields(l)
		if len(fs) < 3 {
			out = append(out, l)
			continue
		}
		fs = append(fs[:2:2], fs[3:]...)
		idx := map[string][]int{}
		for i, f := range fs {
			if k, _, ok := strings.Cut(f, "="); ok {
				idx[k] = append(idx[k], i)
			}
		}
		if len(idx["src"]) == 2 && len(idx["dst"]) == 2 {
			osrc, rdst := fs[idx["src"][0]][4:], fs[idx["dst"][1]][4:]
			portKey, origKey := "dport", "sport"
			if len(idx["id"]) >= 2 {
				portKey, origKey = "id", "id"
			}
			if osrc != rdst && len(idx[portKey]) >= 2 && len(idx[origKey]) >= 1 {
				_, op, _ := strings.Cut(fs[idx[origKey][0]], "=")
				_, rp, _ := strings.Cut(fs[idx[portKey][1]], "=")
				if op != rp {
					fs[idx[portKey][1]] = portKey + "=*"
					masked++
				}
			}
		}
		out = append(out, strings.Join(fs, " "))
	}
	slices.Sort(out)
	return out, masked
}

// TestKernelNATDifferential runs random nat rulesets with raw/mangle/filter
// and random flows (TCP handshakes, data, FIN and RST teardowns, UDP
// request/response, ICMP echo, ICMP errors about NATed flows) through the
// kernel and packetwalk. PACKETWALK_NAT_CASES (default 600 cases, about
// 1,200 flows) and PACKETWALK_DIFF_LABS (default 4) size the run.
func TestKernelNATDifferential(t *testing.T) {
	var cases, flows, pkts, skipped, masked, entries atomic.Int64
	runSuite(t, diffSuite[natCase, flowResult]{
		cases:  envInt("PACKETWALK_NAT_CASES", 600),
		newLab: newNATLab,
		gen:    drawCase(natCaseGen),
		run:    runNATCase,
		tally: func(c natCase, res flowResult) {
			cases.Add(1)
			if res.Skipped {
				skipped.Add(1)
			} else {
				flows.Add(int64(len(c.Flows)))
				for _, f := range res.KernelFrames {
					pkts.Add(int64(len(f)))
				}
				for _, k := range res.Kernel {
					entries.Add(int64(len(k)))
				}
			}
			masked.Add(int64(res.Masked))
		},
		summary: func(took time.Duration) string {
			return fmt.Sprintf("%d cases (%d rulesets refused by both), %d flows, %d packets, %d conntrack lines compared (%d SNAT ports masked) in %v",
				cases.Load(), skipped.Load(), flows.Load(), pkts.Load(), entries.Load(), masked.Load(), took)
		},
	})
}
