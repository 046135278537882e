package netfilter

import (
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Refusals of the other target extensions, each checked against
// iptables-restore 1.8.9 (the accepted forms are in
// testdata/golden/ext-targets.rules and ext-targets6.rules6).
func TestExtTargetsRefused(t *testing.T) {
	for _, tc := range []struct {
		f    Family
		line string
		err  error
	}{
		{IPv4, "-t mangle -A POSTROUTING -j CLASSIFY --set-class 1", ErrBadValue},
		{IPv4, "-t mangle -A POSTROUTING -j CLASSIFY", ErrMissingArgument},
		{IPv4, "-t mangle -A PREROUTING -j CLASSIFY --set-class 1:1", ErrNotAllowed},
		{IPv4, "-t mangle -A INPUT -j CLASSIFY --set-class 1:1", ErrNotAllowed},
		// Any table: only the hook counts (verified: filter OUTPUT,
		// FORWARD, nat and raw POSTROUTING/OUTPUT are accepted).
		{IPv4, "-t filter -A INPUT -j CLASSIFY --set-class 1:1", ErrNotAllowed},
		{IPv4, "-t mangle -A POSTROUTING -j CHECKSUM", ErrMissingArgument},
		{IPv4, "-t filter -A INPUT -j CHECKSUM --checksum-fill", ErrNotAllowed},
		{IPv4, "-A INPUT -j AUDIT --type foo", ErrBadValue},
		{IPv4, "-A INPUT -j AUDIT", ErrMissingArgument},
		{IPv4, "-A INPUT -j IDLETIMER --timeout 0 --label x", ErrBadValue},
		{IPv4, `-A INPUT -j IDLETIMER --timeout 5 --label ""`, ErrBadValue},
		{IPv4, "-A INPUT -j IDLETIMER --label x", ErrMissingArgument},
		{IPv4, "-A INPUT -j IDLETIMER --timeout 10", ErrMissingArgument},
		{IPv4, "-A INPUT -j RATEEST --rateest-name r1", ErrBadValue},
		{IPv4, "-A INPUT -j RATEEST --rateest-interval 1s --rateest-ewmalog 8s", ErrMissingArgument},
		{IPv4, "-A INPUT -j RATEEST --rateest-name x --rateest-interval 9s --rateest-ewmalog 80s", ErrBadValue},
		{IPv4, "-A INPUT -j RATEEST --rateest-name x --rateest-interval 300xs --rateest-ewmalog 3s", ErrBadValue},
		{IPv4, "-t mangle -A INPUT -j CONNSECMARK", ErrMissingArgument},
		{IPv4, "-t mangle -A INPUT -j CONNSECMARK --save --restore", ErrIncompatibleOpts},
		{IPv4, "-t filter -A INPUT -j CONNSECMARK --save", ErrNotAllowed},
		{IPv4, "-A INPUT -j SYNPROXY --mss 1460", ErrNotAllowed},
		{IPv4, "-t mangle -A PREROUTING -p tcp -j SYNPROXY", ErrNotAllowed},
		{IPv4, "-A OUTPUT -p tcp -j SYNPROXY", ErrNotAllowed},
		{IPv4, "-t mangle -A PREROUTING -j TCPOPTSTRIP --strip-options 2", ErrNotAllowed},
		{IPv4, "-t mangle -A PREROUTING -p tcp -j TCPOPTSTRIP --strip-options 256", ErrBadValue},
		{IPv4, "-t mangle -A PREROUTING -p tcp -j TCPOPTSTRIP --strip-options foo", ErrBadValue},
		{IPv4, "-t mangle -A PREROUTING -p tcp -j TCPOPTSTRIP --strip-options 0,1", ErrBadValue},
		{IPv4, "-t mangle -A PREROUTING -p tcp -j TCPOPTSTRIP --strip-options timestamp,8", ErrMultipleFlags},
		{IPv4, "-t filter -A INPUT -p tcp -j TCPOPTSTRIP --strip-options 2", ErrNotAllowed},
		{IPv4, "-A INPUT -j TEE", ErrMissingArgument},
		{IPv4, "-A INPUT -j TEE --oif eth0", ErrMissingArgument},
		{IPv4, "-A INPUT -j TEE --gateway foo.invalid", ErrBadValue},
		{IPv4, "-A INPUT -j TEE --gateway fd00::1", ErrBadValue},
		{IPv4, "-t mangle -A PREROUTING -p tcp -j TPROXY --on-ip 1.2.3.4", ErrMissingArgument},
		{IPv4, "-t mangle -A PREROUTING -j TPROXY --on-port 1", ErrNotAllowed},
		{IPv4, "-t mangle -A INPUT -p tcp -j TPROXY --on-port 1", ErrNotAllowed},
		{IPv4, "-A INPUT -p tcp -j TPROXY --on-port 1", ErrNotAllowed},
		{IPv6, "-t mangle -A PREROUTING -j DNPT --src-pfx fd00::/64", ErrMissingArgument},
		{IPv6, "-t mangle -A PREROUTING -j DNPT --src-pfx fd00::1/64 --dst-pfx 2001:db8::/64", ErrNotAllowed},
		{IPv6, "-t mangle -A POSTROUTING -j DNPT --src-pfx fd00::/64 --dst-pfx 2001:db8::/64", ErrNotAllowed},
		{IPv6, "-t mangle -A OUTPUT -j SNPT --src-pfx fd00::/64 --dst-pfx 2001:db8::/64", ErrNotAllowed},
		{IPv6, "-t nat -A PREROUTING -j DNPT --src-pfx fd00::/64 --dst-pfx 2001:db8::/64", ErrNotAllowed},
		{IPv4, "-t mangle -A PREROUTING -j DNPT --src-pfx fd00::/64 --dst-pfx 2001:db8::/64", ErrUnknownTarget},
		{IPv4, "-t mangle -A PREROUTING -d 10.0.0.5 -j CLUSTERIP --new --hashmode sourceip --clustermac 01:00:5e:00:00:01 --total-nodes 2 --local-node 1", ErrUnknownTarget},
		{IPv4, "-A INPUT -j ULOG --ulog-nlgroup 1", ErrUnknownTarget},
		{IPv6, "-A INPUT -j ULOG --ulog-nlgroup 1", ErrUnknownTarget},
		{IPv4, "-t mangle -A PREROUTING -j HMARK --hmark-mod 10", ErrMissingArgument},
		{IPv4, "-t mangle -A PREROUTING -j HMARK --hmark-tuple src", ErrMissingArgument},
		{IPv4, "-t mangle -A PREROUTING -j HMARK --hmark-mod 3 --hmark-rnd 1", ErrMissingArgument},
		{IPv4, "-t mangle -A PREROUTING -j HMARK --hmark-mod 0 --hmark-rnd 1 --hmark-tuple src", ErrBadValue},
		{IPv4, "-t mangle -A PREROUTING -j HMARK --hmark-mod 10 --hmark-rnd 5 --hmark-sport-mask 0xff --hmark-spi-mask 0x3", ErrIncompatibleOpts},
		{IPv4, "-t mangle -A PREROUTING -j HMARK --hmark-mod 10 --hmark-rnd 5 --hmark-tuple src --hmark-src-prefix 8", ErrMultipleFlags},
		{IPv4, "-t mangle -A PREROUTING -j HMARK --hmark-mod 10 --hmark-rnd 5 --hmark-src-prefix 33", ErrBadValue},
		{IPv4, "-t mangle -A PREROUTING -j HMARK --hmark-mod 10 --hmark-rnd 5 --hmark-tuple foo", ErrBadValue},
		{IPv4, "-A INPUT -j LED", ErrMissingArgument},
		{IPv4, "-A INPUT -j LED --led-trigger-id foo", ErrUnknownTarget},
		{IPv4, "-A INPUT -j SECMARK", ErrMissingArgument},
		{IPv4, "-t mangle -A INPUT -j SECMARK --selctx system_u:object_r:ssh_packet_t:s0", ErrUnknownTarget},
	} {
		t.Run(tc.line, func(t *testing.T) {
			err := NewRuleset(tc.f).Exec(tc.line)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.err)
		})
	}
}

// Targets whose effect packetwalk does not model are read and printed,
// but a host refuses to load them, naming why.
func TestExtTargetsUnmodelledRefusedAtLoad(t *testing.T) {
	for _, tc := range []struct {
		f     Family
		rules string
		why   string
	}{
		{IPv4, "*filter\n-A INPUT -j TEE --gateway 10.0.0.1 --oif eth0\nCOMMIT\n", "TEE: --oif"},
		{IPv4, "*filter\n-A INPUT -p tcp -j SYNPROXY\nCOMMIT\n", "SYNPROXY: the syncookie"},
	} {
		rs, err := ParseRestore(tc.f, []byte(tc.rules))
		require.NoError(t, err, "read and printed")
		assert.NotEmpty(t, rs.AppendSave(nil, SaveOptions{}))
		err = NewHost(HostConfig{}).Load(rs)
		assert.ErrorIs(t, err, ErrNotModelled)
		assert.ErrorContains(t, err, tc.why)
	}
}

// HMARK --hmark-tuple ct hashes the connection's tuples: the original
// source and the reply source (the DNAT destination), their ports; with no
// connection the mark stays. The marks are those TestKernelRewriteTargets
// (hmark-ct-after-dnat) sees in the kernel for the same packet.
func TestHMARKConntrackTuple(t *testing.T) {
	nat := "*nat\n-A PREROUTING -d 10.96.0.10 -p udp --dport 53 -j DNAT --to-destination 10.244.1.5:54\nCOMMIT\n"
	hmark := "-j HMARK --hmark-tuple ct,src,dst,sport,dport,proto --hmark-rnd 7 --hmark-mod 8 --hmark-offset 100\n"
	for _, tc := range []struct {
		name, rules string
		mark        uint32
	}{
		{"after DNAT", "*mangle\n-A FORWARD " + hmark + "COMMIT\n" + nat, 100},
		// before nat PREROUTING the reply tuple is the original's inverse
		{"before DNAT", "*mangle\n-A PREROUTING " + hmark + "COMMIT\n" + nat, 106},
		// the packet form in FORWARD hashes the rewritten packet: the same
		{"packet form", "*mangle\n-A FORWARD " + strings.Replace(hmark, "ct,", "", 1) + "COMMIT\n" + nat, 100},
		{"no conntrack", "*mangle\n-A FORWARD " + hmark + "COMMIT\n", 0},
		{"before the conntrack hook", "*raw\n-A PREROUTING " + hmark + "COMMIT\n" + nat, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHost(HostConfig{})
			require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
			require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
			require.NoError(t, h.Restore(IPv4, []byte(tc.rules), RestoreOptions{}))
			dst := "10.96.0.10:53"
			if tc.name == "no conntrack" {
				dst = "10.244.1.5:54"
			}
			res := h.Receive("eth0", UDP(netip.MustParseAddrPort("192.168.10.2:5000"), netip.MustParseAddrPort(dst)))
			require.Equal(t, Forwarded, res.Disposition, res.Reason)
			assert.Equal(t, tc.mark, res.Packet.Mark)
		})
	}
}

func TestClassifyAndOptstripApply(t *testing.T) {
	h := rewriteHost(t, IPv4, "-A POSTROUTING -j CLASSIFY --set-class 10000:2a\n-A FORWARD -p tcp -j TCPOPTSTRIP --strip-options mss,sack-permitted,md5\n"+
		"-A FORWARD -j CHECKSUM --checksum-fill\n-A FORWARD -j CONNSECMARK --save\n")
	p := TCP(netip.MustParseAddrPort("10.0.0.2:1"), netip.MustParseAddrPort("10.1.0.5:80"), inet.SYN)
	p.SetTCPOption(2)
	p.SetTCPOption(3)
	p.SetTCPOption(4)
	p.MSS, p.TCPHeaderLen, p.Length = 1460, 32, 52
	res := h.Receive("eth0", p)
	require.Equal(t, Forwarded, res.Disposition, res.Reason)
	assert.Equal(t, uint32(0x2a), res.Packet.Priority, "the major's low 16 bits only")
	assert.False(t, res.Packet.hasTCPOption(2))
	assert.False(t, res.Packet.hasTCPOption(4))
	assert.True(t, res.Packet.hasTCPOption(3))
	assert.True(t, res.Packet.hasTCPOption(1), "NOPs in their place")
	assert.Equal(t, 52, res.Packet.Length, "stripping keeps the length")
}

// The targets that act on packets keep the walk allocation-free.
func TestExtTargetsNoAllocs(t *testing.T) {
	h := rewriteHost(t, IPv4, "-A PREROUTING -p tcp -j TCPMSS --set-mss 1000\n-A FORWARD -p tcp -j TCPMSS --clamp-mss-to-pmtu\n"+
		"-A PREROUTING -j DSCP --set-dscp 10\n-A PREROUTING -j TOS --set-tos 0x10/0x3f\n-A PREROUTING -j TTL --ttl-inc 3\n"+
		"-A PREROUTING -p tcp -j ECN --ecn-tcp-remove --ecn-ip-ect 1\n-A FORWARD -p tcp -j TCPOPTSTRIP --strip-options wscale\n"+
		"-A POSTROUTING -j CLASSIFY --set-class 1:2\n-A PREROUTING -j HMARK --hmark-tuple src,dst,sport,dport,proto --hmark-mod 8 --hmark-rnd 1\n"+
		"-A FORWARD -j AUDIT --type accept\n-A FORWARD -j IDLETIMER --timeout 5 --label x\n-A FORWARD -j RATEEST --rateest-name r --rateest-interval 1s --rateest-ewmalog 4s\n")
	p := TCP(netip.MustParseAddrPort("10.0.0.2:1"), netip.MustParseAddrPort("10.1.0.5:80"), inet.SYN)
	require.Equal(t, Forwarded, h.Receive("eth0", p).Disposition)
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.Receive("eth0", p) }))
}

func TestNPTApply(t *testing.T) {
	d := &NPTTarget{Dest: true, Src: netip.MustParsePrefix("fd00:96::/64"), Dst: netip.MustParsePrefix("fd00:244::/64")}
	// RFC 6296 arithmetic: the first interface-identifier word absorbs
	// 0xfd96 - 0xff44 in one's complement (0xfe51).
	a, ok := d.mapNPT(netip.MustParseAddr("fd00:96::1ae:0:0:5"))
	require.True(t, ok)
	assert.Equal(t, netip.MustParseAddr("fd00:244::5"), a, "0x01ae + 0xfe51 = 0xffff, written as 0")
	a, ok = d.mapNPT(netip.MustParseAddr("fd00:96::1"))
	require.True(t, ok)
	assert.Equal(t, netip.MustParseAddr("fd00:244::fe51:0:0:1"), a)
	_, ok = d.mapNPT(netip.MustParseAddr("fd00:96::ffff:ffff:ffff:ffff"))
	assert.False(t, ok, "no word can take the adjustment")
	// The mapping back is the inverse.
	back := &NPTTarget{Src: d.Dst, Dst: d.Src}
	b, _ := back.mapNPT(a)
	assert.Equal(t, netip.MustParseAddr("fd00:96::1"), b)

	h := rewriteHost(t, IPv6, "-A PREROUTING -j DNPT --src-pfx fd00:96::/64 --dst-pfx fd01::/64\n")
	res := h.Receive("eth0", UDP(netip.MustParseAddrPort("[fd00::2]:1"), netip.MustParseAddrPort("[fd00:96::ffff:ffff:ffff:ffff]:53")))
	assert.Equal(t, Dropped, res.Disposition)
	res = h.Receive("eth0", UDP(netip.MustParseAddrPort("[fd00::2]:1"), netip.MustParseAddrPort("[fd00:96::5]:53")))
	require.Equal(t, Forwarded, res.Disposition, res.Reason)
	assert.True(t, netip.MustParsePrefix("fd01::/64").Contains(res.Packet.Dst), "%v", res.Packet.Dst)
	assert.Zero(t, testing.AllocsPerRun(50, func() {
		h.Receive("eth0", UDP(netip.MustParseAddrPort("[fd00::2]:1"), netip.MustParseAddrPort("[fd00:96::5]:53")))
	}))
}

// TestHMARKCT: --hmark-tuple ct hashes the connection's original source
// and reply source with their ports, so a MASQUERADEd reply seen in mangle
// PREROUTING (before nat restores its destination) gets the mark of its
// connection's first packet, where the packet hash does not; a packet
// without a connection keeps its mark (TestKernelRewriteTargets checks
// the tracked and untracked cases against the kernel).
func TestHMARKCT(t *testing.T) {
	a := netip.MustParseAddr
	load := func(tuple string) *Host {
		h := NewHost(HostConfig{})
		require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
		require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
		require.NoError(t, h.Restore(IPv4, []byte("*mangle\n-A PREROUTING -j HMARK "+tuple+" --hmark-mod 1000 --hmark-rnd 0xfeedcafe\nCOMMIT\n"+
			"*nat\n-A POSTROUTING -o eth1 -j MASQUERADE\nCOMMIT\n"), RestoreOptions{}))
		return h
	}
	first := Packet{Proto: inet.TCP, Src: a("192.168.10.2"), Dst: a("10.244.1.5"), SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN, TTL: 64}
	reply := Packet{Proto: inet.TCP, Src: a("10.244.1.5"), Dst: a("10.244.1.1"), SrcPort: 80, TCPFlags: inet.SYN | inet.ACK, TTL: 64}
	for _, tuple := range []string{"--hmark-tuple ct", "--hmark-tuple src,dst,sport,dport,proto"} {
		h := load(tuple)
		res := h.Receive("eth0", first)
		require.Equal(t, Forwarded, res.Disposition)
		mark := res.Packet.Mark
		assert.NotZero(t, mark)
		r := reply
		r.DstPort = res.Packet.SrcPort // MASQUERADE's port
		res = h.Receive("eth1", r)
		require.Equal(t, Forwarded, res.Disposition, tuple)
		if tuple == "--hmark-tuple ct" {
			assert.Equal(t, mark, res.Packet.Mark, "the connection's mark")
		} else {
			assert.NotEqual(t, mark, res.Packet.Mark, "the masqueraded address hashed")
		}
	}
	// Without a rule needing conntrack nothing is tracked: no mark.
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.Restore(IPv4, []byte("*mangle\n-A PREROUTING -j HMARK --hmark-tuple ct --hmark-mod 1000 --hmark-rnd 1\nCOMMIT\n"), RestoreOptions{}))
	assert.Zero(t, h.Receive("eth0", first).Packet.Mark)
}
