package difftest

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// Lab addresses (docs/kernel-notes.md, "Lab topology").
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
	// consistent across a case's packets by assignSeqs and then, for some
	// segments, pushed out of the window by perturbSeqs: conntrack's window
	// tracking marks those INVALID or ignores them.
	Seq, Ack uint32
	// Window is the TCP window field; 0 means 64240 (the frame default)
	// unless ZeroWindow.
	Window     uint16
	ZeroWindow bool
	// TCP options: window scale, SACK permitted, and one SACK block ending
	// at SACKEnd.
	WScale    uint8
	HasWScale bool
	SACKPerm  bool
	SACKEnd   uint32
	HasSACK   bool
	// Perturb names what perturbSeqs did to the segment, for transcripts.
	Perturb string
}

func (p genPacket) String() string {
	s := fmt.Sprintf("from %s: %s %s", p.From, p.Proto, p.Src)
	if p.Proto != "icmp" {
		s += fmt.Sprintf(":%d", p.SPort)
	}
	s += fmt.Sprintf(" > %s", p.Dst)
	switch p.Proto {
	case "tcp":
		s += fmt.Sprintf(":%d [%s] seq=%d ack=%d win=%d", p.DPort, p.Flags, p.Seq, p.Ack, p.Window)
		if p.HasWScale {
			s += fmt.Sprintf(" wscale=%d", p.WScale)
		}
		if p.SACKPerm {
			s += " sackperm"
		}
		if p.HasSACK {
			s += fmt.Sprintf(" sack=%d", p.SACKEnd)
		}
		if p.Perturb != "" {
			s += " (" + p.Perturb + ")"
		}
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
	// NewHost, when set, builds the simulated node instead of newSimHost,
	// for labs whose node has more interfaces or addresses.
	NewHost func() *netfilter.Host
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
	perturbSeqs(t, out)
	return out
}

// perturbSeqs moves some TCP segments out of the window the other packets
// keep to (old retransmissions, data far ahead, acks of unsent data, resets
// off the expected sequence number), draws windows and window scales, and
// adds SACK options, so that the window tracking is compared too.
func perturbSeqs(t *rapid.T, ps []genPacket) {
	for i := range ps {
		p := &ps[i]
		if p.Proto != "tcp" {
			continue
		}
		hasAck := strings.Contains(p.Flags, "ACK")
		if strings.Contains(p.Flags, "SYN") && rapid.IntRange(0, 2).Draw(t, "syn-opts") == 0 {
			p.HasWScale = rapid.Bool().Draw(t, "has-wscale")
			if p.HasWScale {
				p.WScale = uint8(rapid.SampledFrom([]int{0, 2, 7, 14, 15}).Draw(t, "wscale"))
			}
			p.SACKPerm = rapid.Bool().Draw(t, "sack-perm")
		}
		p.Window = rapid.SampledFrom([]uint16{0, 0, 0, 1000, 100, 65535}).Draw(t, "window")
		if hasAck && rapid.IntRange(0, 5).Draw(t, "has-sack") == 0 {
			p.HasSACK = true
			p.SACKEnd = p.Ack + rapid.SampledFrom([]uint32{0, 17, 100, 1 << 20}).Draw(t, "sack-delta")
		}
		if rapid.IntRange(0, 3).Draw(t, "perturb") != 0 {
			continue
		}
		kinds := []string{"old", "ahead", "near", "edge"}
		if hasAck {
			kinds = append(kinds, "ack-ahead", "ack-old", "ack-zero")
		}
		if strings.Contains(p.Flags, "RST") {
			kinds = append(kinds, "rst-off", "rst-back", "rst-zero")
		}
		p.Perturb = rapid.SampledFrom(kinds).Draw(t, "perturb-kind")
		switch p.Perturb {
		case "old":
			p.Seq -= 100000
		case "ahead":
			p.Seq += 1 << 30
		case "near":
			p.Seq += 70000
		case "edge":
			p.Seq += 64240
		case "ack-ahead":
			p.Ack += rapid.SampledFrom([]uint32{1, 1000, 1 << 30}).Draw(t, "ack-ahead-by")
		case "ack-old":
			p.Ack -= rapid.SampledFrom([]uint32{1, 70000}).Draw(t, "ack-old-by")
		case "ack-zero":
			p.Ack = 0
		case "rst-off":
			p.Seq += 50
		case "rst-back":
			p.Seq -= 10
		case "rst-zero":
			p.Seq = 0
		}
	}
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
				// SYN only, as a real stack does (conntrack checks that
				// ack in SYN_SENT).
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
		// Before the peer has answered, conntrack takes nothing but the
		// first segment of a side into its window (a second segment in
		// SYN_SENT is INVALID and ignored), so later ones do not move
		// what the peer acknowledges.
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

// windowCase is a scripted TCP exchange through the node, whose FORWARD
// chain drops what conntrack marks INVALID; fwd says which packets the
// kernel forwards.
type windowCase struct {
	name string
	pkts []genPacket
	fwd  []bool
}

// seg builds a TCP segment of the client (c) or the server (s) side of
// the window cases.
func seg(from Origin, flags string, seq, ack uint32, payload int) genPacket {
	p := genPacket{From: from, Proto: "tcp", Src: clientIP, Dst: serverIP, SPort: 40000, DPort: 80, Flags: flags, Seq: seq, Ack: ack, PayloadLen: payload}
	if from == FromServer {
		p.Src, p.Dst, p.SPort, p.DPort = serverIP, clientIP, 80, 40000
	}
	return p
}

func windowCases() []windowCase {
	const c, s = FromClient, FromServer
	const ci, si = 1_000_000, 5_000_000 // initial sequence numbers
	hs := []genPacket{seg(c, "SYN", ci, 0, 0), seg(s, "SYN,ACK", si, ci+1, 0), seg(c, "ACK", ci+1, si+1, 0)}
	with := func(ps ...genPacket) []genPacket { return append(slices.Clone(hs), ps...) }
	t3 := []bool{true, true, true}
	fw := func(bs ...bool) []bool { return append(slices.Clone(t3), bs...) }
	scaled := func(cs, ss int) []genPacket {
		a, b := seg(c, "SYN", ci, 0, 0), seg(s, "SYN,ACK", si, ci+1, 0)
		if cs >= 0 {
			a.HasWScale, a.WScale = true, uint8(cs)
		}
		if ss >= 0 {
			b.HasWScale, b.WScale = true, uint8(ss)
		}
		d := seg(c, "ACK", ci+1, si+1, 0)
		d.Window = 1000
		e := seg(s, "ACK", si+1, ci+1, 0)
		e.Window = 1000
		return []genPacket{a, b, d, e}
	}
	sackPerm := func() []genPacket {
		a, b := seg(c, "SYN", ci, 0, 0), seg(s, "SYN,ACK", si, ci+1, 0)
		a.SACKPerm, b.SACKPerm = true, true
		return []genPacket{a, b, seg(c, "ACK", ci+1, si+1, 0), seg(c, "PSH,ACK", ci+1, si+1, 100)}
	}
	sack := func(p genPacket, end uint32) genPacket { p.HasSACK, p.SACKEnd = true, end; return p }
	zero := func(p genPacket) genPacket { p.ZeroWindow = true; return p }
	return []windowCase{
		{"in window", with(seg(c, "PSH,ACK", ci+1, si+1, 100), seg(s, "ACK", si+1, ci+101, 0)), fw(true, true)},
		{"seq far ahead", with(seg(c, "PSH,ACK", ci+1+1<<30, si+1, 10), seg(c, "PSH,ACK", ci+1, si+1, 10)), fw(false, true)},
		{"seq just past the window", with(seg(c, "ACK", ci+1+64240+70000, si+1, 0)), fw(false)},
		{"seq at the window's edge", with(seg(c, "ACK", ci+1+64240, si+1, 0)), fw(true)},
		{"ack of unsent data", with(seg(c, "ACK", ci+1, si+2, 0)), fw(false)},
		{"old ack is ignored", with(seg(c, "ACK", ci+1, si+1-70000, 0)), fw(true)},
		{"old retransmission is ignored", with(seg(c, "PSH,ACK", ci+1, si+1, 100), seg(s, "ACK", si+1, ci+101, 0),
			seg(c, "PSH,ACK", ci+101-64240-100, si+1, 10)), fw(true, true, true)},
		{"RST out of window", with(seg(s, "ACK", si+1, ci+1, 0), seg(c, "RST", ci+1+1<<20, 0, 0), seg(c, "ACK", ci+1, si+1, 0)),
			fw(true, false, true)},
		{"RST below the acknowledged seq", with(seg(s, "ACK", si+1, ci+1, 0), seg(c, "RST", ci-10, 0, 0)), fw(true, false)},
		{"RST in window, not exact, keeps the connection", with(seg(s, "ACK", si+1, ci+1, 0), seg(c, "RST", ci+51, 0, 0),
			seg(c, "ACK", ci+1, si+1, 0)), fw(true, true, true)},
		{"RST in window, not exact, gets the close timeout", with(seg(s, "ACK", si+1, ci+1, 0), seg(c, "RST", ci+51, 0, 0)),
			fw(true, true)},
		{"out-of-window FIN then RST shorten the timeout", with(seg(s, "ACK", si+1, ci+1, 0), seg(c, "FIN,ACK", ci+1+1<<30, si+1, 0),
			seg(s, "RST", si+1+1<<30, 0, 0)), fw(true, false, false)},
		{"SYN/ACK answering an ignored SYN resynchronises", with(seg(c, "SYN", 7_000_000, 0, 0), seg(s, "SYN,ACK", 9_000_000, 7_000_001, 0),
			seg(c, "ACK", 7_000_001, 9_000_001, 0), seg(c, "PSH,ACK", 7_000_001, 9_000_001, 10)), fw(true, true, true, true)},
		{"RST exact closes", with(seg(s, "ACK", si+1, ci+1, 0), seg(c, "RST", ci+1, 0, 0), seg(s, "ACK", si+1, ci+1, 0)),
			fw(true, true, true)},
		{"SYN/ACK with a wrong ack", []genPacket{seg(c, "SYN", ci, 0, 0), seg(s, "SYN,ACK", si, ci+7, 0), seg(s, "SYN,ACK", si, ci+1, 0)},
			[]bool{true, false, true}},
		{"RST,ACK answering a SYN", []genPacket{seg(c, "SYN", ci, 0, 0), seg(s, "RST,ACK", 0, ci+1, 0), seg(c, "ACK", ci+1, 1, 0)},
			[]bool{true, true, true}},
		{"RST,ACK with a wrong ack in SYN_SENT", []genPacket{seg(c, "SYN", ci, 0, 0), seg(s, "RST,ACK", 0, ci+9, 0)},
			[]bool{true, false}},
		{"scaled window", append(scaled(7, 7), seg(c, "ACK", ci+1+120000, si+1, 0)), []bool{true, true, true, true, true}},
		{"scale on one SYN only", append(scaled(7, -1), seg(c, "ACK", ci+1+140000, si+1, 0)), []bool{true, true, true, true, false}},
		{"scale 15 is 14", append(scaled(15, 15), seg(c, "ACK", ci+1+(1000<<14)-10, si+1, 0)), []bool{true, true, true, true, true}},
		{"SACK within data seen", append(sackPerm(), sack(seg(s, "ACK", si+1, ci+1, 0), ci+101)), []bool{true, true, true, true, true}},
		{"SACK beyond data seen", append(sackPerm(), sack(seg(s, "ACK", si+1, ci+1, 0), ci+500)), []bool{true, true, true, true, false}},
		{"SACK without SACK_PERM", with(sack(seg(s, "ACK", si+1, ci+1, 0), ci+500)), fw(true)},
		{"mid-stream pickup is liberal", []genPacket{seg(c, "ACK", 123456, 777, 0), seg(s, "ACK", 9, 1<<31, 0), seg(c, "ACK", 42, 7, 0)},
			[]bool{true, true, true}},
		{"retransmitted ACKs", with(seg(c, "ACK", ci+1, si+1, 0), seg(c, "ACK", ci+1, si+1, 0), seg(c, "ACK", ci+1, si+1, 0)),
			fw(true, true, true)},
		{"zero window", with(zero(seg(s, "ACK", si+1, ci+1, 0))), fw(true)},
		{"unacknowledged data", with(seg(c, "PSH,ACK", ci+1, si+1, 100)), fw(true)},
	}
}

const windowRules = `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -m conntrack --ctstate INVALID -j DROP
COMMIT
`

// TestKernelTCPWindow sends scripted segments in and out of the window
// through the kernel and packetwalk: the same segments must be forwarded,
// and the conntrack tables must agree, timeouts included (within the
// seconds the kernel's clock ran).
func TestKernelTCPWindow(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{})
	for _, wc := range windowCases() {
		t.Run(wc.name, func(t *testing.T) {
			require.Len(t, wc.pkts, len(wc.fwd))
			require.NoError(t, lab.Reset(windowRules))
			h := newSimHost()
			require.NoError(t, h.Restore(netfilter.IPv4, []byte(windowRules), netfilter.RestoreOptions{}))
			for i, p := range wc.pkts {
				obs, _, err := kernelSend(lab, p)
				require.NoError(t, err)
				kf, so := kernelFrames(obs), simRun(h, p)
				assert.Equal(t, kf, so.Frames, "packet %d %s", i+1, p)
				assert.Equal(t, wc.fwd[i], len(kf) > 0, "packet %d %s: kernel forwarded", i+1, p)
			}
			kl, err := lab.Conntrack()
			require.NoError(t, err)
			t.Logf("kernel conntrack: %q", kl)
			var sl []string
			for _, e := range h.Conntrack().Entries() {
				sl = append(sl, string(e.AppendText(nil, h.Clock().Now(), conntrack.Format{})))
			}
			assert.Equal(t, withoutTimeouts(kl), withoutTimeouts(sl), "conntrack")
			kt, st := timeoutsOf(kl), timeoutsOf(sl)
			if assert.Len(t, kt, len(st)) {
				for i := range kt {
					assert.InDelta(t, st[i], kt[i], 5, "timeout of %s", sl[i])
				}
			}
		})
	}
}

// withoutTimeouts sorts conntrack lines with the timeout field removed and
// spaces collapsed.
func withoutTimeouts(lines []string) []string {
	out := []string{}
	for _, l := range slices.Sorted(slices.Values(lines)) {
		fs := strings.Fields(l)
		if len(fs) > 3 {
			fs = append(fs[:2:2], fs[3:]...)
		}
		out = append(out, strings.Join(fs, " "))
	}
	return out
}

// timeoutsOf returns the timeout field of each line, in line order sorted
// like withoutTimeouts.
func timeoutsOf(lines []string) []float64 {
	var out []float64
	for _, l := range slices.Sorted(slices.Values(lines)) {
		fs := strings.Fields(l)
		var v float64
		if len(fs) > 2 {
			_, _ = fmt.Sscan(fs[2], &v)
		}
		out = append(out, v)
	}
	return out
}
