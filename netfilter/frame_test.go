package netfilter

import (
	"bytes"
	"encoding/binary"
	"errors"
	"net"
	"net/netip"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
)

var (
	macA = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0a}
	macB = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x0b}
)

// mkFrame serialises layers with correct lengths and checksums.
func mkFrame(t testing.TB, ls ...gopacket.SerializableLayer) []byte {
	t.Helper()
	for _, l := range ls {
		var nl gopacket.NetworkLayer
		for _, m := range ls {
			if n, ok := m.(gopacket.NetworkLayer); ok {
				nl = n
			}
		}
		switch x := l.(type) {
		case *layers.TCP:
			require.NoError(t, x.SetNetworkLayerForChecksum(nl))
		case *layers.UDP:
			require.NoError(t, x.SetNetworkLayerForChecksum(nl))
		case *layers.ICMPv6:
			require.NoError(t, x.SetNetworkLayerForChecksum(nl))
		}
	}
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
	return append([]byte(nil), buf.Bytes()...)
}

func eth4() *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv4}
}

func eth6() *layers.Ethernet {
	return &layers.Ethernet{SrcMAC: macA, DstMAC: macB, EthernetType: layers.EthernetTypeIPv6}
}

func ip4(src, dst string, proto layers.IPProtocol) *layers.IPv4 {
	return &layers.IPv4{Version: 4, IHL: 5, TTL: 64, TOS: 0x10, Id: 0x1234, Protocol: proto,
		SrcIP: net.ParseIP(src).To4(), DstIP: net.ParseIP(dst).To4()}
}

func ip6(src, dst string, next layers.IPProtocol) *layers.IPv6 {
	return &layers.IPv6{Version: 6, HopLimit: 63, TrafficClass: 0x20, NextHeader: next, SrcIP: net.ParseIP(src), DstIP: net.ParseIP(dst)}
}

type sampleFrame struct {
	name  string
	frame []byte
	raw   bool // frame is a raw IP packet
	want  Packet
}

func a(s string) netip.Addr { return netip.MustParseAddr(s) }

func sampleFrames(t testing.TB) []sampleFrame {
	syn := &layers.TCP{SrcPort: 40001, DstPort: 80, SYN: true, Seq: 1000, Window: 64240,
		Options: []layers.TCPOption{{OptionType: 2, OptionLength: 4, OptionData: []byte{5, 0xb4}},
			{OptionType: 4, OptionLength: 2}, {OptionType: 1}, {OptionType: 3, OptionLength: 3, OptionData: []byte{7}}}}
	tcpSYN := mkFrame(t, eth4(), ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolTCP), syn, gopacket.Payload("hello"))
	var tcpOpts [4]uint64
	for _, k := range []uint8{0, 1, 2, 3, 4} { // 0: gopacket pads the options with EOL
		tcpOpts[0] |= 1 << k
	}
	base4 := Packet{Family: IPv4, Src: a("192.168.10.2"), Dst: a("10.96.0.10"), TTL: 64, TOS: 0x10, ID: 0x1234, IPHeaderLen: 20,
		SrcMAC: [6]byte(macA), HasMAC: true, PktType: PktUnicast}

	udp6 := mkFrame(t, eth6(), ip6("fd00::2", "fd00::1", layers.IPProtocolUDP), &layers.UDP{SrcPort: 5353, DstPort: 53}, gopacket.Payload("q"))
	echo4 := mkFrame(t, eth4(), ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 77, Seq: 1}, gopacket.Payload("ping"))
	echo6 := mkFrame(t, eth6(), ip6("fd00::2", "fd00::1", layers.IPProtocolICMPv6),
		&layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(128, 0)}, gopacket.Payload{0, 9, 0, 1, 'x'})
	sctp := mkFrame(t, eth4(), ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolSCTP),
		&layers.SCTP{SrcPort: 3000, DstPort: 3868}, gopacket.Payload{1, 0, 0, 20, 1, 2, 3, 4, 0, 0, 0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 2, 0, 0, 4})
	// An ICMP port unreachable quoting a UDP datagram.
	quoted := mkFrame(t, ip4("10.244.1.5", "192.168.10.2", layers.IPProtocolUDP), &layers.UDP{SrcPort: 53, DstPort: 5353}, gopacket.Payload("abc"))
	unreach := mkFrame(t, eth4(), ip4("10.244.1.1", "10.244.1.5", layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}, gopacket.Payload(quoted))
	// IPv4 with a 4-byte option (router alert): IHL 6, skipped.
	opt := ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolUDP)
	opt.Options = []layers.IPv4Option{{OptionType: 148, OptionLength: 4, OptionData: []byte{0, 0}}}
	withOpt := mkFrame(t, eth4(), opt, &layers.UDP{SrcPort: 1, DstPort: 2})
	// A non-first fragment: its payload is not a UDP header.
	frag := ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolUDP)
	frag.FragOffset = 185
	fragment := mkFrame(t, eth4(), frag, gopacket.Payload("0123456789abcdef"))
	// IPv6 non-first fragment.
	frag6 := mkFrame(t, eth6(), ip6("fd00::2", "fd00::1", layers.IPProtocolIPv6Fragment),
		gopacket.Payload{17, 0, 0x05, 0xc8, 0, 0, 0, 1, 'd', 'a', 't', 'a', 0, 0, 0, 0})
	rawTCP := tcpSYN[14:]
	bcast := mkFrame(t, &layers.Ethernet{SrcMAC: macA, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeIPv4},
		ip4("192.168.10.2", "192.168.10.255", layers.IPProtocolUDP), &layers.UDP{SrcPort: 68, DstPort: 67})

	with := func(p Packet, f func(*Packet)) Packet { f(&p); return p }
	return []sampleFrame{
		{"tcp syn with options", tcpSYN, false, with(base4, func(p *Packet) {
			p.Proto, p.SrcPort, p.DstPort, p.TCPFlags, p.Length, p.TCPOptions = inet.TCP, 40001, 80, inet.SYN, 20+32+5, tcpOpts
			p.Seq, p.Window, p.WScale, p.TCPHeaderLen, p.MSS = 1000, 64240, 7, 32, 1460
		})},
		{"raw ipv4 tcp", rawTCP, true, with(base4, func(p *Packet) {
			p.Proto, p.SrcPort, p.DstPort, p.TCPFlags, p.Length, p.TCPOptions = inet.TCP, 40001, 80, inet.SYN, 20+32+5, tcpOpts
			p.Seq, p.Window, p.WScale, p.TCPHeaderLen, p.MSS = 1000, 64240, 7, 32, 1460
			p.SrcMAC, p.HasMAC, p.PktType = [6]byte{}, false, PktAuto
		})},
		{"udp ipv6", udp6, false, Packet{Family: IPv6, Proto: inet.UDP, Src: a("fd00::2"), Dst: a("fd00::1"), SrcPort: 5353, DstPort: 53,
			Length: 40 + 9, IPHeaderLen: 40, TTL: 63, TOS: 0x20, SrcMAC: [6]byte(macA), HasMAC: true, PktType: PktUnicast, IPv6Exts: ExtProto}},
		{"icmp echo", echo4, false, with(base4, func(p *Packet) { p.Proto, p.ICMPType, p.ICMPID, p.Length = inet.ICMP, 8, 77, 20+8+4 })},
		{"icmpv6 echo", echo6, false, Packet{Family: IPv6, Proto: inet.ICMPv6, Src: a("fd00::2"), Dst: a("fd00::1"), ICMPType: 128, ICMPID: 9,
			Length: 40 + 9, IPHeaderLen: 40, TTL: 63, TOS: 0x20, SrcMAC: [6]byte(macA), HasMAC: true, PktType: PktUnicast, IPv6Exts: ExtProto}},
		{"sctp init", sctp, false, with(base4, func(p *Packet) {
			p.Proto, p.SrcPort, p.DstPort, p.Length = inet.SCTP, 3000, 3868, 20+12+24
			p.SCTPChunks[0], p.SCTPChunks[1], p.NumSCTPChunks = SCTPChunk{Type: 1}, SCTPChunk{Type: 2}, 2
		})},
		{"icmp error quoting udp", unreach, false, with(base4, func(p *Packet) {
			p.Src, p.Dst, p.Proto, p.ICMPType, p.ICMPCode, p.Length = a("10.244.1.1"), a("10.244.1.5"), inet.ICMP, 3, 3, 20+8+31
			p.Inner = InnerHeader{Proto: inet.UDP, Src: a("10.244.1.5"), Dst: a("192.168.10.2"), SrcPort: 53, DstPort: 5353}
		})},
		{"ipv4 options skipped", withOpt, false, with(base4, func(p *Packet) { p.Proto, p.SrcPort, p.DstPort, p.Length, p.IPHeaderLen = inet.UDP, 1, 2, 24+8, 24 })},
		{"non-first fragment", fragment, false, with(base4, func(p *Packet) { p.Proto, p.FragOffset, p.Length = inet.UDP, 185, 20+16 })},
		{"ipv6 non-first fragment", frag6, false, Packet{Family: IPv6, Proto: inet.UDP, Src: a("fd00::2"), Dst: a("fd00::1"), FragOffset: 185,
			IPv6Exts: ExtFragment | ExtProto, FragID: 1,
			Length: 40 + 16, IPHeaderLen: 48, TTL: 63, TOS: 0x20, SrcMAC: [6]byte(macA), HasMAC: true, PktType: PktUnicast}},
		{"broadcast", bcast, false, with(base4, func(p *Packet) {
			p.Dst, p.Proto, p.SrcPort, p.DstPort, p.Length, p.PktType = a("192.168.10.255"), inet.UDP, 68, 67, 28, PktBroadcast
		})},
	}
}

func TestDecodeFrames(t *testing.T) {
	d := NewDecoder()
	for _, tc := range sampleFrames(t) {
		t.Run(tc.name, func(t *testing.T) {
			var got Packet
			var err error
			if tc.raw {
				got, err = d.DecodeIP(tc.frame)
			} else {
				got, err = d.Decode(tc.frame)
			}
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

// Every proper prefix of a frame is refused with a *FrameError naming an
// offset inside the prefix, never a panic.
func TestDecodeTruncatedEveryOffset(t *testing.T) {
	d := NewDecoder()
	for _, tc := range sampleFrames(t) {
		end := tc.want.Length // Ethernet padding past the IP packet is not needed
		if !tc.raw {
			end += 14
		}
		for n := 0; n < end; n++ {
			var err error
			if tc.raw {
				_, err = d.DecodeIP(tc.frame[:n])
			} else {
				_, err = d.Decode(tc.frame[:n])
			}
			var fe *FrameError
			require.Truef(t, errors.As(err, &fe), "%s cut at %d: %v", tc.name, n, err)
			assert.Truef(t, errors.Is(err, ErrTruncated), "%s cut at %d: %v", tc.name, n, err)
			assert.LessOrEqual(t, fe.Offset, max(n, 0), tc.name)
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	d := NewDecoder()
	good := sampleFrames(t)[0].frame
	mod := func(f func(b []byte) []byte) []byte { return f(append([]byte(nil), good...)) }
	for _, tc := range []struct {
		name  string
		frame []byte
		want  string
		is    error
	}{
		{"arp", mod(func(b []byte) []byte { b[12], b[13] = 0x08, 0x06; return b }),
			"frame byte 12: Ethernet: not modelled by packetwalk: EtherType 0x0806 (ARP), want IPv4 or IPv6", ErrNotModelled},
		{"ihl 4", mod(func(b []byte) []byte { b[14] = 0x44; return b }),
			"frame byte 14: IPv4: bad header: header length 16, want at least 20", ErrBadHeader},
		{"version 6 in ipv4 ethertype", mod(func(b []byte) []byte { b[14] = 0x65; return b }),
			"frame byte 14: IPv4: bad header: version 6, want 4", ErrBadHeader},
		{"total length below header", mod(func(b []byte) []byte { b[16], b[17] = 0, 10; return b }),
			"frame byte 16: IPv4: bad header: total length 10 shorter than the header (20)", ErrBadHeader},
		{"total length beyond frame", mod(func(b []byte) []byte { b[16], b[17] = 0x05, 0xdc; return b }),
			"frame byte 14: IPv4: truncated: need 1500 bytes, have 57", ErrTruncated},
		{"tcp data offset 4", mod(func(b []byte) []byte { b[14+20+12] = 0x40; return b }),
			"frame byte 46: TCP: bad header: data offset 16 bytes, want at least 20", ErrBadHeader},
		{"empty", []byte{}, "frame byte 0: Ethernet: truncated: need 14 bytes, have 0", ErrTruncated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := d.Decode(tc.frame)
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
			assert.ErrorIs(t, err, tc.is)
		})
	}
	_, err := d.DecodeIP([]byte{0x50})
	assert.EqualError(t, err, "frame byte 0: IP: bad header: version 5, want 4 or 6")
}

// Trailing Ethernet padding beyond the IP total length is not payload.
func TestDecodeIgnoresEthernetPadding(t *testing.T) {
	d := NewDecoder()
	f := sampleFrames(t)[8].frame // non-first fragment, 50 bytes
	p, err := d.Decode(append(append([]byte(nil), f...), make([]byte, 10)...))
	require.NoError(t, err)
	assert.Equal(t, 36, p.Length)
}

// onesSum is the Internet checksum sum of b plus initial.
func onesSum(b []byte, initial uint32) uint16 {
	s := initial
	for i := 0; i+1 < len(b); i += 2 {
		s += uint32(binary.BigEndian.Uint16(b[i:]))
	}
	if len(b)%2 == 1 {
		s += uint32(b[len(b)-1]) << 8
	}
	for s > 0xffff {
		s = s&0xffff + s>>16
	}
	return uint16(s)
}

// checkSums verifies the IPv4 header and TCP/UDP/ICMP checksums of an
// Ethernet frame by recomputation.
func checkSums(t *testing.T, frame []byte) {
	t.Helper()
	ip := frame[14:]
	var pseudo uint32
	var l4 []byte
	var proto uint8
	if ip[0]>>4 == 4 {
		hl := int(ip[0]&0xf) * 4
		total := int(binary.BigEndian.Uint16(ip[2:4]))
		assert.Equal(t, uint16(0xffff), onesSum(ip[:hl], 0), "IPv4 header checksum")
		proto, l4 = ip[9], ip[hl:total]
		pseudo = uint32(onesSum(ip[12:20], 0)) + uint32(proto) + uint32(len(l4))
	} else {
		plen := int(binary.BigEndian.Uint16(ip[4:6]))
		proto, l4 = ip[6], ip[40:40+plen]
		pseudo = uint32(onesSum(ip[8:40], 0)) + uint32(proto) + uint32(len(l4))
	}
	switch inet.Proto(proto) {
	case inet.TCP, inet.UDP, inet.ICMPv6:
		assert.Equal(t, uint16(0xffff), onesSum(l4, pseudo), "transport checksum")
	case inet.ICMP:
		assert.Equal(t, uint16(0xffff), onesSum(l4, 0), "ICMP checksum")
	}
	// gopacket decodes it without error layers.
	pk := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.Default)
	assert.Nil(t, pk.ErrorLayer())
}

func dnatHost(t testing.TB) *FrameHost {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), netip.MustParsePrefix("fd00::1:1/64")))
	require.NoError(t, h.AddInterface("cni0", netip.MustParsePrefix("10.244.1.1/24"), netip.MustParsePrefix("fd00:244::1/64")))
	rs := NewRuleset(IPv4)
	for _, l := range []string{
		"-t nat -A PREROUTING -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.244.1.5:8080",
		"-t nat -A PREROUTING -d 10.96.0.10/32 -p udp -m udp --dport 53 -j DNAT --to-destination 10.244.1.6:5353",
		"-t nat -A PREROUTING -d 10.96.0.10/32 -p icmp -j DNAT --to-destination 10.244.1.7",
		"-t nat -A POSTROUTING -s 192.168.10.0/24 -o cni0 -j MASQUERADE",
		"-A FORWARD -d 10.244.1.9/32 -p tcp -j REJECT --reject-with tcp-reset",
		"-A FORWARD -d 10.244.1.9/32 -j REJECT",
	} {
		require.NoError(t, rs.Exec(l), l)
	}
	require.NoError(t, h.Load(rs))
	rs6 := NewRuleset(IPv6)
	require.NoError(t, rs6.Exec("-t nat -A PREROUTING -d fd00:96::10/128 -p udp -j DNAT --to-destination [fd00:244::5]:5353"))
	require.NoError(t, rs6.Exec("-A FORWARD -d fd00:244::9/128 -j REJECT"))
	require.NoError(t, h.Load(rs6))
	return NewFrameHost(h)
}

// comparable strips what is not on the wire from a Packet.
func onWire(p Packet) Packet {
	p.In, p.Out, p.Mark, p.PktType = "", "", 0, 0
	return p
}

func TestFrameHostNATRoundTrip(t *testing.T) {
	fh := dnatHost(t)
	d := NewDecoder()
	syn := mkFrame(t, eth4(), ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolTCP),
		&layers.TCP{SrcPort: 40001, DstPort: 80, SYN: true, Seq: 7}, gopacket.Payload("hello"))
	udp := mkFrame(t, eth4(), ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolUDP),
		&layers.UDP{SrcPort: 40002, DstPort: 53}, gopacket.Payload("query"))
	ping := mkFrame(t, eth4(), ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 99, Seq: 1}, gopacket.Payload("ping"))
	udp6 := mkFrame(t, eth6(), ip6("fd00::1:2", "fd00:96::10", layers.IPProtocolUDP),
		&layers.UDP{SrcPort: 40003, DstPort: 53}, gopacket.Payload("q6"))
	for _, tc := range []struct {
		name  string
		frame []byte
		dst   netip.Addr
		dport uint16
	}{
		{"tcp", syn, a("10.244.1.5"), 8080},
		{"udp", udp, a("10.244.1.6"), 5353},
		{"icmp", ping, a("10.244.1.7"), 0},
		{"udp6", udp6, a("fd00:244::5"), 5353},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, err := fh.ReceiveFrame("eth0", tc.frame)
			require.NoError(t, err)
			require.Equal(t, Forwarded, res.Disposition, res.Reason)
			assert.Equal(t, "cni0", res.Packet.Out)
			assert.Equal(t, tc.dst, res.Packet.Dst)
			require.NotNil(t, res.Frame)
			assert.Len(t, res.Frame, len(tc.frame))
			got, err := d.Decode(res.Frame)
			require.NoError(t, err)
			assert.Equal(t, onWire(res.Packet), onWire(got))
			assert.Equal(t, tc.dst, got.Dst)
			assert.Equal(t, tc.dport, got.DstPort)
			checkSums(t, res.Frame)
			// The payload is kept.
			assert.Equal(t, tc.frame[len(tc.frame)-2:], res.Frame[len(res.Frame)-2:])
		})
	}
}

// An ICMP error about a DNATed datagram comes back un-NATed: the outer
// destination and the quoted header are both rewritten, checksums right.
func TestFrameHostRelatedICMPError(t *testing.T) {
	fh := dnatHost(t)
	udp := mkFrame(t, eth4(), ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolUDP),
		&layers.UDP{SrcPort: 40002, DstPort: 53}, gopacket.Payload("query"))
	res, err := fh.ReceiveFrame("eth0", udp)
	require.NoError(t, err)
	require.Equal(t, Forwarded, res.Disposition)
	quoted := append([]byte(nil), res.Frame[14:]...)
	errFrame := mkFrame(t, &layers.Ethernet{SrcMAC: macB, DstMAC: macA, EthernetType: layers.EthernetTypeIPv4},
		ip4("10.244.1.6", "192.168.10.2", layers.IPProtocolICMPv4),
		&layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(3, 3)}, gopacket.Payload(quoted))
	r2, err := fh.ReceiveFrame("cni0", errFrame)
	require.NoError(t, err)
	require.Equal(t, Forwarded, r2.Disposition, r2.Reason)
	got, err := NewDecoder().Decode(r2.Frame)
	require.NoError(t, err)
	want := onWire(r2.Packet)
	want.ICMPID = 0 // an error has no identifier on the wire
	assert.Equal(t, want, onWire(got))
	checkSums(t, r2.Frame)
	if r2.Packet.Inner.Dst == a("10.96.0.10") {
		// The host translated the quoted header back (RELATED NAT).
		assert.Equal(t, InnerHeader{Proto: inet.UDP, Src: a("192.168.10.2"), Dst: a("10.96.0.10"), SrcPort: 40002, DstPort: 53}, got.Inner)
		inner := r2.Frame[14+20+8:]
		assert.Equal(t, uint16(0xffff), onesSum(inner[:20], 0), "quoted IPv4 header checksum")
	}
}

func TestFrameHostReject(t *testing.T) {
	fh := dnatHost(t)
	d := NewDecoder()
	t.Run("tcp reset to syn", func(t *testing.T) {
		syn := mkFrame(t, eth4(), ip4("192.168.10.2", "10.244.1.9", layers.IPProtocolTCP),
			&layers.TCP{SrcPort: 40001, DstPort: 80, SYN: true, Seq: 1000}, gopacket.Payload("abc"))
		res, err := fh.ReceiveFrame("eth0", syn)
		require.NoError(t, err)
		require.Equal(t, Rejected, res.Disposition)
		assert.Nil(t, res.Frame)
		require.Len(t, res.Emitted, 1)
		f := res.Emitted[0]
		assert.Equal(t, []byte(macA), f[0:6], "back to the sender's MAC")
		assert.Equal(t, []byte(macB), f[6:12])
		p, err := d.Decode(f)
		require.NoError(t, err)
		assert.Equal(t, Packet{Family: IPv4, Proto: inet.TCP, Src: a("10.244.1.9"), Dst: a("192.168.10.2"), SrcPort: 80, DstPort: 40001,
			TCPFlags: inet.RST | inet.ACK, Length: 40, TTL: 64, SrcMAC: [6]byte(macB), HasMAC: true, PktType: PktUnicast,
			Ack: 1004, TCPHeaderLen: 20, IPHeaderLen: 20}, p)
		assert.Equal(t, uint32(1004), res.Result.Emitted[0].Ack, "the emitted Packet carries the reset's numbers")
		tcp := f[14+20:]
		assert.Equal(t, uint32(0), binary.BigEndian.Uint32(tcp[4:8]), "seq")
		assert.Equal(t, uint32(1000+1+3), binary.BigEndian.Uint32(tcp[8:12]), "ack = seq + SYN + payload")
		assert.Equal(t, uint16(0x4000), binary.BigEndian.Uint16(f[14+6:]), "DF")
		checkSums(t, f)
	})
	t.Run("tcp reset to ack", func(t *testing.T) {
		ack := mkFrame(t, eth4(), ip4("192.168.10.2", "10.244.1.9", layers.IPProtocolTCP),
			&layers.TCP{SrcPort: 40001, DstPort: 80, ACK: true, Seq: 1000, Ack: 5555})
		res, err := fh.ReceiveFrame("eth0", ack)
		require.NoError(t, err)
		require.Len(t, res.Emitted, 1)
		tcp := res.Emitted[0][14+20:]
		assert.Equal(t, uint32(5555), binary.BigEndian.Uint32(tcp[4:8]), "seq = the segment's ack")
		assert.Equal(t, byte(0x04), tcp[13], "RST only")
		checkSums(t, res.Emitted[0])
	})
	t.Run("icmp port unreachable", func(t *testing.T) {
		udp := mkFrame(t, eth4(), ip4("192.168.10.2", "10.244.1.9", layers.IPProtocolUDP),
			&layers.UDP{SrcPort: 40002, DstPort: 53}, gopacket.Payload("query"))
		res, err := fh.ReceiveFrame("eth0", udp)
		require.NoError(t, err)
		require.Len(t, res.Emitted, 1)
		f := res.Emitted[0]
		p, err := d.Decode(f)
		require.NoError(t, err)
		assert.Equal(t, res.Result.Emitted[0].Length, p.Length)
		assert.Equal(t, uint8(3), p.ICMPType)
		assert.Equal(t, uint8(3), p.ICMPCode)
		assert.Equal(t, a("192.168.10.1"), p.Src, "from the address of the route back")
		assert.Equal(t, InnerHeader{Proto: inet.UDP, Src: a("192.168.10.2"), Dst: a("10.244.1.9"), SrcPort: 40002, DstPort: 53}, p.Inner)
		quote := f[14+20+8:]
		assert.Equal(t, udp[14+20:14+20+13], quote[20:], "the datagram is quoted whole (not the Ethernet padding)")
		assert.Equal(t, byte(63), quote[8], "quoted with the TTL it had when dropped (forwarded)")
		assert.Equal(t, uint16(0xffff), onesSum(quote[:20], 0))
		checkSums(t, f)
	})
	t.Run("icmpv6 port unreachable", func(t *testing.T) {
		udp := mkFrame(t, eth6(), ip6("fd00::1:2", "fd00:244::9", layers.IPProtocolUDP),
			&layers.UDP{SrcPort: 40002, DstPort: 53}, gopacket.Payload("query"))
		res, err := fh.ReceiveFrame("eth0", udp)
		require.NoError(t, err)
		require.Len(t, res.Emitted, 1)
		f := res.Emitted[0]
		p, err := d.Decode(f)
		require.NoError(t, err)
		assert.Equal(t, uint8(1), p.ICMPType)
		assert.Equal(t, uint8(4), p.ICMPCode)
		assert.Equal(t, 40+8+len(udp)-14, p.Length)
		assert.Equal(t, InnerHeader{Proto: inet.UDP, Src: a("fd00::1:2"), Dst: a("fd00:244::9"), SrcPort: 40002, DstPort: 53}, p.Inner)
		checkSums(t, f)
	})
}

func TestAppendFrameRefusesFamilyChange(t *testing.T) {
	d := NewDecoder()
	f := sampleFrames(t)[0].frame
	p, err := d.Decode(f)
	require.NoError(t, err)
	p.Src = a("fd00::1")
	_, err = d.AppendFrame(nil, f, p)
	assert.ErrorIs(t, err, ErrBadValue)
}

func TestDecodeAllocs(t *testing.T) {
	d := NewDecoder()
	for _, tc := range sampleFrames(t) {
		dec := d.Decode
		if tc.raw {
			dec = d.DecodeIP
		}
		allocs := testing.AllocsPerRun(100, func() { _, _ = dec(tc.frame) })
		assert.Zero(t, allocs, tc.name)
	}
	f := sampleFrames(t)[0].frame
	p, _ := d.Decode(f)
	buf := make([]byte, 0, 2048)
	assert.Zero(t, testing.AllocsPerRun(100, func() { _, _ = d.AppendFrame(buf[:0], f, p) }), "rewrite")
}

func BenchmarkFrameDecode(b *testing.B) {
	d := NewDecoder()
	f := sampleFrames(b)[0].frame
	b.ReportAllocs()
	for b.Loop() {
		_, _ = d.Decode(f)
	}
}

// BenchmarkFrameReceive is decode + Receive (DNAT, conntrack) + rewrite
// of one UDP datagram of a DNATed flow.
func BenchmarkFrameReceive(b *testing.B) {
	fh := dnatHost(b)
	ack := mkFrame(b, eth4(), ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolUDP),
		&layers.UDP{SrcPort: 40001, DstPort: 53}, gopacket.Payload("hello"))
	_, err := fh.ReceiveFrame("eth0", ack)
	require.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		res, err := fh.ReceiveFrame("eth0", ack)
		if err != nil || res.Frame == nil {
			b.Fatal(err, res.Disposition)
		}
	}
}

func FuzzDecode(f *testing.F) {
	for _, s := range sampleFrames(f) {
		f.Add(s.frame)
	}
	d := NewDecoder()
	f.Fuzz(func(t *testing.T, frame []byte) {
		for _, dec := range []func([]byte) (Packet, error){d.Decode, d.DecodeIP} {
			p, err := dec(frame)
			if err != nil {
				var fe *FrameError
				if !errors.As(err, &fe) {
					t.Fatalf("error %v is not a *FrameError", err)
				}
				if fe.Offset < 0 || fe.Offset > len(frame) {
					t.Fatalf("offset %d outside the frame of %d bytes", fe.Offset, len(frame))
				}
				continue
			}
			// A decoded frame written back unchanged keeps its bytes (the
			// SCTP checksum is recomputed, so it may differ there).
			write := d.AppendIP
			if p.HasMAC {
				write = d.AppendFrame
			}
			out, err := write(nil, frame, p)
			if err != nil {
				t.Fatalf("rewriting a decoded frame: %v", err)
			}
			if p.Proto != inet.SCTP && !bytes.Equal(out, frame) {
				t.Fatalf("unchanged packet rewritten differently:\n% x\n% x", frame, out)
			}
		}
	})
}
