package netfilter

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
)

// TestExtMatchRefusals: every spec here is refused by iptables 1.8.9
// (nf_tables) in a network namespace, either by the tool or by the
// kernel's checkentry (RULE_APPEND failed: Invalid argument).
func TestExtMatchRefusals(t *testing.T) {
	cases := []struct {
		f           Family
		table, spec string
		want        error
	}{
		{IPv4, "filter", "-A INPUT -m ah --ahspi 5", ErrNotAllowed},
		{IPv4, "filter", "-A INPUT -p ah -m ah --ahspi 4294967296", ErrBadValue},
		{IPv4, "filter", "-A INPUT -p ah -m ah --ahlen 4", ErrUnknownOption},
		{IPv6, "filter", "-A INPUT -m ah --ahlen 4294967296", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m esp --espspi 5", ErrNotAllowed},
		{IPv6, "filter", "-A INPUT -m ipcomp --ipcompspi 5", ErrNotAllowed}, // ip6tables has ipcomp; the kernel wants -p ipcomp
		{IPv4, "filter", "-A INPUT -m dscp --dscp 64", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m dscp --dscp 0x40", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m dscp --dscp-class XX", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m dscp --dscp 1 --dscp-class EF", ErrIncompatibleOpts},
		{IPv4, "filter", "-A INPUT -m dscp", ErrMissingArgument},
		{IPv4, "filter", "-A INPUT -m tos --tos max-throughput", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m tos --tos 0x100", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m ttl --ttl-eq 256", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m ttl --ttl-eq 1 --ttl-gt 2", ErrIncompatibleOpts},
		{IPv4, "filter", "-A INPUT -m ttl", ErrMissingArgument},
		{IPv6, "filter", "-A INPUT -m ttl --ttl-eq 3", ErrUnknownMatch},
		{IPv4, "filter", "-A INPUT -m hl --hl-eq 1", ErrUnknownMatch},
		{IPv4, "filter", "-A INPUT -m ecn --ecn-tcp-cwr", ErrNotAllowed},
		{IPv4, "filter", "-A INPUT -p tcp -m ecn --ecn-ip-ect 4", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m ecn", ErrMissingArgument},
		{IPv4, "filter", "-A INPUT -m tcpmss --mss 5", ErrNotAllowed},
		{IPv4, "filter", "-A INPUT -p tcp -m tcpmss --mss 1500:1000", ErrBadValue},
		{IPv4, "filter", "-A INPUT -p tcp -m tcpmss --mss 65536", ErrBadValue},
		{IPv4, "filter", "-A INPUT -p tcp -m tcpmss", ErrMissingArgument},
		{IPv4, "filter", "-A INPUT -m dccp --sport 5", ErrNotAllowed},
		{IPv4, "filter", "-A INPUT -p dccp -m dccp --dccp-option 0", ErrBadValue},
		{IPv4, "filter", "-A INPUT -p dccp -m dccp --dccp-option 256", ErrBadValue},
		{IPv4, "filter", "-A INPUT -p dccp -m dccp --dccp-types 3", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m realm --realm foo", ErrBadValue},
		{IPv4, "mangle", "-A PREROUTING -m realm --realm 1", ErrNotAllowed},
		{IPv4, "filter", "-A INPUT -m devgroup --dst-group 7", ErrNotAllowed},
		{IPv4, "filter", "-A OUTPUT -m devgroup --src-group 7", ErrNotAllowed},
		{IPv4, "filter", "-A INPUT -m devgroup --src-group foo", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m devgroup", ErrMissingArgument},
		{IPv4, "filter", "-A INPUT -m cpu --cpu 4294967296", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m cpu", ErrMissingArgument},
		{IPv4, "filter", "-A FORWARD -m cgroup --cgroup 1", ErrNotAllowed},
		{IPv4, "mangle", "-A PREROUTING -m cgroup --cgroup 1", ErrNotAllowed},
		{IPv4, "filter", "-A OUTPUT -m cgroup --cgroup 1 --path /", ErrIncompatibleOpts},
		{IPv4, "filter", "-A OUTPUT -m cgroup", ErrMissingArgument},
		{IPv4, "filter", "-A OUTPUT -m cgroup --cgroup 4294967296", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m cluster --cluster-total-nodes 2 --cluster-local-node 3 --cluster-hash-seed 1", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m cluster --cluster-total-nodes 33 --cluster-local-node 1 --cluster-hash-seed 1", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m cluster --cluster-total-nodes 32 --cluster-local-nodemask 33 --cluster-hash-seed 1", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m cluster --cluster-total-nodes 32 --cluster-local-nodemask 0 --cluster-hash-seed 1", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m cluster --cluster-total-nodes 2 --cluster-local-nodemask 7 --cluster-hash-seed 1", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m cluster --cluster-total-nodes 2 --cluster-local-node 1", ErrMissingArgument},
		{IPv4, "filter", "-A INPUT -m cluster --cluster-total-nodes 2 --cluster-hash-seed 1", ErrMissingArgument},
		{IPv4, "filter", "-A INPUT -m cluster --cluster-local-node 1 --cluster-hash-seed 1", ErrMissingArgument},
		{IPv4, "filter", "-A INPUT -m cluster --cluster-total-nodes 2 --cluster-local-node 1 --cluster-local-nodemask 1 --cluster-hash-seed 1", ErrIncompatibleOpts},
		{IPv4, "filter", "-A INPUT -m connlabel --label 128", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m connlabel --label foo", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m connlabel --set", ErrMissingArgument},
		{IPv4, "filter", "-A INPUT -m connbytes --connbytes 100:10 --connbytes-dir original --connbytes-mode packets", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m connbytes --connbytes 1 --connbytes-dir ORIGINAL --connbytes-mode packets", ErrBadValue},
		{IPv4, "filter", "-A INPUT -m connbytes --connbytes 1 --connbytes-dir both", ErrMissingArgument},
		{IPv4, "filter", "-A INPUT -m connbytes --connbytes 10", ErrMissingArgument},
		{IPv6, "filter", "-A INPUT -m mh --mh-type 1", ErrNotAllowed},
		{IPv6, "filter", "-A INPUT -p mh -m mh --mh-type fbu", ErrBadValue},
		{IPv6, "filter", "-A INPUT -p mh -m mh --mh-type 7:2", ErrBadValue},
		{IPv6, "filter", "-A INPUT -p mh -m mh --mh-type 256", ErrBadValue},
		{IPv6, "filter", "-A INPUT -m frag --fragmore --fraglast", ErrIncompatibleOpts},
		{IPv6, "filter", "-A INPUT -m ipv6header", ErrMissingArgument},
		{IPv6, "filter", "-A INPUT -m ipv6header --header bogus", ErrBadValue},
		{IPv6, "filter", "-A INPUT -m rt --rt-0-res", ErrNotAllowed},
		{IPv6, "filter", "-A INPUT -m rt --rt-type 2 --rt-0-res", ErrNotAllowed},
		{IPv6, "filter", "-A INPUT -m rt --rt-type 0 --rt-0-not-strict", ErrMissingArgument},
		{IPv6, "filter", "-A INPUT -m hbh --hbh-opts 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17", ErrBadValue},
		{IPv6, "filter", "-A OUTPUT -m eui64", ErrNotAllowed},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			rs := NewRuleset(c.f)
			err := rs.Exec("-t " + c.table + " " + c.spec)
			require.Error(t, err)
			assert.True(t, errors.Is(err, c.want), "got %v, want %v", err, c.want)
		})
	}
}

// TestExtMatchLoadRefusals: matches that load and print but read state
// the model lacks are refused by name when a Host loads them.
func TestExtMatchLoadRefusals(t *testing.T) {
	for _, c := range []struct {
		f     Family
		rules string
		name  string
	}{
		{IPv6, "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m rt --rt-type 0 --rt-0-addrs ::1\nCOMMIT\n", "-m rt"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rs, err := ParseRestore(c.f, []byte(c.rules))
			require.NoError(t, err, "iptables-restore accepts it")
			require.NotNil(t, rs)
			h := NewHost(HostConfig{})
			err = h.Restore(c.f, []byte(c.rules), RestoreOptions{})
			require.ErrorIs(t, err, ErrNotModelled)
			assert.Contains(t, err.Error(), c.name)
		})
	}
	// cgroup paths are the caller's input (Packet.CgroupPath); any loads.
	h := NewHost(HostConfig{})
	require.NoError(t, h.Restore(IPv4, []byte("*filter\n:OUTPUT ACCEPT [0:0]\n-A OUTPUT -m cgroup --path /user.slice\nCOMMIT\n"), RestoreOptions{}))
}

// extMatch runs the single match of "-A CHAIN spec" on p.
func extMatch(t *testing.T, h *Host, f Family, table, chain, spec string, p Packet) bool {
	t.Helper()
	r := lastRule(t, f, table, chain, spec)
	m := r.Matches[len(r.Matches)-1]
	if h == nil {
		h = NewHost(HostConfig{})
	}
	return m.match(&evalCtx{pkt: &p, host: h, walk: &walk{}})
}

// TestExtMatchSemantics covers the inputs the kernel-backed tests cannot
// set: the CPU, the route realm, the socket's cgroup, device groups, and
// edge cases of the header matches.
func TestExtMatchSemantics(t *testing.T) {
	v4 := Packet{Family: IPv4, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), TTL: 64}
	with := func(f func(*Packet)) Packet { p := v4; f(&p); return p }

	assert.True(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-m cpu --cpu 2", with(func(p *Packet) { p.CPU = 2 })))
	assert.False(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-m cpu --cpu 2", v4))
	assert.True(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-m cpu ! --cpu 2", v4))

	assert.True(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-m realm --realm 0x5/0xff", with(func(p *Packet) { p.Realm = 0x105 })))
	assert.False(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-m realm --realm 5", with(func(p *Packet) { p.Realm = 0x105 })))
	assert.True(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-m realm --realm cosmos", v4))

	sock := with(func(p *Packet) { p.HasSocket, p.CgroupClassID = true, 0x100001 })
	assert.True(t, extMatch(t, nil, IPv4, "filter", "OUTPUT", "-m cgroup --cgroup 0x100001", sock))
	assert.False(t, extMatch(t, nil, IPv4, "filter", "OUTPUT", "-m cgroup ! --cgroup 0x100001", sock))
	assert.False(t, extMatch(t, nil, IPv4, "filter", "OUTPUT", "-m cgroup ! --cgroup 5", v4), "no socket: no match, inverted or not")
	assert.True(t, extMatch(t, nil, IPv4, "filter", "OUTPUT", "-m cgroup --path /", sock))
	assert.False(t, extMatch(t, nil, IPv4, "filter", "OUTPUT", "-m cgroup ! --path /", sock))
	sock.CgroupPath = "/system.slice/sshd.service"
	for spec, want := range map[string]bool{
		"-m cgroup --path /system.slice":                true,
		"-m cgroup --path system.slice/":                true,
		"-m cgroup --path /system.slice/sshd.service":   true,
		"-m cgroup --path /system.slice/sshd.service/x": false,
		"-m cgroup --path /system":                      false,
		"-m cgroup ! --path /user.slice":                true,
	} {
		assert.Equal(t, want, extMatch(t, nil, IPv4, "filter", "OUTPUT", spec, sock), spec)
	}
	cg := lastRule(t, IPv4, "filter", "OUTPUT", "-m cgroup --path /system.slice").Matches[0]
	cc := &evalCtx{pkt: &sock, host: NewHost(HostConfig{}), walk: &walk{}}
	assert.Zero(t, testing.AllocsPerRun(100, func() { cg.match(cc) }), "cgroup --path allocates")

	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0"))
	require.NoError(t, h.AddInterface("eth1"))
	h.Interface("eth1").Group = 7
	fwd := with(func(p *Packet) { p.In, p.Out = "eth0", "eth1" })
	assert.True(t, extMatch(t, h, IPv4, "filter", "FORWARD", "-m devgroup --src-group default --dst-group 7", fwd))
	assert.False(t, extMatch(t, h, IPv4, "filter", "FORWARD", "-m devgroup --src-group 7", fwd))
	assert.True(t, extMatch(t, h, IPv4, "filter", "FORWARD", "-m devgroup ! --dst-group 0x8/0x8", fwd))

	// tcpmss: a segment without the option matches only inverted.
	syn := with(func(p *Packet) { p.Proto = inet.TCP })
	assert.False(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-p tcp -m tcpmss --mss 0:65535", syn))
	assert.True(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-p tcp -m tcpmss ! --mss 0:65535", syn))

	// Reversed SPI ranges are kept and match nothing.
	ah := with(func(p *Packet) { p.Proto, p.SPI = 51, 7 })
	assert.False(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-p ah -m ah --ahspi 10:5", ah))
	assert.True(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-p ah -m ah ! --ahspi 10:5", ah))
	// A non-first fragment carries no AH header.
	assert.False(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-p ah -m ah", with(func(p *Packet) { p.Proto, p.FragOffset = 51, 10 })))

	// connbytes and cluster need a connection.
	assert.False(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-m connbytes --connbytes 0 --connbytes-dir both --connbytes-mode packets", v4))
	assert.False(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-m cluster --cluster-total-nodes 1 --cluster-local-node 1 --cluster-hash-seed 0", v4))

	// connlabel: --set sets the label on the connection; a later packet
	// of it matches without --set.
	lh := NewHost(HostConfig{})
	require.NoError(t, lh.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, lh.Restore(IPv4, []byte("*mangle\n:PREROUTING ACCEPT [0:0]\n"+
		"-A PREROUTING -m connlabel --label 100\n-A PREROUTING -p udp --dport 53 -m connlabel --label 100 --set\n"+
		"-A PREROUTING -m connlabel ! --label 100\nCOMMIT\n"), RestoreOptions{}))
	u := UDP(netip.MustParseAddrPort("192.168.10.2:3000"), netip.MustParseAddrPort("192.168.10.1:53"))
	lh.Receive("eth0", u)
	lh.Receive("eth0", u)
	other := UDP(netip.MustParseAddrPort("192.168.10.2:3000"), netip.MustParseAddrPort("192.168.10.1:54"))
	lh.Receive("eth0", other)
	var got []uint64
	for _, r := range lh.Ruleset(IPv4).Table(Mangle).Chain("PREROUTING").Rules {
		got = append(got, r.Counters.Packets)
	}
	assert.Equal(t, []uint64{1, 2, 1}, got, "label set by the first packet, seen by the second; the other flow has none")
	assert.False(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-m connlabel --label 1 --set", v4), "no connection")
	assert.True(t, extMatch(t, nil, IPv4, "filter", "INPUT", "-m connlabel ! --label 1", v4))

	// ipv6header: exact set, --soft subset, and their inversions.
	v6 := Packet{Family: IPv6, Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), IPv6Exts: ExtHopByHop | ExtFragment | ExtProto}
	for spec, want := range map[string]bool{
		"-m ipv6header --header hop,frag,prot":         true,
		"-m ipv6header --header hop,prot":              false,
		"-m ipv6header --header hop --soft":            true,
		"-m ipv6header --header hop,dst --soft":        false,
		"-m ipv6header ! --header hop,prot":            true,
		"-m ipv6header ! --header dst,route --soft":    true,
		"-m ipv6header ! --header dst,frag --soft":     false,
		"-m ipv6header ! --header hop,frag,prot":       false,
		"-m ipv6header --header ipv6-frag,prot --soft": true,
	} {
		assert.Equal(t, want, extMatch(t, nil, IPv6, "filter", "INPUT", spec, v6), spec)
	}

	// srh: segments left 1 of last entry 1; the tag is read in host
	// (little-endian) byte order.
	sr := Packet{Family: IPv6, Src: netip.MustParseAddr("fd00::1"), Dst: netip.MustParseAddr("fd00::2"), IPv6Exts: ExtRouting | ExtProto,
		RTType: 4, RTSegsLeft: 1, RTLen: 4, SRH: true, SRHNext: 17, SRHLastEntry: 1, SRHTag: 7,
		SRHNextSID: netip.MustParseAddr("fd00:bb::1").As16(), SRHLastSID: netip.MustParseAddr("fd00:bb::1").As16()}
	for spec, want := range map[string]bool{
		"-m srh --srh-next-hdr 17 --srh-segs-left-eq 1 --srh-last-entry-eq 1": true,
		"-m srh --srh-tag 7":                           false,
		"-m srh --srh-tag 1792":                        true,
		"-m srh --srh-psid ::/0":                       false, // no previous segment
		"-m srh ! --srh-psid ::/0":                     false,
		"-m srh --srh-nsid fd00:bb::/32":               true,
		"-m srh --srh-lsid fd00:bb::2":                 false,
		"-m srh --srh-hdr-len-gt 1 --srh-hdr-len-lt 9": false, // both test 9
	} {
		assert.Equal(t, want, extMatch(t, nil, IPv6, "filter", "INPUT", spec, sr), spec)
	}

	// eui64: the modified EUI-64 of the Ethernet source.
	e := Packet{Family: IPv6, Src: netip.MustParseAddr("fe80::70:77ff:fe00:a02"), Dst: netip.MustParseAddr("fe80::1"),
		SrcMAC: [6]byte{0x02, 0x70, 0x77, 0x00, 0x0a, 0x02}, HasMAC: true}
	assert.True(t, extMatch(t, nil, IPv6, "filter", "INPUT", "-m eui64", e))
	e.SrcMAC[5] = 3
	assert.False(t, extMatch(t, nil, IPv6, "filter", "INPUT", "-m eui64", e))
	e.HasMAC = false
	assert.False(t, extMatch(t, nil, IPv6, "filter", "INPUT", "-m eui64", e))
}

// TestClusterHash checks the node choice against the kernel's: the
// counters of TestKernelExtMatches's cluster rules recorded in the lab
// (sources 192.168.10.2-8, seed 0xdeadbeef, 2 nodes) put .2 .5 .6 on one
// node and .3 .4 .7 .8 on the other; this is the same hash, unit-sized.
func TestClusterHash(t *testing.T) {
	m := &ClusterMatch{TotalNodes: 2, NodeMask: 1, HashSeed: 0xdeadbeef}
	nodes := map[uint32][]byte{}
	for _, last := range []byte{2, 3, 4, 5, 6, 7, 8} {
		a := netip.AddrFrom4([4]byte{192, 168, 10, last})
		n := m.node(a.As16(), true)
		require.Less(t, n, uint32(2))
		nodes[n] = append(nodes[n], last)
	}
	assert.Len(t, nodes, 2, "both nodes get sources")
}

// TestExtMatchesDoNotAllocate: a packet walking every modelled extension
// match (in mangle PREROUTING, with conntrack for connbytes and cluster)
// allocates nothing.
func TestExtMatchesDoNotAllocate(t *testing.T) {
	for _, c := range []struct {
		f     Family
		rules []string
		pkt   Packet
	}{
		{IPv4, []string{"-m dscp --dscp 1", "-m tos --tos 0x10", "-m ttl --ttl-lt 3", "-p tcp -m ecn --ecn-tcp-ece", "-m ecn --ecn-ip-ect 1",
			"-p tcp -m tcpmss --mss 1:2", "-p ah -m ah --ahspi 1", "-p esp -m esp --espspi 1", "-p ipcomp -m ipcomp",
			"-p dccp -m dccp --dccp-types DATA --dccp-option 3", "-m devgroup --src-group 3", "-m cpu --cpu 9",
			"-m connbytes --connbytes 5 --connbytes-dir both --connbytes-mode avgpkt",
			"-m cluster --cluster-total-nodes 2 --cluster-local-node 2 --cluster-hash-seed 5"},
			tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN)},
		{IPv6, []string{"-m hl --hl-eq 1", "-m frag --fragid 3", "-m hbh --hbh-opts 1:4", "-m dst --dst-len 8", "-m rt --rt-type 2",
			"-m ah --ahspi 5", "-p mh -m mh --mh-type 3", "-m ipv6header --header hop --soft", "-m eui64"},
			Packet{Family: IPv6, Proto: inet.UDP, Src: netip.MustParseAddr("fd00::2"), Dst: netip.MustParseAddr("fd00::1"),
				SrcPort: 1, DstPort: 2, TTL: 64, Length: 48, IPv6Exts: ExtHopByHop | ExtProto, NumHBHOpts: 1, HBHOpts: [8]IPv6Option{{1, 4}}}},
	} {
		text := "*mangle\n:PREROUTING ACCEPT [0:0]\n"
		for _, r := range c.rules {
			text += "-A PREROUTING " + r + "\n"
		}
		text += "COMMIT\n"
		h := NewHost(HostConfig{})
		require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), netip.MustParsePrefix("fd00::1/64")))
		require.NoError(t, h.Restore(c.f, []byte(text), RestoreOptions{}))
		p := c.pkt
		allocs := testing.AllocsPerRun(100, func() { h.Receive("eth0", p) })
		assert.Zero(t, allocs, "%v: Receive allocates", c.f)
	}
}

// TestDecodeExtFields checks the fields the decoder fills for the
// extension matches, on hand-built headers.
func TestDecodeExtFields(t *testing.T) {
	d := NewDecoder()
	ip6 := func(next byte, payload ...byte) []byte {
		b := []byte{0x60, 0, 0, 0, byte(len(payload) >> 8), byte(len(payload)), next, 64}
		b = append(b, netip.MustParseAddr("fd00::2").AsSlice()...)
		b = append(b, netip.MustParseAddr("fd00::1").AsSlice()...)
		return append(b, payload...)
	}
	udp := []byte{0, 1, 0, 2, 0, 9, 0, 0, 'x'}
	cat := func(bs ...[]byte) []byte {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return out
	}
	// hop-by-hop (Pad1, PadN 3), routing type 2, fragment (first, M, id 9,
	// reserved byte set), AH (len 24, spi 100, reserved set), UDP.
	p, err := d.DecodeIP(ip6(0, cat(
		[]byte{43, 0, 0, 1, 3, 0, 0, 0},
		[]byte{44, 2, 2, 1, 0, 0, 0, 0}, make([]byte, 16),
		[]byte{51, 1, 0, 1, 0, 0, 0, 9},
		[]byte{17, 4, 0, 1, 0, 0, 0, 100, 0, 0, 0, 1}, make([]byte, 12),
		udp)...))
	require.NoError(t, err)
	assert.Equal(t, ExtHopByHop|ExtRouting|ExtFragment|ExtAuth|ExtProto, p.IPv6Exts)
	assert.Equal(t, uint8(2), p.NumHBHOpts)
	assert.Equal(t, [2]IPv6Option{{0, 0}, {1, 3}}, [2]IPv6Option(p.HBHOpts[:2]))
	assert.Equal(t, [3]uint8{2, 1, 2}, [3]uint8{p.RTType, p.RTSegsLeft, p.RTLen})
	assert.Equal(t, uint32(9), p.FragID)
	assert.True(t, p.FragMore)
	assert.True(t, p.FragReserved)
	assert.Equal(t, uint32(100), p.AHSPI)
	assert.Equal(t, uint8(4), p.AHLen)
	assert.True(t, p.AHReserved)
	assert.Equal(t, inet.UDP, p.Proto)

	// ESP ends the chain; no next header.
	p, err = d.DecodeIP(ip6(60, cat([]byte{50, 0, 1, 4, 0, 0, 0, 0}, []byte{0, 0, 1, 44, 0, 0, 0, 1})...))
	require.NoError(t, err)
	assert.Equal(t, ExtDstOpts|ExtESP, p.IPv6Exts)
	assert.Equal(t, uint32(300), p.SPI)
	p, err = d.DecodeIP(ip6(59))
	require.NoError(t, err)
	assert.Equal(t, ExtNone, p.IPv6Exts)

	// Mobility Header type.
	p, err = d.DecodeIP(ip6(135, cat([]byte{59, 1, 5, 0}, make([]byte, 12))...))
	require.NoError(t, err)
	assert.Equal(t, uint8(5), p.MHType)

	ip4 := func(proto byte, payload ...byte) []byte {
		n := 20 + len(payload)
		b := []byte{0x45, 0, byte(n >> 8), byte(n), 0, 0, 0, 0, 64, proto, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1}
		return append(b, payload...)
	}
	p, err = d.DecodeIP(ip4(51, 6, 4, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1))
	require.NoError(t, err)
	assert.Equal(t, uint32(256), p.SPI)
	p, err = d.DecodeIP(ip4(108, 6, 0, 0x12, 0x34))
	require.NoError(t, err)
	assert.Equal(t, uint32(0x1234), p.SPI)
	// DCCP DATA with X=1, option 32 after a Padding (0) and a Mandatory (1).
	p, err = d.DecodeIP(ip4(33, 0x13, 0x88, 0, 80, 5, 0, 0, 0, 2<<1|1, 0, 0, 0, 0, 0, 0, 1, 0, 1, 32, 3, 7, 0, 0, 0))
	require.NoError(t, err)
	assert.Equal(t, [3]uint16{5000, 80, 2}, [3]uint16{p.SrcPort, p.DstPort, uint16(p.DCCPType)})
	assert.Equal(t, uint64(1<<0|1<<1|1<<32), p.DCCPOptions[0])
}

// TestRewriteDCCPPorts: NAT of a DCCP packet rewrites its ports and keeps
// its checksum (which covers the pseudo-header) right, as the kernel's
// DCCP NAT does.
func TestRewriteDCCPPorts(t *testing.T) {
	sum := func(b []byte) uint32 {
		var s uint32
		for i := 0; i+1 < len(b); i += 2 {
			s += uint32(b[i])<<8 | uint32(b[i+1])
		}
		if len(b)%2 == 1 {
			s += uint32(b[len(b)-1]) << 8
		}
		return s
	}
	checksum := func(pkt []byte) uint16 {
		l4 := pkt[20:]
		s := sum(pkt[12:20]) + 33 + uint32(len(l4)) + sum(l4)
		for s > 0xffff {
			s = s&0xffff + s>>16
		}
		return ^uint16(s)
	}
	dccp := []byte{0x13, 0x88, 0, 80, 4, 0, 0, 0, 2<<1 | 1, 0, 0, 0, 0, 0, 0, 1}
	pkt := append([]byte{0x45, 0, 0, byte(20 + len(dccp)), 0, 0, 0, 0, 64, 33, 0, 0, 10, 0, 0, 2, 10, 0, 0, 1}, dccp...)
	c := checksum(pkt)
	pkt[26], pkt[27] = byte(c>>8), byte(c)
	require.Equal(t, uint16(0), checksum(pkt))

	d := NewDecoder()
	p, err := d.DecodeIP(pkt)
	require.NoError(t, err)
	p.Dst, p.DstPort = netip.MustParseAddr("10.244.1.5"), 8080
	out, err := d.AppendIP(nil, pkt, p)
	require.NoError(t, err)
	q, err := d.DecodeIP(out)
	require.NoError(t, err)
	assert.Equal(t, [2]uint16{5000, 8080}, [2]uint16{q.SrcPort, q.DstPort})
	assert.Equal(t, uint16(0), checksum(out), "DCCP checksum after NAT")
}

// For ICMP, xt_conntrack's destination "port" is type<<8 | code and the
// source one the echo id (TestKernelConntrackICMPPorts checks the kernel).
func TestConntrackICMPPorts(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	rules := "*filter\n-A FORWARD -m conntrack --ctorigdstport 2048\n-A FORWARD -m conntrack --ctorigdstport 0:1024\n" +
		"-A FORWARD -m conntrack --ctorigsrcport 77\n-A FORWARD -m conntrack --ctrepldstport 0\nCOMMIT\n"
	require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
	p := ICMP(netip.MustParseAddr("192.168.10.2"), netip.MustParseAddr("10.244.1.5"), 8, 0)
	p.ICMPID = 77
	res := h.Receive("eth0", p)
	require.Equal(t, Forwarded, res.Disposition, res.Reason)
	var got []uint64
	for _, r := range h.Ruleset(IPv4).Table(Filter).Chain("FORWARD").Rules {
		got = append(got, r.Counters.Packets)
	}
	assert.Equal(t, []uint64{1, 0, 1, 1}, got)
}
