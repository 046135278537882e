package difftest

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/netfilter"
	"pgregory.net/rapid"
)

// serviceIP is the "ClusterIP" clients target; nothing owns it, only DNAT
// or REDIRECT make it reachable.
var serviceIP = netip.MustParseAddr("10.96.0.10")

// flowStep is one packet of a flow, sent by the initiator or the
// responder. The responder's addresses are known only at run time: they
// are those of the initiator's first packet as it reached the responder,
// reversed (see runFlow).
type flowStep struct {
	Resp       bool
	Flags      string // TCP
	PayloadLen int
	// ICMPType is the echo type for echo flows; for ICMPError the type and
	// code of an error about the flow's first packet as the responder got
	// it.
	ICMPType, ICMPCode uint8
	ICMPError          bool
	// SeqDelta and AckDelta move a TCP segment off the sequence and
	// acknowledgement numbers the flow keeps to (perturbFlow); such a
	// segment counts as lost: it does not advance its side's sequence, so
	// the peer never acknowledges it.
	SeqDelta, AckDelta uint32
}

// genFlow is a connection: its first packet's tuple and its steps.
type genFlow struct {
	From  Origin // FromClient or FromServer
	Proto string // tcp, udp, icmp
	Dst   netip.Addr
	SPort uint16 // the echo identifier for icmp
	DPort uint16
	Name  string // which template the steps come from
	Steps []flowStep
}

func (f genFlow) String() string {
	src := clientIP
	if f.From == FromServer {
		src = serverIP
	}
	var steps []string
	for _, s := range f.Steps {
		who := "i"
		if s.Resp {
			who = "r"
		}
		switch {
		case s.ICMPError:
			steps = append(steps, fmt.Sprintf("%s:icmp-err %d/%d", who, s.ICMPType, s.ICMPCode))
		case f.Proto == "tcp":
			step := fmt.Sprintf("%s:[%s]+%d", who, s.Flags, s.PayloadLen)
			if s.SeqDelta != 0 {
				step += fmt.Sprintf(" seq%+d", int32(s.SeqDelta))
			}
			if s.AckDelta != 0 {
				step += fmt.Sprintf(" ack%+d", int32(s.AckDelta))
			}
			steps = append(steps, step)
		case f.Proto == "icmp":
			steps = append(steps, fmt.Sprintf("%s:type %d", who, s.ICMPType))
		default:
			steps = append(steps, fmt.Sprintf("%s:+%d", who, s.PayloadLen))
		}
	}
	return fmt.Sprintf("%s %s from %s %s:%d > %s:%d: %s", f.Name, f.Proto, f.From, src, f.SPort, f.Dst, f.DPort, strings.Join(steps, ", "))
}

// natCase is a ruleset over raw/mangle/filter/nat and the flows sent
// through it one after the other, without flushing conntrack in between.
type natCase struct {
	Rules string
	Flows []genFlow
}

func (c natCase) String() string { return flowCaseText(c.Rules, c.Flows) }

// flowCaseText prints a case of flows: the ruleset, then the flows
// numbered from 1.
func flowCaseText[F fmt.Stringer](rules string, flows []F) string {
	var b strings.Builder
	b.WriteString("ruleset:\n")
	b.WriteString(rules)
	b.WriteString("flows:\n")
	for i, f := range flows {
		fmt.Fprintf(&b, "  %d. %s\n", i+1, f)
	}
	return b.String()
}

// NAT rule vocabulary. SNAT keeps to single addresses or address ranges
// without ports: an SNAT that must change the source port draws it at
// random in the kernel (get_random_u16), which cannot be reproduced.
var (
	dnatTargets = []string{"10.244.1.5", "10.244.1.5:8080", "10.244.1.5:80", "10.244.1.5:8080-8081"}
	snatTargets = []string{"10.244.1.1", "192.168.10.1", "10.244.1.100-10.244.1.103", "192.168.10.50-192.168.10.57", "172.16.0.1-172.16.0.255"}
	natCtStates = []string{"DNAT", "SNAT", "NEW", "ESTABLISHED", "RELATED", "NEW,DNAT", "RELATED,ESTABLISHED", "DNAT,SNAT"}
)

// genNATTable draws the nat table: service DNATs (some through user
// chains, kube-proxy style), REDIRECTs on the node, a masquerade mark and
// SNAT/MASQUERADE in POSTROUTING.
func genNATTable(t *rapid.T) string {
	var b strings.Builder
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	nUser := rapid.IntRange(0, 3).Draw(t, "nat-users")
	var users []string
	for i := range nUser {
		users = append(users, fmt.Sprintf("N-C%d", i+1))
		fmt.Fprintf(&b, ":N-C%d - [0:0]\n", i+1)
	}
	// Users chains are reached from PREROUTING only: DNAT is allowed
	// there, and N-Ci jumps only to later ones.
	rules := map[string][]string{}
	chains := append([]string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}, users...)
	for ci, ch := range chains {
		var callable []string
		switch {
		case ci >= 4:
			callable = users[ci-4+1:]
		case ch == "PREROUTING":
			callable = users
		}
		n := rapid.IntRange(0, 4).Draw(t, ch+"-nat-n")
		if ch == "PREROUTING" || ch == "POSTROUTING" {
			n++
		}
		for range n {
			rules[ch] = append(rules[ch], genNATRule(t, ch, callable))
		}
	}
	for _, ch := range chains {
		for _, r := range rules[ch] {
			b.WriteString(r)
			b.WriteByte('\n')
		}
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

func genNATRule(t *rapid.T, ch string, callable []string) string {
	pre := ch == "PREROUTING" || strings.HasPrefix(ch, "N-")
	parts := []string{"-A", ch}
	var kinds []string
	switch {
	case pre:
		kinds = []string{"DNAT", "DNAT", "DNAT", "REDIRECT", "MARK", "ACCEPT", "RETURN", "NONE"}
		if len(callable) > 0 {
			kinds = append(kinds, "JUMP", "JUMP")
		}
	case ch == "POSTROUTING":
		kinds = []string{"MASQ", "MASQ", "SNAT", "SNAT", "ACCEPT", "RETURN", "NONE"}
	case ch == "INPUT":
		kinds = []string{"SNAT", "ACCEPT", "NONE"}
	default: // OUTPUT: nothing of ours starts there; rules stay unmatched
		kinds = []string{"DNAT", "ACCEPT", "NONE"}
	}
	kind := rapid.SampledFrom(kinds).Draw(t, "nat-kind")
	// Selectors.
	if rapid.IntRange(0, 2).Draw(t, "nat-has-dst") == 0 || (pre && (kind == "DNAT" || kind == "MARK")) {
		dsts := []string{"10.96.0.10/32", "10.96.0.0/16", "192.168.10.1/32", "10.244.1.5/32", "192.168.10.2/32"}
		if pre && (kind == "DNAT" || kind == "MARK") {
			dsts = []string{"10.96.0.10/32", "10.96.0.10/32", "10.96.0.0/16"}
		}
		if pre && kind == "REDIRECT" {
			dsts = []string{"192.168.10.1/32", "10.96.0.10/32"}
		}
		parts = append(parts, notRare(t, "nat-dst-not", !pre || kind == "NONE")+"-d", rapid.SampledFrom(dsts).Draw(t, "nat-dst"))
	}
	if rapid.IntRange(0, 3).Draw(t, "nat-has-src") == 0 {
		parts = append(parts, notRare(t, "nat-src-not", true)+"-s", rapid.SampledFrom([]string{"192.168.10.2/32", "10.244.1.0/24", "10.244.1.5/32", "192.168.0.0/16"}).Draw(t, "nat-src"))
	}
	switch {
	case pre && rapid.IntRange(0, 3).Draw(t, "nat-has-in") == 0:
		parts = append(parts, "-i", rapid.SampledFrom([]string{"eth0", "eth1", "eth+"}).Draw(t, "nat-in"))
	case ch == "POSTROUTING" && rapid.IntRange(0, 2).Draw(t, "nat-has-out") == 0:
		parts = append(parts, notRare(t, "nat-out-not", true)+"-o", rapid.SampledFrom([]string{"eth0", "eth1", "eth+"}).Draw(t, "nat-out"))
	}
	proto := rapid.SampledFrom([]string{"", "tcp", "tcp", "udp", "icmp"}).Draw(t, "nat-proto")
	if kind == "REDIRECT" || (kind == "DNAT" && rapid.Bool().Draw(t, "dnat-ports")) {
		proto = rapid.SampledFrom([]string{"tcp", "udp"}).Draw(t, "nat-proto-ports")
	}
	if proto != "" {
		parts = append(parts, "-p", proto)
		if proto != "icmp" && rapid.IntRange(0, 1).Draw(t, "nat-has-dport") == 0 {
			parts = append(parts, "--dport", rapid.SampledFrom([]string{"80", "53", "8080", "80:90"}).Draw(t, "nat-dport"))
		}
	}
	if rapid.IntRange(0, 4).Draw(t, "nat-has-mark") == 0 {
		parts = append(parts, "-m", "mark", notRare(t, "nat-mark-not", true)+"--mark", rapid.SampledFrom([]string{"0x4000/0x4000", "0x1/0x1", "0x0/0x4000"}).Draw(t, "nat-mark"))
	}
	if rapid.IntRange(0, 3).Draw(t, "nat-has-ct") == 0 {
		parts = append(parts, "-m", "conntrack", notRare(t, "nat-ct-not", true)+"--ctstate", rapid.SampledFrom(natCtStates).Draw(t, "nat-ctstate"))
	}
	switch kind {
	case "DNAT":
		to := rapid.SampledFrom(dnatTargets).Draw(t, "dnat-to")
		if proto == "" || proto == "icmp" {
			to = "10.244.1.5"
		}
		parts = append(parts, "-j", "DNAT", "--to-destination", to)
	case "REDIRECT":
		parts = append(parts, "-j", "REDIRECT")
		if rapid.Bool().Draw(t, "redir-ports") {
			parts = append(parts, "--to-ports", rapid.SampledFrom([]string{"8080", "5353", "8080-8081"}).Draw(t, "redir-to"))
		}
	case "MASQ":
		parts = append(parts, "-j", "MASQUERADE")
	case "SNAT":
		to := rapid.SampledFrom(snatTargets).Draw(t, "snat-to")
		if ch == "INPUT" {
			to = rapid.SampledFrom([]string{"192.168.10.50", "10.244.1.100-10.244.1.103"}).Draw(t, "snat-in-to")
		}
		parts = append(parts, "-j", "SNAT", "--to-source", to)
	case "MARK":
		parts = append(parts, "-j", "MARK", "--set-xmark", "0x4000/0x4000")
	case "ACCEPT", "RETURN":
		parts = append(parts, "-j", kind)
	case "JUMP":
		parts = append(parts, "-j", rapid.SampledFrom(callable).Draw(t, "nat-jump"))
	}
	return strings.Join(parts, " ")
}

func notRare(t *rapid.T, label string, allowed bool) string {
	if allowed && rapid.IntRange(0, 5).Draw(t, label) == 0 {
		return "! "
	}
	return ""
}

// genFlowsFor draws 1-3 flows with distinct initiator ports (and echo
// identifiers): two connections never compete for one NAT tuple, so the
// kernel never has to draw a random source port.
func genFlowsFor(t *rapid.T) []genFlow {
	n := rapid.IntRange(1, 3).Draw(t, "nflows")
	sports := []uint16{40000, 40001, 30000, 33333}
	var out []genFlow
	for i := range n {
		out = append(out, genOneFlow(t, sports[i]))
	}
	return out
}

func genOneFlow(t *rapid.T, sport uint16) genFlow {
	f := genFlow{SPort: sport}
	type where struct {
		from Origin
		dst  netip.Addr
	}
	w := rapid.SampledFrom([]where{
		{FromClient, serviceIP}, {FromClient, serviceIP}, {FromClient, serviceIP}, {FromClient, serverIP},
		{FromClient, nodeEth0}, {FromServer, serviceIP}, {FromServer, clientIP}, {FromServer, clientIP},
	}).Draw(t, "flow-where")
	f.From, f.Dst = w.from, w.dst
	f.Proto = rapid.SampledFrom([]string{"tcp", "tcp", "tcp", "udp", "udp", "icmp"}).Draw(t, "flow-proto")
	switch f.Proto {
	case "tcp":
		f.DPort = rapid.SampledFrom([]uint16{80, 80, 8080, 443}).Draw(t, "flow-dport")
	case "udp":
		f.DPort = rapid.SampledFrom([]uint16{53, 53, 5353}).Draw(t, "flow-dport")
	case "icmp":
		f.SPort = sport%7 + 1 // echo id, distinct per flow
	}
	i := func(flags string, payload int) flowStep { return flowStep{Flags: flags, PayloadLen: payload} }
	r := func(flags string, payload int) flowStep {
		return flowStep{Resp: true, Flags: flags, PayloadLen: payload}
	}
	icmpErr := func() flowStep {
		code := rapid.SampledFrom([]uint8{3, 3, 1, 13}).Draw(t, "err-code")
		return flowStep{Resp: true, ICMPError: true, ICMPType: 3, ICMPCode: code}
	}
	switch f.Proto {
	case "tcp":
		hs := []flowStep{i("SYN", 0), r("SYN,ACK", 0), i("ACK", 0)}
		data := []flowStep{i("PSH,ACK", 17), r("ACK", 0), r("PSH,ACK", 100), i("ACK", 0)}
		f.Name = rapid.SampledFrom([]string{"handshake", "fin", "fin", "rst", "rst-resp", "refused", "syn-only", "icmp-error", "resp-fin"}).Draw(t, "tcp-template")
		switch f.Name {
		case "handshake":
			f.Steps = append(hs, data...)
		case "fin":
			f.Steps = append(append(hs, data...), i("FIN,ACK", 0), r("FIN,ACK", 0), i("ACK", 0))
		case "resp-fin":
			f.Steps = append(hs, r("FIN,ACK", 0), i("ACK", 0), i("FIN,ACK", 0), r("ACK", 0))
		case "rst":
			f.Steps = append(append(hs, data[:2]...), i("RST", 0))
		case "rst-resp":
			f.Steps = append(hs, r("RST", 0))
		case "refused":
			f.Steps = []flowStep{i("SYN", 0), r("RST,ACK", 0)}
		case "syn-only":
			f.Steps = []flowStep{i("SYN", 0), i("SYN", 0)}
		case "icmp-error":
			f.Steps = []flowStep{i("SYN", 0), icmpErr()}
		}
	case "udp":
		f.Name = rapid.SampledFrom([]string{"req-resp", "req-resp", "req-only", "icmp-error"}).Draw(t, "udp-template")
		switch f.Name {
		case "req-resp":
			f.Steps = []flowStep{i("", 10), r("", 40), i("", 10)}
		case "req-only":
			f.Steps = []flowStep{i("", 10), i("", 10)}
		case "icmp-error":
			f.Steps = []flowStep{i("", 10), icmpErr(), i("", 10)}
		}
	case "icmp":
		f.Name = "echo"
		f.Steps = []flowStep{{ICMPType: 8, PayloadLen: 8}, {Resp: true, ICMPType: 0, PayloadLen: 8}, {ICMPType: 8, PayloadLen: 8}}
	}
	// Sometimes the flow stops early.
	if len(f.Steps) > 2 && rapid.IntRange(0, 4).Draw(t, "truncate") == 0 {
		f.Steps = f.Steps[:rapid.IntRange(1, len(f.Steps)-1).Draw(t, "keep")]
	}
	if f.Proto == "tcp" {
		perturbFlow(t, f.Steps)
	}
	return f
}

// perturbFlow moves some initiator segments after the first out of the
// window: retransmissions of old data, data far ahead, acks of data not
// sent or long acknowledged, resets off the expected sequence number. Each
// kind leaves conntrack's view of the windows as it was (INVALID, or
// ignored without moving an edge), so the responder's later segments stay
// valid. An INVALID responder segment would not be un-NATed: the node
// would send it to the SNAT address, which no lab host answers ARP for,
// and seconds later answer with an ICMP host unreachable, which packetwalk
// does not model. For the same reason data just past the window (ignored,
// but its end is taken into the window) is left to TestKernelDifferential.
func perturbFlow(t *rapid.T, steps []flowStep) {
	for i := 1; i < len(steps); i++ {
		s := &steps[i]
		if s.Resp || s.ICMPError || rapid.IntRange(0, 4).Draw(t, "flow-perturb") != 0 {
			continue
		}
		kinds := []string{"old", "ahead"}
		if strings.Contains(s.Flags, "ACK") {
			kinds = append(kinds, "ack-ahead", "ack-old")
		}
		if strings.Contains(s.Flags, "RST") {
			kinds = append(kinds, "rst-off", "rst-back")
		}
		switch rapid.SampledFrom(kinds).Draw(t, "flow-perturb-kind") {
		case "old":
			s.SeqDelta = 1<<32 - 100000
		case "ahead":
			s.SeqDelta = 1 << 30
		case "ack-ahead":
			s.AckDelta = 1000
		case "ack-old":
			s.AckDelta = 1<<32 - 70000
		case "rst-off":
			s.SeqDelta = 50
		case "rst-back":
			s.SeqDelta = 1<<32 - 10
		}
	}
}

// natCaseGen draws NAT cases, REJECT included: its replies walk OUTPUT
// and POSTROUTING attached to the rejected connection
// (TestKernelNATRejectReply).
var natCaseGen = rapid.Custom(func(t *rapid.T) natCase {
	rules := genRuleset(t) + genNATTable(t)
	return natCase{Rules: rules, Flows: genFlowsFor(t)}
})

// TestGeneratedNATRulesetsLoad keeps the NAT generator within what
// packetwalk loads, and its flows within what the harness builds.
func TestGeneratedNATRulesetsLoad(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := natCaseGen.Draw(t, "case")
		h := newSimHost()
		if err := h.Restore(netfilter.IPv4, []byte(c.Rules), netfilter.RestoreOptions{}); err != nil {
			t.Fatalf("%v\n%s", err, c)
		}
		for _, f := range c.Flows {
			if len(f.Steps) == 0 || f.Steps[0].Resp {
				t.Fatalf("flow must start with the initiator: %s", f)
			}
		}
	})
}

// neighbourKnown reports whether the lab's node can deliver a packet
// packetwalk sent out: it has static neighbours for the client (eth0, also
// the default gateway) and the server (eth1) only. A frame for any other
// on-link address (an INVALID reply keeps the SNAT address it was sent to,
// as it is not un-NATed) dies when ARP fails, which packetwalk does not
// model, so the harness does not expect it.
func neighbourKnown(p netfilter.Packet) bool {
	switch p.Out {
	case "eth0":
		return p.Dst == clientIP || !netip.MustParsePrefix("192.168.10.0/24").Contains(p.Dst)
	case "eth1":
		return p.Dst == serverIP
	}
	return true
}
