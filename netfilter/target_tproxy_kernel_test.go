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

// tproxyLab is the lab of the TPROXY kernel tests, its node set up as
// tproxyHost's: the secondary 192.168.10.9 on eth0, a default route out of
// eth1, the local route of table 100; steer adds "ip rule add fwmark
// 0x1/0x1 lookup 100" until the test ends.
func tproxyLab(t *testing.T, prefix string) (*kerneltest.Lab, func(t *testing.T, args string)) {
	t.Helper()
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: prefix})
	ip := func(t *testing.T, args string) {
		t.Helper()
		_, stderr, err := lab.Node().Exec("", append([]string{"ip"}, strings.Fields(args)...)...)
		require.NoError(t, err, "ip %s: %s", args, stderr)
	}
	ip(t, "addr add 192.168.10.9/24 dev eth0")
	ip(t, "route add default via 10.244.1.5 dev eth1")
	ip(t, "route add local 0.0.0.0/0 dev lo table 100")
	return lab, ip
}

func kernelSocketSpec(s Socket) kerneltest.SocketSpec {
	return kerneltest.SocketSpec{Proto: strings.ToLower(s.Proto.String()), Addr: netip.AddrPortFrom(s.Addr, s.Port), Transparent: s.Transparent, Mark: s.Mark}
}

// compareMangle compares every mangle rule counter of the kernel's node
// with packetwalk's and returns the number of divergences.
func compareMangle(t *testing.T, lab *kerneltest.Lab, h *Host) int {
	t.Helper()
	kc, err := lab.Counters()
	require.NoError(t, err)
	t.Logf("kernel counters: %s", strings.Join(kc.NonZero(), ", "))
	n := 0
	for _, ch := range h.Ruleset(IPv4).Table(Mangle).Chains() {
		for i, r := range ch.Rules {
			want, ok := kc.Rule("mangle", ch.Name, i+1)
			require.True(t, ok, "mangle %s rule %d", ch.Name, i+1)
			if !assert.Equal(t, want.Packets, r.Counters.Packets, "mangle %s rule %d (%s): kernel (want) vs packetwalk", ch.Name, i+1, strings.TrimSpace(r.String())) {
				n++
			}
		}
	}
	return n
}

// TestTPROXYKernel sends each UDP case of tproxyCases through the lab's
// node, with the case's sockets opened there (IP_TRANSPARENT, bound as
// given), and compares which socket received the datagram (and that its
// original destination is the packet's) and every mangle counter with
// packetwalk's.
func TestTPROXYKernel(t *testing.T) {
	kerneltest.Require(t)
	lab, ip := tproxyLab(t, "pw-tproxy")
	cases, divergences := 0, 0
	for _, tc := range tproxyCases {
		if tc.pkt.Proto != inet.UDP {
			continue // connections: TestTPROXYHandshakeKernel
		}
		cases++
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv4: tproxyRules(tc.prerouting)}))
			if tc.steer {
				ip(t, "rule add fwmark 0x1/0x1 lookup 100")
				defer ip(t, "rule del fwmark 0x1/0x1 lookup 100")
			}
			var socks []*kerneltest.Socket
			for _, s := range tc.socks {
				ks, err := lab.Node().OpenSocket(kernelSocketSpec(s))
				require.NoError(t, err)
				defer ks.Close()
				socks = append(socks, ks)
			}
			p := tc.pkt
			f, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: p.Src, Dst: p.Dst, SrcPort: p.SrcPort, DstPort: p.DstPort, PayloadLen: 2})
			require.NoError(t, err)
			obs, err := lab.Exchange(f)
			require.NoError(t, err)
			got := -1
			for i, ks := range socks {
				ds, err := ks.Datagrams()
				require.NoError(t, err)
				for _, d := range ds {
					got = i
					assert.Equal(t, netip.AddrPortFrom(p.Dst, p.DstPort), d.OrigDst, "the original destination")
					assert.Equal(t, netip.AddrPortFrom(p.Src, p.SrcPort), d.From)
				}
			}
			t.Logf("kernel: socket %d; frames: %s", got, strings.TrimSpace(obs.String()))
			assert.Equal(t, tc.sock, got, "the case's expectation is the kernel's")

			h := tproxyHost(t, tc.steer, tc.prerouting, tc.socks...)
			res := h.Receive("eth0", p)
			model := -1
			for i := range tc.socks {
				if res.Socket != nil && *res.Socket == tc.socks[i] {
					model = i
				}
			}
			if !assert.Equal(t, got, model, "receiving socket: kernel (want) vs packetwalk") {
				divergences++
			}
			divergences += compareMangle(t, lab, h)
		})
	}
	t.Logf("%d cases, %d divergences", cases, divergences)
}

// tproxyHandshakeRules counts what -m socket sees around a TPROXY rule
// at each step of a connection: the SYN (the listener), the ACK that
// completes the handshake (the half-open connection), a data packet (the
// accepted connection, which inherited the listener's SO_MARK 5).
const tproxyHandshakeRules = `*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -p tcp -m socket
-A PREROUTING -p tcp -m socket --transparent
-A PREROUTING -p tcp -m socket --nowildcard
-A PREROUTING -p tcp -j TPROXY --on-port 15006 --tproxy-mark 1
-A INPUT -p tcp -m socket
-A INPUT -p tcp -m socket --nowildcard
-A INPUT -p tcp -m mark --mark 1
-A INPUT -p tcp -m socket --nowildcard --restore-skmark
-A INPUT -p tcp -m mark --mark 5
-A INPUT -p tcp -m mark --mark 1
-A FORWARD -p tcp
COMMIT
`

// TestTPROXYHandshakeKernel completes a TCP handshake through TPROXY
// with a transparent listener on 15006 (SO_MARK 5) in the lab's node:
// the SYN to 203.0.113.9:80 is answered by the listener from that address,
// the ACK finds the half-open connection, accept() gives a connection
// whose local address is 203.0.113.9:80, and a data packet finds it. The
// counters after each packet are compared with packetwalk's, given the
// same sockets (the half-open connection after the SYN, the accepted one
// after the ACK).
func TestTPROXYHandshakeKernel(t *testing.T) {
	kerneltest.Require(t)
	lab, ip := tproxyLab(t, "pw-tproxy-hs")
	ip(t, "rule add fwmark 1 lookup 100")
	require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv4: tproxyHandshakeRules}))
	listener := Socket{Proto: inet.TCP, Addr: netip.IPv4Unspecified(), Port: 15006, Transparent: true, Mark: 5}
	ks, err := lab.Node().OpenSocket(kernelSocketSpec(listener))
	require.NoError(t, err)
	defer ks.Close()

	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), netip.MustParsePrefix("192.168.10.9/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth1", Gateway: netip.MustParseAddr("10.244.1.5")}))
	require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "lo", Type: RouteLocal, Table: 100}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, AutoPriority: true, HasMark: true, Mark: 1, Mask: ^uint32(0), Table: 100}))
	require.NoError(t, h.AddSocket(listener))
	require.NoError(t, h.Restore(IPv4, []byte(tproxyHandshakeRules), RestoreOptions{}))

	client, orig := netip.MustParseAddrPort("192.168.10.2:40000"), netip.MustParseAddrPort("203.0.113.9:80")
	spec := kerneltest.FrameSpec{Proto: "tcp", Src: client.Addr(), Dst: orig.Addr(), SrcPort: client.Port(), DstPort: orig.Port(), TCPFlags: "SYN", Seq: 1000}
	f, err := lab.Frame(spec)
	require.NoError(t, err)
	obs, err := lab.Exchange(f)
	require.NoError(t, err)
	var synack *kerneltest.Summary
	for _, c := range obs.Client {
		if c.Summary.TCPFlags == "SYN,ACK" {
			synack = &c.Summary
		}
	}
	require.NotNil(t, synack, "the listener answers the SYN: %s", obs)
	assert.Equal(t, orig.Addr(), synack.Src, "from the client's destination")
	assert.Equal(t, orig.Port(), synack.SrcPort)
	res := h.Receive("eth0", Packet{Proto: inet.TCP, Src: client.Addr(), Dst: orig.Addr(), SrcPort: client.Port(), DstPort: orig.Port(), TCPFlags: inet.SYN, Seq: 1000, TTL: 64})
	require.Equal(t, Delivered, res.Disposition)
	require.NotNil(t, res.Socket)
	assert.Equal(t, listener, *res.Socket)
	divergences := compareMangle(t, lab, h)

	halfOpen := Socket{Proto: inet.TCP, Addr: orig.Addr(), Port: orig.Port(), Remote: client, Transparent: true, Mark: 5, HalfOpen: true}
	require.NoError(t, h.AddSocket(halfOpen))
	spec.TCPFlags, spec.Seq, spec.Ack = "ACK", 1001, synack.Seq+1
	f, err = lab.Frame(spec)
	require.NoError(t, err)
	_, err = lab.Exchange(f)
	require.NoError(t, err)
	conns, err := ks.Accept()
	require.NoError(t, err)
	require.Equal(t, []kerneltest.Conn{{Local: orig, Remote: client}}, conns, "accept()")
	res = h.Receive("eth0", Packet{Proto: inet.TCP, Src: client.Addr(), Dst: orig.Addr(), SrcPort: client.Port(), DstPort: orig.Port(), TCPFlags: inet.ACK, Seq: 1001, TTL: 64})
	require.Equal(t, Delivered, res.Disposition)
	divergences += compareMangle(t, lab, h)

	require.True(t, h.RemoveSocket(halfOpen))
	accepted := halfOpen
	accepted.HalfOpen = false
	require.NoError(t, h.AddSocket(accepted))
	spec.TCPFlags, spec.PayloadLen = "PSH,ACK", 10
	f, err = lab.Frame(spec)
	require.NoError(t, err)
	_, err = lab.Exchange(f)
	require.NoError(t, err)
	res = h.Receive("eth0", Packet{Proto: inet.TCP, Src: client.Addr(), Dst: orig.Addr(), SrcPort: client.Port(), DstPort: orig.Port(), TCPFlags: inet.PSH | inet.ACK, Seq: 1001, TTL: 64, Length: 50})
	require.Equal(t, Delivered, res.Disposition)
	require.NotNil(t, res.Socket)
	assert.Equal(t, accepted, *res.Socket)
	assert.Equal(t, uint32(5), res.Packet.Mark, "--restore-skmark from the accepted connection")
	divergences += compareMangle(t, lab, h)
	t.Logf("3 packets, %s", fmt.Sprintf("%d divergences", divergences))
}

// TestTPROXY6Kernel: IPv6 TPROXY without --on-ip takes the receiving
// interface's newest global address (fd00:10::9, added after the lab's
// fd00:10::1), which a transparent socket bound to it or to :: receives.
// Compared: the receiving socket and every mangle counter.
func TestTPROXY6Kernel(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-tproxy6"})
	for _, c := range []string{"-6 addr add fd00:10::9/64 dev eth0 nodad", "-6 route add local ::/0 dev lo table 100", "-6 rule add fwmark 1 lookup 100"} {
		_, stderr, err := lab.Node().Exec("", append([]string{"ip"}, strings.Fields(c)...)...)
		require.NoError(t, err, "ip %s: %s", c, stderr)
	}
	const rules = "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		"-A PREROUTING -p udp --dport 53 -j TPROXY --on-port 5000 --tproxy-mark 1\n-A PREROUTING -p udp\n-A INPUT -p udp\n-A FORWARD -p udp\nCOMMIT\n"
	a := netip.MustParseAddr
	divergences := 0
	for _, tc := range []struct {
		bind string
		want bool
	}{{"::", true}, {"fd00:10::9", true}, {"fd00:10::1", false}} {
		t.Run(tc.bind, func(t *testing.T) {
			require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv6: rules}))
			sock := Socket{Proto: inet.UDP, Addr: a(tc.bind), Port: 5000, Transparent: true}
			ks, err := lab.Node().OpenSocket(kernelSocketSpec(sock))
			require.NoError(t, err)
			defer ks.Close()
			p := Packet{Proto: inet.UDP, Src: a("fd00:10::2"), Dst: a("2001:db8::9"), SrcPort: 40000, DstPort: 53, TTL: 64, Length: 50}
			f, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: p.Src, Dst: p.Dst, SrcPort: p.SrcPort, DstPort: p.DstPort, PayloadLen: 2})
			require.NoError(t, err)
			_, err = lab.Exchange(f)
			require.NoError(t, err)
			ds, err := ks.Datagrams()
			require.NoError(t, err)
			kernel := len(ds) == 1
			if kernel {
				assert.Equal(t, netip.AddrPortFrom(p.Dst, p.DstPort), ds[0].OrigDst)
			}
			assert.Equal(t, tc.want, kernel, "the case's expectation is the kernel's")

			h := NewHost(HostConfig{})
			require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("fd00:10::1/64"), netip.MustParsePrefix("fd00:10::9/64")))
			require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("fd00:244::1/64")))
			require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("::/0"), Iface: "lo", Type: RouteLocal, Table: 100}))
			require.NoError(t, h.AddRule(RouteRule{Family: IPv6, AutoPriority: true, HasMark: true, Mark: 1, Mask: ^uint32(0), Table: 100}))
			require.NoError(t, h.AddSocket(sock))
			require.NoError(t, h.Restore(IPv6, []byte(rules), RestoreOptions{}))
			res := h.Receive("eth0", p)
			if !assert.Equal(t, kernel, res.Socket != nil, "received: kernel (want) vs packetwalk (%s %s)", res.Disposition, res.Reason) {
				divergences++
			}
			kc, err := lab.Counters6()
			require.NoError(t, err)
			for _, ch := range h.Ruleset(IPv6).Table(Mangle).Chains() {
				for i, r := range ch.Rules {
					want, ok := kc.Rule("mangle", ch.Name, i+1)
					require.True(t, ok)
					if !assert.Equal(t, want.Packets, r.Counters.Packets, "mangle %s rule %d", ch.Name, i+1) {
						divergences++
					}
				}
			}
		})
	}
	t.Logf("3 cases, %d divergences", divergences)
}
