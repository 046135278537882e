package difftest

import (
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const filterHead = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"

func tcpPkt(from Origin, src, dst netip.Addr, sport, dport uint16, flags string) genPacket {
	return genPacket{From: from, Proto: "tcp", Src: src, Dst: dst, SPort: sport, DPort: dport, Flags: flags}
}

func udpPkt(from Origin, src, dst netip.Addr, sport, dport uint16) genPacket {
	return genPacket{From: from, Proto: "udp", Src: src, Dst: dst, SPort: sport, DPort: dport, PayloadLen: 10}
}

// pathCase is a named kernel-backed case: the kernel and packetwalk must
// agree (frames and every counter), and packetwalk's dispositions and the
// frames seen must be the ones expected.
type pathCase struct {
	name    string
	rules   string
	packets []genPacket
	disp    []netfilter.Disposition
	frames  [][]string // per packet; nil means none
	// nonZero is the kernel's non-zero counters after the case.
	nonZero []string
}

func runPathCases(t *testing.T, cases []pathCase) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{})
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := genCase{Rules: tc.rules, Packets: tc.packets}
			assignSeqs(c.Packets)
			res, err := runCase(lab, c, nil)
			require.NoError(t, err)
			require.False(t, res.Skipped, "both refused the ruleset")
			require.Empty(t, res.Diffs, "%s\n%s", c, res.Transcript)
			for i, so := range res.Sim {
				assert.Equal(t, tc.disp[i].String(), so.Result.Disposition.String(), "packet %d", i+1)
				assert.Equal(t, tc.frames[i], res.Kernel[i], "packet %d", i+1)
			}
			assert.Equal(t, tc.nonZero, res.KernelCounters.NonZero())
		})
	}
}

// TestKernelPaths checks the main paths of a packet through the node.
func TestKernelPaths(t *testing.T) {
	syn := tcpPkt(FromClient, clientIP, serverIP, 40000, 80, "SYN")
	runPathCases(t, []pathCase{{
		name:    "local delivery answered by the node's TCP stack",
		rules:   filterHead + "-A INPUT -d 192.168.10.1/32 -p tcp --dport 22 -j ACCEPT\nCOMMIT\n",
		packets: []genPacket{tcpPkt(FromClient, clientIP, nodeEth0, 40000, 22, "SYN")},
		disp:    []netfilter.Disposition{netfilter.Delivered},
		frames:  [][]string{{"client: tcp 192.168.10.1:22 > 192.168.10.2:40000 [RST,ACK] ttl=64 len=40"}},
		nonZero: []string{"filter/INPUT#1 1", "filter/OUTPUT#0 1"},
	}, {
		name:    "local delivery to the other interface's address",
		rules:   filterHead + "-A INPUT -i eth0 -d 10.244.1.1/32 -p udp -j ACCEPT\nCOMMIT\n",
		packets: []genPacket{udpPkt(FromClient, clientIP, nodeEth1, 5000, 53)},
		disp:    []netfilter.Disposition{netfilter.Delivered},
		frames:  [][]string{{"client: proto1 10.244.1.1 > 192.168.10.2 type=3 code=3 ttl=64 len=66"}},
		nonZero: []string{"filter/INPUT#1 1", "filter/OUTPUT#0 1"},
	}, {
		name:    "forwarding decrements the TTL",
		rules:   filterHead + "-A FORWARD -d 10.244.1.5/32 -p tcp --dport 80 -j ACCEPT\nCOMMIT\n",
		packets: []genPacket{syn},
		disp:    []netfilter.Disposition{netfilter.Forwarded},
		frames:  [][]string{{"server: tcp 192.168.10.2:40000 > 10.244.1.5:80 [SYN] ttl=63 len=40"}},
		nonZero: []string{"filter/FORWARD#1 1"},
	}, {
		name:    "output from the node",
		rules:   filterHead + "-A OUTPUT -s 10.244.1.1/32 -o eth1 -p udp --dport 53 -j ACCEPT\nCOMMIT\n",
		packets: []genPacket{udpPkt(FromNode, nodeEth1, serverIP, 3333, 53)},
		disp:    []netfilter.Disposition{netfilter.Sent},
		frames:  [][]string{{"server: udp 10.244.1.1:3333 > 10.244.1.5:53 ttl=64 len=38"}},
		nonZero: []string{"filter/OUTPUT#1 1"},
	}, {
		name:    "output dropped: sendto fails with EPERM",
		rules:   filterHead + "-A OUTPUT -p udp -j DROP\nCOMMIT\n",
		packets: []genPacket{udpPkt(FromNode, nodeEth1, serverIP, 3333, 53)},
		disp:    []netfilter.Disposition{netfilter.Dropped},
		frames:  [][]string{nil},
		nonZero: []string{"filter/OUTPUT#1 1"},
	}, {
		name:    "REJECT tcp-reset, the reset crossing OUTPUT",
		rules:   filterHead + "-A FORWARD -p tcp -j REJECT --reject-with tcp-reset\nCOMMIT\n",
		packets: []genPacket{syn},
		disp:    []netfilter.Disposition{netfilter.Rejected},
		frames:  [][]string{{"client: tcp 10.244.1.5:80 > 192.168.10.2:40000 [RST,ACK] ttl=64 len=40"}},
		nonZero: []string{"filter/FORWARD#1 1", "filter/OUTPUT#0 1"},
	}, {
		name:    "REJECT icmp-port-unreachable comes from the facing interface",
		rules:   filterHead + "-A FORWARD -p udp -j REJECT\nCOMMIT\n",
		packets: []genPacket{udpPkt(FromClient, clientIP, serverIP, 5000, 53)},
		disp:    []netfilter.Disposition{netfilter.Rejected},
		frames:  [][]string{{"client: proto1 192.168.10.1 > 192.168.10.2 type=3 code=3 ttl=64 len=66"}},
		nonZero: []string{"filter/FORWARD#1 1", "filter/OUTPUT#0 1"},
	}, {
		name:    "REJECT icmp-admin-prohibited on INPUT",
		rules:   filterHead + "-A INPUT -p udp -j REJECT --reject-with icmp-admin-prohibited\nCOMMIT\n",
		packets: []genPacket{udpPkt(FromServer, serverIP, nodeEth0, 5000, 53)},
		disp:    []netfilter.Disposition{netfilter.Rejected},
		frames:  [][]string{{"server: proto1 192.168.10.1 > 10.244.1.5 type=3 code=13 ttl=64 len=66"}},
		nonZero: []string{"filter/INPUT#1 1", "filter/OUTPUT#0 1"},
	}, {
		name:    "policy DROP counts on the policy",
		rules:   "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -p udp -j ACCEPT\nCOMMIT\n",
		packets: []genPacket{syn},
		disp:    []netfilter.Disposition{netfilter.Dropped},
		frames:  [][]string{nil},
		nonZero: []string{"filter/FORWARD#0 1"},
	}})
}

// TestKernelChains checks jumps, gotos, RETURN, marks across tables and
// stateful matches.
func TestKernelChains(t *testing.T) {
	syn := tcpPkt(FromClient, clientIP, serverIP, 40000, 80, "SYN")
	synFrame := []string{"server: tcp 192.168.10.2:40000 > 10.244.1.5:80 [SYN] ttl=63 len=40"}
	runPathCases(t, []pathCase{{
		// RETURN from a chain entered by -g returns to the chain that
		// called the caller: here none, so the policy decides.
		name:    "goto then RETURN falls to the policy",
		rules:   filterHead + ":A - [0:0]\n-A FORWARD -g A\n-A FORWARD -j DROP\n-A A -j RETURN\nCOMMIT\n",
		packets: []genPacket{syn},
		disp:    []netfilter.Disposition{netfilter.Forwarded},
		frames:  [][]string{synFrame},
		nonZero: []string{"filter/FORWARD#1 1", "filter/FORWARD#0 1", "filter/A#1 1"},
	}, {
		name:    "jump then RETURN continues after the jump",
		rules:   filterHead + ":A - [0:0]\n-A FORWARD -j A\n-A FORWARD -j DROP\n-A A -j RETURN\nCOMMIT\n",
		packets: []genPacket{syn},
		disp:    []netfilter.Disposition{netfilter.Dropped},
		frames:  [][]string{nil},
		nonZero: []string{"filter/FORWARD#1 1", "filter/FORWARD#2 1", "filter/A#1 1"},
	}, {
		name: "nested RETURN pops one level",
		rules: filterHead + ":A - [0:0]\n:B - [0:0]\n-A FORWARD -j A\n-A FORWARD -j ACCEPT\n" +
			"-A A -j B\n-A A -p tcp -j DROP\n-A B -j RETURN\n-A B -j ACCEPT\nCOMMIT\n",
		packets: []genPacket{syn},
		disp:    []netfilter.Disposition{netfilter.Dropped},
		frames:  [][]string{nil},
		nonZero: []string{"filter/FORWARD#1 1", "filter/A#1 1", "filter/A#2 1", "filter/B#1 1"},
	}, {
		name: "mangle PREROUTING mark seen by filter FORWARD",
		rules: "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
			"-A PREROUTING -i eth0 -j MARK --set-xmark 0x5/0xff\n-A POSTROUTING -m mark --mark 0x5 -j MARK --or-mark 0x100\nCOMMIT\n" +
			filterHead + "-A FORWARD -m mark --mark 0x105 -j DROP\n-A FORWARD -m mark --mark 0x5/0xff -j DROP\nCOMMIT\n",
		packets: []genPacket{syn},
		disp:    []netfilter.Disposition{netfilter.Dropped},
		frames:  [][]string{nil},
		nonZero: []string{"mangle/PREROUTING#1 1", "mangle/PREROUTING#0 1", "mangle/FORWARD#0 1", "filter/FORWARD#2 1"},
	}, {
		name: "nth counts only evaluations",
		rules: filterHead + "-A FORWARD -p tcp --dport 81 -m statistic --mode nth --every 2 --packet 1 -j DROP\n" +
			"-A FORWARD -m statistic --mode nth --every 3 --packet 1 -j DROP\nCOMMIT\n",
		packets: []genPacket{
			tcpPkt(FromClient, clientIP, serverIP, 40000, 81, "SYN"),
			tcpPkt(FromClient, clientIP, serverIP, 40001, 81, "SYN"),
			tcpPkt(FromClient, clientIP, serverIP, 40002, 81, "SYN"),
		},
		disp:    []netfilter.Disposition{netfilter.Forwarded, netfilter.Dropped, netfilter.Dropped},
		frames:  [][]string{{"server: tcp 192.168.10.2:40000 > 10.244.1.5:81 [SYN] ttl=63 len=40"}, nil, nil},
		nonZero: []string{"filter/FORWARD#1 1", "filter/FORWARD#2 1", "filter/FORWARD#0 1"},
	}, {
		name: "addrtype LOCAL with --limit-iface-in",
		rules: filterHead + "-A INPUT -p tcp -m addrtype --dst-type LOCAL --limit-iface-in -j DROP\n" +
			"-A INPUT -p tcp -m addrtype --dst-type LOCAL -j DROP\nCOMMIT\n",
		packets: []genPacket{
			tcpPkt(FromClient, clientIP, nodeEth0, 40000, 22, "RST"),
			tcpPkt(FromClient, clientIP, nodeEth1, 40000, 22, "RST"),
		},
		disp:    []netfilter.Disposition{netfilter.Dropped, netfilter.Dropped},
		frames:  [][]string{nil, nil},
		nonZero: []string{"filter/INPUT#1 1", "filter/INPUT#2 1"},
	}, {
		name: "interface wildcards",
		rules: filterHead + "-A FORWARD -i eth1 -j DROP\n-A FORWARD -i et+ -o eth0 -j DROP\n" +
			"-A FORWARD ! -i eth+ -j DROP\n-A FORWARD -o eth+ -p tcp -j ACCEPT\nCOMMIT\n",
		packets: []genPacket{syn},
		disp:    []netfilter.Disposition{netfilter.Forwarded},
		frames:  [][]string{synFrame},
		nonZero: []string{"filter/FORWARD#4 1"},
	}, {
		name:  "conntrack: reply is ESTABLISHED",
		rules: filterHead + "-A FORWARD -m conntrack --ctstate ESTABLISHED -j ACCEPT\n-A FORWARD -m conntrack --ctstate NEW -i eth0 -j ACCEPT\n-A FORWARD -j DROP\nCOMMIT\n",
		packets: []genPacket{syn,
			tcpPkt(FromServer, serverIP, clientIP, 80, 40000, "SYN,ACK"),
			tcpPkt(FromServer, serverIP, clientIP, 81, 40000, "SYN")},
		disp:    []netfilter.Disposition{netfilter.Forwarded, netfilter.Forwarded, netfilter.Dropped},
		frames:  [][]string{synFrame, {"client: tcp 10.244.1.5:80 > 192.168.10.2:40000 [SYN,ACK] ttl=63 len=40"}, nil},
		nonZero: []string{"filter/FORWARD#1 1", "filter/FORWARD#2 1", "filter/FORWARD#3 1"},
	}})
}

// TestKernelIPv6Forwarding checks the IPv6 forward path and its counters.
func TestKernelIPv6Forwarding(t *testing.T) {
	c6, s6 := netip.MustParseAddr("fd00:10::2"), netip.MustParseAddr("fd00:244::5")
	runPathCases(t, []pathCase{{
		name:    "forwarded with hop limit - 1",
		rules:   filterHead + "-A FORWARD -s fd00:10::/64 -o eth+ -p udp --dport 53 -j ACCEPT\n-A FORWARD -j DROP\nCOMMIT\n",
		packets: []genPacket{udpPkt(FromClient, c6, s6, 5000, 53), udpPkt(FromClient, c6, s6, 5000, 54)},
		disp:    []netfilter.Disposition{netfilter.Forwarded, netfilter.Dropped},
		frames:  [][]string{{"server: udp [fd00:10::2]:5000 > [fd00:244::5]:53 ttl=63 len=58"}, nil},
		nonZero: []string{"filter/FORWARD#1 1", "filter/FORWARD#2 1"},
	}, {
		name:    "REJECT tcp-reset over IPv6",
		rules:   filterHead + "-A FORWARD -p tcp -j REJECT --reject-with tcp-reset\nCOMMIT\n",
		packets: []genPacket{tcpPkt(FromClient, c6, s6, 40000, 80, "SYN")},
		disp:    []netfilter.Disposition{netfilter.Rejected},
		frames:  [][]string{{"client: tcp [fd00:244::5]:80 > [fd00:10::2]:40000 [RST,ACK] ttl=64 len=60"}},
		nonZero: []string{"filter/FORWARD#1 1", "filter/OUTPUT#0 1"},
	}})
}

// TestKernelInvertedPortPair pins an iptables-nft 1.8.9 bug that
// packetwalk reproduces for the NFTables backend: "-p tcp ! --sport P !
// --dport Q" with single ports is compiled into one 4-byte compare
// "payload != Q<<16|P", so the kernel matches when either port differs, not
// when both do (nft's listing still shows two separate "!=" statements).
// If this test starts failing, the installed iptables fixed the bug.
func TestKernelInvertedPortPair(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{})
	rules := filterHead + "-A FORWARD -p tcp ! --sport 80 ! --dport 53 -j DROP\nCOMMIT\n"
	res, err := runCase(lab, genCase{Rules: rules, Packets: []genPacket{tcpPkt(FromClient, clientIP, serverIP, 22, 53, "SYN")}}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"filter/FORWARD#1 1"}, res.KernelCounters.NonZero(), "kernel: the sport differs, so the combined compare matches")
	require.Len(t, res.Sim, 1)
	assert.Equal(t, netfilter.Dropped, res.Sim[0].Result.Disposition, "packetwalk reproduces the combined compare")
	assert.Empty(t, res.Diffs)
}
