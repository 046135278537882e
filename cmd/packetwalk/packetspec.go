package main

import (
	"bufio"
	"bytes"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/services"
	"github.com/packetwalk/packetwalk/netfilter"
)

// A packet spec is one line of space-separated key=value tokens, e.g.
// "in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80 flags=S".

// specKey identifies one key of a packet spec.
type specKey uint32

const (
	kProto specKey = 1 << iota
	kSrc
	kDst
	kSport
	kDport
	kType
	kCode
	kID
	kIn
	kFlags
	kMark
	kLen
	kTTL
	kAfter
	kReply
	kSeq
	kAck
	kWin
)

var specKeys = map[string]specKey{
	"proto": kProto, "src": kSrc, "dst": kDst, "sport": kSport, "dport": kDport,
	"type": kType, "code": kCode, "id": kID, "in": kIn, "flags": kFlags,
	"mark": kMark, "len": kLen, "ttl": kTTL, "after": kAfter, "reply": kReply,
	"seq": kSeq, "ack": kAck, "win": kWin,
}

const specKeyList = "proto, src, dst, sport, dport, type, code, id, in, flags, mark, len, ttl, after, reply, seq, ack, win"

// packetSpec is a parsed spec; set records which keys were given.
type packetSpec struct {
	set        specKey
	proto      inet.Proto
	src, dst   netip.Addr
	sport      uint16
	dport      uint16
	icmpType   uint8
	typeName   string // type= given by name: resolved per family in resolve
	icmpCode   uint8
	id         uint16
	in         string // "" with kIn set means in=local
	flags      inet.TCPFlags
	mark       uint32
	payload    int
	ttl        uint8
	after      time.Duration
	reply      int
	seq, ack   uint32
	win        uint16
	text       string // the spec as given, for messages
	sourceLine int    // line in --packets, 0 for an argument
	origin     string // where the spec came from, for messages
}

// specError is a bad token in a packet spec.
type specError struct {
	token string
	msg   string
}

func (e *specError) Error() string { return fmt.Sprintf("%s at %q", e.msg, e.token) }

func specErr(tok, format string, a ...any) error {
	return &specError{token: tok, msg: fmt.Sprintf(format, a...)}
}

// protoNames are the protocol names a spec accepts.
var protoNames = map[string]inet.Proto{
	"tcp": inet.TCP, "udp": inet.UDP, "icmp": inet.ICMP,
	"icmpv6": inet.ICMPv6, "ipv6-icmp": inet.ICMPv6,
	"sctp": inet.SCTP, "udplite": inet.UDPLite,
}

// protoName is the spec name of p (what a spec accepts), or its number.
func protoName(p inet.Proto) string {
	for n, v := range protoNames {
		if v == p && n != "ipv6-icmp" {
			return n
		}
	}
	return strconv.Itoa(int(p))
}

// icmpTypeNames are the echo types by name; other types are numbers.
var icmpTypeNames = map[string][2]uint8{ // name → {ICMPv4, ICMPv6}
	"echo-request": {8, 128}, "echo-reply": {0, 129},
	"destination-unreachable": {3, 1}, "time-exceeded": {11, 3},
}

// parseSpec parses one packet spec. Checks that need the packet number
// or earlier results (reply=, in=IFACE existence) happen in resolve.
func parseSpec(text string) (packetSpec, error) {
	s := packetSpec{text: text}
	toks := strings.Fields(text)
	if len(toks) == 0 {
		return s, specErr(text, "empty packet: expected key=value tokens (%s)", specKeyList)
	}
	var rawType string
	var portNames []string
	for _, tok := range toks {
		k, v, ok := strings.Cut(tok, "=")
		if !ok {
			return s, specErr(tok, "expected key=value")
		}
		key, known := specKeys[k]
		if !known {
			return s, specErr(tok, "unknown key %q: expected one of %s", k, specKeyList)
		}
		if s.set&key != 0 {
			return s, specErr(tok, "key %q given twice", k)
		}
		if v == "" {
			return s, specErr(tok, "empty value for %s=", k)
		}
		s.set |= key
		var err error
		switch key {
		case kProto:
			p, ok := protoNames[v]
			if !ok {
				n, perr := strconv.ParseUint(v, 10, 8)
				if perr != nil {
					return s, specErr(tok, "bad protocol: expected tcp, udp, icmp, icmpv6, sctp, udplite or a number 0-255")
				}
				p = inet.Proto(n)
			}
			s.proto = p
		case kSrc, kDst:
			a, perr := netip.ParseAddr(v)
			if perr != nil || a.Zone() != "" {
				return s, specErr(tok, "bad address: expected an IPv4 or IPv6 address")
			}
			a = a.Unmap()
			if key == kSrc {
				s.src = a
			} else {
				s.dst = a
			}
		case kSport, kDport:
			if isPortName(v) {
				portNames = append(portNames, tok) // resolved once proto is known
				break
			}
			p, perr := parseUint16(tok, v, "port")
			err = perr
			if key == kSport {
				s.sport = p
			} else {
				s.dport = p
			}
		case kType:
			rawType = v
		case kCode:
			var n uint64
			n, err = parseUintTok(tok, v, 255, "ICMP code 0-255")
			s.icmpCode = uint8(n)
		case kID:
			s.id, err = parseUint16(tok, v, "ICMP echo id")
		case kIn:
			if v == "local" {
				s.in = ""
			} else if cerr := checkIfaceName(v); cerr != nil {
				return s, specErr(tok, "%v", cerr)
			} else {
				s.in = v
			}
		case kFlags:
			s.flags, err = parseTCPFlags(tok, v)
		case kMark:
			n, perr := strconv.ParseUint(v, 0, 32)
			if perr != nil {
				return s, specErr(tok, "bad mark: expected a number 0-0xffffffff")
			}
			s.mark = uint32(n)
		case kLen:
			var n uint64
			n, err = parseUintTok(tok, v, 65535, "payload length 0-65535")
			s.payload = int(n)
		case kTTL:
			var n uint64
			n, err = parseUintTok(tok, v, 255, "TTL 0-255")
			s.ttl = uint8(n)
		case kAfter:
			f, perr := strconv.ParseFloat(v, 64)
			if perr != nil || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) || f > 1e9 {
				return s, specErr(tok, "bad delay: expected seconds ≥ 0, e.g. 0.5 or 30")
			}
			s.after = time.Duration(f * float64(time.Second))
		case kSeq, kAck:
			var n uint64
			n, err = parseUintTok(tok, v, math.MaxUint32, "TCP sequence number 0-4294967295")
			if key == kSeq {
				s.seq = uint32(n)
			} else {
				s.ack = uint32(n)
			}
		case kWin:
			s.win, err = parseUint16(tok, v, "TCP window")
		case kReply:
			var n uint64
			n, err = parseUintTok(tok, v, 1<<31, "packet number ≥ 1")
			if err == nil && n == 0 {
				err = specErr(tok, "bad packet number: expected packet number ≥ 1")
			}
			s.reply = int(n)
		}
		if err != nil {
			return s, err
		}
	}
	if s.set&kReply == 0 {
		if s.set&kDst == 0 {
			return s, specErr(text, "missing dst=: every packet needs a destination (or reply=N)")
		}
		if s.set&kProto == 0 {
			s.proto = inet.TCP
		}
		if err := s.checkProtoKeys(s.proto, s.dst); err != nil {
			return s, err
		}
		if s.set&kSrc != 0 && s.src.Is4() != s.dst.Is4() {
			return s, specErr(text, "src and dst are of different families")
		}
	}
	if rawType != "" {
		if err := s.setType(rawType); err != nil {
			return s, err
		}
	}
	for _, tok := range portNames {
		if err := s.setPortName(tok); err != nil {
			return s, err
		}
	}
	return s, nil
}

// isPortName tells a service name from a number: /etc/services names do
// not start with a digit.
func isPortName(v string) bool { return v[0] < '0' || v[0] > '9' }

// setPortName resolves sport=NAME or dport=NAME among the /etc/services
// entries of the packet's protocol, as getservbyname does for the tools
// (dport=domain is 53 for tcp and udp, dport=mdns exists for udp only).
func (s *packetSpec) setPortName(tok string) error {
	k, name, _ := strings.Cut(tok, "=")
	if s.set&kProto == 0 && s.set&kReply != 0 {
		return specErr(tok, "a service name needs proto= on a reply packet")
	}
	proto := protoName(s.proto)
	p, ok := services.ByName(name, proto)
	if !ok {
		return specErr(tok, "unknown %s service %q: expected a port 0-65535 or a %s name of /etc/services", proto, name, proto)
	}
	if k == "sport" {
		s.sport = p
	} else {
		s.dport = p
	}
	return nil
}

// checkProtoKeys refuses keys that do not belong to the protocol, rather
// than silently ignoring them.
func (s *packetSpec) checkProtoKeys(proto inet.Proto, dst netip.Addr) error {
	for _, tok := range strings.Fields(s.text) {
		k, _, _ := strings.Cut(tok, "=")
		key := specKeys[k]
		switch {
		case key&(kSport|kDport) != 0 && !proto.HasPorts():
			return specErr(tok, "%s= needs proto tcp, udp, sctp or udplite, not %s", k, protoName(proto))
		case key&(kType|kCode|kID) != 0 && !proto.IsICMP():
			return specErr(tok, "%s= needs proto icmp or icmpv6, not %s", k, protoName(proto))
		case key&(kFlags|kSeq|kAck|kWin) != 0 && proto != inet.TCP:
			return specErr(tok, "%s= needs proto tcp, not %s", k, protoName(proto))
		case key == kProto && proto == inet.ICMP && dst.Is6():
			return specErr(tok, "icmp with an IPv6 destination: use proto=icmpv6")
		case key == kProto && proto == inet.ICMPv6 && dst.Is4():
			return specErr(tok, "icmpv6 with an IPv4 destination: use proto=icmp")
		}
	}
	return nil
}

func (s *packetSpec) setType(v string) error {
	tok := "type=" + v
	if _, ok := icmpTypeNames[v]; ok {
		s.typeName = v // the number depends on the family
		return nil
	}
	n, err := parseUintTok(tok, v, 255, "ICMP type 0-255 or echo-request, echo-reply, destination-unreachable, time-exceeded")
	s.icmpType = uint8(n)
	return err
}

func parseUintTok(tok, v string, max uint64, want string) (uint64, error) {
	n, err := strconv.ParseUint(v, 10, 64)
	if err != nil || n > max {
		return 0, specErr(tok, "bad value: expected %s", want)
	}
	return n, nil
}

func parseUint16(tok, v, what string) (uint16, error) {
	n, err := parseUintTok(tok, v, 65535, what+" 0-65535")
	return uint16(n), err
}

var flagLetters = map[rune]inet.TCPFlags{
	'S': inet.SYN, 'A': inet.ACK, 'F': inet.FIN, 'R': inet.RST,
	'P': inet.PSH, 'U': inet.URG, 'E': inet.ECE, 'C': inet.CWR,
}

// parseTCPFlags reads flags as letters (S, SA, FA, R…) or "none".
func parseTCPFlags(tok, v string) (inet.TCPFlags, error) {
	if v == "none" || v == "NONE" {
		return 0, nil
	}
	var f inet.TCPFlags
	for _, r := range v {
		bit, ok := flagLetters[r]
		if !ok {
			return 0, specErr(tok, "bad TCP flag %q: expected letters S A F R P U E C, or none", string(r))
		}
		f |= bit
	}
	return f, nil
}

// flagString prints flags as letters in the order people write them
// (SA, FA, PA, RA).
func flagString(f inet.TCPFlags) string {
	if f == 0 {
		return "none"
	}
	var b strings.Builder
	for _, l := range []struct {
		r rune
		f inet.TCPFlags
	}{{'S', inet.SYN}, {'F', inet.FIN}, {'R', inet.RST}, {'P', inet.PSH}, {'A', inet.ACK}, {'U', inet.URG}, {'E', inet.ECE}, {'C', inet.CWR}} {
		if f&l.f != 0 {
			b.WriteRune(l.r)
		}
	}
	return b.String()
}

// parsePacketsFile reads --packets input: one spec per line, '#' comments
// and blank lines skipped.
func parsePacketsFile(data []byte) ([]packetSpec, error) {
	var specs []packetSpec
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		t := strings.TrimSpace(sc.Text())
		if t == "" || t[0] == '#' {
			continue
		}
		s, err := parseSpec(t)
		if err != nil {
			return nil, &lineError{line: line, err: err}
		}
		s.sourceLine = line
		specs = append(specs, s)
	}
	if err := sc.Err(); err != nil {
		return nil, &lineError{line: line + 1, err: err}
	}
	return specs, nil
}

// lineError places an error on a line of an input file.
type lineError struct {
	line int
	err  error
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %v", e.line, e.err) }
func (e *lineError) Unwrap() error { return e.err }

// l4Header is the transport header length counted in a packet's IP total
// length.
func l4Header(p inet.Proto) int {
	switch p {
	case inet.TCP:
		return 20
	case inet.UDP, inet.UDPLite, inet.ICMP, inet.ICMPv6:
		return 8
	case inet.SCTP:
		return 12
	}
	return 0
}

// TCP numbers of packets whose spec leaves them out: a segment continues
// the sequence space of its direction of the flow, and a reply starts its
// own, so a handshake written as specs (flags=S; reply=1; flags=A)
// passes conntrack's window check as the kernel lab's frames do.
const (
	// defaultISN is the first sequence number of a flow's original
	// direction; replyISN that of its reply direction.
	defaultISN uint32 = 1000
	replyISN   uint32 = 5000
	// defaultWindow is the window field (Linux's initial 64240).
	defaultWindow uint16 = 64240
)

// tcpNext is the sequence number after segment p: its payload, plus one
// for SYN and one for FIN.
func tcpNext(p netfilter.Packet) uint32 {
	hdr := 20 + 20
	if p.Family == netfilter.IPv6 {
		hdr = 40 + 20
	}
	n := uint32(max(p.Length-hdr, 0))
	if p.TCPFlags&inet.SYN != 0 {
		n++
	}
	if p.TCPFlags&inet.FIN != 0 {
		n++
	}
	return p.Seq + n
}

type flow struct {
	src, dst     netip.Addr
	sport, dport uint16
}

func flowOf(p netfilter.Packet) flow { return flow{p.Src, p.Dst, p.SrcPort, p.DstPort} }
func (f flow) reverse() flow         { return flow{f.dst, f.src, f.dport, f.sport} }

// numberTCP fills seq=, ack= and win= or their defaults. Without seq=,
// a segment continues the latest earlier one of its direction (as it
// entered the node), else it starts at defaultISN (replyISN for reply=N).
// Without ack=, a segment with ACK acknowledges everything of the latest
// earlier segment of the other direction (as it left the node: that is
// what this side saw), packet N for reply=N.
func (s *packetSpec) numberTCP(p *netfilter.Packet, prior []outcome) {
	p.Window = defaultWindow
	if s.set&kWin != 0 {
		p.Window = s.win
	}
	f := flowOf(*p)
	var same, back *netfilter.Packet
	for i := len(prior) - 1; i >= 0 && (same == nil || back == nil); i-- {
		o := &prior[i]
		if o.input.Proto != inet.TCP {
			continue
		}
		if same == nil && flowOf(o.input) == f {
			same = &o.input
		}
		if back == nil && flowOf(o.res.Packet).reverse() == f {
			back = &o.res.Packet // NAT keeps the numbers
		}
	}
	if s.set&kReply != 0 {
		back = &prior[s.reply-1].res.Packet
	}
	switch {
	case s.set&kSeq != 0:
		p.Seq = s.seq
	case same != nil:
		p.Seq = tcpNext(*same)
	case s.set&kReply != 0:
		p.Seq = replyISN
	default:
		p.Seq = defaultISN
	}
	switch {
	case s.set&kAck != 0:
		p.Ack = s.ack
	case back != nil && p.TCPFlags&inet.ACK != 0:
		p.Ack = tcpNext(*back)
	}
}

// outcome is one packet's run: its spec, where it came in, and the result.
type outcome struct {
	n     int
	spec  packetSpec
	in    string // receiving interface, "" for a locally sent packet
	input netfilter.Packet
	res   netfilter.Result
	ct    string // the conntrack entry after the packet, "" if untracked
}

// resolve builds packet n (1-based) of the run from its spec and the
// outcomes of the packets before it.
func (s *packetSpec) resolve(n int, prior []outcome, host *netfilter.Host) (netfilter.Packet, string, error) {
	var p netfilter.Packet
	in := s.in
	if s.set&kReply != 0 {
		if s.reply >= n {
			return p, "", specErr("reply="+strconv.Itoa(s.reply), "reply to packet %d, which does not come earlier (this is packet %d)", s.reply, n)
		}
		prev := prior[s.reply-1].res
		if prev.Disposition == netfilter.Dropped || prev.Disposition == netfilter.Rejected {
			return p, "", specErr("reply="+strconv.Itoa(s.reply), "packet %d was %s: there is nothing to reply to", s.reply, prev.Disposition)
		}
		q := prev.Packet
		p = netfilter.Packet{
			Proto: q.Proto, Src: q.Dst, Dst: q.Src, SrcPort: q.DstPort, DstPort: q.SrcPort,
			ICMPType: q.ICMPType, ICMPCode: q.ICMPCode, ICMPID: q.ICMPID,
		}
		switch {
		case q.Proto == inet.ICMP && q.ICMPType == 8:
			p.ICMPType = 0
		case q.Proto == inet.ICMPv6 && q.ICMPType == 128:
			p.ICMPType = 129
		}
		if q.Proto == inet.TCP {
			p.TCPFlags = inet.ACK
			if q.TCPFlags&(inet.SYN|inet.ACK) == inet.SYN {
				p.TCPFlags = inet.SYN | inet.ACK
			}
		}
		if s.set&kIn == 0 {
			in = q.Out // a reply to a delivered packet is sent locally
			if prev.Disposition == netfilter.Delivered {
				in = ""
			}
		}
	} else {
		p.Proto = s.proto
		if p.Proto.HasPorts() {
			p.SrcPort, p.DstPort = uint16(40000+n), 80
		}
		if p.Proto == inet.TCP {
			p.TCPFlags = inet.SYN
		}
		if p.Proto.IsICMP() {
			p.ICMPID = uint16(n)
			p.ICMPType = 8
			if p.Proto == inet.ICMPv6 {
				p.ICMPType = 128
			}
		}
	}
	// Explicit keys override defaults and reply fields.
	if s.set&kProto != 0 {
		p.Proto = s.proto
	}
	if s.set&kSrc != 0 {
		p.Src = s.src
	}
	if s.set&kDst != 0 {
		p.Dst = s.dst
	}
	if s.set&kSport != 0 {
		p.SrcPort = s.sport
	}
	if s.set&kDport != 0 {
		p.DstPort = s.dport
	}
	if s.set&kType != 0 {
		p.ICMPType = s.icmpType
		if t, ok := icmpTypeNames[s.typeName]; ok {
			p.ICMPType = t[0]
			if p.Dst.Is6() {
				p.ICMPType = t[1]
			}
		}
	}
	if s.set&kCode != 0 {
		p.ICMPCode = s.icmpCode
	}
	if s.set&kID != 0 {
		p.ICMPID = s.id
	}
	if s.set&kFlags != 0 {
		p.TCPFlags = s.flags
	}
	p.Mark = s.mark
	p.TTL = 64
	if s.set&kTTL != 0 {
		p.TTL = s.ttl
	}
	if err := s.checkProtoKeys(p.Proto, p.Dst); err != nil {
		return p, "", err
	}
	if p.Src.IsValid() && p.Src.Is4() != p.Dst.Is4() {
		return p, "", specErr(s.text, "src and dst are of different families")
	}
	p.Family = netfilter.IPv4
	hdr := 20
	if p.Dst.Is6() {
		p.Family, hdr = netfilter.IPv6, 40
	}
	p.Length = hdr + l4Header(p.Proto) + s.payload
	if p.Family == netfilter.IPv4 && p.Length > 65535 || p.Length-40 > 65535 {
		return p, "", specErr("len="+strconv.Itoa(s.payload), "packet too long: IP total length %d exceeds 65535", p.Length)
	}
	if p.Proto == inet.TCP {
		s.numberTCP(&p, prior)
	}
	if in != "" {
		// Every Linux host has lo, even when the snapshot leaves it out.
		if in != "lo" && host.Interface(in) == nil {
			return p, "", specErr("in="+in, "unknown interface %q: add it with --addr %s=CIDR or --iface %s", in, in, in)
		}
		if !p.Src.IsValid() {
			return p, "", specErr(s.text, "missing src=: a packet received on %s needs a source address", in)
		}
	}
	return p, in, nil
}
