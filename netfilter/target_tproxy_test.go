package netfilter

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
)

// tproxyHost is the node of TestTPROXYKernel: eth0 192.168.10.1/24 with
// the secondary 192.168.10.9, eth1 10.244.1.1/24 and a default route out
// of it; with steer, "ip rule add fwmark 0x1/0x1 lookup 100" and "ip route
// add local 0.0.0.0/0 dev lo table 100". The mangle rules count what
// reaches INPUT and FORWARD.
func tproxyHost(t *testing.T, steer bool, prerouting string, socks ...Socket) *Host {
	t.Helper()
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), netip.MustParsePrefix("192.168.10.9/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth1", Gateway: netip.MustParseAddr("10.244.1.5")}))
	if steer {
		require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "lo", Type: RouteLocal, Table: 100}))
		require.NoError(t, h.AddRule(RouteRule{Family: IPv4, AutoPriority: true, HasMark: true, Mark: 1, Mask: 1, Table: 100}))
	}
	for _, s := range socks {
		require.NoError(t, h.AddSocket(s))
	}
	require.NoError(t, h.Restore(IPv4, []byte(tproxyRules(prerouting)), RestoreOptions{}))
	return h
}

func tproxyRules(prerouting string) string {
	return "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
		prerouting + "-A PREROUTING -p udp\n-A PREROUTING -p tcp\n-A INPUT ! -p icmp\n-A FORWARD ! -p icmp\nCOMMIT\n"
}

func mangleCount(h *Host, chain string, n int) uint64 {
	return h.Ruleset(IPv4).Table(Mangle).Chain(chain).Rules[n-1].Counters.Packets
}

const tproxyUDP = "-A PREROUTING -p udp --dport 53 -j TPROXY --on-port 5000 --tproxy-mark 0x1/0x1\n"

type tproxyCase struct {
	name       string
	steer      bool
	prerouting string
	socks      []Socket
	pkt        Packet
	want       Disposition
	reason     Reason
	sock       int // index into socks of the receiving socket, -1 none
	mark       uint32
}

var (
	tpUDP  = Packet{Proto: inet.UDP, Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("203.0.113.9"), SrcPort: 40000, DstPort: 53, TTL: 64, Length: 30}
	tpWild = Socket{Proto: inet.UDP, Addr: netip.IPv4Unspecified(), Port: 5000, Transparent: true}
)

// tproxyCases are TestTPROXY's, also sent through the kernel by
// TestTPROXYKernel.
var tproxyCases = []tproxyCase{
	{name: "wildcard listener", steer: true, prerouting: tproxyUDP, socks: []Socket{tpWild}, pkt: tpUDP, want: Delivered, sock: 0, mark: 1},
	{name: "listener on the secondary address", steer: true, prerouting: tproxyUDP,
		socks: []Socket{{Proto: inet.UDP, Addr: netip.MustParseAddr("192.168.10.9"), Port: 5000, Transparent: true}}, pkt: tpUDP, want: Dropped, sock: -1},
	{name: "listener on the primary address", steer: true, prerouting: tproxyUDP,
		socks: []Socket{{Proto: inet.UDP, Addr: netip.MustParseAddr("192.168.10.1"), Port: 5000, Transparent: true}}, pkt: tpUDP, want: Delivered, sock: 0, mark: 1},
	{name: "--on-ip the secondary", steer: true,
		prerouting: "-A PREROUTING -p udp --dport 53 -j TPROXY --on-port 5000 --on-ip 192.168.10.9 --tproxy-mark 0x1/0x1\n",
		socks:      []Socket{{Proto: inet.UDP, Addr: netip.MustParseAddr("192.168.10.9"), Port: 5000, Transparent: true}}, pkt: tpUDP, want: Delivered, sock: 0, mark: 1},
	{name: "not transparent", steer: true, prerouting: tproxyUDP,
		socks: []Socket{{Proto: inet.UDP, Addr: netip.IPv4Unspecified(), Port: 5000}}, pkt: tpUDP, want: Dropped, sock: -1},
	{name: "no socket", steer: true, prerouting: tproxyUDP, pkt: tpUDP, want: Dropped, sock: -1},
	{name: "no local route", prerouting: tproxyUDP, socks: []Socket{tpWild}, pkt: tpUDP, want: Dropped, reason: ReasonSocketNotLocal, sock: -1, mark: 1},
	{name: "mark value and mask", steer: true,
		prerouting: "-A PREROUTING -j MARK --set-mark 0x30\n-A PREROUTING -p udp --dport 53 -j TPROXY --on-port 5000 --tproxy-mark 0x11/0x11\n",
		socks:      []Socket{tpWild}, pkt: tpUDP, want: Delivered, sock: 0, mark: 0x31},
	{name: "port 0 keeps the packet's", steer: true, prerouting: "-A PREROUTING -p udp -j TPROXY --on-port 0 --tproxy-mark 1\n",
		socks: []Socket{{Proto: inet.UDP, Addr: netip.IPv4Unspecified(), Port: 53, Transparent: true}}, pkt: tpUDP, want: Delivered, sock: 0, mark: 1},
	{name: "a connection's socket wins", steer: true, prerouting: "-A PREROUTING -p tcp -j TPROXY --on-port 15006 --tproxy-mark 1\n",
		socks: []Socket{{Proto: inet.TCP, Addr: netip.IPv4Unspecified(), Port: 15006, Transparent: true},
			{Proto: inet.TCP, Addr: netip.MustParseAddr("203.0.113.9"), Port: 80, Remote: netip.MustParseAddrPort("192.168.10.2:40000"), Transparent: true}},
		pkt:  Packet{Proto: inet.TCP, Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("203.0.113.9"), SrcPort: 40000, DstPort: 80, TCPFlags: inet.ACK, TTL: 64},
		want: Delivered, sock: 1, mark: 1},
	{name: "a SYN of another port goes to the listener", steer: true, prerouting: "-A PREROUTING -p tcp -j TPROXY --on-port 15006 --tproxy-mark 1\n",
		socks: []Socket{{Proto: inet.TCP, Addr: netip.IPv4Unspecified(), Port: 15006, Transparent: true},
			{Proto: inet.TCP, Addr: netip.MustParseAddr("203.0.113.9"), Port: 80, Remote: netip.MustParseAddrPort("192.168.10.2:40000"), Transparent: true}},
		pkt:  Packet{Proto: inet.TCP, Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("203.0.113.9"), SrcPort: 40001, DstPort: 80, TCPFlags: inet.SYN, TTL: 64},
		want: Delivered, sock: 0, mark: 1},
}

// TestTPROXY: the listener TPROXY finds (address 0 meaning the receiving
// interface's first address, not the packet's destination), its
// transparent flag, the mark, the local route the mark must meet, and the
// drop when nothing fits; each outcome as the kernel gave it in
// TestTPROXYKernel.
func TestTPROXY(t *testing.T) {
	for _, tc := range tproxyCases {
		t.Run(tc.name, func(t *testing.T) {
			h := tproxyHost(t, tc.steer, tc.prerouting, tc.socks...)
			res := h.Receive("eth0", tc.pkt)
			assert.Equal(t, tc.want, res.Disposition)
			assert.Equal(t, tc.reason, res.Reason)
			assert.Equal(t, tc.mark, res.Packet.Mark)
			assert.Equal(t, tc.pkt.Dst, res.Packet.Dst, "TPROXY does not rewrite the packet")
			if tc.sock < 0 {
				assert.Nil(t, res.Socket)
			} else if assert.NotNil(t, res.Socket) {
				assert.Equal(t, tc.socks[tc.sock], *res.Socket)
			}
			in, fwd := mangleCount(h, "INPUT", 1), mangleCount(h, "FORWARD", 1)
			assert.Equal(t, map[bool]uint64{true: 1}[tc.want == Delivered], in, "mangle INPUT")
			assert.Equal(t, uint64(0), fwd, "mangle FORWARD: an assigned packet is not forwarded")
			n := len(h.Ruleset(IPv4).Table(Mangle).Chain("PREROUTING").Rules)
			// TPROXY's ACCEPT ends mangle PREROUTING: the counting rules
			// after it see nothing.
			assert.Equal(t, uint64(0), mangleCount(h, "PREROUTING", n-1)+mangleCount(h, "PREROUTING", n))
		})
	}
}

// TestTPROXYThenSocket: -m socket in INPUT sees the socket TPROXY
// assigned (a wildcard listener: only with --nowildcard), and a packet
// of a transparent connection matches -m socket --transparent in
// PREROUTING where the SYN, finding only the wildcard listener, does not.
func TestTPROXYThenSocket(t *testing.T) {
	a := netip.MustParseAddr
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "lo", Type: RouteLocal, Table: 100}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, AutoPriority: true, HasMark: true, Mark: 1, Mask: ^uint32(0), Table: 100}))
	require.NoError(t, h.AddSocket(Socket{Proto: inet.TCP, Addr: netip.IPv4Unspecified(), Port: 15006, Transparent: true, Mark: 5}))
	require.NoError(t, h.Restore(IPv4, []byte(`*mangle
-A PREROUTING -p tcp -m socket --transparent -j MARK --set-mark 1
-A PREROUTING -p tcp -m mark --mark 1 -j ACCEPT
-A PREROUTING -p tcp -j TPROXY --on-port 15006 --tproxy-mark 1
-A INPUT -m socket
-A INPUT -m socket --nowildcard --restore-skmark
COMMIT
`), RestoreOptions{}))
	syn := Packet{Proto: inet.TCP, Src: a("192.168.10.2"), Dst: a("203.0.113.9"), SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN, TTL: 64}
	res := h.Receive("eth0", syn)
	require.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, uint32(5), res.Packet.Mark, "--restore-skmark from the assigned listener")
	rs := h.Ruleset(IPv4).Table(Mangle)
	assert.Equal(t, []uint64{0, 0, 1}, packets(rs.Chain("PREROUTING")))
	assert.Equal(t, []uint64{0, 1}, packets(rs.Chain("INPUT")))

	// accept() gives the proxy the connection, with the client's
	// destination as its local address.
	require.NoError(t, h.AddSocket(Socket{Proto: inet.TCP, Addr: a("203.0.113.9"), Port: 80, Remote: netip.MustParseAddrPort("192.168.10.2:40000"), Transparent: true}))
	ack := syn
	ack.TCPFlags = inet.ACK
	res = h.Receive("eth0", ack)
	require.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, uint32(0), res.Packet.Mark, "the connection's SO_MARK is 0")
	rs = h.Ruleset(IPv4).Table(Mangle)
	assert.Equal(t, []uint64{1, 1, 1}, packets(rs.Chain("PREROUTING")))
	assert.Equal(t, []uint64{1, 2}, packets(rs.Chain("INPUT")))
	require.NotNil(t, res.Socket)
	assert.Equal(t, uint16(80), res.Socket.Port)
}

func packets(c *Chain) []uint64 {
	var out []uint64
	for _, r := range c.Rules {
		out = append(out, r.Counters.Packets)
	}
	return out
}

// TestSocketValidation: a connected socket needs a local address of its
// peer's family.
func TestSocketValidation(t *testing.T) {
	h := NewHost(HostConfig{})
	err := h.AddSocket(Socket{Proto: inet.TCP, Addr: netip.IPv4Unspecified(), Port: 80, Remote: netip.MustParseAddrPort("1.2.3.4:5")})
	assert.ErrorIs(t, err, ErrBadValue)
	assert.ErrorContains(t, err, "wildcard local address")
	err = h.AddSocket(Socket{Proto: inet.TCP, Addr: netip.MustParseAddr("::1"), Port: 80, Remote: netip.MustParseAddrPort("1.2.3.4:5")})
	assert.ErrorIs(t, err, ErrBadValue)
	assert.Empty(t, h.Sockets())
}

// TestTPROXY6: without --on-ip, IPv6 TPROXY looks for the listener at
// the receiving interface's newest global address (TestTPROXY6Kernel).
func TestTPROXY6(t *testing.T) {
	a := netip.MustParseAddr
	for bind, want := range map[string]bool{"::": true, "fd00:10::9": true, "fd00:10::1": false} {
		h := NewHost(HostConfig{})
		require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("fd00:10::1/64"), netip.MustParsePrefix("fd00:10::9/64")))
		require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("::/0"), Iface: "lo", Type: RouteLocal, Table: 100}))
		require.NoError(t, h.AddRule(RouteRule{Family: IPv6, AutoPriority: true, HasMark: true, Mark: 1, Mask: ^uint32(0), Table: 100}))
		require.NoError(t, h.AddSocket(Socket{Proto: inet.UDP, Addr: a(bind), Port: 5000, Transparent: true}))
		require.NoError(t, h.Restore(IPv6, []byte("*mangle\n-A PREROUTING -p udp --dport 53 -j TPROXY --on-port 5000 --tproxy-mark 1\nCOMMIT\n"), RestoreOptions{}))
		res := h.Receive("eth0", Packet{Proto: inet.UDP, Src: a("fd00:10::2"), Dst: a("2001:db8::9"), SrcPort: 40000, DstPort: 53, TTL: 64})
		assert.Equal(t, want, res.Disposition == Delivered, bind)
		assert.Equal(t, want, res.Socket != nil, bind)
	}
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("fd00:10::1/64"), netip.MustParsePrefix("fe80::1/64"), netip.MustParsePrefix("fd00:10::9/64")))
	assert.Equal(t, a("fe80::1"), h.firstAddr("eth0", IPv6), "the link-local scope heads the list")
	assert.Equal(t, netip.Addr{}, h.firstAddr("eth0", IPv4))
	assert.Equal(t, a("127.0.0.1"), h.firstAddr("lo", IPv4))
}
