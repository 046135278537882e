package main

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// labNodeRules is a kube-proxy-style node for the kerneltest lab (client
// 192.168.10.2 on eth0, pod 10.244.1.5 on eth1): a ClusterIP and a
// NodePort with one endpoint (so no statistic choice), masquerade, a
// service without endpoints rejected in filter, and host firewall rules
// that reject and drop.
const labNodeRules = `*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:KUBE-EXT-X - [0:0]
:KUBE-MARK-MASQ - [0:0]
:KUBE-NODEPORTS - [0:0]
:KUBE-POSTROUTING - [0:0]
:KUBE-SEP-A - [0:0]
:KUBE-SERVICES - [0:0]
:KUBE-SVC-X - [0:0]
-A PREROUTING -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A OUTPUT -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A POSTROUTING -m comment --comment "kubernetes postrouting rules" -j KUBE-POSTROUTING
-A KUBE-EXT-X -m comment --comment "masquerade traffic for default/web:http external destinations" -j KUBE-MARK-MASQ
-A KUBE-EXT-X -j KUBE-SVC-X
-A KUBE-MARK-MASQ -j MARK --set-xmark 0x4000/0x4000
-A KUBE-NODEPORTS -p tcp -m comment --comment "default/web:http" -m tcp --dport 30080 -j KUBE-EXT-X
-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN
-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0
-A KUBE-POSTROUTING -m comment --comment "kubernetes service traffic requiring SNAT" -j MASQUERADE --random-fully
-A KUBE-SEP-A -s 10.244.1.5/32 -m comment --comment "default/web:http" -j KUBE-MARK-MASQ
-A KUBE-SEP-A -p tcp -m comment --comment "default/web:http" -m tcp -j DNAT --to-destination 10.244.1.5:8080
-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-SVC-X
-A KUBE-SERVICES -m comment --comment "kubernetes service nodeports; NOTE: this must be the last rule in this chain" -m addrtype --dst-type LOCAL -j KUBE-NODEPORTS
-A KUBE-SVC-X ! -s 10.244.0.0/16 -d 10.96.0.10/32 -p tcp -m comment --comment "default/web:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ
-A KUBE-SVC-X -m comment --comment "default/web:http -> 10.244.1.5:8080" -j KUBE-SEP-A
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:KUBE-FIREWALL - [0:0]
:KUBE-FORWARD - [0:0]
:KUBE-SERVICES - [0:0]
-A INPUT -j KUBE-FIREWALL
-A INPUT -p tcp -m tcp --dport 23 -j REJECT --reject-with tcp-reset
-A INPUT -p udp -m udp --dport 9999 -j REJECT --reject-with icmp-port-unreachable
-A FORWARD -m comment --comment "kubernetes forwarding rules" -j KUBE-FORWARD
-A FORWARD -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A FORWARD -d 10.244.1.5/32 -p tcp -m tcp --dport 9000 -j DROP
-A OUTPUT -m conntrack --ctstate NEW -m comment --comment "kubernetes service portals" -j KUBE-SERVICES
-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP
-A KUBE-FORWARD -m conntrack --ctstate INVALID -j DROP
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding rules" -m mark --mark 0x4000/0x4000 -j ACCEPT
-A KUBE-FORWARD -m comment --comment "kubernetes forwarding conntrack rule" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
-A KUBE-SERVICES -d 10.96.0.11/32 -p tcp -m comment --comment "default/empty:http has no endpoints" -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable
COMMIT
`

// labPacket is one packet of the differential run, described twice: as a
// packetwalk PACKET argument and as the lab frame injected into the
// kernel. A reply (replyTo > 0) is built in both from what packet replyTo
// looked like when it left the node, on the side it left by.
type labPacket struct {
	spec    string
	frame   kerneltest.FrameSpec // for replyTo == 0: sent by the client
	replyTo int
	// replySeq and replyAck are the TCP sequence numbers of a reply, so
	// that conntrack's window tracking accepts it.
	replySeq, replyAck uint32
}

var (
	labClient = netip.MustParseAddr("192.168.10.2")
	labNode   = netip.MustParseAddr("192.168.10.1")
	labPod    = netip.MustParseAddr("10.244.1.5")
	labSvc    = netip.MustParseAddr("10.96.0.10")
)

// labPackets covers DNAT + masquerade both ways, a NodePort, local
// delivery, REJECT with tcp-reset and ICMP in INPUT and FORWARD, a DROP
// rule, plain forwarding of TCP and ICMP echo, and established traffic.
var labPackets = []labPacket{
	{spec: "in=eth0 src=192.168.10.2 dst=10.96.0.10 sport=40001 dport=80",
		frame: kerneltest.FrameSpec{Proto: "tcp", Src: labClient, Dst: labSvc, SrcPort: 40001, DstPort: 80, TCPFlags: "SYN", Seq: 1000}},
	{spec: "reply=1", replyTo: 1, replySeq: 5000, replyAck: 1001},
	{spec: "in=eth0 src=192.168.10.2 dst=10.96.0.10 sport=40001 dport=80 flags=A",
		frame: kerneltest.FrameSpec{Proto: "tcp", Src: labClient, Dst: labSvc, SrcPort: 40001, DstPort: 80, TCPFlags: "ACK", Seq: 1001, Ack: 5001}},
	{spec: "in=eth0 src=192.168.10.2 dst=192.168.10.1 sport=40004 dport=30080",
		frame: kerneltest.FrameSpec{Proto: "tcp", Src: labClient, Dst: labNode, SrcPort: 40004, DstPort: 30080, TCPFlags: "SYN", Seq: 1000}},
	{spec: "in=eth0 src=192.168.10.2 dst=192.168.10.1 sport=40005 dport=22",
		frame: kerneltest.FrameSpec{Proto: "tcp", Src: labClient, Dst: labNode, SrcPort: 40005, DstPort: 22, TCPFlags: "SYN", Seq: 1000}},
	{spec: "in=eth0 src=192.168.10.2 dst=192.168.10.1 sport=40006 dport=23",
		frame: kerneltest.FrameSpec{Proto: "tcp", Src: labClient, Dst: labNode, SrcPort: 40006, DstPort: 23, TCPFlags: "SYN", Seq: 1000}},
	{spec: "in=eth0 proto=udp src=192.168.10.2 dst=192.168.10.1 sport=40007 dport=9999 len=12",
		frame: kerneltest.FrameSpec{Proto: "udp", Src: labClient, Dst: labNode, SrcPort: 40007, DstPort: 9999, PayloadLen: 12}},
	{spec: "in=eth0 src=192.168.10.2 dst=10.96.0.11 sport=40008 dport=80",
		frame: kerneltest.FrameSpec{Proto: "tcp", Src: labClient, Dst: netip.MustParseAddr("10.96.0.11"), SrcPort: 40008, DstPort: 80, TCPFlags: "SYN", Seq: 1000}},
	{spec: "in=eth0 src=192.168.10.2 dst=10.244.1.5 sport=40009 dport=9000",
		frame: kerneltest.FrameSpec{Proto: "tcp", Src: labClient, Dst: labPod, SrcPort: 40009, DstPort: 9000, TCPFlags: "SYN", Seq: 1000}},
	{spec: "in=eth0 src=192.168.10.2 dst=10.244.1.5 sport=40010 dport=8080 len=100 ttl=17",
		frame: kerneltest.FrameSpec{Proto: "tcp", Src: labClient, Dst: labPod, SrcPort: 40010, DstPort: 8080, TCPFlags: "SYN", Seq: 1000, PayloadLen: 100, TTL: 17}},
	{spec: "in=eth0 proto=icmp type=8 code=0 id=77 src=192.168.10.2 dst=10.244.1.5",
		frame: kerneltest.FrameSpec{Proto: "icmp", Src: labClient, Dst: labPod, ICMPType: 8, ICMPID: 77, ICMPSeq: 1}},
	{spec: "reply=11", replyTo: 11},
}

// twJSON is the part of `trace --format json` the differential test reads.
type twJSON struct {
	N           int          `json:"n"`
	Disposition string       `json:"disposition"`
	Out         *string      `json:"out"`
	Packet      twPacket     `json:"packet"`
	Emitted     []twPacket   `json:"emitted"`
	Trace       []twJSONStep `json:"trace"`
}

type twPacket struct {
	Proto string  `json:"proto"`
	Src   string  `json:"src"`
	Sport *uint16 `json:"sport"`
	Dst   string  `json:"dst"`
	Dport *uint16 `json:"dport"`
	Flags *string `json:"flags"`
	Type  *uint8  `json:"type"`
	Code  *uint8  `json:"code"`
	TTL   uint8   `json:"ttl"`
	Len   int     `json:"len"`
}

type twJSONStep struct {
	Table  string `json:"table"`
	Chain  string `json:"chain"`
	Rule   int    `json:"rule"`
	Action string `json:"action"`
}

// leaving is the comparable form of a packet as it leaves the node (or is
// emitted by it): "tcp 10.244.1.1:* > 10.244.1.5:8080 flags=S ttl=63
// len=40". A source port the kernel randomises (MASQUERADE
// --random-fully) is written "*" on both sides; so is a destination port
// that only echoes such a port back (the de-NATed reply keeps the
// client's port, so it is kept).
func (p twPacket) leaving(wildSport bool) string {
	var b strings.Builder
	b.WriteString(p.Proto + " " + p.Src)
	if p.Sport != nil {
		if wildSport {
			b.WriteString(":*")
		} else {
			fmt.Fprintf(&b, ":%d", *p.Sport)
		}
	}
	b.WriteString(" > " + p.Dst)
	if p.Dport != nil {
		fmt.Fprintf(&b, ":%d", *p.Dport)
	}
	if p.Flags != nil {
		b.WriteString(" flags=" + *p.Flags)
	}
	if p.Type != nil {
		fmt.Fprintf(&b, " type=%d code=%d", *p.Type, *p.Code)
	}
	fmt.Fprintf(&b, " ttl=%d len=%d", p.TTL, p.Len)
	return b.String()
}

// summaryPacket converts a captured frame to packetwalk's JSON packet
// shape, TCP flags as letters.
func summaryPacket(s kerneltest.Summary) twPacket {
	p := twPacket{Src: s.Src.String(), Dst: s.Dst.String(), TTL: s.TTL, Len: s.IPLen}
	switch s.Proto {
	case 6, 17:
		p.Proto = map[uint8]string{6: "tcp", 17: "udp"}[s.Proto]
		sp, dp := s.SrcPort, s.DstPort
		p.Sport, p.Dport = &sp, &dp
		if s.Proto == 6 {
			bits := map[string]inet.TCPFlags{"FIN": inet.FIN, "SYN": inet.SYN, "RST": inet.RST, "PSH": inet.PSH,
				"ACK": inet.ACK, "URG": inet.URG, "ECE": inet.ECE, "CWR": inet.CWR}
			var fl inet.TCPFlags
			for _, name := range strings.Split(s.TCPFlags, ",") {
				fl |= bits[name]
			}
			f := flagString(fl)
			p.Flags = &f
		}
	case 1:
		p.Proto = "icmp"
		t, c := s.ICMPType, s.ICMPCode
		p.Type, p.Code = &t, &c
	default:
		p.Proto = strconv.Itoa(int(s.Proto))
	}
	return p
}

// injectLabPacket sends packet i, lp, into the lab from the client, or,
// when it answers an earlier packet (whose outcome is in earlier), as the
// answer from the side that packet left to; it returns the side, the frame
// sent and what the lab saw.
func injectLabPacket(t *testing.T, lab *kerneltest.Lab, i int, lp labPacket, earlier []kernelOutcome) (kerneltest.Side, kerneltest.FrameSpec, kerneltest.Observation) {
	t.Helper()
	side, spec := kerneltest.Client, lp.frame
	if lp.replyTo > 0 {
		prev := earlier[lp.replyTo-1]
		require.NotNil(t, prev.leaving, "packet %d answers packet %d, which did not leave", i+1, lp.replyTo)
		spec = replyFrame(*prev.leaving, prev.frame, lp.replySeq, lp.replyAck)
		if prev.out == "eth1" {
			side = kerneltest.Server
		}
	}
	frame, err := lab.FrameFrom(side, spec)
	require.NoError(t, err)
	require.NoError(t, lab.InjectFrom(side, frame))
	obs, err := lab.Settle()
	require.NoError(t, err)
	return side, spec, obs
}

// kernelOutcome is what the lab saw of one packet.
type kernelOutcome struct {
	disposition string
	out         string
	leaving     *kerneltest.Summary // the forwarded packet
	frame       []byte              // its frame, for the ICMP echo id
	near        []kerneltest.Summary
	emitted     []kerneltest.Summary
	hits        []string // counters that grew, as "table/chain#n" (0 = policy)
}

func counterHits(before, after kerneltest.Counters) (hits []string, texts map[string]string) {
	texts = map[string]string{}
	for _, t := range after.Tables {
		for _, ch := range t.Chains {
			old := before.Chain(t.Name, ch.Name)
			for i, r := range ch.Rules {
				var prev uint64
				if old != nil && i < len(old.Rules) {
					prev = old.Rules[i].Packets
				}
				if r.Packets > prev {
					k := fmt.Sprintf("%s/%s#%d", t.Name, ch.Name, i+1)
					hits = append(hits, k)
					texts[k] = r.Rule
				}
			}
			var prev uint64
			if old != nil {
				prev = old.PolicyCounter.Packets
			}
			if ch.PolicyCounter.Packets > prev {
				k := fmt.Sprintf("%s/%s#0", t.Name, ch.Name)
				hits = append(hits, k)
				texts[k] = "policy " + ch.Policy
			}
		}
	}
	return hits, texts
}

// classify derives the kernel's disposition for a packet sent from side:
// a frame on the far side is the forwarded packet; otherwise the counters
// tell a REJECT or a DROP rule (or DROP policy) apart from local delivery,
// whose own answers (the stack's RST or ICMP for a closed port) are not
// netfilter's and are left out.
func classify(side kerneltest.Side, obs kerneltest.Observation, hits []string, texts map[string]string, local bool) kernelOutcome {
	far, near := obs.Server, obs.Client
	farIface := "eth1"
	if side == kerneltest.Server {
		far, near, farIface = obs.Client, obs.Server, "eth0"
	}
	k := kernelOutcome{hits: hits}
	rejected, dropped := false, false
	for _, h := range hits {
		switch t := texts[h]; {
		case strings.Contains(t, "-j REJECT"):
			rejected = true
		case strings.HasSuffix(t, "-j DROP"), t == "policy DROP":
			dropped = true
		}
	}
	switch {
	case len(far) > 0:
		k.disposition, k.out = "forwarded", farIface
		s := far[0].Summary
		k.leaving, k.frame = &s, far[0].Frame
	case rejected:
		k.disposition = "rejected"
	case dropped:
		k.disposition = "dropped"
	case local:
		k.disposition = "delivered"
	default:
		k.disposition = "dropped"
	}
	for _, c := range near {
		k.near = append(k.near, c.Summary)
	}
	if rejected {
		for _, c := range near {
			k.emitted = append(k.emitted, c.Summary)
		}
	}
	return k
}

// replyFrame builds the reply to a packet as it left the node: addresses
// and ports swapped, SYN answered by SYN-ACK and anything else by ACK, an
// echo request by an echo reply with the same id.
func replyFrame(left kerneltest.Summary, frame []byte, seq, ack uint32) kerneltest.FrameSpec {
	f := kerneltest.FrameSpec{Src: left.Dst, Dst: left.Src, SrcPort: left.DstPort, DstPort: left.SrcPort, Seq: seq, Ack: ack}
	switch left.Proto {
	case 6:
		f.Proto, f.TCPFlags = "tcp", "ACK"
		if left.TCPFlags == "SYN" {
			f.TCPFlags = "SYN,ACK"
		}
	case 17:
		f.Proto = "udp"
	case 1:
		f.Proto, f.ICMPType = "icmp", 0
		// Summary has no echo id: read id and sequence after the
		// Ethernet and IPv4 headers.
		if l4 := 14 + int(frame[14]&0x0f)*4; len(frame) >= l4+8 {
			f.ICMPID = uint16(frame[l4+4])<<8 | uint16(frame[l4+5])
			f.ICMPSeq = uint16(frame[l4+6])<<8 | uint16(frame[l4+7])
		}
	}
	return f
}

// TestKernelTraceDifferential loads a kube-proxy-style ruleset into the
// kernel lab's node, captures the node with testdata/capture-node.sh,
// runs the same packets through the kernel and through `packetwalk trace
// --node`, and compares per packet the disposition, the out interface,
// the packet as it leaves, what netfilter emitted and which counters grew;
// then `save -c` after the packets against the lab's iptables-save -c.
func TestKernelTraceDifferential(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-cli-lab"})
	require.NoError(t, lab.Reset(labNodeRules))
	// A Kubernetes node has a default route; without it a ClusterIP with
	// no DNAT (10.96.0.11) fails routing before FORWARD.
	for _, c := range []string{"neigh replace 10.244.1.254 lladdr " + kerneltest.ServerMAC.String() + " dev eth1 nud permanent",
		"route replace default via 10.244.1.254 dev eth1"} {
		_, _, err := lab.Node().Exec("", append([]string{"ip"}, strings.Fields(c)...)...)
		require.NoError(t, err)
	}

	dir := t.TempDir()
	out, err := exec.Command("sh", "testdata/capture-node.sh", lab.Node().Name(), dir).CombinedOutput()
	require.NoError(t, err, "capture-node.sh: %s", out)

	// The kernel side, packet by packet.
	var kern []kernelOutcome
	before, err := lab.Counters()
	require.NoError(t, err)
	for i, lp := range labPackets {
		side, spec, obs := injectLabPacket(t, lab, i, lp, kern)
		after, err := lab.Counters()
		require.NoError(t, err)
		hits, texts := counterHits(before, after)
		before = after
		local := spec.Dst == labNode || spec.Dst == netip.MustParseAddr("10.244.1.1")
		kern = append(kern, classify(side, obs, hits, texts, local))
		t.Logf("kernel %d: %s\n%s", i+1, strings.Join(hits, " "), obs)
	}

	// packetwalk on the captured snapshot.
	args := []string{"trace", "--node", dir, "--format", "json"}
	for _, lp := range labPackets {
		args = append(args, lp.spec)
	}
	code, stdout, stderr := runCmd(args, "")
	require.Equal(t, 0, code, stderr)
	var ours []twJSON
	for _, line := range strings.Split(strings.TrimSpace(stdout), "\n") {
		var j twJSON
		require.NoError(t, json.Unmarshal([]byte(line), &j), line)
		ours = append(ours, j)
	}
	require.Len(t, ours, len(labPackets))

	for i, k := range kern {
		o := ours[i]
		n := i + 1
		assert.Equal(t, k.disposition, o.Disposition, "packet %d (%s): disposition", n, labPackets[i].spec)
		ourOut := ""
		if o.Out != nil && o.Disposition == "forwarded" {
			ourOut = *o.Out
		}
		assert.Equal(t, k.out, ourOut, "packet %d: out interface", n)
		if k.leaving != nil && o.Disposition == "forwarded" {
			kp := summaryPacket(*k.leaving)
			// MASQUERADE --random-fully picks the source port at random in
			// both: compare it only when neither translated it.
			in := labPackets[i].frame
			wild := kp.Sport != nil && o.Packet.Sport != nil && labPackets[i].replyTo == 0 &&
				*kp.Sport != in.SrcPort && *o.Packet.Sport != in.SrcPort
			assert.Equal(t, kp.leaving(wild), o.Packet.leaving(wild), "packet %d: packet as it leaves", n)
		}
		var kEm, oEm []string
		for _, e := range k.emitted {
			kEm = append(kEm, summaryPacket(e).leaving(false))
		}
		for _, e := range o.Emitted {
			oEm = append(oEm, e.leaving(false))
		}
		assert.Equal(t, kEm, oEm, "packet %d: emitted by netfilter", n)

		// The rules the packet hit: every trace step is one counter.
		var ourHits []string
		for _, s := range o.Trace {
			if strings.HasPrefix(s.Action, "POLICY:") {
				ourHits = append(ourHits, fmt.Sprintf("%s/%s#0", s.Table, s.Chain))
			} else {
				ourHits = append(ourHits, fmt.Sprintf("%s/%s#%d", s.Table, s.Chain, s.Rule))
			}
		}
		assert.ElementsMatch(t, k.hits, append(append(ourHits, generatedHits[n]...), rejectReplyHits[n]...), "packet %d: counters that grew", n)
	}

	// The counters after all the packets, as the tools print them.
	code, saved, stderr := runCmd([]string{"save", "--node", dir, "-c", "--packets", writePackets(t)}, "")
	require.Equal(t, 0, code, stderr)
	kernelSave, _, err := lab.Node().Exec("", "iptables-save", "-c")
	require.NoError(t, err)
	kc, err := kerneltest.ParseSaveCounters(kernelSave)
	require.NoError(t, err)
	oc, err := kerneltest.ParseSaveCounters(saved)
	require.NoError(t, err)
	// Take out what the node's own packets counted (generatedHits).
	for n, keys := range generatedHits {
		require.Len(t, kern[n-1].near, 1, "packet %d: one node-generated packet", n)
		size := uint64(kern[n-1].near[0].IPLen)
		for _, k := range keys {
			table, rest, _ := strings.Cut(k, "/")
			chain, num, _ := strings.Cut(rest, "#")
			ch := kc.Chain(table, chain)
			require.NotNil(t, ch, k)
			c := &ch.PolicyCounter
			if num != "0" {
				i, _ := strconv.Atoi(num)
				c = &ch.Rules[i-1].Counter
			}
			c.Packets--
			c.Bytes -= size
		}
	}
	assert.Equal(t, kc, oc, "save -c after the packets (less generatedHits) vs iptables-save -c")
	if len(generatedHits) == 0 {
		assert.Equal(t, kerneltest.StripSaveComments(kernelSave), kerneltest.StripSaveComments(saved))
	}
}

// generatedHits are the counters that the node's own packets grew in the
// kernel, per packet number, which packetwalk does not model: the local
// stack's answers (its RST for a closed port belongs to the packet's
// conntrack entry, so it only crosses filter OUTPUT). REJECT's replies are
// modelled: they walk OUTPUT and POSTROUTING attached to the rejected
// connection, the tcp-reset's RST counted by nat POSTROUTING as NEW.
var generatedHits = map[int][]string{
	5: {"filter/OUTPUT#0"}, // the stack's RST to the SYN for :22
}

// rejectReplyHits are the counters REJECT's replies grow, in the kernel and
// in packetwalk alike; the trace does not show them (the kernel's generated
// packets do not inherit nftrace), so the per-packet comparison adds them.
var rejectReplyHits = map[int][]string{
	6: {"filter/OUTPUT#0", "nat/POSTROUTING#1", "nat/KUBE-POSTROUTING#1", "nat/POSTROUTING#0"}, // tcp-reset's RST
	7: {"filter/OUTPUT#0"},                                                                     // REJECT's ICMP port unreachable
	8: {"filter/OUTPUT#0"},                                                                     // REJECT's ICMP port unreachable, FORWARD
}

// writePackets writes labPackets as a --packets file.
func writePackets(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, lp := range labPackets {
		b.WriteString(lp.spec + "\n")
	}
	path := t.TempDir() + "/packets"
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}
