package kerneltest

import (
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuildAndDecode(t *testing.T) {
	v6a, v6b := netip.MustParseAddr("fd00:10::2"), netip.MustParseAddr("fd00:244::5")
	for _, tc := range []struct {
		name string
		spec FrameSpec
		want string
	}{
		{"tcp syn", FrameSpec{Proto: "tcp", Src: clientIP, Dst: serverIP, SrcPort: 40000, DstPort: 80, TCPFlags: "SYN", Seq: 9},
			"IPv4 tcp 192.168.10.2:40000 > 10.244.1.5:80 [SYN] ttl=64 len=40"},
		{"tcp all flags", FrameSpec{Proto: "TCP", Src: clientIP, Dst: serverIP, TCPFlags: "cwr,ece,urg,ack,psh,rst,syn,fin", TTL: 3},
			"IPv4 tcp 192.168.10.2:0 > 10.244.1.5:0 [FIN,SYN,RST,PSH,ACK,URG,ECE,CWR] ttl=3 len=40"},
		{"udp payload", FrameSpec{Proto: "udp", Src: clientIP, Dst: serverIP, SrcPort: 1, DstPort: 53, PayloadLen: 100},
			"IPv4 udp 192.168.10.2:1 > 10.244.1.5:53 ttl=64 len=128"},
		{"icmp echo", FrameSpec{Proto: "icmp", Src: clientIP, Dst: serverIP, ICMPType: 8, ICMPID: 1, ICMPSeq: 2},
			"IPv4 icmp 192.168.10.2 > 10.244.1.5 type=8 code=0 ttl=64 len=28"},
		{"udp6", FrameSpec{Proto: "udp", Src: v6a, Dst: v6b, SrcPort: 5, DstPort: 6, PayloadLen: 2},
			"IPv6 udp [fd00:10::2]:5 > [fd00:244::5]:6 ttl=64 len=50"},
		{"icmp6 echo", FrameSpec{Proto: "icmp", Src: v6a, Dst: v6b, ICMPType: 128},
			"IPv6 icmpv6 fd00:10::2 > fd00:244::5 type=128 code=0 ttl=64 len=48"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := BuildFrame(ClientMAC, NodeEth0MAC, tc.spec)
			require.NoError(t, err)
			s, err := Decode(f)
			require.NoError(t, err)
			assert.Equal(t, tc.want, s.String())
			assert.Equal(t, "02:70:77:00:0a:02", s.EthSrc)
			// Checksums are valid: gopacket verifies them on re-serialisation.
			pkt := gopacket.NewPacket(f, layers.LayerTypeEthernet, gopacket.Default)
			require.Nil(t, pkt.ErrorLayer())
			if tcp, ok := pkt.Layer(layers.LayerTypeTCP).(*layers.TCP); ok {
				assert.Equal(t, checksumOf(t, pkt, tcp), tcp.Checksum)
			}
		})
	}
}

// checksumOf recomputes the TCP checksum of pkt.
func checksumOf(t *testing.T, pkt gopacket.Packet, tcp *layers.TCP) uint16 {
	t.Helper()
	c := *tcp
	require.NoError(t, c.SetNetworkLayerForChecksum(pkt.NetworkLayer()))
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, &c, gopacket.Payload(tcp.Payload)))
	return c.Checksum
}

func TestBuildErrors(t *testing.T) {
	for _, tc := range []struct {
		spec FrameSpec
		msg  string
	}{
		{FrameSpec{Proto: "tcp"}, "kerneltest: bad frame spec: Src invalid IP and Dst invalid IP must both be set"},
		{FrameSpec{Proto: "tcp", Src: clientIP, Dst: netip.MustParseAddr("::1")}, "kerneltest: bad frame spec: Src 192.168.10.2 and Dst ::1 are of different families"},
		{FrameSpec{Proto: "sctp", Src: clientIP, Dst: serverIP}, `kerneltest: bad frame spec: Proto "sctp", want tcp, udp or icmp`},
		{FrameSpec{Proto: "tcp", Src: clientIP, Dst: serverIP, TCPFlags: "SYN,XMAS"}, `kerneltest: bad frame spec: TCP flag "XMAS" in "SYN,XMAS", want one of FIN,SYN,RST,PSH,ACK,URG,ECE,CWR`},
	} {
		_, err := BuildPacket(tc.spec)
		assert.ErrorIs(t, err, ErrBadSpec)
		assert.EqualError(t, err, tc.msg)
	}
}

func TestDecodeICMPErrorQuotesInner(t *testing.T) {
	inner, err := BuildPacket(FrameSpec{Proto: "tcp", Src: clientIP, Dst: serverIP, SrcPort: 1234, DstPort: 80, TCPFlags: "SYN"})
	require.NoError(t, err)
	f, err := BuildFrame(NodeEth0MAC, ClientMAC, FrameSpec{Proto: "icmp", Src: nodeEth0, Dst: clientIP, ICMPType: 3, ICMPCode: 13, Payload: inner[:28]})
	require.NoError(t, err)
	s, err := Decode(f)
	require.NoError(t, err)
	assert.Equal(t, "IPv4 icmp 192.168.10.1 > 192.168.10.2 type=3 code=13 ttl=64 len=56 {IPv4 tcp 192.168.10.2:1234 > 10.244.1.5:80 [] ttl=64 len=40}", s.String())
}

func TestDecodeBad(t *testing.T) {
	_, err := Decode([]byte{1, 2, 3})
	assert.ErrorIs(t, err, ErrBadFrame)
	f := append(append([]byte{}, make([]byte, 12)...), 0x08, 0x00, 0x45)
	_, err = Decode(f)
	assert.ErrorIs(t, err, ErrBadFrame)
	assert.EqualError(t, err, "kerneltest: undecodable frame: IPv4 header of 1 bytes, want >= 20")
}

func FuzzDecode(f *testing.F) {
	fr, _ := BuildFrame(ClientMAC, NodeEth0MAC, FrameSpec{Proto: "tcp", Src: clientIP, Dst: serverIP, TCPFlags: "SYN"})
	f.Add(fr)
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := Decode(b)
		if err == nil {
			_ = s.String()
		}
	})
}
