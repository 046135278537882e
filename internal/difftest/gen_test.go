package difftest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/internal/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
	"pgregory.net/rapid"
)

// Lab addresses (kernel-ground-truth §4.1).
var (
	clientIP = netip.MustParseAddr("192.168.10.2")
	nodeEth0 = netip.MustParseAddr("192.168.10.1")
	nodeEth1 = netip.MustParseAddr("10.244.1.1")
	serverIP = netip.MustParseAddr("10.244.1.5")
)

// Origin is where a generated packet enters the node.
type Origin int

const (
	// FromClient is injected on the client's wire (node eth0).
	FromClient Origin = iota
	// FromServer is injected on the server's wire (node eth1).
	FromServer
	// FromNode is sent by a raw socket in the node (OUTPUT path).
	FromNode
)

func (o Origin) String() string { return [...]string{"client", "server", "node"}[o] }

// genPacket is one packet of a case.
type genPacket struct {
	From       Origin
	Proto      string // tcp, udp, icmp
	Src, Dst   netip.Addr
	SPort      uint16
	DPort      uint16
	Flags      string // TCP flags, comma-separated
	ICMPType   uint8
	PayloadLen int
	// Seq and Ack are the TCP sequence and acknowledgement numbers, kept
	// consistent across a case's packets by assignSeqs: the kernel's TCP
	// window tracking marks segments outside the window INVALID, which
	// packetwalk does not model.
	Seq, Ack uint32
}

func (p genPacket) String() string {
	s := fmt.Sprintf("from %s: %s %s", p.From, p.Proto, p.Src)
	if p.Proto != "icmp" {
		s += fmt.Sprintf(":%d", p.SPort)
	}
	s += fmt.Sprintf(" > %s", p.Dst)
	switch p.Proto {
	case "tcp":
		s += fmt.Sprintf(":%d [%s]", p.DPort, p.Flags)
	case "udp":
		s += fmt.Sprintf(":%d", p.DPort)
	default:
		s += fmt.Sprintf(" type=%d", p.ICMPType)
	}
	return s + fmt.Sprintf(" payload=%d", p.PayloadLen)
}

// genCase is a ruleset and the packets sent through it.
type genCase struct {
	Rules   string
	Packets []genPacket
}

func (c genCase) String() string {
	var b strings.Builder
	b.WriteString("ruleset:\n")
	b.WriteString(c.Rules)
	b.WriteString("packets:\n")
	for i, p := range c.Packets {
		fmt.Fprintf(&b, "  %d. %s\n", i+1, p)
	}
	return b.String()
}

// Hooks a chain may be reached from, as a bit set.
type hookSet uint8

const (
	hPre hookSet = 1 << iota
	hIn
	hFwd
	hOut
	hPost
)

// localOut is the set of hooks that see locally generated packets, where
// REJECT replies and the node's own answers go; conntrack state is kept out
// of chains reached from them (see the package documentation).
const localOut = hOut | hPost

var builtinHooks = map[string]hookSet{"PREROUTING": hPre, "INPUT": hIn, "FORWARD": hFwd, "OUTPUT": hOut, "POSTROUTING": hPost}

type tableSpec struct {
	name     string
	builtins []string
}

var tableSpecs = []tableSpec{
	{"raw", []string{"PREROUTING", "OUTPUT"}},
	{"mangle", []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}},
	{"filter", []string{"INPUT", "FORWARD", "OUTPUT"}},
}

// ruleSkel is a rule before its matches are drawn: they depend on which
// hooks reach its chain, known only once every jump is drawn.
type ruleSkel struct {
	kind   string // ACCEPT DROP REJECT RETURN MARK NONE JUMP GOTO
	target string // user chain for JUMP/GOTO
}

var (
	prefixes4 = []string{"192.168.10.2/32", "192.168.10.0/24", "10.244.1.5/32", "10.244.1.0/24", "10.244.0.0/16",
		"192.168.10.1/32", "10.244.1.1/32", "10.0.0.0/8", "192.168.0.0/16", "172.16.0.0/12"}
	ports      = []uint16{22, 53, 80, 443, 8080, 30000, 40000, 40001}
	portRanges = []string{"22", "53", "80", "443", "8080", "1:1024", "30000:40000", "40000:40001", "8000:9000", "1024:65535"}
	ifaces     = []string{"eth0", "eth1", "eth+", "et+", "lo", "eth2"}
	tcpFlagSel = []string{"SYN,RST,ACK,FIN SYN", "SYN,ACK SYN,ACK", "ALL NONE", "ACK ACK", "RST RST", "FIN,SYN,RST,PSH,ACK,URG ACK", "SYN,FIN SYN,FIN"}
	marks      = []string{"0x1", "0x2", "0x4", "0x1/0x1", "0x2/0x3", "0x6/0xe", "0x0/0xff"}
)

// genRuleset draws an iptables-restore ruleset over raw, mangle and filter.
func genRuleset(t *rapid.T) string {
	var b strings.Builder
	for _, ts := range tableSpecs {
		if !rapid.Bool().Draw(t, "table-"+ts.name) && ts.name != "filter" {
			continue
		}
		nUser := rapid.IntRange(0, 4).Draw(t, ts.name+"-users")
		var users []string
		for i := range nUser {
			users = append(users, fmt.Sprintf("%s-C%d", strings.ToUpper(ts.name[:1]), i+1))
		}
		chains := append(slices.Clone(ts.builtins), users...)
		skel := map[string][]ruleSkel{}
		for ci, ch := range chains {
			// User chain i jumps only to later ones: no loops, depth <= 4.
			var callable []string
			if ci >= len(ts.builtins) {
				callable = users[ci-len(ts.builtins)+1:]
			} else {
				callable = users
			}
			n := rapid.IntRange(0, 5).Draw(t, ch+"-n")
			for range n {
				kinds := []string{"ACCEPT", "DROP", "RETURN", "MARK", "NONE", "NONE"}
				if ts.name == "filter" {
					kinds = append(kinds, "REJECT", "REJECT")
				}
				if len(callable) > 0 {
					kinds = append(kinds, "JUMP", "JUMP", "GOTO")
				}
				k := rapid.SampledFrom(kinds).Draw(t, "kind")
				r := ruleSkel{kind: k}
				if k == "JUMP" || k == "GOTO" {
					r.target = rapid.SampledFrom(callable).Draw(t, "target")
				}
				skel[ch] = append(skel[ch], r)
			}
		}
		reach := map[string]hookSet{}
		for _, bi := range ts.builtins {
			reach[bi] = builtinHooks[bi]
		}
		for _, ch := range chains { // callers come before callees
			for _, r := range skel[ch] {
				if r.target != "" {
					reach[r.target] |= reach[ch]
				}
			}
		}
		fmt.Fprintf(&b, "*%s\n", ts.name)
		for _, bi := range ts.builtins {
			pol := "ACCEPT"
			if ts.name == "filter" && (bi == "INPUT" || bi == "FORWARD") && rapid.IntRange(0, 3).Draw(t, "policy-"+bi) == 0 {
				pol = "DROP"
			}
			fmt.Fprintf(&b, ":%s %s [0:0]\n", bi, pol)
		}
		for _, u := range users {
			fmt.Fprintf(&b, ":%s - [0:0]\n", u)
		}
		for _, ch := range chains {
			for _, r := range skel[ch] {
				b.WriteString(genRule(t, ts.name, ch, reach[ch], r))
				b.WriteByte('\n')
			}
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

func not(t *rapid.T, label string) string {
	if rapid.IntRange(0, 4).Draw(t, label) == 0 {
		return "! "
	}
	return ""
}

// genRule draws one rule of chain ch of table, reached from hooks reach.
func genRule(t *rapid.T, table, ch string, reach hookSet, r ruleSkel) string {
	builtin := builtinHooks[ch] != 0
	parts := []string{"-A", ch}
	if rapid.IntRange(0, 3).Draw(t, "has-src") == 0 {
		parts = append(parts, not(t, "src-not")+"-s", rapid.SampledFrom(prefixes4).Draw(t, "src"))
	}
	if rapid.IntRange(0, 3).Draw(t, "has-dst") == 0 {
		parts = append(parts, not(t, "dst-not")+"-d", rapid.SampledFrom(prefixes4).Draw(t, "dst"))
	}
	// iptables refuses -i in OUTPUT/POSTROUTING and -o in
	// PREROUTING/INPUT, but only by chain name: user chains may say either.
	if (!builtin || reach&localOut == 0) && rapid.IntRange(0, 4).Draw(t, "has-in") == 0 {
		parts = append(parts, not(t, "in-not")+"-i", rapid.SampledFrom(ifaces).Draw(t, "in"))
	}
	if (!builtin || reach&(hPre|hIn) == 0) && rapid.IntRange(0, 4).Draw(t, "has-out") == 0 {
		parts = append(parts, not(t, "out-not")+"-o", rapid.SampledFrom(ifaces).Draw(t, "out"))
	}
	proto := ""
	if r.kind == "REJECT" && rapid.Bool().Draw(t, "reset") {
		proto = "tcp"
	} else {
		proto = rapid.SampledFrom([]string{"", "", "tcp", "udp", "icmp"}).Draw(t, "proto")
	}
	if proto != "" {
		parts = append(parts, "-p", proto)
	}
	switch proto {
	case "tcp", "udp":
		if rapid.IntRange(0, 2).Draw(t, "has-dport") == 0 {
			parts = append(parts, not(t, "dport-not")+"--dport", rapid.SampledFrom(portRanges).Draw(t, "dport"))
		}
		if rapid.IntRange(0, 4).Draw(t, "has-sport") == 0 {
			// "! --sport P ! --dport Q" exercises iptables-nft's combined
			// compare, which packetwalk reproduces (TestKernelInvertedPortPair).
			snot := not(t, "sport-not")
			parts = append(parts, snot+"--sport", rapid.SampledFrom(portRanges).Draw(t, "sport"))
		}
		if proto == "tcp" && rapid.IntRange(0, 3).Draw(t, "has-flags") == 0 {
			parts = append(parts, not(t, "flags-not")+"--tcp-flags", rapid.SampledFrom(tcpFlagSel).Draw(t, "flags"))
		}
		if rapid.IntRange(0, 4).Draw(t, "has-multiport") == 0 {
			opt := rapid.SampledFrom([]string{"--dports", "--sports", "--ports"}).Draw(t, "mp-opt")
			list := rapid.SampledFrom([]string{"22,80,443", "53", "8000:9000,80", "30000:40000", "1:79,81:65535"}).Draw(t, "mp-list")
			parts = append(parts, "-m", "multiport", not(t, "mp-not")+opt, list)
		}
	case "icmp":
		if rapid.Bool().Draw(t, "has-icmp-type") {
			parts = append(parts, not(t, "icmp-not")+"--icmp-type", rapid.SampledFrom([]string{"8", "0", "echo-request", "3"}).Draw(t, "icmp-type"))
		}
	}
	if rapid.IntRange(0, 4).Draw(t, "has-mark") == 0 {
		parts = append(parts, "-m", "mark", not(t, "mark-not")+"--mark", rapid.SampledFrom(marks).Draw(t, "mark"))
	}
	if reach&localOut == 0 && rapid.IntRange(0, 3).Draw(t, "has-ct") == 0 {
		st := rapid.SampledFrom([]string{"NEW", "ESTABLISHED", "INVALID", "NEW,ESTABLISHED", "RELATED,ESTABLISHED", "UNTRACKED"}).Draw(t, "ctstate")
		parts = append(parts, "-m", "conntrack", not(t, "ct-not")+"--ctstate", st)
	}
	if rapid.IntRange(0, 5).Draw(t, "has-addrtype") == 0 {
		parts = append(parts, "-m", "addrtype", not(t, "at-not")+"--dst-type", rapid.SampledFrom([]string{"LOCAL", "UNICAST"}).Draw(t, "dst-type"))
		// --limit-iface-in is refused by the kernel outside
		// PREROUTING/INPUT/FORWARD.
		if reach != 0 && reach&localOut == 0 && rapid.Bool().Draw(t, "limit-in") {
			parts = append(parts, "--limit-iface-in")
		}
	}
	if rapid.IntRange(0, 6).Draw(t, "has-nth") == 0 {
		every := rapid.IntRange(2, 3).Draw(t, "every")
		parts = append(parts, "-m", "statistic", "--mode", "nth", "--every", fmt.Sprint(every),
			"--packet", fmt.Sprint(rapid.IntRange(0, every-1).Draw(t, "packet")))
	}
	if rapid.IntRange(0, 6).Draw(t, "has-comment") == 0 {
		parts = append(parts, "-m", "comment", "--comment", rapid.SampledFrom([]string{"x", `"two words"`, "kube-svc"}).Draw(t, "comment"))
	}
	switch r.kind {
	case "ACCEPT", "DROP", "RETURN":
		parts = append(parts, "-j", r.kind)
	case "JUMP":
		parts = append(parts, "-j", r.target)
	case "GOTO":
		parts = append(parts, "-g", r.target)
	case "MARK":
		op := rapid.SampledFrom([]string{"--set-xmark", "--or-mark", "--set-mark", "--and-mark"}).Draw(t, "mark-op")
		v := map[string][]string{
			"--set-xmark": {"0x1/0xff", "0x2/0x2", "0x4/0x0", "0x3/0xffffffff"},
			"--set-mark":  {"0x1", "0x2/0x3"},
			"--or-mark":   {"0x1", "0x2", "0x4"},
			"--and-mark":  {"0x6", "0xfe"},
		}[op]
		parts = append(parts, "-j", "MARK", op, rapid.SampledFrom(v).Draw(t, "mark-val"))
	case "REJECT":
		// REJECT in chains reached from OUTPUT would answer the node
		// itself over loopback, a path the lab does not observe.
		if reach&^(hIn|hFwd) != 0 {
			parts = append(parts, "-j", "DROP")
			break
		}
		parts = append(parts, "-j", "REJECT")
		if proto == "tcp" {
			parts = append(parts, "--reject-with", "tcp-reset")
		} else if rapid.Bool().Draw(t, "explicit-icmp") {
			parts = append(parts, "--reject-with", rapid.SampledFrom([]string{"icmp-port-unreachable", "icmp-host-unreachable", "icmp-admin-prohibited"}).Draw(t, "reject-with"))
		}
	}
	return strings.Join(parts, " ")
}

var tcpFlagChoices = []string{"SYN", "SYN", "SYN,ACK", "ACK", "PSH,ACK", "FIN,ACK", "RST", "RST,ACK", ""}

// genPackets draws 1-3 packets; a later packet may answer or repeat an
// earlier one so that conntrack sees replies (ESTABLISHED).
func genPackets(t *rapid.T) []genPacket {
	n := rapid.IntRange(1, 3).Draw(t, "npackets")
	var out []genPacket
	for i := range n {
		if i > 0 && rapid.IntRange(0, 2).Draw(t, "follow") == 0 {
			prev := out[rapid.IntRange(0, i-1).Draw(t, "prev")]
			if q, ok := followUp(t, prev); ok {
				out = append(out, q)
				continue
			}
		}
		out = append(out, genFresh(t))
	}
	assignSeqs(out)
	return out
}

type endpoint struct {
	addr netip.Addr
	port uint16
}

// assignSeqs numbers the TCP segments of a case like real endpoints
// would: each side starts at its own initial sequence number, advances by
// payload, SYN and FIN, and acknowledges what the other side sent.
func assignSeqs(ps []genPacket) {
	next := map[[2]endpoint]uint32{}
	synEnd := map[[2]endpoint]uint32{} // the SYN's sequence + 1, per direction
	for i := range ps {
		p := &ps[i]
		if p.Proto != "tcp" {
			continue
		}
		me, peer := endpoint{p.Src, p.SPort}, endpoint{p.Dst, p.DPort}
		seq, ok := next[[2]endpoint{me, peer}]
		if !ok {
			seq = 1000
			if _, peerStarted := next[[2]endpoint{peer, me}]; peerStarted {
				seq = 5000
			}
		}
		p.Seq = seq
		if strings.Contains(p.Flags, "ACK") {
			p.Ack = next[[2]endpoint{peer, me}]
			if _, spoke := next[[2]endpoint{me, peer}]; !spoke && strings.Contains(p.Flags, "RST") {
				// A reset answering a connection attempt acknowledges its
				// SYN only, as a real stack does; the kernel checks that
				// ack in SYN_SENT, which packetwalk's conntrack does not
				// model (it tracks no TCP windows).
				if end, ok := synEnd[[2]endpoint{peer, me}]; ok {
					p.Ack = end
				}
			}
		}
		if strings.Contains(p.Flags, "SYN") && !strings.Contains(p.Flags, "ACK") {
			synEnd[[2]endpoint{me, peer}] = seq + 1
		}
		adv := uint32(p.PayloadLen)
		if strings.Contains(p.Flags, "SYN") {
			adv++
		}
		if strings.Contains(p.Flags, "FIN") {
			adv++
		}
		// Before the peer has answered, the kernel takes nothing but the
		// first segment of a side into its window (a second segment in
		// SYN_SENT is INVALID and ignored), so later ones do not move
		// what the peer acknowledges; packetwalk tracks no windows.
		_, peerSpoke := next[[2]endpoint{peer, me}]
		if !ok || peerSpoke {
			next[[2]endpoint{me, peer}] = seq + adv
		}
	}
}

func genFresh(t *rapid.T) genPacket {
	p := genPacket{From: Origin(rapid.SampledFrom([]int{0, 0, 0, 1, 1, 2}).Draw(t, "from"))}
	switch p.From {
	case FromClient:
		p.Src = clientIP
		p.Dst = rapid.SampledFrom([]netip.Addr{serverIP, serverIP, nodeEth0, nodeEth1}).Draw(t, "dst")
	case FromServer:
		p.Src = serverIP
		p.Dst = rapid.SampledFrom([]netip.Addr{clientIP, clientIP, nodeEth1, nodeEth0}).Draw(t, "dst")
	case FromNode:
		p.Src = rapid.SampledFrom([]netip.Addr{nodeEth0, nodeEth1}).Draw(t, "src")
		p.Dst = rapid.SampledFrom([]netip.Addr{serverIP, clientIP}).Draw(t, "dst")
	}
	p.Proto = rapid.SampledFrom([]string{"tcp", "tcp", "udp", "icmp"}).Draw(t, "pproto")
	switch p.Proto {
	case "tcp", "udp":
		p.SPort = rapid.SampledFrom(ports).Draw(t, "sport")
		p.DPort = rapid.SampledFrom(ports).Draw(t, "dport")
		if p.Proto == "tcp" {
			p.Flags = rapid.SampledFrom(tcpFlagChoices).Draw(t, "tflags")
		}
	case "icmp":
		p.ICMPType = rapid.SampledFrom([]uint8{8, 8, 0}).Draw(t, "itype")
		p.SPort = uint16(rapid.IntRange(1, 3).Draw(t, "icmp-id")) // echo id
	}
	p.PayloadLen = rapid.SampledFrom([]int{0, 0, 4, 17, 100}).Draw(t, "payload")
	return p
}

// followUp answers prev from the other end (a reply in conntrack's eyes) or
// repeats its tuple with other flags.
func followUp(t *rapid.T, prev genPacket) (genPacket, bool) {
	q := prev
	if rapid.Bool().Draw(t, "reply") {
		switch {
		case prev.From == FromClient && prev.Dst == serverIP:
			q.From = FromServer
		case prev.From == FromServer && prev.Dst == clientIP:
			q.From = FromClient
		default:
			return q, false
		}
		q.Src, q.Dst, q.SPort, q.DPort = prev.Dst, prev.Src, prev.DPort, prev.SPort
		switch prev.Proto {
		case "tcp":
			q.Flags = rapid.SampledFrom([]string{"SYN,ACK", "ACK", "RST,ACK"}).Draw(t, "reply-flags")
		case "icmp":
			q.ICMPType = 0
			if prev.ICMPType == 0 {
				q.ICMPType = 8
			}
		}
		return q, true
	}
	if prev.Proto == "tcp" {
		q.Flags = rapid.SampledFrom([]string{"ACK", "PSH,ACK", "FIN,ACK", "SYN"}).Draw(t, "repeat-flags")
	}
	return q, true
}

var caseGen = rapid.Custom(func(t *rapid.T) genCase {
	return genCase{Rules: genRuleset(t), Packets: genPackets(t)}
})

// TestGeneratedRulesetsLoad keeps the generator within what packetwalk
// models: every ruleset it draws must load, and every packet must build.
func TestGeneratedRulesetsLoad(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := caseGen.Draw(t, "case")
		h := newSimHost()
		if err := h.Restore(netfilter.IPv4, []byte(c.Rules), netfilter.RestoreOptions{}); err != nil {
			t.Fatalf("%v\n%s", err, c)
		}
		for _, p := range c.Packets {
			if _, err := kerneltest.BuildPacket(p.frameSpec()); err != nil {
				t.Fatalf("%v\n%s", err, c)
			}
			simRun(h, p)
		}
	})
}
