package netfilter

import (
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// parseMatch parses one rule and returns its only match.
func parseMatch(t *testing.T, f Family, chain, spec string) Match {
	t.Helper()
	r := lastRule(t, f, "filter", chain, spec)
	require.Len(t, r.Matches, 1)
	return r.Matches[0]
}

func evalOn(h *Host, m Match, p Packet) bool {
	c := &evalCtx{pkt: &p, host: h, walk: &walk{}}
	return m.match(c)
}

var (
	a4 = netip.MustParseAddr
	p4 = netip.MustParsePrefix
)

func TestMarkSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	m := parseMatch(t, IPv4, "T", "-m mark ! --mark 0x4000/0x4000")
	assert.False(t, evalOn(h, m, Packet{Mark: 0x4001}))
	assert.True(t, evalOn(h, m, Packet{Mark: 0x1}))
	m = parseMatch(t, IPv4, "T", "-m mark --mark 0x1/0x0")
	assert.False(t, evalOn(h, m, Packet{Mark: 0x1}), "(mark & 0) is never 1")
	m = parseMatch(t, IPv4, "T", "-m mark --mark 0x50")
	assert.True(t, evalOn(h, m, Packet{Mark: 0x50}))
	assert.False(t, evalOn(h, m, Packet{Mark: 0x51}))
}

func TestMultiportSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	cases := []struct {
		spec   string
		sp, dp uint16
		frag   uint16
		want   bool
	}{
		{"--dports 80,443,8000:8080", 1, 8080, 0, true},
		{"--dports 80,443,8000:8080", 1, 8081, 0, false},
		{"--dports 80,443,8000:8080", 80, 1, 0, false},
		{"--sports 53", 53, 1, 0, true},
		{"--ports 22", 22, 1, 0, true},
		{"--ports 22", 1, 22, 0, true},
		{"--ports 22", 1, 2, 0, false},
		{"! --dports 80,443", 1, 443, 0, false},
		{"! --dports 80,443", 1, 444, 0, true},
		{"--dports 80", 1, 80, 5, false},
		{"! --dports 80", 1, 81, 5, false},
	}
	for _, tc := range cases {
		m := parseMatch(t, IPv4, "T", "-p tcp -m multiport "+tc.spec)
		got := evalOn(h, m, Packet{Proto: inet.TCP, SrcPort: tc.sp, DstPort: tc.dp, FragOffset: tc.frag})
		assert.Equal(t, tc.want, got, "%s sport %d dport %d frag %d", tc.spec, tc.sp, tc.dp, tc.frag)
	}
}

func TestICMPSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	cases := []struct {
		f         Family
		spec      string
		typ, code uint8
		want      bool
	}{
		{IPv4, "-p icmp --icmp-type any", 42, 7, true},
		{IPv4, "-p icmp ! --icmp-type any", 42, 7, false},
		{IPv4, "-p icmp --icmp-type echo-request", 8, 0, true},
		{IPv4, "-p icmp --icmp-type echo-request", 8, 9, true},
		{IPv4, "-p icmp --icmp-type echo-request", 0, 0, false},
		{IPv4, "-p icmp --icmp-type port-unreachable", 3, 3, true},
		{IPv4, "-p icmp --icmp-type port-unreachable", 3, 1, false},
		{IPv4, "-p icmp ! --icmp-type 3/3", 3, 1, true},
		{IPv6, "-p icmpv6 --icmpv6-type 255", 1, 0, false},
		{IPv6, "-p icmpv6 --icmpv6-type 255", 255, 3, true},
		{IPv6, "-p icmpv6 --icmpv6-type neighbour-solicitation", 135, 0, true},
		{IPv6, "-p icmpv6 ! --icmpv6-type echo-request", 128, 0, false},
	}
	for _, tc := range cases {
		m := parseMatch(t, tc.f, "T", tc.spec)
		got := evalOn(h, m, Packet{Family: tc.f, ICMPType: tc.typ, ICMPCode: tc.code})
		assert.Equal(t, tc.want, got, "%s type %d code %d", tc.spec, tc.typ, tc.code)
	}
	m := parseMatch(t, IPv4, "T", "-p icmp --icmp-type any")
	assert.False(t, evalOn(h, m, Packet{FragOffset: 1}), "fragments never match")
}

func TestIPRangeAndLengthSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	m := parseMatch(t, IPv4, "T", "-m iprange --src-range 10.0.0.1-10.0.0.5 ! --dst-range 10.1.0.0-10.2.0.0")
	assert.True(t, evalOn(h, m, Packet{Src: a4("10.0.0.5"), Dst: a4("10.2.0.1")}))
	assert.False(t, evalOn(h, m, Packet{Src: a4("10.0.0.6"), Dst: a4("10.2.0.1")}))
	assert.False(t, evalOn(h, m, Packet{Src: a4("10.0.0.1"), Dst: a4("10.1.255.255")}))
	m = parseMatch(t, IPv4, "T", "-m iprange --src-range 10.0.0.5-10.0.0.1")
	assert.False(t, evalOn(h, m, Packet{Src: a4("10.0.0.3")}), "a reversed range matches nothing")

	m = parseMatch(t, IPv4, "T", "-m length --length 40:100")
	assert.True(t, evalOn(h, m, Packet{Length: 40}))
	assert.True(t, evalOn(h, m, Packet{Length: 100}))
	assert.False(t, evalOn(h, m, Packet{Length: 101}))
	m = parseMatch(t, IPv4, "T", "-m length ! --length 0:100")
	assert.True(t, evalOn(h, m, Packet{Length: 1500}))
}

func TestHostAddrType(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", p4("10.1.0.2/24"), p4("2001:db8:1::2/64")))
	require.NoError(t, h.AddInterface("eth1", p4("192.168.7.1/30")))
	require.NoError(t, h.AddRoute(Route{Dst: p4("10.9.9.0/24"), Type: RouteBlackhole}))
	require.NoError(t, h.AddRoute(Route{Dst: p4("0.0.0.0/0"), Iface: "eth0", Gateway: a4("10.1.0.1")}))
	require.NoError(t, h.AddRoute(Route{Dst: p4("2001:db8:dead::/48"), Type: RouteUnreachable}))
	cases := []struct {
		addr, iface string
		want        AddrType
	}{
		// IPv4: observed with a veth pair in a namespace on Linux 6.18.
		{"10.1.0.2", "", AddrLocal},
		{"10.1.0.255", "", AddrBroadcast},
		{"10.1.0.0", "", AddrUnicast},
		{"255.255.255.255", "", AddrBroadcast},
		{"224.0.0.5", "", AddrMulticast},
		{"127.0.0.5", "", AddrLocal},
		{"8.8.8.8", "", AddrUnicast},
		{"0.0.0.0", "", AddrBroadcast},
		{"0.0.0.1", "", AddrUnicast},
		{"10.9.9.1", "", AddrUnicast},
		{"192.168.7.3", "", AddrBroadcast},
		{"10.1.0.2", "eth0", AddrLocal},
		{"10.1.0.2", "eth1", AddrUnicast},
		{"127.0.0.1", "eth0", AddrUnicast},
		{"127.0.0.1", "lo", AddrLocal},
		{"255.255.255.255", "eth1", AddrBroadcast},
		// IPv6: the set of properties match_type6 tests.
		{"::", "", AddrUnspec | AddrUnreachable},
		{"ff02::1", "", AddrMulticast},
		{"2001:db8:1::2", "", AddrUnicast | AddrLocal},
		{"2001:db8:1::2", "eth1", AddrUnicast | AddrUnreachable},
		{"2001:db8:1::", "", AddrUnicast | AddrAnycast},
		{"2001:db8:dead::1", "", AddrUnicast | AddrUnreachable},
		{"2001:db8:2::1", "", AddrUnicast | AddrUnreachable},
		{"::1", "", AddrUnicast | AddrLocal},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, AddrType(h.addrType(a4(tc.addr), tc.iface)), "%s on %q", tc.addr, tc.iface)
	}

	m := parseMatch(t, IPv4, "T", "-m addrtype --src-type UNICAST ! --dst-type LOCAL,BROADCAST")
	assert.True(t, evalOn(h, m, Packet{Src: a4("10.1.0.7"), Dst: a4("8.8.8.8")}))
	assert.False(t, evalOn(h, m, Packet{Src: a4("10.1.0.7"), Dst: a4("10.1.0.255")}))
	assert.False(t, evalOn(h, m, Packet{Src: a4("224.0.0.1"), Dst: a4("8.8.8.8")}))
	m = parseMatch(t, IPv4, "INPUT", "-m addrtype --dst-type LOCAL --limit-iface-in")
	assert.True(t, evalOn(h, m, Packet{In: "eth0", Dst: a4("10.1.0.2")}))
	assert.False(t, evalOn(h, m, Packet{In: "eth1", Dst: a4("10.1.0.2")}))
	m6 := parseMatch(t, IPv6, "T", "-m addrtype --dst-type UNICAST,LOCAL")
	assert.True(t, evalOn(h, m6, Packet{Family: IPv6, Dst: a4("2001:db8:1::2")}))
	assert.False(t, evalOn(h, m6, Packet{Family: IPv6, Dst: a4("2001:db8:1::9")}), "IPv6 needs every listed property")
	m6 = parseMatch(t, IPv6, "T", "-m addrtype --dst-type MULTICAST")
	assert.True(t, evalOn(h, m6, Packet{Family: IPv6, Dst: a4("ff02::1")}))
}

func TestAddrTypeLimitIfacePlacement(t *testing.T) {
	rs := NewRuleset(IPv4)
	require.NoError(t, rs.Exec("-N X"))
	require.NoError(t, rs.Exec("-A X -m addrtype --dst-type LOCAL --limit-iface-in -j ACCEPT"))
	err := rs.Exec("-A OUTPUT -j X")
	assert.ErrorIs(t, err, ErrNotAllowed, "a user chain reached from OUTPUT inherits the restriction")
	require.NoError(t, rs.Exec("-A INPUT -j X"))
}

// TestStatisticRandomSemantics checks that random mode draws from the
// host's seeded source exactly as the kernel does.
func TestStatisticRandomSemantics(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		seed := rapid.Uint64().Draw(rt, "seed")
		stored := rapid.Uint32Range(0, 1<<31).Draw(rt, "stored")
		inv := rapid.Bool().Draw(rt, "inv")
		h := NewHost(HostConfig{Seed: seed})
		ref := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
		m := &StatisticMatch{Mode: StatisticRandom, Probability: stored, Invert: inv}
		for i := 0; i < 20; i++ {
			want := (ref.Uint32()&0x7fffffff < stored) != inv
			if got := evalOn(h, m, Packet{}); got != want {
				rt.Fatalf("draw %d: got %v want %v", i, got, want)
			}
		}
	})
}

// TestStatisticProbabilityTable is the table of docs/kernel-notes.md,
// "statistic: probability quantisation".
func TestStatisticProbabilityTable(t *testing.T) {
	cases := []struct {
		in, out string
		stored  uint32
	}{
		{"0.5", "0.50000000000", 1073741824},
		{".5", "0.50000000000", 1073741824},
		{"0.3333333333", "0.33333333349", 715827883},
		{"0.33333333333333333", "0.33333333349", 715827883},
		{"0.25", "0.25000000000", 536870912},
		{"0.2", "0.20000000019", 429496730},
		{"0.1", "0.10000000009", 214748365},
		{"0.1428571429", "0.14285714272", 306783378},
		{"0.0001", "0.00009999983", 214748},
		{"0.99999", "0.99998999992", 2147462173},
		{"0.9999999999", "1.00000000000", 2147483648},
		{"1", "1.00000000000", 2147483648},
		{"0", "0.00000000000", 0},
		{"0.0000000001", "0.00000000000", 0},
		{"0.00000000023", "0.00000000000", 0},
		{"0.00000000024", "0.00000000047", 1},
		{"0.0000000005", "0.00000000047", 1},
		{"0.75", "0.75000000000", 1610612736},
		{"0.6666666667", "0.66666666651", 1431655765},
		{"0.0666666667", "0.06666666688", 143165577},
		{"0.01", "0.00999999978", 21474836},
		{"0.05", "0.04999999981", 107374182},
		{"1e-3", "0.00100000016", 2147484},
	}
	for _, tc := range cases {
		m := parseMatch(t, IPv4, "T", "-m statistic --mode random --probability "+tc.in).(*StatisticMatch)
		assert.Equal(t, tc.stored, m.Probability, tc.in)
		assert.Equal(t, " --mode random --probability "+tc.out, string(m.appendSave(nil)), tc.in)
	}
	// stored = 2^31 always matches: a 31-bit draw is always below it.
	h := NewHost(HostConfig{Seed: 3})
	for i := 0; i < 100; i++ {
		require.True(t, evalOn(h, &StatisticMatch{Probability: 1 << 31}, Packet{}))
		require.False(t, evalOn(h, &StatisticMatch{Probability: 0}, Packet{}))
	}
}

func udpTo7(h *Host) Result {
	return h.Receive("eth0", Packet{Src: a4("10.1.0.9"), Dst: a4("10.1.0.2"), Proto: inet.UDP, SrcPort: 1000, DstPort: 7, TTL: 64, Length: 29})
}

// TestStatisticNthSemantics replays the nft column of docs/kernel-notes.md,
// "statistic: nth mode".
func TestStatisticNthSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", p4("10.1.0.2/24")))
	rs := NewRuleset(IPv4).MustExec(
		"-A INPUT -p udp --dport 7 -m statistic --mode nth --every 3 --packet 1 -j ACCEPT",
		"-A INPUT -p udp --dport 7 -m statistic --mode nth --every 3 --packet 2 -j ACCEPT",
		"-A INPUT -p tcp -j ACCEPT",
	)
	require.NoError(t, h.Load(rs))
	want := [][2]uint64{{0, 0}, {1, 0}, {1, 0}, {1, 1}, {2, 1}, {2, 1}, {2, 1}, {3, 1}, {3, 2}}
	for k, w := range want {
		udpTo7(h)
		// The host counts in its own copy of rs.
		rules := h.Ruleset(IPv4).Table(Filter).Chain("INPUT").Rules
		assert.Equal(t, w, [2]uint64{rules[0].Counters.Packets, rules[1].Counters.Packets}, "after packet %d", k)
	}
	// A packet that fails an earlier match of the rule does not advance it.
	m := &StatisticMatch{Mode: StatisticNth, Every: 2, Packet: 0}
	assert.Equal(t, uint32(1), m.initialState())
}

func TestLimitSemantics(t *testing.T) {
	for _, backend := range []Backend{NFTables, Legacy} {
		t.Run(backend.String(), func(t *testing.T) {
			clk := NewManualClock(time.Unix(1000, 0))
			h := NewHost(HostConfig{Clock: clk, Backend: backend})
			require.NoError(t, h.AddInterface("eth0", p4("10.1.0.2/24")))
			rs := NewRuleset(IPv4).MustExec(
				"-P INPUT DROP",
				"-A INPUT -m limit --limit 5/sec --limit-burst 10 -j ACCEPT",
			)
			require.NoError(t, h.Load(rs))
			pass := func(n int) int {
				ok := 0
				for i := 0; i < n; i++ {
					if udpTo7(h).Verdict == VerdictAccept {
						ok++
					}
				}
				return ok
			}
			assert.Equal(t, 10, pass(15), "the full bucket lets the burst through")
			clk.Advance(199 * time.Millisecond)
			assert.Equal(t, 0, pass(1), "one packet costs 200ms")
			clk.Advance(time.Millisecond)
			assert.Equal(t, 1, pass(3))
			clk.Advance(time.Second)
			assert.Equal(t, 5, pass(10))
			clk.Advance(time.Hour)
			assert.Equal(t, 10, pass(20), "the bucket never holds more than the burst")
		})
	}
}

func TestPktTypeSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", p4("10.1.0.2/24")))
	uni := parseMatch(t, IPv4, "T", "-m pkttype --pkt-type unicast")
	bc := parseMatch(t, IPv4, "T", "-m pkttype --pkt-type broadcast")
	mc := parseMatch(t, IPv4, "T", "-m pkttype ! --pkt-type multicast")
	assert.True(t, evalOn(h, uni, Packet{Dst: a4("10.1.0.2")}))
	assert.True(t, evalOn(h, bc, Packet{Dst: a4("10.1.0.255"), In: "eth0"}))
	assert.True(t, evalOn(h, bc, Packet{Dst: a4("255.255.255.255")}))
	assert.False(t, evalOn(h, mc, Packet{Dst: a4("239.1.1.1")}))
	assert.True(t, evalOn(h, bc, Packet{Dst: a4("10.1.0.2"), PktType: PktLoopback}), "looped-back IPv4 unicast counts as broadcast")
	assert.True(t, evalOn(h, uni, Packet{Dst: a4("10.1.0.255"), PktType: PktUnicast}), "an explicit type wins")
}

func TestMACOwnerPhysdevHelperSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	mac := parseMatch(t, IPv4, "INPUT", "-m mac ! --mac-source 00:11:22:33:44:55")
	assert.False(t, evalOn(h, mac, Packet{}), "no Ethernet header: no match even inverted")
	assert.True(t, evalOn(h, mac, Packet{HasMAC: true, SrcMAC: [6]byte{1}}))
	assert.False(t, evalOn(h, mac, Packet{HasMAC: true, SrcMAC: [6]byte{0, 0x11, 0x22, 0x33, 0x44, 0x55}}))

	own := parseMatch(t, IPv4, "OUTPUT", "-m owner --uid-owner 1000-2000 ! --gid-owner 5")
	assert.True(t, evalOn(h, own, Packet{HasSocket: true, UID: 1500, GID: 6}))
	assert.False(t, evalOn(h, own, Packet{HasSocket: true, UID: 1500, GID: 5}))
	assert.False(t, evalOn(h, own, Packet{HasSocket: true, UID: 999, GID: 6}))
	assert.False(t, evalOn(h, own, Packet{}), "no socket: uid not inverted")
	noSock := parseMatch(t, IPv4, "OUTPUT", "-m owner ! --socket-exists")
	assert.True(t, evalOn(h, noSock, Packet{}))
	assert.False(t, evalOn(h, noSock, Packet{HasSocket: true}))
	suppl := parseMatch(t, IPv4, "OUTPUT", "-m owner --gid-owner 100 --suppl-groups")
	assert.True(t, evalOn(h, suppl, Packet{HasSocket: true, GID: 5, Groups: [16]uint32{4, 100}, NumGroups: 2}))
	assert.False(t, evalOn(h, suppl, Packet{HasSocket: true, GID: 5, Groups: [16]uint32{4, 100}, NumGroups: 1}))
	plain := parseMatch(t, IPv4, "OUTPUT", "-m owner --gid-owner 100")
	assert.False(t, evalOn(h, plain, Packet{HasSocket: true, GID: 5, Groups: [16]uint32{100}, NumGroups: 1}), "supplementary groups count only with --suppl-groups")
	allInv := parseMatch(t, IPv4, "OUTPUT", "-m owner ! --uid-owner 0")
	assert.True(t, evalOn(h, allInv, Packet{}), "no socket and every option inverted")

	pd := parseMatch(t, IPv4, "FORWARD", "-m physdev --physdev-in eth+ --physdev-is-bridged")
	assert.False(t, evalOn(h, pd, Packet{}))
	assert.True(t, evalOn(h, pd, Packet{Bridged: true, PhysIn: "eth3", PhysOut: "eth4"}))
	assert.False(t, evalOn(h, pd, Packet{Bridged: true, PhysIn: "veth1", PhysOut: "eth4"}))
	assert.False(t, evalOn(h, pd, Packet{Bridged: true, PhysIn: "eth3"}), "is-bridged needs an output port")
	pdInv := parseMatch(t, IPv4, "FORWARD", "-m physdev ! --physdev-is-bridged")
	assert.True(t, evalOn(h, pdInv, Packet{}))
	pdOut := parseMatch(t, IPv4, "FORWARD", "-m physdev ! --physdev-out eth1")
	assert.False(t, evalOn(h, pdOut, Packet{Bridged: true, PhysIn: "eth0"}), "no output port fails --physdev-out even inverted")
	assert.True(t, evalOn(h, pdOut, Packet{Bridged: true, PhysOut: "eth2"}))

	hm := parseMatch(t, IPv4, "T", "-m helper --helper ftp")
	assert.False(t, evalOn(h, hm, Packet{}))
	hm = parseMatch(t, IPv4, "T", "-m helper ! --helper ftp")
	assert.True(t, evalOn(h, hm, Packet{}))
	assert.True(t, evalOn(h, parseMatch(t, IPv4, "T", "-m comment --comment x"), Packet{}))
}

func TestSCTPChunkSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	data := func(flags uint8) SCTPChunk { return SCTPChunk{Type: 0, Flags: flags} }
	initc, sack := SCTPChunk{Type: 1}, SCTPChunk{Type: 3}
	cases := []struct {
		spec   string
		chunks []SCTPChunk
		want   bool
	}{
		{"--chunk-types any DATA,INIT", []SCTPChunk{sack, initc}, true},
		{"--chunk-types any DATA,INIT", []SCTPChunk{sack}, false},
		{"--chunk-types any DATA:B", []SCTPChunk{data(0)}, false},
		{"--chunk-types any DATA:B", []SCTPChunk{data(0), data(2)}, true},
		{"--chunk-types any DATA:b", []SCTPChunk{data(2)}, false},
		{"--chunk-types all DATA,INIT", []SCTPChunk{data(0), sack, initc}, true},
		{"--chunk-types all DATA,INIT", []SCTPChunk{data(0), sack}, false},
		{"--chunk-types only DATA,INIT", []SCTPChunk{data(0), initc}, true},
		{"--chunk-types only DATA,INIT", []SCTPChunk{data(0), sack}, false},
		{"--chunk-types only DATA:E", []SCTPChunk{data(1), data(3)}, true},
		{"--chunk-types only DATA:E", []SCTPChunk{data(1), data(2)}, false},
		{"! --chunk-types any INIT", []SCTPChunk{sack}, true},
		{"--chunk-types all NONE", []SCTPChunk{sack}, true},
		{"--chunk-types only ALL", []SCTPChunk{sack, initc}, true},
	}
	for _, tc := range cases {
		var p0 Packet
		m := parseMatch(t, IPv4, "T", "-p sctp -m sctp "+tc.spec)
		p := Packet{Proto: inet.SCTP, NumSCTPChunks: uint8(copy(p0.SCTPChunks[:], tc.chunks))}
		p.SCTPChunks = p0.SCTPChunks
		assert.Equal(t, tc.want, evalOn(h, m, p), "%s %v", tc.spec, tc.chunks)
	}
	m := parseMatch(t, IPv4, "T", "-p sctp -m sctp ! --chunk-types any INIT")
	c := &evalCtx{pkt: &Packet{Proto: inet.SCTP}, host: h, walk: &walk{}}
	assert.False(t, m.match(c))
	assert.True(t, c.hotdrop, "a packet without chunks is dropped as malformed")
	m = parseMatch(t, IPv4, "T", "-p sctp --sport 5 --dport 1:10")
	assert.True(t, evalOn(h, m, Packet{Proto: inet.SCTP, SrcPort: 5, DstPort: 10}))
	assert.False(t, evalOn(h, m, Packet{Proto: inet.SCTP, SrcPort: 5, DstPort: 11}))
}
