package netfilter

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// TestKernelRewriteTargets forwards frames through the kernel lab's node
// with the header-rewriting targets (TCPMSS, TCPOPTSTRIP, DSCP, TOS, TTL,
// HL, ECN) in
// its mangle table and through a FrameHost with the same rules, and
// compares the frames leaving towards the server byte for byte (the
// Ethernet addresses excepted: FrameHost does not model neighbours) and
// the rules' packet and byte counters.
func TestKernelRewriteTargets(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-rw"})
	cfg := lab.Config()
	client, server := cfg.Client.Addr(), cfg.Server[0].Addr()
	client6, server6 := cfg.Client6.Addr(), cfg.Server6[0].Addr()

	mangle := func(rules string) string {
		return "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" + rules + "COMMIT\n"
	}
	syn := func(port uint16) kerneltest.FrameSpec {
		return kerneltest.FrameSpec{Proto: "tcp", Src: client, Dst: server, SrcPort: port, DstPort: 80, TCPFlags: "SYN", Seq: 1000, ID: port, DF: true}
	}
	withMSS := func(s kerneltest.FrameSpec, mss uint16) kerneltest.FrameSpec {
		s.MSS, s.HasMSS, s.HasWScale, s.WScale, s.SACKPerm = mss, true, true, 7, true
		return s
	}
	with := func(s kerneltest.FrameSpec, f func(*kerneltest.FrameSpec)) kerneltest.FrameSpec {
		f(&s)
		return s
	}
	udp := kerneltest.FrameSpec{Proto: "udp", Src: client, Dst: server, SrcPort: 5000, DstPort: 53, ID: 9, TOS: 0xb9, PayloadLen: 12}
	udp6 := kerneltest.FrameSpec{Proto: "udp", Src: client6, Dst: server6, SrcPort: 5000, DstPort: 53, TOS: 0xb9, PayloadLen: 12}
	syn6 := kerneltest.FrameSpec{Proto: "tcp", Src: client6, Dst: server6, SrcPort: 41000, DstPort: 80, TCPFlags: "SYN", Seq: 7}

	for _, tc := range []struct {
		name  string
		v6    bool
		rules string
		spec  kerneltest.FrameSpec
		// eth1MTU, when set, is the MTU of the node's eth1 for the case.
		eth1MTU int
	}{
		{"tcpmss-set-lowers", false, "-A FORWARD -p tcp -m tcp --tcp-flags SYN,RST SYN -j TCPMSS --set-mss 1200\n", withMSS(syn(41001), 1460), 0},
		{"tcpmss-set-never-raises", false, "-A FORWARD -p tcp -j TCPMSS --set-mss 1600\n", withMSS(syn(41002), 1460), 0},
		{"tcpmss-clamp-default-mtu", false, "-A FORWARD -p tcp -j TCPMSS --clamp-mss-to-pmtu\n", withMSS(syn(41003), 8960), 0},
		{"tcpmss-clamp-eth1-mtu", false, "-A POSTROUTING -o eth1 -p tcp -j TCPMSS --clamp-mss-to-pmtu\n", withMSS(syn(41004), 1460), 1400},
		{"tcpmss-adds-option", false, "-A FORWARD -p tcp -j TCPMSS --set-mss 1000\n", syn(41005), 0},
		{"tcpmss-adds-option-clamp", false, "-A FORWARD -p tcp -j TCPMSS --clamp-mss-to-pmtu\n",
			with(syn(41006), func(s *kerneltest.FrameSpec) { s.HasWScale, s.WScale = true, 2 }), 0},
		// No SYN in the rule: with the nf_tables backend the kernel acts on
		// any segment, adding the option to a bare ACK too.
		{"tcpmss-ack-no-syn-match", false, "-A FORWARD -p tcp -j TCPMSS --set-mss 1000\n",
			with(syn(41007), func(s *kerneltest.FrameSpec) { s.TCPFlags, s.Ack = "ACK", 55 }), 0},
		{"tcpmss-payload-untouched", false, "-A FORWARD -p tcp -j TCPMSS --set-mss 1000\n",
			with(syn(41008), func(s *kerneltest.FrameSpec) { s.TCPFlags, s.Ack, s.PayloadLen = "PSH,ACK", 55, 20 }), 0},
		{"tcpoptstrip", false, "-A FORWARD -p tcp -j TCPOPTSTRIP --strip-options wscale,sack-permitted\n", withMSS(syn(41011), 1460), 0},
		{"tcpoptstrip-mss-then-tcpmss", false, "-A FORWARD -p tcp -j TCPOPTSTRIP --strip-options mss\n-A POSTROUTING -p tcp -j TCPMSS --set-mss 1000\n", withMSS(syn(41012), 1460), 0},
		{"tcpoptstrip-absent", false, "-A FORWARD -p tcp -j TCPOPTSTRIP --strip-options timestamp,md5\n", withMSS(syn(41013), 1460), 0},
		{"tcpoptstrip6", true, "-A FORWARD -p tcp -j TCPOPTSTRIP --strip-options mss,3\n", withMSS(syn6, 1440), 0},
		{"hmark-5tuple-tcp", false, hmarkRules("--hmark-tuple src,dst,sport,dport,proto --hmark-rnd 0xfeedcafe"), syn(41014), 0},
		{"hmark-5tuple-udp", false, hmarkRules("--hmark-tuple src,dst,sport,dport,proto --hmark-rnd 0xfeedcafe"), udp, 0},
		{"hmark-masks", false, hmarkRules("--hmark-src-prefix 16 --hmark-dst-prefix 24 --hmark-sport-mask 0x0f0f --hmark-dport 0x8000 --hmark-proto-mask 0x3 --hmark-rnd 7"), syn(41015), 0},
		{"hmark-icmp", false, hmarkRules("--hmark-tuple src,dst,sport,dport,proto --hmark-rnd 1"),
			kerneltest.FrameSpec{Proto: "icmp", Src: client, Dst: server, ICMPType: 8, ICMPID: 9, ICMPSeq: 1, ID: 3}, 0},
		// --hmark-tuple ct hashes the connection's tuples, when conntrack
		// runs (a conntrack rule turns it on); without it nothing is marked.
		{"hmark-ct", false, hmarkRules("--hmark-tuple ct --hmark-rnd 0xfeedcafe") + "-A FORWARD -m conntrack --ctstate NEW\n", syn(41016), 0},
		{"hmark-ct-udp-masks", false, hmarkRules("--hmark-tuple ct --hmark-src-prefix 16 --hmark-dport-mask 0xff --hmark-rnd 7") + "-A FORWARD -m conntrack --ctstate NEW\n", udp, 0},
		{"hmark-ct-icmp", false, hmarkRules("--hmark-tuple ct --hmark-rnd 1") + "-A FORWARD -m conntrack --ctstate NEW\n",
			kerneltest.FrameSpec{Proto: "icmp", Src: client, Dst: server, ICMPType: 8, ICMPID: 9, ICMPSeq: 1, ID: 4}, 0},
		{"hmark-ct-no-conntrack", false, hmarkRules("--hmark-tuple ct --hmark-rnd 0xfeedcafe"), syn(41017), 0},
		{"hmark6", true, hmarkRules("--hmark-tuple src,dst,sport,dport,proto --hmark-rnd 0x12345678"), udp6, 0},
		{"hmark6-prefix", true, hmarkRules("--hmark-src-prefix 56 --hmark-dst-prefix 100 --hmark-dport-mask 0xff --hmark-rnd 3"), syn6, 0},
		// --hmark-tuple ct: HMARK takes no conntrack reference, so alone it
		// finds no connection and leaves the mark; a conntrack rule turns
		// conntrack on. "ct" alone masks every field to 0 (one mark for
		// all); src, dst, sport, dport and proto give the masks.
		{"hmark-ct-conntrack-off", false, hmarkRules("--hmark-tuple ct --hmark-rnd 0xfeedcafe"), syn(41016), 0},
		{"hmark-ct-tcp", false, "-A PREROUTING -m conntrack --ctstate NEW\n" + hmarkRules("--hmark-tuple ct,src,dst,sport,dport,proto --hmark-rnd 0xfeedcafe"), syn(41017), 0},
		{"hmark-ct-udp-masks", false, "-A PREROUTING -m state --state NEW\n" + hmarkRules("--hmark-tuple ct --hmark-src-prefix 16 --hmark-sport-mask 0x0f0f --hmark-dport 0x8000 --hmark-proto-mask 0xff --hmark-rnd 7"), udp, 0},
		{"hmark-ct-icmp", false, "-A PREROUTING -m conntrack --ctstate NEW\n" + hmarkRules("--hmark-tuple ct,src,dst --hmark-rnd 1"),
			kerneltest.FrameSpec{Proto: "icmp", Src: client, Dst: server, ICMPType: 8, ICMPID: 9, ICMPSeq: 1, ID: 4}, 0},
		// After DNAT (nat PREROUTING), the reply tuple's source is the
		// new destination: HMARK in FORWARD hashes it.
		{"hmark-ct-after-dnat", false, hmarkCTWithDNAT(server, "FORWARD"),
			with(udp, func(s *kerneltest.FrameSpec) { s.Dst = netip.MustParseAddr("10.96.0.10") }), 0},
		// mangle PREROUTING runs before nat PREROUTING: the reply tuple is
		// still the inverse of the original.
		{"hmark-ct-before-dnat", false, hmarkCTWithDNAT(server, "PREROUTING"),
			with(udp, func(s *kerneltest.FrameSpec) { s.Dst = netip.MustParseAddr("10.96.0.10") }), 0},
		{"hmark6-ct", true, "-A PREROUTING -m conntrack --ctstate NEW\n" + hmarkRules("--hmark-tuple ct,src,dst,sport,dport --hmark-rnd 0x12345678"), udp6, 0},
		{"hmark6-ct-icmp", true, "-A PREROUTING -m conntrack --ctstate NEW\n" + hmarkRules("--hmark-tuple ct,sport,dport --hmark-dst-prefix 64 --hmark-rnd 5"),
			kerneltest.FrameSpec{Proto: "icmp", Src: client6, Dst: server6, ICMPType: 128, ICMPID: 77, ICMPSeq: 1}, 0},
		{"dscp-class-ef", false, "-A PREROUTING -j DSCP --set-dscp-class EF\n", udp, 0},
		{"dscp-zero", false, "-A FORWARD -j DSCP --set-dscp 0\n", udp, 0},
		{"tos-symbol", false, "-A PREROUTING -j TOS --set-tos Minimize-Delay\n", udp, 0},
		{"tos-and-or-xor", false, "-A PREROUTING -j TOS --and-tos 0xf0\n-A FORWARD -j TOS --or-tos 0x05\n-A POSTROUTING -j TOS --xor-tos 0x81\n", udp, 0},
		{"tos-value-mask", false, "-A PREROUTING -j TOS --set-tos 0x12/0x3c\n", udp, 0},
		{"ttl-set", false, "-A PREROUTING -j TTL --ttl-set 9\n", udp, 0},
		{"ttl-inc-saturates", false, "-A PREROUTING -j TTL --ttl-inc 250\n", udp, 0},
		{"ttl-dec-to-zero", false, "-A POSTROUTING -j TTL --ttl-dec 200\n", udp, 0},
		{"ecn-tcp-remove", false, "-A FORWARD -p tcp -j ECN --ecn-tcp-remove\n",
			with(syn(41009), func(s *kerneltest.FrameSpec) { s.TCPFlags = "SYN,ECE,CWR" }), 0},
		{"ecn-tcp-set", false, "-A FORWARD -p tcp -j ECN --ecn-tcp-ece 1 --ecn-tcp-cwr 1 --ecn-ip-ect 2\n", syn(41010), 0},
		{"ecn-ip-ect", false, "-A FORWARD -j ECN --ecn-ip-ect 1\n", udp, 0},
		{"hl-set", true, "-A PREROUTING -j HL --hl-set 3\n", udp6, 0},
		{"hl-inc-dec", true, "-A PREROUTING -j HL --hl-inc 100\n-A POSTROUTING -j HL --hl-dec 7\n", udp6, 0},
		{"dscp6", true, "-A FORWARD -j DSCP --set-dscp 0x11\n-A POSTROUTING -j TOS --xor-tos 0x0f\n", udp6, 0},
		{"tcpmss6-clamp-adds", true, "-A FORWARD -p tcp -j TCPMSS --clamp-mss-to-pmtu\n", syn6, 0},
		{"tcpmss6-clamp-lowers", true, "-A FORWARD -p tcp -j TCPMSS --clamp-mss-to-pmtu\n", withMSS(syn6, 9000), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := mangle(tc.rules)
			rs := kerneltest.Ruleset{IPv4: rules}
			fam := IPv4
			if tc.v6 {
				rs, fam = kerneltest.Ruleset{IPv6: rules}, IPv6
			}
			require.NoError(t, lab.ResetRuleset(rs))
			h := labHost(t, cfg, HostConfig{}, fam, rules)
			if tc.eth1MTU != 0 {
				_, _, err := lab.Node().Exec("", "ip", "link", "set", "eth1", "mtu", fmt.Sprint(tc.eth1MTU))
				require.NoError(t, err)
				t.Cleanup(func() { _, _, _ = lab.Node().Exec("", "ip", "link", "set", "eth1", "mtu", "1500") })
				h.Interface("eth1").MTU = tc.eth1MTU
			}
			frame, err := lab.Frame(tc.spec)
			require.NoError(t, err)
			obs, err := lab.Exchange(frame)
			require.NoError(t, err)
			res, err := NewFrameHost(h).ReceiveFrame("eth0", frame)
			require.NoError(t, err)

			require.Len(t, obs.Server, 1, "kernel: %s", obs)
			require.NotNil(t, res.Frame, "packetwalk did not forward: %v %s", res.Disposition, res.Reason)
			k, o := ipPart(t, obs.Server[0].Frame), ipPart(t, res.Frame)
			assert.Equal(t, fmt.Sprintf("% x", k), fmt.Sprintf("% x", o), "leaving frame: kernel (want) vs FrameHost (got)\nsent: % x", frame[12:])

			cnt, err := lab.Counters()
			if tc.v6 {
				cnt, err = lab.Counters6()
			}
			require.NoError(t, err)
			mine := h.Ruleset(fam).Table(Mangle)
			for _, ch := range mine.Chains() {
				for i, r := range ch.Rules {
					kc, ok := cnt.Rule("mangle", ch.Name, i+1)
					require.True(t, ok, "kernel counter of %s rule %d", ch.Name, i+1)
					assert.Equal(t, kc.Packets, r.Counters.Packets, "%s rule %d packets", ch.Name, i+1)
					assert.Equal(t, kc.Bytes, r.Counters.Bytes, "%s rule %d bytes", ch.Name, i+1)
				}
			}
		})
	}
}

// assertSameOut requires that the kernel let exactly one frame out on a
// side (out, of obs) and packetwalk one too (res), and compares their IP
// packets byte for byte.
func assertSameOut(t *testing.T, obs kerneltest.Observation, out []kerneltest.Captured, res FrameResult, what string) {
	t.Helper()
	require.Len(t, out, 1, "%s: kernel: %s", what, obs)
	require.NotNil(t, res.Frame, "%s: packetwalk let nothing out: %v %s", what, res.Disposition, res.Reason)
	assert.Equal(t, fmt.Sprintf("% x", ipPart(t, out[0].Frame)), fmt.Sprintf("% x", ipPart(t, res.Frame)), what)
}

// ipPart returns a frame from the EtherType on, without Ethernet padding
// (the IP packet's own length decides).
func ipPart(t *testing.T, f []byte) []byte {
	t.Helper()
	require.GreaterOrEqual(t, len(f), 34)
	n := len(f)
	switch binary.BigEndian.Uint16(f[12:14]) {
	case 0x0800:
		n = 14 + int(binary.BigEndian.Uint16(f[16:18]))
	case 0x86dd:
		n = 14 + 40 + int(binary.BigEndian.Uint16(f[18:20]))
	}
	require.LessOrEqual(t, n, len(f))
	return f[12:n]
}

// TestKernelNETMAP maps a whole prefix in nat PREROUTING (destination) and
// POSTROUTING (source) in the kernel lab and in a FrameHost, and compares
// the forwarded frame and the server's reply as they leave the node: the
// reply is translated back through the connection's binding.
func TestKernelNETMAP(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-nm"})
	cfg := lab.Config()
	nat := func(rules string) string {
		return "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" + rules + "COMMIT\n"
	}
	a := netip.MustParseAddr
	for _, tc := range []struct {
		name     string
		v6       bool
		rules    string
		spec     kerneltest.FrameSpec
		replySrc netip.Addr // the server's address the reply comes from
		replyDst netip.Addr // where the server answers (the mapped source)
	}{
		{"dst-and-src", false,
			"-A PREROUTING -d 10.96.1.0/24 -j NETMAP --to 10.244.1.0/24\n-A POSTROUTING -o eth1 -j NETMAP --to 172.16.10.0/24\n",
			kerneltest.FrameSpec{Proto: "udp", Src: cfg.Client.Addr(), Dst: a("10.96.1.5"), SrcPort: 5001, DstPort: 53, ID: 1, PayloadLen: 8},
			cfg.Server[0].Addr(), a("172.16.10.2")},
		{"tcp-dst-only", false,
			"-A PREROUTING -p tcp -d 10.96.16.0/20 -j NETMAP --to 10.244.0.0/20\n",
			kerneltest.FrameSpec{Proto: "tcp", Src: cfg.Client.Addr(), Dst: a("10.96.17.5"), SrcPort: 5002, DstPort: 80, TCPFlags: "SYN", Seq: 1, ID: 2, DF: true},
			cfg.Server[0].Addr(), cfg.Client.Addr()},
		{"ipv6", true,
			"-A PREROUTING -d fd00:96::/64 -j NETMAP --to fd00:244::/64\n-A POSTROUTING -o eth1 -j NETMAP --to fd00:172::/96\n",
			kerneltest.FrameSpec{Proto: "udp", Src: cfg.Client6.Addr(), Dst: a("fd00:96::5"), SrcPort: 5003, DstPort: 53, PayloadLen: 8},
			cfg.Server6[0].Addr(), a("fd00:172::2")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := nat(tc.rules)
			rs, fam := kerneltest.Ruleset{IPv4: rules}, IPv4
			if tc.v6 {
				rs, fam = kerneltest.Ruleset{IPv6: rules}, IPv6
			}
			require.NoError(t, lab.ResetRuleset(rs))
			h := labHost(t, cfg, HostConfig{}, fam, rules)
			fh := NewFrameHost(h)

			frame, err := lab.Frame(tc.spec)
			require.NoError(t, err)
			obs, err := lab.Exchange(frame)
			require.NoError(t, err)
			res, err := fh.ReceiveFrame("eth0", frame)
			require.NoError(t, err)
			assertSameOut(t, obs, obs.Server, res, "forwarded frame")

			reply := kerneltest.FrameSpec{Proto: tc.spec.Proto, Src: tc.replySrc, Dst: tc.replyDst, SrcPort: tc.spec.DstPort, DstPort: tc.spec.SrcPort, ID: 77, PayloadLen: 4}
			if tc.spec.Proto == "tcp" {
				reply.TCPFlags, reply.Seq, reply.Ack, reply.PayloadLen = "SYN,ACK", 500, 2, 0
			}
			rf, err := lab.FrameFrom(kerneltest.Server, reply)
			require.NoError(t, err)
			require.NoError(t, lab.InjectFrom(kerneltest.Server, rf))
			obs, err = lab.Settle()
			require.NoError(t, err)
			res, err = fh.ReceiveFrame("eth1", rf)
			require.NoError(t, err)
			assertSameOut(t, obs, obs.Client, res, "reply frame")
		})
	}
}

// TestKernelNFQUEUE checks what NFQUEUE does with no program bound to the
// queue: the kernel drops the packet, or with --queue-bypass accepts it
// for the current table only (the next table of the hook still runs).
// FrameHost without a QueueHandler must agree, counters included.
func TestKernelNFQUEUE(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-nq"})
	cfg := lab.Config()
	const mangle = "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
	const filter = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
	for _, tc := range []struct {
		name    string
		rules   string
		forward bool
	}{
		{"no-listener-drops", filter + "-A FORWARD -j NFQUEUE --queue-num 3\nCOMMIT\n", false},
		{"balance-drops", filter + "-A FORWARD -j NFQUEUE --queue-balance 2:5\nCOMMIT\n", false},
		{"bypass-accepts-table", filter + "-A FORWARD -j NFQUEUE --queue-num 3 --queue-bypass\n-A FORWARD -j DROP\nCOMMIT\n", true},
		{"bypass-next-table-runs", mangle + "-A FORWARD -j NFQUEUE --queue-bypass\n-A FORWARD -j DROP\nCOMMIT\n" +
			filter + "-A FORWARD -p udp -j DROP\nCOMMIT\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, lab.Reset(tc.rules))
			h := NewHost(HostConfig{})
			require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0))
			require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1))
			require.NoError(t, h.Restore(IPv4, []byte(tc.rules), RestoreOptions{}))
			frame, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: cfg.Client.Addr(), Dst: cfg.Server[0].Addr(), SrcPort: 4000, DstPort: 53, ID: 5, PayloadLen: 10})
			require.NoError(t, err)
			obs, err := lab.Exchange(frame)
			require.NoError(t, err)
			res, err := NewFrameHost(h).ReceiveFrame("eth0", frame)
			require.NoError(t, err)
			assert.Equal(t, tc.forward, len(obs.Server) == 1, "kernel forwarded: %s", obs)
			assert.Equal(t, tc.forward, res.Frame != nil, "packetwalk: %v %s", res.Disposition, res.Reason)
			cnt, err := lab.Counters()
			require.NoError(t, err)
			assertSameRuleCounters(t, h, IPv4, cnt, false)
		})
	}
}

// hmarkRules is an HMARK rule with the given options (and --hmark-mod 8
// --hmark-offset 100) in PREROUTING, and one FORWARD rule per possible
// mark, whose counters show which mark the packet got.
func hmarkRules(opts string) string {
	r := "-A PREROUTING -j HMARK " + opts + " --hmark-mod 8 --hmark-offset 100\n"
	for m := 100; m < 108; m++ {
		r += fmt.Sprintf("-A FORWARD -m mark --mark %d\n", m)
	}
	return r
}

// hmarkCTWithDNAT is an HMARK --hmark-tuple ct rule in chain, one
// POSTROUTING rule per possible mark, and (after the mangle table's
// COMMIT, which the caller writes at its end) a nat table that DNATs UDP
// to 10.96.0.10:53 to server:54.
func hmarkCTWithDNAT(server netip.Addr, chain string) string {
	r := "-A " + chain + " -j HMARK --hmark-tuple ct,src,dst,sport,dport,proto --hmark-rnd 7 --hmark-mod 8 --hmark-offset 100\n"
	for m := 100; m < 108; m++ {
		r += fmt.Sprintf("-A POSTROUTING -m mark --mark %d\n", m)
	}
	return r + "COMMIT\n*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A PREROUTING -d 10.96.0.10 -p udp --dport 53 -j DNAT --to-destination " + server.String() + ":54\n"
}

// TestKernelNPT forwards IPv6 frames through DNPT (PREROUTING) and SNPT
// (POSTROUTING) in the kernel lab and in a FrameHost and compares the
// frames leaving towards the server: the mapped addresses and the
// untouched (checksum-neutral) transport checksums.
func TestKernelNPT(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-npt"})
	cfg := lab.Config()
	server6 := cfg.Server6[0].Addr()
	const mangle = "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
	// pre is the address DNPT maps onto the server: the inverse mapping
	// of the server's address.
	pre := func(from, to string) netip.Addr {
		inv := NPTTarget{Dest: true, Src: netip.MustParsePrefix(to), Dst: netip.MustParsePrefix(from)}
		a, ok := inv.mapNPT(server6)
		require.True(t, ok)
		return a
	}
	for _, tc := range []struct {
		name, rules string
		dst         netip.Addr
		proto       string
	}{
		{"dnpt64-udp", "-A PREROUTING -d fd00:96::/64 -j DNPT --src-pfx fd00:96::/64 --dst-pfx fd00:244::/64\n", pre("fd00:96::/64", "fd00:244::/64"), "udp"},
		{"dnpt48-tcp", "-A PREROUTING -d fd00:97::/48 -j DNPT --src-pfx fd00:97::/48 --dst-pfx fd00:244::/48\n", pre("fd00:97::/48", "fd00:244::/48"), "tcp"},
		{"snpt56", "-A POSTROUTING -o eth1 -j SNPT --src-pfx fd00:10::/56 --dst-pfx fd00:172:aa00::/40\n", server6, "udp"},
		{"both", "-A PREROUTING -d fd00:96::/64 -j DNPT --src-pfx fd00:96::/64 --dst-pfx fd00:244::/64\n" +
			"-A POSTROUTING -o eth1 -j SNPT --src-pfx fd00:10::/64 --dst-pfx 2001:db8:1::/64\n", pre("fd00:96::/64", "fd00:244::/64"), "tcp"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rules := mangle + tc.rules + "COMMIT\n"
			require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv6: rules}))
			h := labHost(t, cfg, HostConfig{}, IPv6, rules)
			spec := kerneltest.FrameSpec{Proto: tc.proto, Src: cfg.Client6.Addr(), Dst: tc.dst, SrcPort: 7000, DstPort: 53, PayloadLen: 6}
			if tc.proto == "tcp" {
				spec.TCPFlags, spec.Seq, spec.PayloadLen = "SYN", 99, 0
			}
			frame, err := lab.Frame(spec)
			require.NoError(t, err)
			obs, err := lab.Exchange(frame)
			require.NoError(t, err)
			res, err := NewFrameHost(h).ReceiveFrame("eth0", frame)
			require.NoError(t, err)
			assertSameOut(t, obs, obs.Server, res, "forwarded frame")
		})
	}
}

// TestKernelTCPMSSLocal clamps a segment the node sends itself: the route
// back to a local source is through lo (MTU 65536), so the clamp follows
// the output route's MTU.
func TestKernelTCPMSSLocal(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-mssl"})
	cfg := lab.Config()
	rules := "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A OUTPUT -p tcp -j TCPMSS --clamp-mss-to-pmtu\nCOMMIT\n"
	require.NoError(t, lab.Reset(rules))
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0))
	require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1))
	require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
	spec := kerneltest.FrameSpec{Proto: "tcp", Src: cfg.NodeEth1.Addr(), Dst: cfg.Server[0].Addr(), SrcPort: 43000, DstPort: 80,
		TCPFlags: "SYN", Seq: 1, ID: 0x77, DF: true, HasMSS: true, MSS: 9000}
	pkt, err := kerneltest.BuildPacket(spec)
	require.NoError(t, err)
	require.NoError(t, lab.SendFromNode(pkt))
	obs, err := lab.Settle()
	require.NoError(t, err)
	require.Len(t, obs.Server, 1, "kernel: %s", obs)
	frame, err := kerneltest.BuildFrame(kerneltest.NodeEth1MAC, kerneltest.ServerMAC, spec)
	require.NoError(t, err)
	res, err := NewFrameHost(h).SendFrame(frame)
	require.NoError(t, err)
	require.NotNil(t, res.Frame, "%v %s", res.Disposition, res.Reason)
	assert.Equal(t, fmt.Sprintf("% x", ipPart(t, obs.Server[0].Frame)), fmt.Sprintf("% x", ipPart(t, res.Frame)))
}
