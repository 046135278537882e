package difftest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
)

// newSimHost builds the node of the lab as a simulated host.
func newSimHost() *netfilter.Host {
	// The lab runs the kernel default route_localnet=0.
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1, NoRouteLocalnet: true})
	mustNoErr(h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), netip.MustParsePrefix("fd00:10::1/64")))
	mustNoErr(h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24"), netip.MustParsePrefix("fd00:244::1/64")))
	return h
}

func mustNoErr(err error) {
	if err != nil {
		panic(err)
	}
}

// frameSpec is the kernel harness's view of p.
func (p genPacket) frameSpec() kerneltest.FrameSpec {
	s := kerneltest.FrameSpec{Proto: p.Proto, Src: p.Src, Dst: p.Dst, SrcPort: p.SPort, DstPort: p.DPort,
		TCPFlags: p.Flags, Seq: p.Seq, Ack: p.Ack, ICMPType: p.ICMPType, PayloadLen: p.PayloadLen, ID: 7,
		Window: p.Window, ZeroWindow: p.ZeroWindow, WScale: p.WScale, HasWScale: p.HasWScale, SACKPerm: p.SACKPerm}
	if p.HasSACK {
		s.SACK = [][2]uint32{{p.SACKEnd - 100, p.SACKEnd}}
	}
	if p.Proto == "icmp" {
		s.ICMPID, s.ICMPSeq = p.SPort, 1
		s.SrcPort = 0
	}
	return s
}

var protoNums = map[string]inet.Proto{"tcp": inet.TCP, "udp": inet.UDP, "icmp": inet.ICMP}

// simPacket is the simulator's view of p. Length is the IP total length of
// the frame the kernel gets, which byte counters add up.
func (p genPacket) simPacket() netfilter.Packet {
	sp := netfilter.Packet{Proto: protoNums[p.Proto], Src: p.Src, Dst: p.Dst, TTL: 64, ID: 7}
	if p.Src.Is4() {
		sp.Family = netfilter.IPv4
	} else {
		sp.Family = netfilter.IPv6
	}
	hdr := 20
	if p.Src.Is6() {
		hdr = 40
		if p.Proto == "icmp" {
			sp.Proto = inet.ICMPv6
		}
	}
	switch p.Proto {
	case "tcp":
		sp.SrcPort, sp.DstPort = p.SPort, p.DPort
		sp.TCPFlags = parseFlags(p.Flags)
		sp.Seq, sp.Ack, sp.Window = p.Seq, p.Ack, p.Window
		if sp.Window == 0 && !p.ZeroWindow {
			sp.Window = 64240 // the frame builder's default
		}
		optLen := 0
		if p.HasWScale {
			sp.SetTCPOption(3)
			sp.WScale = p.WScale
			optLen += 3
		}
		if p.SACKPerm {
			sp.SetTCPOption(4)
			optLen += 2
		}
		if p.HasSACK {
			sp.SetTCPOption(5)
			sp.SACKEnd = p.SACKEnd
			optLen += 10
		}
		sp.TCPHeaderLen = uint8(20 + (optLen+3)/4*4)
		sp.Length = hdr + int(sp.TCPHeaderLen) + p.PayloadLen
	case "udp":
		sp.SrcPort, sp.DstPort = p.SPort, p.DPort
		sp.Length = hdr + 8 + p.PayloadLen
	default:
		sp.ICMPType, sp.ICMPID = p.ICMPType, p.SPort
		sp.Length = hdr + 8 + p.PayloadLen
	}
	return sp
}

func parseFlags(s string) inet.TCPFlags {
	var f inet.TCPFlags
	for n := range strings.SplitSeq(s, ",") {
		switch n {
		case "FIN":
			f |= inet.FIN
		case "SYN":
			f |= inet.SYN
		case "RST":
			f |= inet.RST
		case "PSH":
			f |= inet.PSH
		case "ACK":
			f |= inet.ACK
		case "URG":
			f |= inet.URG
		}
	}
	return f
}

// stackReply is what the node's own IP stack (not netfilter) sends back for
// a packet delivered to it, with no socket listening anywhere: a reset for
// TCP (RST alone when the segment carried ACK, RST,ACK otherwise; nothing
// for a reset), ICMP port unreachable for UDP (quoting up to 576 bytes,
// TOS 0xc0 like every ICMP error) and an echo reply for an echo request.
func stackReply(p netfilter.Packet) (netfilter.Packet, bool) {
	r := netfilter.Packet{Family: p.Family, Src: p.Dst, Dst: p.Src, TTL: 64}
	v6 := p.Family == netfilter.IPv6
	hdr := 20
	if v6 {
		hdr = 40
	}
	switch p.Proto {
	case inet.TCP:
		if p.TCPFlags&inet.RST != 0 {
			return r, false
		}
		r.Proto, r.SrcPort, r.DstPort = inet.TCP, p.DstPort, p.SrcPort
		r.TCPFlags = inet.RST
		// The stack's reset (tcp_v4_send_reset) takes its sequence from
		// the segment's ack, or acknowledges the segment; window 0.
		if p.TCPFlags&inet.ACK == 0 {
			r.TCPFlags |= inet.ACK
			r.Ack = p.Seq + uint32(tcpPayload(p))
			if p.TCPFlags&inet.SYN != 0 {
				r.Ack++
			}
			if p.TCPFlags&inet.FIN != 0 {
				r.Ack++
			}
		} else {
			r.Seq = p.Ack
		}
		r.Length = hdr + 20
	case inet.UDP:
		if v6 {
			r.Proto, r.ICMPType, r.ICMPCode = inet.ICMPv6, 1, 4
			r.Length = min(hdr+8+p.Length, 1280)
		} else {
			r.Proto, r.ICMPType, r.ICMPCode = inet.ICMP, 3, 3
			r.Length = min(hdr+8+p.Length, 576)
			r.TOS = 0xc0
		}
		// The error quotes the datagram as the stack got it (after any
		// DNAT); conntrack relates the error to its connection by it.
		r.Inner = netfilter.InnerHeader{Proto: p.Proto, Src: p.Src, Dst: p.Dst, SrcPort: p.SrcPort, DstPort: p.DstPort}
	case inet.ICMP:
		if p.ICMPType != 8 {
			return r, false
		}
		r.Proto, r.ICMPID, r.Length = inet.ICMP, p.ICMPID, p.Length
	case inet.ICMPv6:
		if p.ICMPType != 128 {
			return r, false
		}
		r.Proto, r.ICMPType, r.ICMPID, r.Length = inet.ICMPv6, 129, p.ICMPID, p.Length
	default:
		return r, false
	}
	return r, true
}

// tcpPayload is the TCP payload length of p.
func tcpPayload(p netfilter.Packet) int {
	ipHL, tcpHL := 20, 20
	if p.Family == netfilter.IPv6 {
		ipHL = 40
	}
	if p.TCPHeaderLen != 0 {
		tcpHL = int(p.TCPHeaderLen)
	}
	return max(p.Length-ipHL-tcpHL, 0)
}

// simOutcome is what the simulator did with one packet, in the terms the
// lab can observe.
type simOutcome struct {
	Result netfilter.Result
	// Frames are the keys of every frame that reaches the client or the
	// server: the packet itself, REJECT's reply, the node's own answer.
	Frames []string
	// Notes describe the extra packets sent through OUTPUT.
	Notes []string
	// Out are the packets behind Frames, as they left the host.
	Out []netfilter.Packet
}

// simRun sends p through h like the lab does, including the node's answers
// and REJECT's replies through the OUTPUT path.
func simRun(h *netfilter.Host, p genPacket) simOutcome {
	return simRunPacket(h, p.From, p.simPacket())
}

// simRunPacket is simRun for a packet already in the simulator's terms.
func simRunPacket(h *netfilter.Host, from Origin, sp netfilter.Packet) simOutcome {
	var o simOutcome
	switch from {
	case FromClient:
		sp.SrcMAC, sp.HasMAC = [6]byte(kerneltest.ClientMAC), true
		o.Result = h.Receive("eth0", sp)
	case FromServer:
		sp.SrcMAC, sp.HasMAC = [6]byte(kerneltest.ServerMAC), true
		o.Result = h.Receive("eth1", sp)
	case FromNode:
		o.Result = h.Send(sp)
	}
	o.addFrame(o.Result)
	var extra []netfilter.Packet
	switch o.Result.Disposition {
	case netfilter.Delivered:
		if r, ok := stackReply(o.Result.Packet); ok {
			extra = append(extra, r)
		}
	}
	// The host sends REJECT's replies and the ICMP time exceeded of a
	// packet it cannot forward through OUTPUT and POSTROUTING itself;
	// Emitted holds them as they left.
	for _, e := range o.Result.Emitted {
		o.Notes = append(o.Notes, fmt.Sprintf("%s: the node sends %s", o.Result.Disposition, keyOfSim(e, "?")))
		o.addFrame(netfilter.Result{Disposition: netfilter.Sent, Packet: e})
	}
	for _, e := range extra {
		res := h.Send(e)
		o.Notes = append(o.Notes, fmt.Sprintf("node sends %s -> %s", keyOfSim(e, "?"), res.Disposition))
		o.addFrame(res)
	}
	slices.Sort(o.Frames)
	return o
}

func (o *simOutcome) addFrame(r netfilter.Result) {
	if r.Disposition != netfilter.Forwarded && r.Disposition != netfilter.Sent {
		return
	}
	if r.Packet.Out == "eth0" || r.Packet.Out == "eth1" {
		o.Out = append(o.Out, r.Packet)
	}
	switch r.Packet.Out {
	case "eth0":
		o.Frames = append(o.Frames, keyOfSim(r.Packet, "client"))
	case "eth1":
		o.Frames = append(o.Frames, keyOfSim(r.Packet, "server"))
	}
}

// keyOfSim and keyOfKernel render a packet the same way on both sides.
func keyOfSim(p netfilter.Packet, side string) string {
	flags := ""
	if p.Proto == inet.TCP && p.TCPFlags != 0 {
		flags = p.TCPFlags.String()
	}
	return frameKey(side, p.Proto, p.Src, p.Dst, p.SrcPort, p.DstPort, flags, p.ICMPType, p.ICMPCode, p.TTL, p.Length)
}

func keyOfKernel(c kerneltest.Captured) string {
	s := c.Summary
	return frameKey(c.Side.String(), inet.Proto(s.Proto), s.Src, s.Dst, s.SrcPort, s.DstPort, s.TCPFlags, s.ICMPType, s.ICMPCode, s.TTL, s.IPLen)
}

func frameKey(side string, proto inet.Proto, src, dst netip.Addr, sport, dport uint16, flags string, it, ic, ttl uint8, length int) string {
	switch proto {
	case inet.TCP:
		return fmt.Sprintf("%s: tcp %s > %s [%s] ttl=%d len=%d", side, netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport), flags, ttl, length)
	case inet.UDP:
		return fmt.Sprintf("%s: udp %s > %s ttl=%d len=%d", side, netip.AddrPortFrom(src, sport), netip.AddrPortFrom(dst, dport), ttl, length)
	}
	return fmt.Sprintf("%s: proto%d %s > %s type=%d code=%d ttl=%d len=%d", side, proto, src, dst, it, ic, ttl, length)
}

// kernelFrames lists the keys of what the lab captured, sorted.
func kernelFrames(obs kerneltest.Observation) []string {
	var out []string
	for _, c := range append(slices.Clone(obs.Client), obs.Server...) {
		out = append(out, keyOfKernel(c))
	}
	slices.Sort(out)
	return out
}

// compareCounters lists every difference between the kernel's and the
// simulator's iptables-save -c: per chain, the policy counter and each
// rule's text and counter, by position.
func compareCounters(kern, sim kerneltest.Counters) []string {
	var diffs []string
	for _, kt := range kern.Tables {
		for _, kc := range kt.Chains {
			sc := sim.Chain(kt.Name, kc.Name)
			if sc == nil {
				diffs = append(diffs, fmt.Sprintf("%s/%s: missing in packetwalk", kt.Name, kc.Name))
				continue
			}
			if kc.Policy != sc.Policy || kc.PolicyCounter != sc.PolicyCounter {
				diffs = append(diffs, fmt.Sprintf("%s/%s policy: kernel %s %v, packetwalk %s %v", kt.Name, kc.Name, kc.Policy, kc.PolicyCounter, sc.Policy, sc.PolicyCounter))
			}
			if len(kc.Rules) != len(sc.Rules) {
				diffs = append(diffs, fmt.Sprintf("%s/%s: kernel %d rules, packetwalk %d", kt.Name, kc.Name, len(kc.Rules), len(sc.Rules)))
				continue
			}
			for i, kr := range kc.Rules {
				sr := sc.Rules[i]
				if kr.Counter != sr.Counter {
					diffs = append(diffs, fmt.Sprintf("%s/%s#%d counter: kernel %v, packetwalk %v (%s)", kt.Name, kc.Name, i+1, kr.Counter, sr.Counter, kr.Rule))
				}
				if kr.Rule != sr.Rule {
					diffs = append(diffs, fmt.Sprintf("%s/%s#%d text: kernel %q, packetwalk %q", kt.Name, kc.Name, i+1, kr.Rule, sr.Rule))
				}
			}
		}
	}
	return diffs
}

// simCounters parses the simulator's iptables-save -c for family f.
func simCounters(h *netfilter.Host, f netfilter.Family) (kerneltest.Counters, error) {
	return kerneltest.ParseSaveCounters(string(h.Ruleset(f).AppendSave(nil, netfilter.SaveOptions{Counters: true})))
}
