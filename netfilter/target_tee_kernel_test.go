package netfilter

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// teeRules puts rule (a TEE) in mangle chain and counts UDP everywhere,
// the copy's UNTRACKED state in mangle OUTPUT; filter INPUT drops what is
// delivered, so the node does not answer.
func teeRules(chain, rule string) string {
	return "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A " + chain + " -p udp " + rule + "\n" +
		"-A PREROUTING -p udp\n-A INPUT -p udp\n-A FORWARD -p udp\n-A OUTPUT -p udp\n-A OUTPUT -p udp -m conntrack --ctstate UNTRACKED\n" +
		"-A OUTPUT -p udp -m conntrack --ctstate NEW\n-A POSTROUTING -p udp -o eth0\n-A POSTROUTING -p udp -o eth1\nCOMMIT\n" +
		"*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p udp -j DROP\nCOMMIT\n"
}

// teeCases are the TEE cases of TestTEE and TestTEEKernel: where the
// copies and the original of a UDP packet from the client go (frames per
// side, as "eth0:TTL" or "eth1:TTL"), sorted.
var teeCases = []struct {
	name, chain, rule string
	dst               string
	want              string // the frames leaving the node, "eth1:63 eth1:63"
	disposition       Disposition
}{
	{"PREROUTING, delivered", "PREROUTING", "-j TEE --gateway 10.244.1.5", "192.168.10.1", "eth1:63", Dropped},
	{"PREROUTING, forwarded", "PREROUTING", "-j TEE --gateway 10.244.1.5", "10.244.1.5", "eth1:63 eth1:63", Forwarded},
	{"FORWARD, to the client's side", "FORWARD", "-j TEE --gateway 192.168.10.2", "10.244.1.5", "eth0:63 eth1:63", Forwarded},
	{"INPUT", "INPUT", "-j TEE --gateway 192.168.10.2", "192.168.10.1", "eth0:63", Dropped},
	{"POSTROUTING", "POSTROUTING", "-o eth1 -j TEE --gateway 192.168.10.2", "10.244.1.5", "eth0:63 eth1:63", Forwarded},
	{"no route to the gateway", "PREROUTING", "-j TEE --gateway 172.16.0.1", "10.244.1.5", "eth1:63", Forwarded},
	{"two TEEs", "PREROUTING", "-j TEE --gateway 10.244.1.5\n-A PREROUTING -p udp -j TEE --gateway 192.168.10.2", "10.244.1.5", "eth0:63 eth1:63 eth1:63", Forwarded},
}

func teeHost(t *testing.T, rules string) *Host {
	t.Helper()
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
	return h
}

// teeModel walks the case's packet through packetwalk and returns the
// frames that leave, as teeCases writes them.
func teeModel(h *Host, dst string) (string, Result) {
	p := Packet{Proto: inet.UDP, Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr(dst), SrcPort: 40000, DstPort: 53, TTL: 64, Length: 30}
	res := h.Receive("eth0", p)
	var out []string
	if res.Disposition == Forwarded {
		out = append(out, fmt.Sprintf("%s:%d", res.Packet.Out, res.Packet.TTL))
	}
	for _, e := range res.Emitted {
		out = append(out, fmt.Sprintf("%s:%d", e.Out, e.TTL))
	}
	return sortedJoin(out), res
}

func sortedJoin(s []string) string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return strings.Join(s, " ")
}

// TestTEEKernel sends each case's UDP packet from the lab's client and
// compares the frames that leave the node (the copies at the gateway's
// side, with their TTL) and every counter with packetwalk's.
func TestTEEKernel(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-tee"})
	divergences := 0
	for _, tc := range teeCases {
		t.Run(tc.name, func(t *testing.T) {
			rules := teeRules(tc.chain, tc.rule)
			require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv4: rules}))
			f, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr(tc.dst), SrcPort: 40000, DstPort: 53, PayloadLen: 2})
			require.NoError(t, err)
			obs, err := lab.Exchange(f)
			require.NoError(t, err)
			var frames []string
			for _, c := range append(obs.Client, obs.Server...) {
				if c.Summary.Proto == 17 && c.Summary.SrcPort == 40000 {
					frames = append(frames, fmt.Sprintf("%s:%d", map[kerneltest.Side]string{kerneltest.Client: "eth0", kerneltest.Server: "eth1"}[c.Side], c.Summary.TTL))
				}
			}
			kernel := sortedJoin(frames)
			t.Logf("kernel: %s", strings.ReplaceAll(strings.TrimSpace(obs.String()), "\n", "; "))
			assert.Equal(t, tc.want, kernel, "the case's expectation is the kernel's")
			h := teeHost(t, rules)
			model, _ := teeModel(h, tc.dst)
			if !assert.Equal(t, kernel, model, "frames leaving: kernel (want) vs packetwalk") {
				divergences++
			}
			divergences += compareAllCounters(t, lab, h, true)
		})
	}
	t.Logf("%d cases, %d divergences", len(teeCases), divergences)
}

// TestTEE6Kernel: IPv6 TEE in PREROUTING, to the node and through it:
// the copies at the server's side (hop limit lowered), every counter.
func TestTEE6Kernel(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-tee6"})
	divergences := 0
	for _, tc := range []struct{ dst, want string }{{"fd00:10::1", "eth1:63"}, {"fd00:244::5", "eth1:63 eth1:63"}} {
		t.Run(tc.dst, func(t *testing.T) {
			rules := teeRules("PREROUTING", "-j TEE --gateway fd00:244::5")
			require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv6: rules}))
			src, dst := netip.MustParseAddr("fd00:10::2"), netip.MustParseAddr(tc.dst)
			f, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: src, Dst: dst, SrcPort: 40000, DstPort: 53, PayloadLen: 2})
			require.NoError(t, err)
			obs, err := lab.Exchange(f)
			require.NoError(t, err)
			var frames []string
			for _, c := range append(obs.Client, obs.Server...) {
				if c.Summary.Proto == 17 && c.Summary.SrcPort == 40000 {
					frames = append(frames, fmt.Sprintf("%s:%d", map[kerneltest.Side]string{kerneltest.Client: "eth0", kerneltest.Server: "eth1"}[c.Side], c.Summary.TTL))
				}
			}
			kernel := sortedJoin(frames)
			assert.Equal(t, tc.want, kernel, "the case's expectation is the kernel's")

			h := NewHost(HostConfig{})
			require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("fd00:10::1/64")))
			require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("fd00:244::1/64")))
			require.NoError(t, h.Restore(IPv6, []byte(rules), RestoreOptions{}))
			res := h.Receive("eth0", Packet{Proto: inet.UDP, Src: src, Dst: dst, SrcPort: 40000, DstPort: 53, TTL: 64, Length: 50})
			var out []string
			if res.Disposition == Forwarded {
				out = append(out, fmt.Sprintf("%s:%d", res.Packet.Out, res.Packet.TTL))
			}
			for _, e := range res.Emitted {
				out = append(out, fmt.Sprintf("%s:%d", e.Out, e.TTL))
			}
			if !assert.Equal(t, kernel, sortedJoin(out), "frames leaving: kernel (want) vs packetwalk") {
				divergences++
			}
			kc, err := lab.Counters6()
			require.NoError(t, err)
			for _, tbl := range h.Ruleset(IPv6).Tables() {
				for _, ch := range tbl.Chains() {
					for i, r := range ch.Rules {
						want, ok := kc.Rule(tbl.ID().String(), ch.Name, i+1)
						require.True(t, ok)
						if !assert.Equal(t, want.Packets, r.Counters.Packets, "%s %s rule %d", tbl.ID(), ch.Name, i+1) {
							divergences++
						}
					}
				}
			}
		})
	}
	t.Logf("2 cases, %d divergences", divergences)
}

// TestHMARKCTKernel: HMARK --hmark-tuple ct on a MASQUERADEd connection:
// the first packet from the client and the server's reply, seen in mangle
// PREROUTING, and the FORWARD counters of each possible mark.
func TestHMARKCTKernel(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-hmct"})
	divergences := 0
	for _, tuple := range []string{"--hmark-tuple ct", "--hmark-tuple src,dst,sport,dport,proto"} {
		t.Run(tuple, func(t *testing.T) {
			rules := "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
				hmarkRules(tuple+" --hmark-rnd 0xfeedcafe") + "COMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
				"-A POSTROUTING -o eth1 -j MASQUERADE\nCOMMIT\n"
			require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv4: rules}))
			h := teeHost(t, rules)
			client, server, node := netip.MustParseAddr("192.168.10.2"), netip.MustParseAddr("10.244.1.5"), netip.MustParseAddr("10.244.1.1")
			f, err := lab.Frame(kerneltest.FrameSpec{Proto: "tcp", Src: client, Dst: server, SrcPort: 40000, DstPort: 80, TCPFlags: "SYN", Seq: 1})
			require.NoError(t, err)
			obs, err := lab.Exchange(f)
			require.NoError(t, err)
			require.Len(t, obs.Server, 1)
			out := obs.Server[0].Summary
			res := h.Receive("eth0", Packet{Proto: inet.TCP, Src: client, Dst: server, SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN, Seq: 1, TTL: 64})
			require.Equal(t, node, res.Packet.Src)
			require.Equal(t, out.SrcPort, res.Packet.SrcPort, "MASQUERADE's port")
			rf, err := lab.FrameFrom(kerneltest.Server, kerneltest.FrameSpec{Proto: "tcp", Src: server, Dst: node, SrcPort: 80, DstPort: out.SrcPort, TCPFlags: "SYN,ACK", Seq: 500, Ack: 2})
			require.NoError(t, err)
			require.NoError(t, lab.InjectFrom(kerneltest.Server, rf))
			_, err = lab.Settle()
			require.NoError(t, err)
			res = h.Receive("eth1", Packet{Proto: inet.TCP, Src: server, Dst: node, SrcPort: 80, DstPort: out.SrcPort, TCPFlags: inet.SYN | inet.ACK, Seq: 500, TTL: 64})
			require.Equal(t, Forwarded, res.Disposition)
			divergences += compareAllCounters(t, lab, h, true)
		})
	}
	t.Logf("2 cases, %d divergences", divergences)
}
