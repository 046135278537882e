package netfilter

import (
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// extFrame builds an Ethernet frame from the lab client to the node's
// eth0 with the given network layer and what follows it.
func extFrame(t *testing.T, ip gopacket.SerializableLayer, rest ...gopacket.SerializableLayer) []byte {
	t.Helper()
	eth := &layers.Ethernet{SrcMAC: kerneltest.ClientMAC, DstMAC: kerneltest.NodeEth0MAC, EthernetType: layers.EthernetTypeIPv4}
	if _, ok := ip.(*layers.IPv6); ok {
		eth.EthernetType = layers.EthernetTypeIPv6
	}
	for _, l := range rest {
		if c, ok := l.(interface {
			SetNetworkLayerForChecksum(gopacket.NetworkLayer) error
		}); ok {
			require.NoError(t, c.SetNetworkLayerForChecksum(ip.(gopacket.NetworkLayer)))
		}
	}
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true},
		append([]gopacket.SerializableLayer{eth, ip}, rest...)...))
	return append([]byte(nil), buf.Bytes()...)
}

// extRulesCompare runs frames through the lab node and a Host loaded
// with the same rules, and compares the packet counters of every rule of
// mangle PREROUTING. With drop, a last rule drops every frame there (no
// connection is confirmed); without, the node receives them.
func extRulesCompare(t *testing.T, lab *kerneltest.Lab, f Family, rules []string, frames [][]byte, drop bool) {
	t.Helper()
	cfg := lab.Config()
	text := "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
	for _, r := range rules {
		text += "-A PREROUTING -i eth0 " + r + "\n"
	}
	if drop {
		text += "-A PREROUTING -i eth0 -j DROP\n"
	}
	text += "COMMIT\n"
	rs := kerneltest.Ruleset{IPv4: text}
	if f == IPv6 {
		rs = kerneltest.Ruleset{IPv6: text}
	}
	require.NoError(t, lab.ResetRuleset(rs))
	_, err := lab.Exchange(frames...)
	require.NoError(t, err)
	var kc kerneltest.Counters
	if f == IPv6 {
		kc, err = lab.Counters6()
	} else {
		kc, err = lab.Counters()
	}
	require.NoError(t, err)

	h := labHost(t, cfg, HostConfig{}, f, text)
	d := NewDecoder()
	for i, fr := range frames {
		p, err := d.Decode(fr)
		require.NoError(t, err, "frame %d", i)
		h.Receive("eth0", p)
	}
	got := h.Ruleset(f).Table(Mangle).Chain("PREROUTING").Rules
	require.Len(t, got, len(rules)+map[bool]int{true: 1}[drop])
	for i, r := range rules {
		want, ok := kc.Rule("mangle", "PREROUTING", i+1)
		require.True(t, ok, "rule %d", i+1)
		assert.Equal(t, want.Packets, got[i].Counters.Packets, "rule %d %q", i+1, r)
	}
	if drop {
		want, _ := kc.Rule("mangle", "PREROUTING", len(rules)+1)
		assert.Equal(t, want.Packets, got[len(rules)].Counters.Packets, "final DROP")
	}
	t.Logf("kernel: %s", strings.Join(kc.NonZero(), ", "))
}

// TestKernelExtMatches sends IPv4 frames exercising the header-field
// extension matches (tcpmss, ttl, tos, dscp, ecn, ah, esp, ipcomp, dccp,
// connbytes, cluster, devgroup) through the kernel lab's node and a Host,
// and compares per-rule counters.
func TestKernelExtMatches(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-extm"})
	cfg := lab.Config()
	dst := net.IP(cfg.NodeEth0.Addr().AsSlice())
	src := func(last byte) net.IP { return net.IPv4(192, 168, 10, last).To4() }
	ip := func(proto layers.IPProtocol, s net.IP, ttl, tos uint8) *layers.IPv4 {
		return &layers.IPv4{Version: 4, IHL: 5, TTL: ttl, TOS: tos, Protocol: proto, SrcIP: s, DstIP: dst}
	}
	tcp := func(sport uint16, syn, ece, cwr bool, mss []byte) *layers.TCP {
		l := &layers.TCP{SrcPort: layers.TCPPort(sport), DstPort: 80, SYN: syn, ACK: !syn, ECE: ece, CWR: cwr, Seq: 1, Window: 1000}
		if mss != nil {
			l.Options = []layers.TCPOption{{OptionType: 2, OptionLength: 4, OptionData: mss}}
		}
		return l
	}
	dccp := func(sport uint16, typ byte, opts ...byte) gopacket.Payload {
		// Generic header with X=1 (16 bytes), then the type's subheader.
		h := []byte{byte(sport >> 8), byte(sport), 0x13, 0x89, 0, 0, 0, 0, typ<<1 | 1, 0, 0, 0, 0, 0, 0, 1}
		switch typ {
		case 0:
			h = append(h, 0, 0, 0, 0)
		case 2:
		default:
			h = append(h, 0, 0, 0, 0, 0, 0, 0, 1)
		}
		h = append(h, opts...)
		for len(h)%4 != 0 {
			h = append(h, 0)
		}
		h[4] = byte(len(h) / 4)
		return gopacket.Payload(h)
	}
	frames := [][]byte{
		extFrame(t, ip(layers.IPProtocolTCP, src(2), 64, 0x10), tcp(1001, true, false, false, []byte{0x05, 0xb4})), // mss 1460
		extFrame(t, ip(layers.IPProtocolTCP, src(2), 5, 0xb8|1), tcp(1002, true, true, true, []byte{0x02, 0x18})),  // mss 536, EF, ECT(1)
		extFrame(t, ip(layers.IPProtocolTCP, src(3), 200, 0x88|2), tcp(1003, false, true, false, nil)),             // AF41, ECT(0)
		extFrame(t, ip(layers.IPProtocolTCP, src(4), 64, 3), tcp(1004, false, false, true, []byte{0x03, 0xe8})),    // mss 1000 on a non-SYN, CE
		extFrame(t, ip(layers.IPProtocolAH, src(2), 64, 0), gopacket.Payload{6, 4, 0, 0, 0, 0, 0, 100, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
		extFrame(t, ip(layers.IPProtocolAH, src(2), 64, 0), gopacket.Payload{6, 4, 0, 0, 0, 0, 0, 250, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}),
		extFrame(t, ip(layers.IPProtocolESP, src(2), 64, 0), gopacket.Payload{0, 0, 1, 44, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8}),
		extFrame(t, ip(layers.IPProtocolESP, src(3), 64, 0), gopacket.Payload{0, 0, 0, 5, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8}),
		extFrame(t, ip(108, src(2), 64, 0), gopacket.Payload{6, 0, 0, 7, 1, 2, 3, 4}),
		extFrame(t, ip(108, src(2), 64, 0), gopacket.Payload{6, 0, 0, 0, 1, 2, 3, 4}),
		extFrame(t, ip(33, src(2), 64, 0), dccp(2001, 0)),           // REQUEST
		extFrame(t, ip(33, src(2), 64, 0), dccp(2001, 2, 32, 3, 9)), // DATA, option 32
		extFrame(t, ip(33, src(3), 64, 0), dccp(2002, 4, 0, 1, 40, 4, 1, 2)),
		extFrame(t, ip(layers.IPProtocolUDP, src(5), 64, 0), &layers.UDP{SrcPort: 3000, DstPort: 53}, gopacket.Payload("x")),
		extFrame(t, ip(layers.IPProtocolUDP, src(5), 64, 0), &layers.UDP{SrcPort: 3000, DstPort: 53}, gopacket.Payload("yyyyyyyy")),
		extFrame(t, ip(layers.IPProtocolUDP, src(6), 64, 0), &layers.UDP{SrcPort: 3000, DstPort: 53}, gopacket.Payload("z")),
		extFrame(t, ip(layers.IPProtocolUDP, src(7), 64, 0), &layers.UDP{SrcPort: 3000, DstPort: 53}, gopacket.Payload("z")),
		extFrame(t, ip(layers.IPProtocolUDP, src(8), 64, 0), &layers.UDP{SrcPort: 3000, DstPort: 53}, gopacket.Payload("z")),
	}
	rules := []string{
		"-p tcp -m tcpmss --mss 1460",
		"-p tcp -m tcpmss ! --mss 1000:1400",
		"-p tcp -m tcpmss --mss 0:536",
		"-p tcp -m tcpmss --mss 1000",
		"-m ttl --ttl-eq 64",
		"-m ttl ! --ttl-eq 64",
		"-m ttl --ttl-lt 10",
		"-m ttl --ttl-gt 100",
		"-m tos --tos 0x10",
		"-m tos --tos Minimize-Delay",
		"-m tos ! --tos 0x88/0xfc",
		"-m dscp --dscp 0x2e",
		"-m dscp --dscp-class AF41",
		"-m dscp ! --dscp 0",
		"-m ecn --ecn-ip-ect 0",
		"-m ecn --ecn-ip-ect 1",
		"-m ecn --ecn-ip-ect 2",
		"-m ecn ! --ecn-ip-ect 3",
		"-p tcp -m ecn --ecn-tcp-ece",
		"-p tcp -m ecn --ecn-tcp-cwr",
		"-p tcp -m ecn ! --ecn-tcp-ece --ecn-tcp-cwr",
		"-p ah -m ah --ahspi 100",
		"-p ah -m ah ! --ahspi 100:200",
		"-p ah -m ah",
		"-p esp -m esp --espspi 300",
		"-p esp -m esp --espspi 0:10",
		"-p esp -m esp ! --espspi 5",
		"-p ipcomp -m ipcomp --ipcompspi 7",
		"-p ipcomp -m ipcomp",
		"-p ipcomp -m ipcomp ! --ipcompspi 5:10",
		"-p dccp -m dccp --dport 5001",
		"-p dccp -m dccp --sport 2001",
		"-p dccp -m dccp ! --sport 2001",
		"-p dccp -m dccp --dccp-types REQUEST",
		"-p dccp -m dccp --dccp-types DATA,ACK",
		"-p dccp -m dccp --dccp-option 32",
		"-p dccp -m dccp --dccp-option 40",
		"-p dccp -m dccp ! --dccp-option 32",
		"-m connbytes --connbytes 1 --connbytes-dir original --connbytes-mode packets",
		"-m connbytes --connbytes 2 --connbytes-dir original --connbytes-mode packets",
		"-m connbytes ! --connbytes 2 --connbytes-dir both --connbytes-mode packets",
		"-m connbytes --connbytes 40 --connbytes-dir original --connbytes-mode avgpkt",
		"-m connbytes --connbytes 0:0 --connbytes-dir reply --connbytes-mode bytes",
		"-m connbytes --connbytes 60 --connbytes-dir both --connbytes-mode bytes",
		"-m cluster --cluster-total-nodes 2 --cluster-local-node 1 --cluster-hash-seed 0xdeadbeef",
		"-m cluster --cluster-total-nodes 2 --cluster-local-node 2 --cluster-hash-seed 0xdeadbeef",
		"-m cluster --cluster-total-nodes 3 ! --cluster-local-nodemask 5 --cluster-hash-seed 7",
		"-m cluster --cluster-total-nodes 32 --cluster-local-nodemask 0x1f --cluster-hash-seed 1",
		"-m devgroup --src-group 0",
		"-m devgroup ! --src-group 1",
		"-m connlabel --label 3",
		"-p udp -m connlabel --label 3 --set",
		"-m connlabel --label 3",
		"-m connlabel ! --label 3",
		"-p tcp -m connlabel ! --label 127 --set",
		"-m connlabel --label 127",
	}
	for _, drop := range []bool{true, false} {
		t.Run(map[bool]string{true: "dropped", false: "delivered"}[drop], func(t *testing.T) {
			extRulesCompare(t, lab, IPv4, rules, frames, drop)
		})
	}
}

// TestKernelExtMatches6 sends IPv6 frames with extension header chains
// (hop-by-hop, destination options, routing, fragment, AH, ESP, Mobility
// Header, no next header) through the kernel lab's node and a Host, and
// compares the per-rule counters of the IPv6 extension matches (hl,
// frag, hbh, dst, rt, ah, esp, mh, ipv6header, eui64, dscp, tos, ecn).
func TestKernelExtMatches6(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-extm6"})
	cfg := lab.Config()
	dst := net.IP(cfg.NodeEth0v6.Addr().AsSlice())
	client := net.ParseIP("fd00:10::2")
	eui := net.ParseIP("fd00:10::70:77ff:fe00:a02") // the client MAC's modified EUI-64
	ip := func(next layers.IPProtocol, src net.IP, hl, tc uint8) *layers.IPv6 {
		return &layers.IPv6{Version: 6, HopLimit: hl, TrafficClass: tc, NextHeader: next, SrcIP: src, DstIP: dst}
	}
	udp := []byte{0x0b, 0xb8, 0, 53, 0, 9, 0, 0, 'x'}
	cat := func(bs ...[]byte) gopacket.Payload {
		var out []byte
		for _, b := range bs {
			out = append(out, b...)
		}
		return gopacket.Payload(out)
	}
	addr := make([]byte, 16)
	sid := func(s string) []byte { return netip.MustParseAddr(s).AsSlice() }
	frames := [][]byte{
		extFrame(t, ip(layers.IPProtocolUDP, client, 64, 0xb8|2), cat(udp)),
		extFrame(t, ip(layers.IPProtocolUDP, eui, 5, 0), cat(udp)),
		extFrame(t, ip(0, client, 200, 0), cat([]byte{17, 0, 0, 1, 3, 0, 0, 0}, udp)),                                 // hbh: Pad1, PadN(3)
		extFrame(t, ip(0, client, 64, 0), cat([]byte{17, 1, 0x1e, 12}, make([]byte, 12), udp)),                        // hbh len 16: type 30 len 12
		extFrame(t, ip(0, client, 64, 0), cat([]byte{60, 0, 5, 2, 0, 0, 1, 0}, []byte{17, 0, 1, 4, 0, 0, 0, 0}, udp)), // hbh router alert, then dst opts
		extFrame(t, ip(60, client, 64, 0), cat([]byte{17, 2, 201, 16}, make([]byte, 16), []byte{1, 2, 0, 0}, udp)),    // dst len 24: 201:16
		extFrame(t, ip(43, client, 64, 0), cat([]byte{17, 2, 2, 1, 0, 0, 0, 0}, addr, udp)),                           // rt type 2
		extFrame(t, ip(43, client, 64, 0), cat([]byte{17, 2, 0, 1, 0, 0, 0, 1}, addr, udp)),                           // rt type 0, reserved set
		extFrame(t, ip(44, client, 64, 0), cat([]byte{17, 0, 0, 1, 0, 0, 0, 5}, udp)),                                 // first fragment, M, id 5
		extFrame(t, ip(44, client, 64, 0), cat([]byte{17, 0, 0x05, 0xc8, 0, 0, 0, 6}, []byte("0123456789abcdef"))),    // non-first, last, id 6
		extFrame(t, ip(44, client, 64, 0), cat([]byte{17, 1, 0, 3, 0, 0, 0, 7}, udp)),                                 // reserved bits set
		extFrame(t, ip(51, client, 64, 0), cat([]byte{17, 4, 0, 0, 0, 0, 0, 100, 0, 0, 0, 1}, make([]byte, 12), udp)), // AH len 24, spi 100
		extFrame(t, ip(51, client, 64, 0), cat([]byte{17, 4, 0, 1, 0, 0, 0, 200, 0, 0, 0, 1}, make([]byte, 12), udp)), // AH reserved set
		extFrame(t, ip(50, client, 64, 0), cat([]byte{0, 0, 1, 44, 0, 0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8})),              // ESP spi 300
		extFrame(t, ip(135, client, 64, 0), cat([]byte{59, 1, 5, 0, 0, 0, 0, 0}, make([]byte, 8))),                    // MH binding update
		extFrame(t, ip(135, client, 64, 0), cat([]byte{59, 1, 1, 0, 0, 0, 0, 0}, make([]byte, 8))),                    // MH home test init
		extFrame(t, ip(59, client, 64, 0)),
		// Segment routing headers: segments [fd00:bb::1, fd00:aa::2],
		// last entry 1, tag 7; segments left 1, 0, and 2 (beyond the
		// last entry).
		extFrame(t, ip(43, client, 64, 0), cat([]byte{17, 4, 4, 1, 1, 0, 0, 7}, sid("fd00:bb::1"), sid("fd00:aa::2"), udp)),
		extFrame(t, ip(43, client, 64, 0), cat([]byte{17, 4, 4, 0, 1, 0, 0, 7}, sid("fd00:bb::1"), sid("fd00:aa::2"), udp)),
		extFrame(t, ip(43, client, 64, 0), cat([]byte{17, 4, 4, 2, 1, 0, 0, 7}, sid("fd00:bb::1"), sid("fd00:aa::2"), udp)),
	}
	rules := []string{
		"-m hl --hl-eq 64", "-m hl ! --hl-eq 64", "-m hl --hl-lt 10", "-m hl --hl-gt 100",
		"-m dscp --dscp 0x2e", "-m tos --tos 0xb8/0xfc", "-m ecn --ecn-ip-ect 2",
		"-m eui64",
		"-m frag", "-m frag --fragid 5", "-m frag ! --fragid 5", "-m frag --fragfirst", "-m frag --fragmore",
		"-m frag --fraglast", "-m frag --fragres", "-m frag --fraglen 8", "-m frag ! --fraglen 8",
		"-m hbh", "-m hbh --hbh-len 8", "-m hbh --hbh-len 16", "-m hbh ! --hbh-len 8", "-m hbh --hbh-opts 0,1",
		"-m hbh --hbh-opts 0,1:3", "-m hbh --hbh-opts 0,1:4", "-m hbh --hbh-opts 30:12", "-m hbh --hbh-opts 5:2,1",
		"-m hbh --hbh-opts 5,1,1",
		"-m dst", "-m dst --dst-len 8", "-m dst --dst-len 24", "-m dst --dst-opts 201:16", "-m dst --dst-opts 1",
		"-m dst --dst-opts 201,1:2",
		"-m rt", "-m rt --rt-type 2", "-m rt ! --rt-type 2", "-m rt --rt-segsleft 1", "-m rt ! --rt-segsleft 2:5",
		"-m rt --rt-len 24", "-m rt --rt-len 2", "-m rt --rt-type 0 --rt-0-res",
		"-m ah", "-m ah --ahspi 100", "-m ah ! --ahspi 100", "-m ah --ahlen 24", "-m ah ! --ahlen 24", "-m ah --ahlen 4", "-m ah --ahres",
		"-p esp -m esp --espspi 300", "-p esp -m esp ! --espspi 300",
		"-p mh -m mh --mh-type bu", "-p mh -m mh ! --mh-type 5", "-p mh -m mh",
		"-m ipv6header --header prot", "-m ipv6header --header hop-by-hop,prot", "-m ipv6header --header hop-by-hop --soft",
		"-m ipv6header --header hop-by-hop,dst,prot", "-m ipv6header --header esp --soft", "-m ipv6header --header ipv6-nonxt",
		"-m ipv6header ! --header prot", "-m ipv6header ! --header frag --soft", "-m ipv6header --header dst,prot",
		"-m ipv6header --header route,prot", "-m ipv6header --header ah,prot", "-m ipv6header --header frag,prot",
		"-m ipv6header --header none", "-m ipv6header --header 0",
		"-m srh", "-m srh --srh-next-hdr 17", "-m srh ! --srh-next-hdr 17", "-m srh --srh-hdr-len-eq 4",
		"-m srh --srh-hdr-len-gt 3", "-m srh --srh-hdr-len-lt 3", "-m srh --srh-segs-left-eq 1", "-m srh ! --srh-segs-left-eq 1",
		"-m srh --srh-segs-left-lt 1", "-m srh --srh-segs-left-gt 0", "-m srh --srh-last-entry-eq 1", "-m srh --srh-last-entry-gt 0",
		"-m srh --srh-last-entry-lt 1", "-m srh --srh-tag 7", "-m srh ! --srh-tag 7",
		"-m srh --srh-psid fd00:aa::/32", "-m srh ! --srh-psid fd00:aa::/32", "-m srh --srh-nsid fd00:bb::/32",
		"-m srh ! --srh-nsid fd00:cc::/32", "-m srh --srh-lsid fd00:bb::1", "-m srh ! --srh-lsid fd00:bb::1",
		"-m srh --srh-lsid ::/0 --srh-tag 8", "-m srh --srh-tag 1792",
	}
	extRulesCompare(t, lab, IPv6, rules, frames, true)
}
