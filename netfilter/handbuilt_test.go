package netfilter

import (
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHandBuiltMatches pins that a match built in Go means what its fields
// say: it equals the parsed match, prints the same rule (-S and -L text) and
// matches the same packets.
func TestHandBuiltMatches(t *testing.T) {
	mask := uint32(0x4000)
	cases := []struct {
		spec  string
		proto inet.Proto
		built Match
	}{
		{"-p tcp -m tcp --dport 443", inet.TCP, &TCPMatch{DstPorts: Port(443)}},
		{"-p tcp -m tcp --sport 1024:65535 ! --dport 22", inet.TCP, &TCPMatch{SrcPorts: Ports(1024, 65535), DstPorts: Port(22), InvDstPorts: true}},
		{"-p tcp -m tcp --tcp-flags SYN,ACK SYN", inet.TCP, &TCPMatch{FlagsMask: inet.SYN | inet.ACK, FlagsCmp: inet.SYN}},
		{"-p udp -m udp --dport 53", inet.UDP, &UDPMatch{DstPorts: Port(53)}},
		{"-p udp -m udp ! --sport 53 ! --dport 54", inet.UDP, &UDPMatch{SrcPorts: Port(53), InvSrcPorts: true, DstPorts: Port(54), InvDstPorts: true}},
		{"-p sctp -m sctp --dport 3868", inet.SCTP, &SCTPMatch{DstPorts: Port(3868)}},
		{"-p sctp -m sctp ! --sport 1:100", inet.SCTP, &SCTPMatch{SrcPorts: Ports(1, 100), InvSrcPorts: true}},
		{"-m mark --mark 0x4000", 0, &MarkMatch{Value: 0x4000}},
		{"-m mark ! --mark 0x4000/0x4000", 0, &MarkMatch{Value: 0x4000, Mask: &mask, Invert: true}},
		{"-m state --state RELATED,ESTABLISHED", 0, &StateMatch{State: CTStatesOf(conntrack.StateEstablished, conntrack.StateRelated)}},
		{"-m state ! --state INVALID", 0, &StateMatch{State: CTStatesOf(conntrack.StateInvalid), Invert: true}},
	}
	for _, backend := range []Backend{NFTables, Legacy} {
		h := NewHost(HostConfig{Backend: backend})
		for _, tc := range cases {
			parsed := lastRule(t, IPv4, "filter", "INPUT", tc.spec+" -j DROP")
			require.Len(t, parsed.Matches, 1, tc.spec)
			built := &Rule{IP: parsed.IP, Matches: []Match{tc.built}, Target: parsed.Target}
			assert.Equal(t, parsed.Matches[0], tc.built, tc.spec)
			assert.Equal(t, parsed.String(), built.String(), tc.spec)
			for _, numeric := range []bool{false, true} {
				assert.Equal(t, string(parsed.Matches[0].appendList(nil, numeric)), string(tc.built.appendList(nil, numeric)), tc.spec)
			}
			for _, sp := range []uint16{0, 1, 22, 53, 100, 443, 2000} {
				for _, dp := range []uint16{0, 22, 53, 54, 443, 3868, 5000} {
					for _, mark := range []uint32{0, 0x4000, 0x4001, 0x1} {
						p := Packet{Family: IPv4, Proto: tc.proto, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
							Mark: mark, TCPFlags: inet.SYN}
						if tc.proto.HasPorts() {
							p.SrcPort, p.DstPort = sp, dp
						}
						if tc.proto != inet.TCP {
							p.TCPFlags = 0
						}
						assert.Equal(t, evalOn(h, parsed.Matches[0], p), evalOn(h, tc.built, p), "%s: %v sport %d dport %d mark %#x", tc.spec, backend, sp, dp, mark)
					}
				}
			}
		}
	}
	// The conntrack match's state set is built from conntrack's states.
	assert.Equal(t, "INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT",
		(CTStatesOf(conntrack.StateUntracked, conntrack.StateEstablished, conntrack.StateRelated, conntrack.StateNew, conntrack.StateInvalid) |
			NATStates(conntrack.DNAT, conntrack.SNAT)).String())
	assert.Equal(t, conntrack.DNAT, NATRedirect.Manip())
	assert.Equal(t, conntrack.SNAT, NATMasquerade.Manip())

	// The zero value of a port match tests nothing: every packet of the
	// protocol matches, and nothing is printed after the module.
	h := NewHost(HostConfig{})
	zero := &TCPMatch{InvDstPorts: true}
	assert.True(t, evalOn(h, zero, Packet{Family: IPv4, Proto: inet.TCP, SrcPort: 7, DstPort: 0}))
	assert.Equal(t, "", string(zero.appendSave(nil)))
}

// TestHandBuiltOptionMatches: matches whose options are a set (conntrack,
// srh), whose defaults depend on the family (recent), whose ranges may be
// absent (ah, esp, frag, rt) or which name one of two modules (ttl/hl,
// hbh/dst, ah for either family) or a protocol for -L (multiport), built
// in Go, give the same iptables-save, -S and -L
// text as the parsed rule, and on a host the same verdict for every packet
// and the same counters.
func TestHandBuiltOptionMatches(t *testing.T) {
	cli4, cli4b, node4 := a4("10.0.0.2"), a4("10.0.9.9"), a4("10.0.0.1")
	cli6, node6 := a4("fd00:10::2"), a4("fd00:10::1")
	in := func(p Packet) step { return step{iface: "eth0", p: p} }
	udp4 := func(src netip.Addr, sport, dport uint16) Packet {
		return UDP(netip.AddrPortFrom(src, sport), netip.AddrPortFrom(node4, dport))
	}
	// ctFlow: a UDP exchange that makes a connection NEW, then
	// ESTABLISHED, and packets of other tuples.
	ctFlow := []step{
		in(udp4(cli4, 40000, 53)),
		{p: UDP(netip.AddrPortFrom(node4, 53), netip.AddrPortFrom(cli4, 40000))},
		in(udp4(cli4, 40000, 53)),
		in(udp4(cli4b, 40001, 80)),
		in(udp4(cli4, 40002, 95)),
		in(TCP(netip.AddrPortFrom(cli4, 40003), netip.AddrPortFrom(node4, 85), inet.SYN)),
	}
	srh := func(segsLeft, last, next uint8, psid string) Packet {
		p := UDP(netip.AddrPortFrom(cli6, 1), netip.AddrPortFrom(node6, 2))
		p.IPv6Exts |= ExtRouting | ExtProto
		p.SRH, p.RTType, p.RTSegsLeft, p.SRHLastEntry, p.SRHNext = true, 4, segsLeft, last, next
		p.SRHPrevSID = a4(psid).As16()
		return p
	}
	ah4 := func(spi uint32) Packet {
		p := udp4(cli4, 0, 0)
		p.Proto, p.SPI = 51, spi
		return p
	}
	ah6 := func(spi uint32, hdrLen uint8, reserved bool) Packet {
		p := UDP(netip.AddrPortFrom(cli6, 1), netip.AddrPortFrom(node6, 2))
		p.IPv6Exts, p.AHSPI, p.AHLen, p.AHReserved = ExtAuth|ExtProto, spi, hdrLen, reserved
		return p
	}
	esp4 := func(spi uint32) Packet {
		p := udp4(cli4, 0, 0)
		p.Proto, p.SPI = 50, spi
		return p
	}
	frag6 := func(id uint32, more bool) Packet {
		p := UDP(netip.AddrPortFrom(cli6, 1), netip.AddrPortFrom(node6, 2))
		p.IPv6Exts, p.FragID, p.FragMore = ExtFragment|ExtProto, id, more
		return p
	}
	exts6 := func(exts, hbhLen, dstLen uint8) Packet {
		p := UDP(netip.AddrPortFrom(cli6, 1), netip.AddrPortFrom(node6, 2))
		p.IPv6Exts, p.HBHLen, p.DstLen = exts|ExtProto, hbhLen, dstLen
		p.HBHOpts[0], p.NumHBHOpts = IPv6Option{Type: 1, Len: 4}, 1
		return p
	}
	ttl := func(f Family, v uint8) step {
		src, dst := cli4, node4
		if f == IPv6 {
			src, dst = cli6, node6
		}
		p := UDP(netip.AddrPortFrom(src, 1), netip.AddrPortFrom(dst, 2))
		p.TTL = v
		return in(p)
	}
	tcp4 := func(src netip.Addr, sport, dport uint16) step {
		return in(TCP(netip.AddrPortFrom(src, sport), netip.AddrPortFrom(node4, dport), inet.SYN))
	}
	recentCheck := NewRecentMatch(IPv4, RecentCheck)
	recentCheck.Name, recentCheck.Seconds = "A", 60
	cases := []struct {
		fam   Family
		pre   string // rules before the one under test
		spec  string
		built Match
		steps []step
	}{
		{IPv4, "", "-m conntrack --ctstate NEW", &ConntrackMatch{State: CTStatesOf(conntrack.StateNew), Tests: CTTestState}, ctFlow},
		{IPv4, "", "-m conntrack ! --ctstate ESTABLISHED --ctproto 17 --ctorigdstport 80:90", &ConntrackMatch{
			State: CTStatesOf(conntrack.StateEstablished), Proto: inet.UDP, OrigDstPort: PortRange{80, 90},
			Tests: CTTestState | CTTestProto | CTTestOrigDstPort, Inverted: CTTestState}, ctFlow},
		{IPv4, "", "-m conntrack --ctorigsrc 10.0.0.0/24 ! --ctrepldst 10.0.0.3 ! --ctstatus NONE --ctdir ORIGINAL", &ConntrackMatch{
			OrigSrc: p4("10.0.0.0/24"), ReplDst: p4("10.0.0.3/32"), Direction: "ORIGINAL",
			Tests: CTTestOrigSrc | CTTestReplDst | CTTestStatus | CTTestDirection, Inverted: CTTestReplDst | CTTestStatus}, ctFlow},
		{IPv4, "", "-m conntrack --ctproto 0", &ConntrackMatch{Tests: CTTestProto}, ctFlow},
		{IPv4, "", "-m conntrack --ctstatus SEEN_REPLY --ctexpire 10:200", &ConntrackMatch{Status: conntrack.StatusSeenReply,
			ExpireLo: 10, ExpireHi: 200, Tests: CTTestStatus | CTTestExpire}, ctFlow},
		{IPv6, "", "-m srh --srh-segs-left-gt 1 ! --srh-next-hdr 17", &SRHMatch{SegsLeft: 1, NextHdr: 17,
			Tests: SRHSegsLeftGt | SRHNextHdr, Inverted: SRHNextHdr},
			[]step{in(srh(2, 3, 17, "::")), in(srh(2, 3, 6, "::")), in(srh(1, 3, 6, "::")), in(srh(4, 3, 6, "::"))}},
		{IPv6, "", "-m srh ! --srh-psid fd00:aa::/32 --srh-last-entry-eq 3", &SRHMatch{PSID: p4("fd00:aa::/32"), LastEntry: 3,
			Tests: SRHPSID | SRHLastEntryEq, Inverted: SRHPSID},
			[]step{in(srh(1, 3, 6, "fd00:aa::1")), in(srh(1, 3, 6, "fd00:bb::1")), in(srh(3, 3, 6, "fd00:bb::1")), in(srh(1, 2, 6, "fd00:bb::1"))}},
		{IPv6, "", "-m srh", &SRHMatch{}, []step{in(srh(1, 3, 6, "::")), in(ah6(1, 4, false))}},
		{IPv4, "", "-p ah -m ah --ahspi 256:300", &AHMatch{SPIs: &SPIRange{256, 300}}, []step{in(ah4(255)), in(ah4(256)), in(ah4(300)), in(ah4(301))}},
		{IPv4, "", "-p ah -m ah ! --ahspi 5", &AHMatch{SPIs: &SPIRange{5, 5}, InvSPI: true}, []step{in(ah4(5)), in(ah4(0)), in(ah4(6))}},
		{IPv6, "", "-m ah", &AHMatch{}, []step{in(ah6(0, 4, false)), in(ah6(7, 1, true)), in(srh(1, 3, 6, "::"))}},
		{IPv6, "", "-m ah ! --ahspi 5 --ahlen 24 --ahres", &AHMatch{SPIs: &SPIRange{5, 5}, InvSPI: true, Len: 24, HasLen: true, Reserved: true},
			[]step{in(ah6(5, 4, false)), in(ah6(6, 4, false)), in(ah6(6, 5, false)), in(ah6(6, 4, true))}},
		{IPv4, "", "-p esp -m esp --espspi 7", &ESPMatch{SPIs: &SPIRange{7, 7}}, []step{in(esp4(6)), in(esp4(7))}},
		{IPv4, "", "-p esp -m esp", &ESPMatch{}, []step{in(esp4(0)), in(esp4(9))}},
		{IPv6, "", "-m frag ! --fragid 1:9 --fragmore", &FragMatch{IDs: &SPIRange{1, 9}, InvIDs: true, More: true},
			[]step{in(frag6(5, true)), in(frag6(10, true)), in(frag6(10, false))}},
		{IPv6, "", "-m frag --fraglen 8", &FragMatch{Len: 8, HasLen: true}, []step{in(frag6(0, false)), in(ah6(1, 4, false))}},
		{IPv6, "", "-m rt --rt-segsleft 2:3 ! --rt-len 16", &RTMatch{SegsLeft: &SPIRange{2, 3}, Len: 16, HasLen: true, InvLen: true},
			[]step{in(srh(2, 3, 6, "::")), in(srh(1, 3, 6, "::")), in(srh(3, 3, 6, "::"))}},
		{IPv6, "", "-m rt", &RTMatch{}, []step{in(srh(1, 3, 6, "::")), in(ah6(1, 4, false))}},
		{IPv6, "", "-m hbh ! --hbh-len 16 --hbh-opts 1:4", &OptsMatch{Len: 16, HasLen: true, InvLen: true, Opts: []uint16{1<<8 | 4}},
			[]step{in(exts6(ExtHopByHop, 0, 0)), in(exts6(ExtHopByHop, 1, 0)), in(exts6(ExtDstOpts, 0, 0))}},
		{IPv6, "", "-m dst --dst-len 8", &OptsMatch{Len: 8, HasLen: true, Dst: true},
			[]step{in(exts6(ExtDstOpts, 0, 0)), in(exts6(ExtDstOpts, 0, 1)), in(exts6(ExtHopByHop, 0, 0))}},
		{IPv4, "", "-m ttl --ttl-gt 5", &TTLMatch{Op: TTLGt, Value: 5}, []step{ttl(IPv4, 5), ttl(IPv4, 6), ttl(IPv4, 64)}},
		{IPv4, "", "-m ttl ! --ttl-eq 64", &TTLMatch{Op: TTLNe, Value: 64}, []step{ttl(IPv4, 63), ttl(IPv4, 64)}},
		{IPv6, "", "-m hl --hl-lt 64", &TTLMatch{Op: TTLLt, Value: 64, HL: true}, []step{ttl(IPv6, 63), ttl(IPv6, 64)}},
		{IPv4, "", "-p tcp -m multiport --dports 80,443:445", &MultiportMatch{Dir: MultiportDestination, Ports: []PortRange{{80, 80}, {443, 445}}, Proto: inet.TCP},
			[]step{tcp4(cli4, 1, 80), tcp4(cli4, 2, 81), tcp4(cli4, 3, 444), tcp4(cli4, 4, 446)}},
		{IPv4, "", "-p udp -m multiport ! --ports 53", &MultiportMatch{Dir: MultiportEither, Ports: []PortRange{{53, 53}}, Invert: true, Proto: inet.UDP},
			[]step{in(udp4(cli4, 53, 1)), in(udp4(cli4, 1, 53)), in(udp4(cli4, 1, 2))}},
		{IPv4, "-A INPUT -p udp -m recent --set --name A\n", "-p tcp -m recent --rcheck --seconds 60 --name A", recentCheck,
			[]step{tcp4(cli4, 1, 80), in(udp4(cli4, 1, 53)), tcp4(cli4, 2, 80), tcp4(cli4b, 3, 80)}},
		{IPv6, "", "-m recent --set", NewRecentMatch(IPv6, RecentSet), []step{ttl(IPv6, 1)}},
	}
	for _, tc := range cases {
		t.Run(tc.spec, func(t *testing.T) {
			text := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" + tc.pre +
				"-A INPUT " + tc.spec + " -j DROP\nCOMMIT\n"
			parsed := handHost(t, tc.fam, text)
			built := handHost(t, tc.fam, text)
			rs := built.Ruleset(tc.fam)
			rules := rs.Table(Filter).Chain("INPUT").Rules
			last := rules[len(rules)-1]
			require.Len(t, last.Matches, 1)
			last.Matches[0] = tc.built
			require.NoError(t, built.Load(rs))

			want, got := parsed.Ruleset(tc.fam), built.Ruleset(tc.fam)
			assert.Equal(t, want.String(), got.String(), "iptables-save")
			for _, numeric := range []bool{false, true} {
				w, err := want.AppendList(nil, Filter, "INPUT", ListOptions{Numeric: numeric, Verbose: true})
				require.NoError(t, err)
				g, err := got.AppendList(nil, Filter, "INPUT", ListOptions{Numeric: numeric, Verbose: true})
				require.NoError(t, err)
				assert.Equal(t, string(w), string(g), "-L numeric=%v", numeric)
			}
			drops := 0
			for i, s := range tc.steps {
				w, g := s.run(parsed), s.run(built)
				require.NotEqual(t, Refused, w.Disposition, "step %d: %v", i+1, w)
				assert.Equal(t, w.Disposition, g.Disposition, "step %d: %v", i+1, s.p)
				if w.Disposition == Dropped {
					drops++
				}
			}
			w, err := parsed.Ruleset(tc.fam).AppendRules(nil, Filter, "INPUT", 0, true)
			require.NoError(t, err)
			g, err := built.Ruleset(tc.fam).AppendRules(nil, Filter, "INPUT", 0, true)
			require.NoError(t, err)
			assert.Equal(t, string(w), string(g), "-S -v after the packets (counters)")
			if tc.spec != "-m recent --set" && tc.spec != "-m conntrack --ctproto 0" && tc.spec != "-p esp -m esp" {
				// The rule under test must both drop and pass some packet,
				// or the comparison says little.
				assert.True(t, drops > 0 && drops < len(tc.steps), "%d of %d packets dropped", drops, len(tc.steps))
			}
		})
	}
}

// step is one packet of a hand-built match's check: received on iface, or
// sent by the host when iface is empty.
type step struct {
	iface string
	p     Packet
}

func (s step) run(h *Host) Result {
	if s.iface == "" {
		return h.Send(s.p)
	}
	return h.Receive(s.iface, s.p)
}

func handHost(t *testing.T, f Family, rules string) *Host {
	t.Helper()
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", p4("10.0.0.1/24"), p4("fd00:10::1/64")))
	require.NoError(t, h.Restore(f, []byte(rules), RestoreOptions{}))
	return h
}
