package netfilter

import (
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// The refusals of the header-rewriting targets, as iptables 1.8.9 and the
// kernel refuse them (see testdata/golden/ext-targets.rules for the
// accepted forms).
func TestRewriteTargetsRefused(t *testing.T) {
	for _, tc := range []struct {
		f    Family
		line string
		err  error
	}{
		{IPv4, "-t mangle -A PREROUTING -j TCPMSS --set-mss 1400", ErrNotAllowed},
		{IPv4, "-t mangle -A PREROUTING ! -p tcp -j TCPMSS --set-mss 1400", ErrNotAllowed},
		{IPv4, "-t mangle -A PREROUTING -p tcp -j TCPMSS --clamp-mss-to-pmtu", ErrNotAllowed},
		{IPv4, "-t filter -A INPUT -p tcp -j TCPMSS --clamp-mss-to-pmtu", ErrNotAllowed},
		{IPv4, "-t mangle -A POSTROUTING -p tcp -j TCPMSS --set-mss 65516", ErrBadValue},
		{IPv6, "-t mangle -A POSTROUTING -p tcp -j TCPMSS --set-mss 65496", ErrBadValue},
		{IPv4, "-t mangle -A POSTROUTING -p tcp -j TCPMSS", ErrMissingArgument},
		{IPv4, "-t filter -A INPUT -j DSCP --set-dscp 1", ErrNotAllowed},
		{IPv4, "-t mangle -A INPUT -j DSCP --set-dscp 64", ErrBadValue},
		{IPv4, "-t mangle -A INPUT -j DSCP --set-dscp-class XX", ErrBadValue},
		{IPv4, "-t mangle -A INPUT -j DSCP --set-dscp 1 --set-dscp-class BE", ErrIncompatibleOpts},
		{IPv4, "-t mangle -A INPUT -j DSCP --set-dscp 1 --set-dscp 2", ErrMultipleFlags},
		{IPv4, "-t mangle -A INPUT -j DSCP", ErrMissingArgument},
		{IPv4, "-t mangle -A INPUT -j TOS --set-tos 0x100", ErrBadValue},
		{IPv4, "-t mangle -A INPUT -j TOS --set-tos 5/0x1ff", ErrBadValue},
		{IPv4, "-t mangle -A INPUT -j TOS --and-tos 256", ErrBadValue},
		{IPv4, "-t mangle -A INPUT -j TOS --set-tos 1 --and-tos 3", ErrIncompatibleOpts},
		{IPv4, "-t mangle -A INPUT -j TOS", ErrMissingArgument},
		{IPv4, "-t nat -A OUTPUT -j TOS --set-tos 1", ErrNotAllowed},
		{IPv6, "-t mangle -A INPUT -j TTL --ttl-set 1", ErrUnknownTarget},
		{IPv4, "-t mangle -A INPUT -j HL --hl-set 1", ErrUnknownTarget},
		{IPv6, "-t mangle -A INPUT -j ECN --ecn-ip-ect 1", ErrUnknownTarget},
		{IPv4, "-t mangle -A INPUT -j TTL --ttl-dec 0", ErrBadValue},
		{IPv4, "-t mangle -A INPUT -j TTL --ttl-set 256", ErrBadValue},
		{IPv4, "-t mangle -A INPUT -j TTL --ttl-set 1 --ttl-inc 2", ErrIncompatibleOpts},
		{IPv4, "-t mangle -A INPUT -j TTL", ErrMissingArgument},
		{IPv6, "-t mangle -A INPUT -j HL --hl-inc 0", ErrBadValue},
		{IPv6, "-t filter -A INPUT -j HL --hl-set 0", ErrNotAllowed},
		{IPv4, "-t mangle -A INPUT -j ECN --ecn-tcp-cwr 1", ErrNotAllowed},
		{IPv4, "-t mangle -A INPUT -j ECN --ecn-tcp-remove", ErrNotAllowed},
		{IPv4, "-t mangle -A INPUT -p tcp -j ECN --ecn-tcp-cwr 2", ErrBadValue},
		{IPv4, "-t mangle -A INPUT -j ECN --ecn-ip-ect 4", ErrBadValue},
		{IPv4, "-t mangle -A INPUT -j ECN", ErrMissingArgument},
	} {
		t.Run(tc.line, func(t *testing.T) {
			err := NewRuleset(tc.f).Exec(tc.line)
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.err)
		})
	}
}

// rewriteHost is a forwarding host (eth0 10.0.0.1/24, eth1 10.1.0.1/24
// and their IPv6 twins) with rules loaded in the mangle table.
func rewriteHost(t *testing.T, f Family, rules string) *Host {
	t.Helper()
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24"), netip.MustParsePrefix("fd00::1/64")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.1.0.1/24"), netip.MustParsePrefix("fd01::1/64")))
	require.NoError(t, h.Restore(f, []byte("*mangle\n"+rules+"COMMIT\n"), RestoreOptions{}))
	return h
}

func TestTCPMSSApply(t *testing.T) {
	src, dst := netip.MustParseAddrPort("10.0.0.2:40000"), netip.MustParseAddrPort("10.1.0.5:80")
	synMSS := func(mss uint16, payload int) Packet {
		p := TCP(src, dst, inet.SYN)
		p.TCPHeaderLen, p.Length, p.MSS = 24, 44+payload, mss
		p.SetTCPOption(2)
		return p
	}
	for _, tc := range []struct {
		name    string
		rule    string
		mtu     int // eth1's, 0 for the default
		in      Packet
		wantMSS uint16 // 0: no option
		wantLen int
		drop    bool
	}{
		{"set-lowers", "--set-mss 1200", 0, synMSS(1460, 0), 1200, 44, false},
		{"set-never-raises", "--set-mss 1600", 0, synMSS(1460, 0), 1460, 44, false},
		{"clamp-default", "--clamp-mss-to-pmtu", 0, synMSS(8960, 0), 1460, 44, false},
		{"clamp-mtu", "--clamp-mss-to-pmtu", 1400, synMSS(1460, 0), 1360, 44, false},
		{"clamp-invalid-mtu", "--clamp-mss-to-pmtu", 40, synMSS(1460, 0), 0, 0, true},
		{"adds-capped", "--set-mss 1000", 0, TCP(src, dst, inet.SYN), 536, 44, false},
		{"adds-small", "--set-mss 300", 0, TCP(src, dst, inet.ACK), 300, 44, false},
		{"payload-no-add", "--set-mss 300", 0, func() Packet { p := TCP(src, dst, inet.ACK); p.Length += 10; return p }(), 0, 50, false},
		{"payload-lowers", "--set-mss 300", 0, synMSS(1460, 10), 300, 54, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := rewriteHost(t, IPv4, "-A FORWARD -p tcp -j TCPMSS "+tc.rule+"\n")
			if tc.mtu != 0 {
				h.Interface("eth1").MTU = tc.mtu
			}
			res := h.Receive("eth0", tc.in)
			if tc.drop {
				assert.Equal(t, Dropped, res.Disposition)
				return
			}
			require.Equal(t, Forwarded, res.Disposition, res.Reason)
			assert.Equal(t, tc.wantMSS != 0, res.Packet.hasTCPOption(2))
			if tc.wantMSS != 0 {
				assert.Equal(t, tc.wantMSS, res.Packet.MSS)
			}
			assert.Equal(t, tc.wantLen, res.Packet.Length)
		})
	}
	// IPv6: 60 bytes of headers and a 1220 cap on an added option.
	h := rewriteHost(t, IPv6, "-A FORWARD -p tcp -j TCPMSS --clamp-mss-to-pmtu\n")
	res := h.Receive("eth0", TCP(netip.MustParseAddrPort("[fd00::2]:1"), netip.MustParseAddrPort("[fd01::5]:80"), inet.SYN))
	require.Equal(t, Forwarded, res.Disposition)
	assert.Equal(t, uint16(1220), res.Packet.MSS)
	assert.Equal(t, 64, res.Packet.Length)
	p := TCP(netip.MustParseAddrPort("[fd00::2]:1"), netip.MustParseAddrPort("[fd01::5]:80"), inet.SYN)
	p.SetTCPOption(2)
	p.MSS, p.TCPHeaderLen, p.Length = 9000, 24, 64
	res = h.Receive("eth0", p)
	assert.Equal(t, uint16(1440), res.Packet.MSS)
}

func TestHeaderTargetsApply(t *testing.T) {
	src, dst := netip.MustParseAddrPort("10.0.0.2:40000"), netip.MustParseAddrPort("10.1.0.5:53")
	for _, tc := range []struct {
		rules   string
		tos     uint8
		ttl     uint8
		flags   inet.TCPFlags
		wantTOS uint8
		wantTTL uint8 // after forwarding's decrement
		wantFl  inet.TCPFlags
	}{
		{"-A PREROUTING -j DSCP --set-dscp-class EF\n", 0xb9, 64, 0, 0xb9&3 | 0x2e<<2, 63, 0},
		{"-A PREROUTING -j TOS --set-tos Minimize-Delay\n", 0xff, 64, 0, 0xd0, 63, 0},
		{"-A PREROUTING -j TOS --and-tos 0xf0\n-A FORWARD -j TOS --or-tos 0x05\n-A POSTROUTING -j TOS --xor-tos 0x81\n", 0xb9, 64, 0, (0xb0 | 0x05) ^ 0x81, 63, 0},
		{"-A PREROUTING -j TTL --ttl-set 9\n", 0, 64, 0, 0, 8, 0},
		{"-A PREROUTING -j TTL --ttl-inc 250\n", 0, 64, 0, 0, 254, 0},
		{"-A POSTROUTING -j TTL --ttl-dec 200\n", 0, 64, 0, 0, 0, 0},
		{"-A FORWARD -j ECN --ecn-ip-ect 1\n", 0xba, 64, 0, 0xb9, 63, 0},
		{"-A FORWARD -p tcp -j ECN --ecn-tcp-remove\n", 0, 64, inet.SYN | inet.ECE | inet.CWR, 0, 63, inet.SYN},
		{"-A FORWARD -p tcp -j ECN --ecn-tcp-ece 1 --ecn-tcp-cwr 0\n", 0, 64, inet.SYN | inet.CWR, 0, 63, inet.SYN | inet.ECE},
	} {
		t.Run(tc.rules, func(t *testing.T) {
			h := rewriteHost(t, IPv4, tc.rules)
			p := UDP(src, dst)
			if tc.flags != 0 {
				p = TCP(src, dst, tc.flags)
			}
			p.TOS, p.TTL = tc.tos, tc.ttl
			res := h.Receive("eth0", p)
			require.Equal(t, Forwarded, res.Disposition, res.Reason)
			assert.Equal(t, tc.wantTOS, res.Packet.TOS, "TOS %#x", res.Packet.TOS)
			assert.Equal(t, tc.wantTTL, res.Packet.TTL)
			assert.Equal(t, tc.wantFl, res.Packet.TCPFlags)
		})
	}
	h := rewriteHost(t, IPv6, "-A PREROUTING -j HL --hl-inc 100\n-A POSTROUTING -j HL --hl-dec 7\n")
	res := h.Receive("eth0", UDP(netip.MustParseAddrPort("[fd00::2]:1"), netip.MustParseAddrPort("[fd01::5]:53")))
	require.Equal(t, Forwarded, res.Disposition)
	assert.Equal(t, uint8(64+100-1-7), res.Packet.TTL)
}

// FrameHost writes what the rewriting targets did into the frame with
// valid checksums: an MSS option inserted (header and IP length grown),
// options stripped to NOPs, TOS and TTL.
func TestRewriteTargetsFrame(t *testing.T) {
	h := rewriteHost(t, IPv4, "-A FORWARD -p tcp -j TCPOPTSTRIP --strip-options sack-permitted\n"+
		"-A POSTROUTING -p tcp -j TCPMSS --set-mss 1200\n-A PREROUTING -j TOS --set-tos 0x10\n-A PREROUTING -j TTL --ttl-set 9\n")
	spec := kerneltest.FrameSpec{Proto: "tcp", Src: netip.MustParseAddr("10.0.0.2"), Dst: netip.MustParseAddr("10.1.0.5"),
		SrcPort: 1234, DstPort: 80, TCPFlags: "SYN", Seq: 5, HasWScale: true, WScale: 7, SACKPerm: true}
	frame, err := kerneltest.BuildFrame(kerneltest.ClientMAC, kerneltest.NodeEth0MAC, spec)
	require.NoError(t, err)
	res, err := NewFrameHost(h).ReceiveFrame("eth0", frame)
	require.NoError(t, err)
	require.NotNil(t, res.Frame)
	ip := ipFrame(t, res.Frame)[14:]
	require.Equal(t, len(frame)-14+4, len(ip), "4 bytes of MSS option")
	assert.True(t, ipv4HeaderChecksumOK(ip))
	assert.Equal(t, uint16(0xffff), tcpSum(ip), "TCP checksum")
	assert.Equal(t, []byte{0x10, 9}, []byte{ip[1], ip[8] + 1}, "TOS, and TTL 9 less forwarding's decrement")
	assert.Equal(t, byte(0x80), ip[20+12], "data offset 32 bytes")
	// MSS first, then the original options with SACK-permitted as NOPs.
	assert.Equal(t, []byte{2, 4, 0x02, 0x18, 3, 3, 7, 1, 1, 1}, ip[40:50], "an added MSS is capped at 536")
}

// iptables-legacy loads TCPMSS only in a rule that matches SYN (verified
// with iptables-legacy-restore in a namespace); iptables-nft does not ask.
func TestTCPMSSLegacyNeedsSYN(t *testing.T) {
	for _, tc := range []struct {
		spec string
		ok   bool
	}{
		{"-p tcp", false},
		{"-p tcp --tcp-flags SYN,RST SYN", true},
		{"-p tcp --syn", true},
		{"-p tcp -m tcp --dport 80 --tcp-flags SYN SYN", true},
		{"-p tcp ! --tcp-flags SYN SYN", false},
		{"-p tcp --tcp-flags SYN,ACK ACK", false},
	} {
		rules := []byte("*mangle\n-A FORWARD " + tc.spec + " -j TCPMSS --set-mss 1400\nCOMMIT\n")
		err := NewHost(HostConfig{Backend: Legacy}).Restore(IPv4, rules, RestoreOptions{})
		if tc.ok {
			assert.NoError(t, err, tc.spec)
		} else {
			assert.ErrorIs(t, err, ErrNotAllowed, tc.spec)
		}
		assert.NoError(t, NewHost(HostConfig{}).Restore(IPv4, rules, RestoreOptions{}), "nft: %s", tc.spec)
	}
}
