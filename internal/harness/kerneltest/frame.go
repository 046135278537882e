package kerneltest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
)

// ErrBadSpec is wrapped by errors for a [FrameSpec] that cannot be built.
var ErrBadSpec = errors.New("kerneltest: bad frame spec")

// ErrBadFrame is wrapped by errors from [Decode].
var ErrBadFrame = errors.New("kerneltest: undecodable frame")

// FrameSpec describes one IPv4 or IPv6 packet to build. The family follows
// Src and Dst, which must agree.
type FrameSpec struct {
	Proto    string // "tcp", "udp" or "icmp" (ICMPv6 for IPv6 addresses)
	Src, Dst netip.Addr
	SrcPort  uint16 // tcp, udp
	DstPort  uint16 // tcp, udp
	// TCPFlags is a comma-separated list of FIN, SYN, RST, PSH, ACK, URG,
	// ECE, CWR (case-insensitive), e.g. "SYN" or "SYN,ACK". Empty means none.
	TCPFlags string
	Seq, Ack uint32 // tcp
	ICMPType uint8  // icmp: e.g. 8 echo request (v4), 128 (v6)
	ICMPCode uint8
	ICMPID   uint16 // icmp echo identifier
	ICMPSeq  uint16 // icmp echo sequence
	TTL      uint8  // IPv4 TTL or IPv6 hop limit; 0 means 64
	TOS      uint8  // IPv4 TOS byte or IPv6 traffic class
	ID       uint16 // IPv4 identification
	DF       bool   // IPv4 don't-fragment
	// Payload is the transport payload; when nil, PayloadLen zero bytes.
	Payload    []byte
	PayloadLen int
	// Window is the TCP window field; 0 means 64240 unless ZeroWindow.
	Window     uint16
	ZeroWindow bool
	// TCP options, written in this order: MSS (kind 2) when HasMSS, window scale (kind 3) when
	// HasWScale, SACK permitted (kind 4), SACK blocks (kind 5, left and
	// right edge each); NOPs pad the header to a multiple of 4 bytes.
	WScale    uint8
	HasWScale bool
	SACKPerm  bool
	SACK      [][2]uint32
	// MSS is written as the first option (kind 2) when HasMSS.
	MSS    uint16
	HasMSS bool
}

// MAC addresses of the lab interfaces: fixed and locally administered, so
// that frames and static neighbour entries can be written in advance.
var (
	ClientMAC   = net.HardwareAddr{0x02, 0x70, 0x77, 0x00, 0x0a, 0x02} // client c0
	NodeEth0MAC = net.HardwareAddr{0x02, 0x70, 0x77, 0x00, 0x0a, 0x01} // node eth0
	NodeEth1MAC = net.HardwareAddr{0x02, 0x70, 0x77, 0x00, 0xf4, 0x01} // node eth1
	ServerMAC   = net.HardwareAddr{0x02, 0x70, 0x77, 0x00, 0xf4, 0x05} // server p0
)

var tcpFlagNames = []string{"FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"}

// BuildPacket builds the IP packet of spec with correct lengths and
// checksums.
func BuildPacket(spec FrameSpec) ([]byte, error) {
	ls, err := specLayers(spec)
	if err != nil {
		return nil, err
	}
	return serialize(ls)
}

// BuildFrame builds spec as an Ethernet frame from src to dst MAC.
func BuildFrame(src, dst net.HardwareAddr, spec FrameSpec) ([]byte, error) {
	ls, err := specLayers(spec)
	if err != nil {
		return nil, err
	}
	et := layers.EthernetTypeIPv4
	if spec.Src.Is6() {
		et = layers.EthernetTypeIPv6
	}
	eth := &layers.Ethernet{SrcMAC: src, DstMAC: dst, EthernetType: et}
	return serialize(append([]gopacket.SerializableLayer{eth}, ls...))
}

func serialize(ls []gopacket.SerializableLayer) ([]byte, error) {
	buf := gopacket.NewSerializeBuffer()
	if err := gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...); err != nil {
		return nil, fmt.Errorf("kerneltest: serialize: %w", err)
	}
	return append([]byte(nil), buf.Bytes()...), nil
}

func specLayers(spec FrameSpec) ([]gopacket.SerializableLayer, error) {
	if !spec.Src.IsValid() || !spec.Dst.IsValid() {
		return nil, fmt.Errorf("%w: Src %v and Dst %v must both be set", ErrBadSpec, spec.Src, spec.Dst)
	}
	src, dst := spec.Src.Unmap(), spec.Dst.Unmap()
	if src.Is4() != dst.Is4() && spec.Src.Is6() && spec.Dst.Is6() {
		// An IPv4-mapped address next to a real IPv6 one: an IPv6 frame
		// carrying the mapped address as its 16 bytes.
		src, dst = spec.Src, spec.Dst
	}
	if src.Is4() != dst.Is4() {
		return nil, fmt.Errorf("%w: Src %v and Dst %v are of different families", ErrBadSpec, src, dst)
	}
	ttl := spec.TTL
	if ttl == 0 {
		ttl = 64
	}
	payload := spec.Payload
	if payload == nil {
		if spec.PayloadLen < 0 || spec.PayloadLen > 65000 {
			return nil, fmt.Errorf("%w: PayloadLen %d out of range 0..65000", ErrBadSpec, spec.PayloadLen)
		}
		payload = make([]byte, spec.PayloadLen)
	}
	var ipLayer gopacket.SerializableLayer
	var netLayer gopacket.NetworkLayer
	var proto layers.IPProtocol
	switch strings.ToLower(spec.Proto) {
	case "tcp":
		proto = layers.IPProtocolTCP
	case "udp":
		proto = layers.IPProtocolUDP
	case "icmp", "icmpv6", "ipv6-icmp":
		proto = layers.IPProtocolICMPv4
		if src.Is6() {
			proto = layers.IPProtocolICMPv6
		}
	default:
		return nil, fmt.Errorf("%w: Proto %q, want tcp, udp or icmp", ErrBadSpec, spec.Proto)
	}
	if src.Is4() {
		ip := &layers.IPv4{Version: 4, IHL: 5, TTL: ttl, TOS: spec.TOS, Id: spec.ID, Protocol: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		if spec.DF {
			ip.Flags = layers.IPv4DontFragment
		}
		ipLayer, netLayer = ip, ip
	} else {
		ip := &layers.IPv6{Version: 6, HopLimit: ttl, TrafficClass: spec.TOS, NextHeader: proto, SrcIP: src.AsSlice(), DstIP: dst.AsSlice()}
		ipLayer, netLayer = ip, ip
	}
	ls := []gopacket.SerializableLayer{ipLayer}
	switch proto {
	case layers.IPProtocolTCP:
		win := spec.Window
		if win == 0 && !spec.ZeroWindow {
			win = 64240
		}
		tcp := &layers.TCP{SrcPort: layers.TCPPort(spec.SrcPort), DstPort: layers.TCPPort(spec.DstPort), Seq: spec.Seq, Ack: spec.Ack, Window: win}
		tcp.Options = tcpOptions(spec)
		if err := setTCPFlags(tcp, spec.TCPFlags); err != nil {
			return nil, err
		}
		if err := tcp.SetNetworkLayerForChecksum(netLayer); err != nil {
			return nil, err
		}
		ls = append(ls, tcp)
	case layers.IPProtocolUDP:
		udp := &layers.UDP{SrcPort: layers.UDPPort(spec.SrcPort), DstPort: layers.UDPPort(spec.DstPort)}
		if err := udp.SetNetworkLayerForChecksum(netLayer); err != nil {
			return nil, err
		}
		ls = append(ls, udp)
	case layers.IPProtocolICMPv4:
		ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(spec.ICMPType, spec.ICMPCode), Id: spec.ICMPID, Seq: spec.ICMPSeq})
	case layers.IPProtocolICMPv6:
		icmp := &layers.ICMPv6{TypeCode: layers.CreateICMPv6TypeCode(spec.ICMPType, spec.ICMPCode)}
		if err := icmp.SetNetworkLayerForChecksum(netLayer); err != nil {
			return nil, err
		}
		// The 4 bytes after the ICMPv6 checksum: id and sequence for echo,
		// unused/MTU/pointer for errors; written as given.
		var rest [4]byte
		binary.BigEndian.PutUint16(rest[0:], spec.ICMPID)
		binary.BigEndian.PutUint16(rest[2:], spec.ICMPSeq)
		ls = append(ls, icmp, gopacket.Payload(append(rest[:], payload...)))
		return ls, nil
	}
	if len(payload) > 0 {
		ls = append(ls, gopacket.Payload(payload))
	}
	return ls, nil
}

// tcpOptions lays out the options of spec, NOP-padded to 4-byte words.
func tcpOptions(spec FrameSpec) []layers.TCPOption {
	var opts []layers.TCPOption
	n := 0
	if spec.HasMSS {
		opts = append(opts, layers.TCPOption{OptionType: layers.TCPOptionKindMSS, OptionLength: 4, OptionData: []byte{byte(spec.MSS >> 8), byte(spec.MSS)}})
		n += 4
	}
	if spec.HasWScale {
		opts = append(opts, layers.TCPOption{OptionType: layers.TCPOptionKindWindowScale, OptionLength: 3, OptionData: []byte{spec.WScale}})
		n += 3
	}
	if spec.SACKPerm {
		opts = append(opts, layers.TCPOption{OptionType: layers.TCPOptionKindSACKPermitted, OptionLength: 2})
		n += 2
	}
	if len(spec.SACK) > 0 {
		data := make([]byte, 0, 8*len(spec.SACK))
		for _, b := range spec.SACK {
			data = binary.BigEndian.AppendUint32(data, b[0])
			data = binary.BigEndian.AppendUint32(data, b[1])
		}
		opts = append(opts, layers.TCPOption{OptionType: layers.TCPOptionKindSACK, OptionLength: uint8(2 + len(data)), OptionData: data})
		n += 2 + len(data)
	}
	for ; n%4 != 0; n++ {
		opts = append(opts, layers.TCPOption{OptionType: layers.TCPOptionKindNop, OptionLength: 1})
	}
	return opts
}

func setTCPFlags(tcp *layers.TCP, flags string) error {
	if strings.TrimSpace(flags) == "" {
		return nil
	}
	for f := range strings.SplitSeq(flags, ",") {
		switch strings.ToUpper(strings.TrimSpace(f)) {
		case "FIN":
			tcp.FIN = true
		case "SYN":
			tcp.SYN = true
		case "RST":
			tcp.RST = true
		case "PSH":
			tcp.PSH = true
		case "ACK":
			tcp.ACK = true
		case "URG":
			tcp.URG = true
		case "ECE":
			tcp.ECE = true
		case "CWR":
			tcp.CWR = true
		default:
			return fmt.Errorf("%w: TCP flag %q in %q, want one of %s", ErrBadSpec, f, flags, strings.Join(tcpFlagNames, ","))
		}
	}
	return nil
}

// Summary is the comparable gist of a captured frame.
type Summary struct {
	EthSrc, EthDst string // MAC addresses, "02:70:77:00:0a:02"
	EtherType      uint16
	Version        int // 4, 6, or 0 for non-IP frames
	Src, Dst       netip.Addr
	Proto          uint8  // IP protocol number (IPv6: the first next header)
	TTL            uint8  // TTL or hop limit
	IPLen          int    // IPv4 total length; IPv6 payload length + 40
	ID             uint16 // IPv4 identification
	DF             bool   // IPv4 don't-fragment
	SrcPort        uint16 // tcp, udp
	DstPort        uint16 // tcp, udp
	TCPFlags       string // "SYN,ACK" in FIN,SYN,RST,PSH,ACK,URG,ECE,CWR order
	Seq, Ack       uint32 // tcp
	ICMPType       uint8
	ICMPCode       uint8
	// Inner is the packet quoted by an ICMP error (addresses, protocol,
	// ports), nil otherwise.
	Inner *Summary
}

// String renders the summary on one line, e.g.
// "IPv4 tcp 192.168.10.2:40000 > 10.244.1.5:80 [SYN] ttl=63 len=40".
func (s Summary) String() string {
	if s.Version == 0 {
		return fmt.Sprintf("eth 0x%04x %s > %s", s.EtherType, s.EthSrc, s.EthDst)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "IPv%d %s ", s.Version, protoName(s.Proto, s.Version))
	switch s.Proto {
	case 6, 17:
		fmt.Fprintf(&b, "%s > %s", netip.AddrPortFrom(s.Src, s.SrcPort), netip.AddrPortFrom(s.Dst, s.DstPort))
		if s.Proto == 6 {
			fmt.Fprintf(&b, " [%s]", s.TCPFlags)
		}
	case 1, 58:
		fmt.Fprintf(&b, "%s > %s type=%d code=%d", s.Src, s.Dst, s.ICMPType, s.ICMPCode)
	default:
		fmt.Fprintf(&b, "%s > %s", s.Src, s.Dst)
	}
	fmt.Fprintf(&b, " ttl=%d len=%d", s.TTL, s.IPLen)
	if s.Inner != nil {
		fmt.Fprintf(&b, " {%s}", s.Inner.String())
	}
	return b.String()
}

func protoName(p uint8, version int) string {
	switch p {
	case 6:
		return "tcp"
	case 17:
		return "udp"
	case 1:
		return "icmp"
	case 58:
		return "icmpv6"
	}
	return fmt.Sprintf("proto-%d", p)
}

// Decode summarises an Ethernet frame.
func Decode(frame []byte) (Summary, error) {
	pkt := gopacket.NewPacket(frame, layers.LayerTypeEthernet, gopacket.DecodeOptions{Lazy: true, NoCopy: true})
	eth, _ := pkt.Layer(layers.LayerTypeEthernet).(*layers.Ethernet)
	if eth == nil {
		return Summary{}, fmt.Errorf("%w: %d bytes, no Ethernet header", ErrBadFrame, len(frame))
	}
	s := Summary{EthSrc: eth.SrcMAC.String(), EthDst: eth.DstMAC.String(), EtherType: uint16(eth.EthernetType)}
	switch eth.EthernetType {
	case layers.EthernetTypeIPv4, layers.EthernetTypeIPv6:
		if err := decodeIP(eth.Payload, &s, false); err != nil {
			return s, err
		}
	}
	return s, nil
}

// decodeIP fills s from an IP packet. quoted marks the (possibly truncated)
// packet inside an ICMP error, where only the first 8 transport bytes exist.
func decodeIP(b []byte, s *Summary, quoted bool) error {
	if len(b) < 1 {
		return fmt.Errorf("%w: empty IP packet", ErrBadFrame)
	}
	var l4 []byte
	switch b[0] >> 4 {
	case 4:
		if len(b) < 20 {
			return fmt.Errorf("%w: IPv4 header of %d bytes, want >= 20", ErrBadFrame, len(b))
		}
		ihl := int(b[0]&0x0f) * 4
		if ihl < 20 || len(b) < ihl {
			return fmt.Errorf("%w: IPv4 IHL %d with %d bytes", ErrBadFrame, ihl, len(b))
		}
		s.Version = 4
		s.IPLen = int(binary.BigEndian.Uint16(b[2:]))
		s.ID = binary.BigEndian.Uint16(b[4:])
		s.DF = b[6]&0x40 != 0
		s.TTL = b[8]
		s.Proto = b[9]
		s.Src, _ = netip.AddrFromSlice(b[12:16])
		s.Dst, _ = netip.AddrFromSlice(b[16:20])
		if binary.BigEndian.Uint16(b[6:])&0x1fff != 0 {
			return nil // a non-first fragment has no transport header
		}
		l4 = b[ihl:]
		if !quoted && s.IPLen <= len(b) && s.IPLen >= ihl {
			l4 = b[ihl:s.IPLen] // drop Ethernet padding
		}
	case 6:
		if len(b) < 40 {
			return fmt.Errorf("%w: IPv6 header of %d bytes, want >= 40", ErrBadFrame, len(b))
		}
		s.Version = 6
		s.IPLen = int(binary.BigEndian.Uint16(b[4:])) + 40
		s.Proto = b[6]
		s.TTL = b[7]
		s.Src, _ = netip.AddrFromSlice(b[8:24])
		s.Dst, _ = netip.AddrFromSlice(b[24:40])
		l4 = b[40:]
	default:
		return fmt.Errorf("%w: IP version %d", ErrBadFrame, b[0]>>4)
	}
	switch s.Proto {
	case 6, 17:
		if len(l4) >= 4 {
			s.SrcPort = binary.BigEndian.Uint16(l4[0:])
			s.DstPort = binary.BigEndian.Uint16(l4[2:])
		}
		if s.Proto == 6 && len(l4) >= 14 {
			s.Seq = binary.BigEndian.Uint32(l4[4:])
			s.Ack = binary.BigEndian.Uint32(l4[8:])
			var names []string
			for i, n := range tcpFlagNames {
				if l4[13]&(1<<i) != 0 {
					names = append(names, n)
				}
			}
			s.TCPFlags = strings.Join(names, ",")
		}
	case 1, 58:
		if len(l4) >= 2 {
			s.ICMPType, s.ICMPCode = l4[0], l4[1]
		}
		isErr := (s.Proto == 1 && (s.ICMPType == 3 || s.ICMPType == 5 || s.ICMPType == 11 || s.ICMPType == 12)) ||
			(s.Proto == 58 && s.ICMPType < 128)
		if isErr && !quoted && len(l4) > 8 {
			inner := &Summary{}
			if err := decodeIP(l4[8:], inner, true); err == nil {
				s.Inner = inner
			}
		}
	}
	return nil
}
