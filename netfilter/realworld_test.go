package netfilter

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The rulesets real tools write (ufw, wg-quick, istio-iptables), kept with
// their sources in testdata/golden/real-*.rules: TestGolden and
// TestGoldenKernel check that iptables 1.8.9 loads and prints them as
// packetwalk does; the tests below walk packets through them.

func realHost(t *testing.T, name string, cfg HostConfig, ifaces map[string][]string, gw string) *Host {
	t.Helper()
	h := NewHost(cfg)
	for _, name := range []string{"eth0", "wg0"} {
		addrs, ok := ifaces[name]
		if !ok {
			continue
		}
		var ps []netip.Prefix
		for _, a := range addrs {
			ps = append(ps, netip.MustParsePrefix(a))
		}
		require.NoError(t, h.AddInterface(name, ps...))
	}
	if gw != "" {
		require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr(gw)}))
	}
	in, err := os.ReadFile(filepath.Join(goldenDir, name))
	require.NoError(t, err)
	require.NoError(t, h.Restore(IPv4, in, RestoreOptions{}))
	return h
}

func tcpSYN(src string, sport uint16, dst string, dport uint16) Packet {
	a := netip.MustParseAddr
	return Packet{Proto: inet.TCP, Src: a(src), Dst: a(dst), SrcPort: sport, DstPort: dport, TCPFlags: inet.SYN, TTL: 64, Length: 60}
}

func tracedChain(res Result, chain string) bool {
	for _, s := range res.Trace {
		if s.Chain == chain && s.Rule > 0 {
			return true
		}
	}
	return false
}

// TestRealUFW: ufw with "limit 22/tcp" and "allow 80/tcp" accepts SSH and
// HTTP, drops a closed port by INPUT's policy after the "[UFW BLOCK] " LOG
// rule, and rejects the sixth new SSH connection from one source within
// 30 seconds (recent --set, then --update --hitcount 6 counting it).
func TestRealUFW(t *testing.T) {
	h := realHost(t, "real-ufw.rules", HostConfig{}, map[string][]string{"eth0": {"192.168.1.10/24"}}, "192.168.1.1")
	h.Tracing = true

	res := h.Receive("eth0", tcpSYN("192.168.1.20", 40000, "192.168.1.10", 80))
	assert.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, "ufw-user-input", res.Where.Chain)
	assert.Equal(t, 4, res.Where.Rule)

	res = h.Receive("eth0", tcpSYN("192.168.1.20", 40001, "192.168.1.10", 23))
	assert.Equal(t, Dropped, res.Disposition)
	assert.Equal(t, VerdictDrop, res.Verdict)
	assert.Equal(t, "INPUT", res.Where.Chain)
	assert.Equal(t, 0, res.Where.Rule, "INPUT's policy")
	assert.True(t, tracedChain(res, "ufw-after-logging-input"), "the [UFW BLOCK] LOG rule saw it")

	// UDP to 137 is skipped to the policy without logging.
	u := Packet{Proto: inet.UDP, Src: netip.MustParseAddr("192.168.1.20"), Dst: netip.MustParseAddr("192.168.1.10"), SrcPort: 137, DstPort: 137, TTL: 64, Length: 78}
	res = h.Receive("eth0", u)
	assert.Equal(t, Dropped, res.Disposition)
	assert.Equal(t, "ufw-skip-to-policy-input", res.Where.Chain)
	assert.False(t, tracedChain(res, "ufw-after-logging-input"))

	// The limit: five new SSH connections pass, the sixth is rejected.
	for i := 0; i < 6; i++ {
		res = h.Receive("eth0", tcpSYN("192.168.1.30", uint16(41000+i), "192.168.1.10", 22))
		if i < 5 {
			assert.Equal(t, Delivered, res.Disposition, "SSH SYN %d", i+1)
			assert.Equal(t, "ufw-user-limit-accept", res.Where.Chain, "SSH SYN %d", i+1)
		} else {
			assert.Equal(t, Rejected, res.Disposition, "SSH SYN %d", i+1)
			assert.Equal(t, "ufw-user-limit", res.Where.Chain)
			assert.Equal(t, 2, res.Where.Rule)
			assert.True(t, tracedChain(res, "ufw-user-limit"))
		}
	}
	// Another source is not limited.
	res = h.Receive("eth0", tcpSYN("192.168.1.31", 42000, "192.168.1.10", 22))
	assert.Equal(t, Delivered, res.Disposition)
}

// TestRealWGQuick: wg-quick's raw rule drops a packet for the tunnel
// address that does not come through the tunnel; its mangle pair saves the
// fwmark 51820 of WireGuard's own UDP packets to the connection and puts it
// back on the replies; the server lines forward and masquerade tunnel
// traffic.
func TestRealWGQuick(t *testing.T) {
	a := netip.MustParseAddr
	h := realHost(t, "real-wg-quick.rules", HostConfig{}, map[string][]string{
		"eth0": {"203.0.113.5/24"}, "wg0": {"10.8.0.2/24"}}, "203.0.113.1")

	res := h.Receive("eth0", tcpSYN("203.0.113.9", 40000, "10.8.0.2", 22))
	assert.Equal(t, Dropped, res.Disposition)
	assert.Equal(t, Raw, res.Where.Table)
	assert.Equal(t, "PREROUTING", res.Where.Chain)
	assert.Equal(t, 1, res.Where.Rule)

	res = h.Receive("wg0", tcpSYN("10.8.0.3", 40000, "10.8.0.2", 22))
	assert.Equal(t, Delivered, res.Disposition, "through the tunnel")

	// WireGuard's encapsulated packet carries the fwmark; the reply gets it
	// back from the connection mark.
	out := Packet{Proto: inet.UDP, Src: a("203.0.113.5"), Dst: a("198.51.100.1"), SrcPort: 51820, DstPort: 51820,
		TTL: 64, Length: 176, Mark: 51820, HasSocket: true}
	res = h.Send(out)
	require.Equal(t, Sent, res.Disposition)
	require.NotNil(t, res.Conn)
	assert.Equal(t, uint32(51820), res.Conn.Mark)
	reply := Packet{Proto: inet.UDP, Src: a("198.51.100.1"), Dst: a("203.0.113.5"), SrcPort: 51820, DstPort: 51820, TTL: 64, Length: 176}
	res = h.Receive("eth0", reply)
	assert.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, uint32(51820), res.Packet.Mark, "CONNMARK --restore-mark")

	// A UDP packet of another flow keeps mark 0.
	res = h.Receive("eth0", Packet{Proto: inet.UDP, Src: a("198.51.100.2"), Dst: a("203.0.113.5"), SrcPort: 53, DstPort: 5353, TTL: 64, Length: 60})
	assert.Equal(t, uint32(0), res.Packet.Mark)

	// A tunnel client's packet to the internet is forwarded and masqueraded.
	res = h.Receive("wg0", tcpSYN("10.8.0.3", 40001, "198.51.100.7", 443))
	assert.Equal(t, Forwarded, res.Disposition)
	assert.Equal(t, a("203.0.113.5"), res.Packet.Src)
	assert.Equal(t, a("198.51.100.7"), res.Packet.Dst)
}

// TestRealIstio: the sidecar's nat rules send inbound TCP to Envoy's
// inbound port 15006 (except 15008, HBONE), a local application's outbound
// TCP to 15001, and leave Envoy's own (uid 1337) traffic alone.
func TestRealIstio(t *testing.T) {
	a := netip.MustParseAddr
	h := realHost(t, "real-istio.rules", HostConfig{}, map[string][]string{"eth0": {"10.244.1.5/24"}}, "10.244.1.1")

	res := h.Receive("eth0", tcpSYN("10.244.2.7", 40000, "10.244.1.5", 8080))
	assert.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, a("10.244.1.5"), res.Packet.Dst)
	assert.Equal(t, uint16(15006), res.Packet.DstPort, "inbound REDIRECTed to Envoy")

	res = h.Receive("eth0", tcpSYN("10.244.2.7", 40001, "10.244.1.5", 15008))
	assert.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, uint16(15008), res.Packet.DstPort, "HBONE port not captured")

	app := tcpSYN("10.244.1.5", 40002, "10.96.0.10", 80)
	app.UID, app.GID, app.HasSocket = 1000, 1000, true
	res = h.Send(app)
	assert.Equal(t, Delivered, res.Disposition, "redirected to the local Envoy")
	assert.Equal(t, a("127.0.0.1"), res.Packet.Dst)
	assert.Equal(t, uint16(15001), res.Packet.DstPort)

	envoy := tcpSYN("10.244.1.5", 40003, "10.96.0.10", 80)
	envoy.UID, envoy.GID, envoy.HasSocket = 1337, 1337, true
	h.Tracing = true
	res = h.Send(envoy)
	assert.Equal(t, Sent, res.Disposition, "Envoy's own traffic leaves")
	assert.Equal(t, a("10.96.0.10"), res.Packet.Dst)
	assert.Equal(t, uint16(80), res.Packet.DstPort)
	returned := false
	for _, st := range res.Trace {
		returned = returned || st.Chain == "ISTIO_OUTPUT" && st.Rule == 4 // -m owner --uid-owner 1337 -j RETURN
	}
	assert.True(t, returned, "ISTIO_OUTPUT rule 4 returns Envoy's packet")
}

// TestRealIstioTPROXY: istio's TPROXY interception on the pod's side,
// with "ip rule add fwmark 1337 lookup 133" and "ip route add local
// 0.0.0.0/0 dev lo table 133", Envoy's transparent listener on 15006 and
// the application's ordinary one on 8080. The SYN to 8080 finds no
// socket for -m socket (the application's listener is a wildcard one), so
// TPROXY gives it to Envoy with mark 1337, which the policy route delivers;
// once Envoy has accepted the connection (its socket has the client's
// destination as local address, transparent), the next packet matches -m
// socket and goes through ISTIO_DIVERT. Without Envoy listening, TPROXY
// drops the SYN.
func TestRealIstioTPROXY(t *testing.T) {
	a := netip.MustParseAddr
	in, err := os.ReadFile(filepath.Join(goldenDir, "real-istio-tproxy.rules"))
	require.NoError(t, err)
	newHost := func(envoy bool) *Host {
		h := NewHost(HostConfig{})
		require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.244.1.5/24")))
		require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: a("10.244.1.1")}))
		require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "lo", Type: RouteLocal, Table: 133}))
		require.NoError(t, h.AddRule(RouteRule{Family: IPv4, AutoPriority: true, HasMark: true, Mark: 1337, Mask: ^uint32(0), Table: 133}))
		require.NoError(t, h.AddSocket(Socket{Proto: inet.TCP, Addr: netip.IPv4Unspecified(), Port: 8080}))
		if envoy {
			require.NoError(t, h.AddSocket(Socket{Proto: inet.TCP, Addr: netip.IPv4Unspecified(), Port: 15006, Transparent: true}))
		}
		require.NoError(t, h.Restore(IPv4, in, RestoreOptions{}))
		h.Tracing = true
		return h
	}
	h := newHost(true)
	syn := tcpSYN("10.244.2.7", 40000, "10.244.1.5", 8080)
	res := h.Receive("eth0", syn)
	assert.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, uint32(1337), res.Packet.Mark, "TPROXY's mark")
	assert.Equal(t, uint16(8080), res.Packet.DstPort, "TPROXY does not rewrite the packet")
	assert.True(t, tracedChain(res, "ISTIO_TPROXY"))
	assert.False(t, tracedChain(res, "ISTIO_DIVERT"))
	require.NotNil(t, res.Socket)
	assert.Equal(t, uint16(15006), res.Socket.Port, "Envoy's listener has the SYN")
	require.NotEmpty(t, res.Routes)
	assert.Equal(t, TableLocal, res.Routes[0].Table, "the pod's own address: the local table answers first")

	require.NoError(t, h.AddSocket(Socket{Proto: inet.TCP, Addr: a("10.244.1.5"), Port: 8080, Remote: netip.MustParseAddrPort("10.244.2.7:40000"), Transparent: true}))
	ack := syn
	ack.TCPFlags = inet.ACK
	res = h.Receive("eth0", ack)
	assert.Equal(t, Delivered, res.Disposition)
	assert.True(t, tracedChain(res, "ISTIO_DIVERT"), "-m socket finds Envoy's connection")
	assert.False(t, tracedChain(res, "ISTIO_TPROXY"))
	assert.Equal(t, uint32(1337), res.Packet.Mark)
	require.NotNil(t, res.Socket)
	assert.Equal(t, netip.MustParseAddrPort("10.244.2.7:40000"), res.Socket.Remote)

	res = newHost(false).Receive("eth0", syn)
	assert.Equal(t, Dropped, res.Disposition, "no transparent listener on 15006")
	assert.Equal(t, "ISTIO_TPROXY", res.Where.Chain)
	assert.Equal(t, 1, res.Where.Rule)
}
