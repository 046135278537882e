package netfilter

import (
	"net"
	"strings"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/kerneltest"
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

	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0, cfg.NodeEth0v6))
	require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1, cfg.NodeEth1v6))
	require.NoError(t, h.Restore(f, []byte(text), RestoreOptions{}))
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

// TestExtMatchesKernel sends IPv4 frames exercising the header-field
// extension matches (tcpmss, ttl, tos, dscp, ecn, ah, esp, ipcomp, dccp,
// connbytes, cluster, devgroup) through the kernel lab's node and a Host,
// and compares per-rule counters.
func TestExtMatchesKernel(t *testing.T) {
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
	}
	for _, drop := range []bool{true, false} {
		t.Run(map[bool]string{true: "dropped", false: "delivered"}[drop], func(t *testing.T) {
			extRulesCompare(t, lab, IPv4, rules, frames, drop)
		})
	}
}
