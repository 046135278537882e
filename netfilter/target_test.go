package netfilter

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMarkTargetApply(t *testing.T) {
	for _, tc := range []struct {
		spec     string
		in, want uint32
	}{
		{"--set-mark 0x1", 0xff00, 0x1},
		{"--set-mark 0x1/0xf", 0xff00, 0xff01},
		{"--or-mark 0x4000", 0x1, 0x4001},
		{"--and-mark 0xfffffffb", 0xf, 0xb},
		{"--xor-mark 0x4000", 0x4001, 0x1},
		{"--set-xmark 0x10/0x30", 0x3f, 0x1f},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			rs := NewRuleset(IPv4)
			require.NoError(t, rs.Exec("-t mangle -A PREROUTING -j MARK "+tc.spec))
			h := NewHost(HostConfig{})
			require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24")))
			require.NoError(t, h.Load(rs))
			res := h.Receive("eth0", Packet{Proto: inet.UDP, Src: netip.MustParseAddr("10.0.0.2"),
				Dst: netip.MustParseAddr("10.0.0.1"), DstPort: 53, TTL: 64, Length: 60, Mark: tc.in})
			assert.Equal(t, Delivered, res.Disposition)
			assert.Equal(t, tc.want, res.Packet.Mark)
		})
	}
}

func TestConnmarkTargetApply(t *testing.T) {
	ct := func(mark uint32) *evalCtx {
		return &evalCtx{pkt: &Packet{}, ct: ctInfo{tracked: true, mark: mark}, ctReady: true, host: NewHost(HostConfig{}), walk: &walk{}}
	}
	// Without a conntrack entry in the host, setCTMark cannot store; the
	// pure arithmetic is checked on RESTORE and through the mark it reads.
	tg := &ConnmarkTarget{Mode: ConnmarkRestore, CTMask: 0xff, NFMask: 0xff}
	c := ct(0x1234)
	c.pkt.Mark = 0xab00
	assert.Equal(t, vContinue, tg.apply(c))
	assert.Equal(t, uint32(0xab34), c.pkt.Mark)

	tg = &ConnmarkTarget{Mode: ConnmarkRestore, CTMask: 0xff00, NFMask: 0xff, ShiftRight: true, ShiftBits: 8}
	c = ct(0x1200)
	assert.Equal(t, vContinue, tg.apply(c))
	assert.Equal(t, uint32(0x12), c.pkt.Mark)

	// Untracked packets are left alone.
	c = &evalCtx{pkt: &Packet{Mark: 7}, ctReady: true}
	tg.apply(c)
	assert.Equal(t, uint32(7), c.pkt.Mark)
}

func TestTargetErrors(t *testing.T) {
	for _, tc := range []struct {
		fam  Family
		line string
		want error
	}{
		{IPv4, "-t mangle -A PREROUTING -j MARK --set-mark abc", ErrBadValue},
		{IPv4, "-t mangle -A PREROUTING -j MARK", ErrMissingArgument},
		{IPv4, "-t mangle -A PREROUTING -j MARK --set-mark 1 --or-mark 2", ErrIncompatibleOpts},
		{IPv4, "-t mangle -A PREROUTING -j CONNMARK --save-mark --nfmask 1 --mask 2", ErrIncompatibleOpts},
		{IPv4, "-t mangle -A PREROUTING -j CONNMARK", ErrMissingArgument},
		{IPv4, "-A INPUT -j REJECT --reject-with bogus", ErrBadValue},
		{IPv4, "-A INPUT -p udp -j REJECT --reject-with tcp-reset", ErrNotAllowed},
		{IPv4, "-t mangle -A INPUT -j REJECT", ErrNotAllowed},
		{IPv4, "-t nat -A PREROUTING -j DNAT --to-destination 10.0.0.1:80", ErrNotAllowed},
		{IPv4, "-t nat -A PREROUTING -j DNAT --to-destination foo", ErrBadValue},
		{IPv4, "-t nat -A PREROUTING -j DNAT", ErrMissingArgument},
		{IPv4, "-t nat -A POSTROUTING -j DNAT --to-destination 1.2.3.4", ErrNotAllowed},
		{IPv4, "-t nat -A OUTPUT -j SNAT --to-source 1.2.3.4", ErrNotAllowed},
		{IPv4, "-t nat -A INPUT -j MASQUERADE", ErrNotAllowed},
		{IPv4, "-t nat -A POSTROUTING -p tcp -j MASQUERADE --to-ports 1:2", ErrBadValue},
		{IPv4, "-t nat -A POSTROUTING -p tcp -j MASQUERADE --to-ports 1-2/3", ErrNotModelled},
		{IPv6, "-t nat -A PREROUTING -j DNAT --to-destination 10.0.0.1", ErrBadValue},
		{IPv6, "-t nat -A OUTPUT -p ipv6-icmp -j REDIRECT --to-ports 22", ErrNotAllowed},
		{IPv6, "-t nat -A POSTROUTING -p ipv6-icmp -j MASQUERADE --to-ports 80", ErrNotAllowed},
		{IPv4, "-A INPUT -j LOG --log-level 8", ErrBadValue},
		{IPv4, "-A INPUT -j NFLOG --nflog-group 65536", ErrBadValue},
		{IPv4, "-t raw -A PREROUTING -j CT --helper ftp", ErrNotModelled},
		{IPv4, "-t raw -A PREROUTING -j CT --timeout t", ErrNotModelled},
		{IPv4, "-t mangle -A PREROUTING -j CT --notrack", ErrNotAllowed},
		{IPv4, "-t mangle -A PREROUTING -j NOTRACK", ErrNotAllowed},
		{IPv4, "-A INPUT -j SET --map-set S src", ErrNotModelled},
		{IPv4, "-A INPUT -j SET", ErrMissingArgument},
		{IPv4, "-A INPUT -j SET --del-set S src --exist", ErrIncompatibleOpts},
	} {
		t.Run(tc.line, func(t *testing.T) {
			err := NewRuleset(tc.fam).Exec(tc.line)
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.want), "got %v", err)
		})
	}
}

func TestBuildReject(t *testing.T) {
	a := netip.MustParseAddr
	syn := Packet{Family: IPv4, Proto: inet.TCP, Src: a("10.0.0.2"), Dst: a("10.0.0.1"), SrcPort: 40000, DstPort: 80,
		TCPFlags: inet.SYN, TTL: 64, Length: 60, In: "eth0", Seq: 1000, TCPHeaderLen: 40}
	r, ok := buildReject(&syn, RejectTCPReset)
	require.True(t, ok)
	assert.Equal(t, Packet{Family: IPv4, Proto: inet.TCP, Src: a("10.0.0.1"), Dst: a("10.0.0.2"), SrcPort: 80, DstPort: 40000,
		TCPFlags: inet.RST | inet.ACK, TTL: 64, Length: 40, Out: "eth0", Ack: 1001}, r)

	ack := syn
	ack.TCPFlags, ack.Ack = inet.ACK|inet.PSH, 5000
	r, ok = buildReject(&ack, RejectTCPReset)
	require.True(t, ok)
	assert.Equal(t, inet.RST, r.TCPFlags)
	assert.Equal(t, [2]uint32{5000, 0}, [2]uint32{r.Seq, r.Ack})

	rst := syn
	rst.TCPFlags = inet.RST
	_, ok = buildReject(&rst, RejectTCPReset)
	assert.False(t, ok, "no reset in reply to a reset")

	udp := Packet{Family: IPv4, Proto: inet.UDP, Src: a("10.0.0.2"), Dst: a("10.0.0.1"), SrcPort: 5000, DstPort: 53,
		TTL: 64, TOS: 0x10, Length: 100, In: "eth0"}
	r, ok = buildReject(&udp, RejectICMPPortUnreachable)
	require.True(t, ok)
	assert.Equal(t, Packet{Family: IPv4, Proto: inet.ICMP, ICMPType: 3, ICMPCode: 3, Src: a("10.0.0.1"), Dst: a("10.0.0.2"),
		TTL: 64, TOS: 0xd0, Length: 128, Out: "eth0"}, r)

	big := udp
	big.Length = 1500
	r, _ = buildReject(&big, RejectICMPAdminProhibited)
	assert.Equal(t, 576, r.Length)
	assert.Equal(t, uint8(13), r.ICMPCode)

	frag := udp
	frag.FragOffset = 10
	_, ok = buildReject(&frag, RejectICMPPortUnreachable)
	assert.False(t, ok, "no error about a non-first fragment")

	icmpErr := Packet{Family: IPv4, Proto: inet.ICMP, ICMPType: 3, Src: a("10.0.0.2"), Dst: a("10.0.0.1"), Length: 56}
	_, ok = buildReject(&icmpErr, RejectICMPPortUnreachable)
	assert.False(t, ok, "no error about an error")
	echo := icmpErr
	echo.ICMPType = 8
	_, ok = buildReject(&echo, RejectICMPHostProhibited)
	assert.True(t, ok)

	bcast := udp
	bcast.Dst = a("255.255.255.255")
	_, ok = buildReject(&bcast, RejectICMPPortUnreachable)
	assert.False(t, ok)

	u6 := Packet{Family: IPv6, Proto: inet.UDP, Src: a("2001:db8::2"), Dst: a("2001:db8::1"), DstPort: 53, Length: 2000}
	r, ok = buildReject(&u6, RejectICMP6AdmProhibited)
	require.True(t, ok)
	assert.Equal(t, Packet{Family: IPv6, Proto: inet.ICMPv6, ICMPType: 1, ICMPCode: 1, Src: a("2001:db8::1"), Dst: a("2001:db8::2"),
		TTL: 64, Length: 1280}, r)
	ns := u6
	ns.Proto, ns.ICMPType = inet.ICMPv6, 1
	_, ok = buildReject(&ns, RejectICMP6PortUnreachable)
	assert.False(t, ok)
}

func TestRejectOnHost(t *testing.T) {
	a := netip.MustParseAddr
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("192.168.1.1/24")))
	rs := NewRuleset(IPv4).MustExec(
		"-A INPUT -p tcp --dport 22 -j REJECT --reject-with tcp-reset",
		"-A FORWARD -d 192.168.1.5 -j REJECT --reject-with icmp-host-prohibited")
	require.NoError(t, h.Load(rs))

	res := h.Receive("eth0", Packet{Proto: inet.TCP, Src: a("10.0.0.2"), Dst: a("10.0.0.1"), SrcPort: 4000, DstPort: 22,
		TCPFlags: inet.SYN, TTL: 64, Length: 60})
	assert.Equal(t, VerdictReject, res.Verdict)
	assert.Equal(t, Rejected, res.Disposition)
	require.Len(t, res.Emitted, 1)
	assert.Equal(t, inet.RST|inet.ACK, res.Emitted[0].TCPFlags)
	assert.Equal(t, a("10.0.0.1"), res.Emitted[0].Src)
	assert.Equal(t, 1, res.Where.Rule)

	// A forwarded packet's ICMP error comes from the router's address
	// towards the sender, not from the unreachable destination.
	res = h.Receive("eth0", Packet{Proto: inet.UDP, Src: a("10.0.0.2"), Dst: a("192.168.1.5"), DstPort: 53, TTL: 64, Length: 60})
	assert.Equal(t, Rejected, res.Disposition)
	require.Len(t, res.Emitted, 1)
	e := res.Emitted[0]
	assert.Equal(t, a("10.0.0.1"), e.Src)
	assert.Equal(t, a("10.0.0.2"), e.Dst)
	assert.Equal(t, uint8(10), e.ICMPCode)
	assert.Equal(t, 28+60, e.Length)
}

// TestNATPortsICMP6: ip6tables 1.8.9 takes NAT ports after "-p icmp"
// (protocol 1, as iptables does), not after "-p ipv6-icmp" (TestTargetErrors);
// the -S lines are ip6tables -S's.
func TestNATPortsICMP6(t *testing.T) {
	rs := NewRuleset(IPv6)
	for _, line := range []string{
		"-A OUTPUT -p icmp -j REDIRECT --to-ports 22-30000 --random",
		"-A OUTPUT -p icmp -j DNAT --to-destination [fd00::1]:80",
		"-A POSTROUTING -p icmp -j SNAT --to-source [fd00::1]:80",
		"-A POSTROUTING -p icmp -j MASQUERADE --to-ports 80",
	} {
		require.NoError(t, rs.Exec("-t nat "+line), line)
	}
	b, err := rs.AppendRules(nil, NAT, "", 0, false)
	require.NoError(t, err)
	assert.Equal(t, `-P PREROUTING ACCEPT
-P INPUT ACCEPT
-P OUTPUT ACCEPT
-P POSTROUTING ACCEPT
-A OUTPUT -p icmp -j REDIRECT --to-ports 22-30000 --random
-A OUTPUT -p icmp -j DNAT --to-destination [fd00::1]:80
-A POSTROUTING -p icmp -j SNAT --to-source [fd00::1]:80
-A POSTROUTING -p icmp -j MASQUERADE --to-ports 80
`, string(b))
}

func TestNATTargetRequest(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		fam  Family
		line string
		want natRequest
	}{
		{IPv4, "-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.244.1.5:8080",
			natRequest{kind: natDNAT, minAddr: a("10.244.1.5"), maxAddr: a("10.244.1.5"), minPort: 8080, maxPort: 8080}},
		{IPv4, "-t nat -A POSTROUTING -p tcp -j SNAT --to-source 1.2.3.4-1.2.3.10:1000-2000 --random --persistent",
			natRequest{kind: natSNAT, minAddr: a("1.2.3.4"), maxAddr: a("1.2.3.10"), minPort: 1000, maxPort: 2000, random: true, persistent: true}},
		{IPv4, "-t nat -A POSTROUTING -j MASQUERADE --random-fully", natRequest{kind: natMasquerade, randomFull: true}},
		{IPv4, "-t nat -A PREROUTING -p udp -j REDIRECT --to-ports 5353", natRequest{kind: natRedirect, minPort: 5353, maxPort: 5353}},
		{IPv4, "-t nat -A PREROUTING -p tcp -j DNAT --to-destination 10.0.0.1:80-90/100",
			natRequest{kind: natDNAT, minAddr: a("10.0.0.1"), maxAddr: a("10.0.0.1"), minPort: 80, maxPort: 90, offset: true, basePort: 100}},
		// SNAT keeps the offset flag only: its base is 0, saved as "/0".
		{IPv4, "-t nat -A POSTROUTING -p tcp -j SNAT --to-source 10.0.0.1:1000-1998/40000",
			natRequest{kind: natSNAT, minAddr: a("10.0.0.1"), maxAddr: a("10.0.0.1"), minPort: 1000, maxPort: 1998, offset: true}},
		{IPv6, "-t nat -A PREROUTING -p tcp -j DNAT --to-destination [2001:db8::1-2001:db8::5]:80",
			natRequest{kind: natDNAT, minAddr: a("2001:db8::1"), maxAddr: a("2001:db8::5"), minPort: 80, maxPort: 80}},
	} {
		t.Run(tc.line, func(t *testing.T) {
			rs := NewRuleset(tc.fam)
			require.NoError(t, rs.Exec(tc.line))
			var tg Target
			for _, ch := range rs.Table(NAT).Chains() {
				for _, r := range ch.Rules {
					tg = r.Target
				}
			}
			nt, ok := tg.(*NATTarget)
			require.True(t, ok)
			c := &evalCtx{}
			assert.Equal(t, vAccept, nt.apply(c))
			require.NotNil(t, c.nat)
			assert.Equal(t, tc.want, *c.nat)
		})
	}
}

func TestNotrackTargets(t *testing.T) {
	for _, tg := range []applier{&NotrackTarget{}, &CTTarget{NoTrack: true}} {
		c := &evalCtx{host: NewHost(HostConfig{}), walk: &walk{}}
		assert.Equal(t, vContinue, tg.apply(c))
		assert.True(t, c.notrack)
	}
	c := &evalCtx{host: NewHost(HostConfig{}), walk: &walk{}}
	(&CTTarget{Zone: 3}).apply(c)
	assert.False(t, c.notrack)
	assert.True(t, c.tmpl, "CT --zone attaches a template")
	(&CTTarget{NoTrack: true}).apply(c)
	assert.False(t, c.notrack, "a packet with a template ignores a later CT --notrack")
}

func TestContinueTargets(t *testing.T) {
	for _, tg := range []applier{&LogTarget{Level: 4}, &NFLOGTarget{}, &TraceTarget{}, &SetTarget{Add: SetRef{Name: "S", Dirs: []bool{true}}}} {
		c := &evalCtx{pkt: &Packet{Mark: 1}, host: NewHost(HostConfig{}), walk: &walk{}}
		assert.Equal(t, vContinue, tg.apply(c))
		assert.Equal(t, uint32(1), c.pkt.Mark)
	}
}

func FuzzNATTo(f *testing.F) {
	for _, s := range []string{"10.0.0.1", "10.0.0.1-10.0.0.5:80-90", ":80", "1.2.3.4:80-90/100", "[2001:db8::1]:80", "x:y:z", "-", "[", "1.2.3.4:-"} {
		f.Add(s, false)
		f.Add(s, true)
	}
	f.Fuzz(func(t *testing.T, s string, v6 bool) {
		fam, table := IPv4, "nat"
		if v6 {
			fam = IPv6
		}
		rs := NewRuleset(fam)
		err := rs.ExecArgs([]string{"-t", table, "-A", "PREROUTING", "-p", "tcp", "-j", "DNAT", "--to-destination", s})
		if err != nil {
			return
		}
		// What parsed must print and parse back to the same text.
		out := rs.String()
		rs2 := NewRuleset(fam)
		require.NoError(t, rs2.Restore([]byte(out), RestoreOptions{}), out)
		assert.Equal(t, out, rs2.String())
	})
}
