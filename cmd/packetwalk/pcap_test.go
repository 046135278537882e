package main

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/golden"
	"github.com/packetwalk/packetwalk/netfilter"
)

// The capture tests build their input files with gopacket and pcapgo, run
// the command on them, and compare the summary and a dump of every file
// written (a decoded line and the bytes of each frame) with golden files
// in testdata/golden/pcap-*.golden.

var (
	macClient = net.HardwareAddr{0x02, 0x70, 0x77, 0x00, 0x0a, 0x02}
	macEth0   = net.HardwareAddr{0x02, 0x70, 0x77, 0x00, 0x0a, 0x01}
	macEth1   = net.HardwareAddr{0x02, 0x70, 0x77, 0x00, 0xf4, 0x01}
	macServer = net.HardwareAddr{0x02, 0x70, 0x77, 0x00, 0xf4, 0x05}
	pcapT0    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
)

// pcapNode is the node of the capture tests: eth0 faces clients, eth1
// pods; 10.96.0.10:80 is DNATed to 10.244.1.5:8080.
var pcapNode = []string{"--rules", "testdata/pcap/iptables-save", "--addr", "eth0=192.168.10.1/24", "--addr", "eth1=10.244.1.1/24"}

// pkt describes one test frame.
type pkt struct {
	in       string // pcapng interface: "eth0" (from the client) or "eth1" (from the server)
	proto    string // tcp, udp, icmp, arp
	src, dst string
	sport    uint16
	dport    uint16
	flags    string // TCP: S, SA, A
	payload  int
	at       time.Duration // after pcapT0
}

func buildPkt(t testing.TB, p pkt, eth bool) []byte {
	t.Helper()
	var ls []gopacket.SerializableLayer
	srcMAC, dstMAC := macClient, macEth0
	if p.in == "eth1" {
		srcMAC, dstMAC = macServer, macEth1
	}
	if p.proto == "arp" {
		ls = append(ls, &layers.Ethernet{SrcMAC: srcMAC, DstMAC: layers.EthernetBroadcast, EthernetType: layers.EthernetTypeARP},
			&layers.ARP{AddrType: layers.LinkTypeEthernet, Protocol: layers.EthernetTypeIPv4, HwAddressSize: 6, ProtAddressSize: 4,
				Operation: layers.ARPRequest, SourceHwAddress: srcMAC, SourceProtAddress: net.ParseIP(p.src).To4(),
				DstHwAddress: make([]byte, 6), DstProtAddress: net.ParseIP(p.dst).To4()})
		return serializeLayers(t, ls)
	}
	ip := &layers.IPv4{Version: 4, IHL: 5, TTL: 64, Id: 0x1234, Flags: layers.IPv4DontFragment,
		SrcIP: net.ParseIP(p.src).To4(), DstIP: net.ParseIP(p.dst).To4()}
	if eth {
		ls = append(ls, &layers.Ethernet{SrcMAC: srcMAC, DstMAC: dstMAC, EthernetType: layers.EthernetTypeIPv4})
	}
	ls = append(ls, ip)
	switch p.proto {
	case "tcp":
		ip.Protocol = layers.IPProtocolTCP
		tcp := &layers.TCP{SrcPort: layers.TCPPort(p.sport), DstPort: layers.TCPPort(p.dport), Seq: 1000, Window: 64240,
			SYN: strings.Contains(p.flags, "S"), ACK: strings.Contains(p.flags, "A")}
		if tcp.ACK {
			tcp.Ack = 1001
		}
		require.NoError(t, tcp.SetNetworkLayerForChecksum(ip))
		ls = append(ls, tcp)
	case "udp":
		ip.Protocol = layers.IPProtocolUDP
		udp := &layers.UDP{SrcPort: layers.UDPPort(p.sport), DstPort: layers.UDPPort(p.dport)}
		require.NoError(t, udp.SetNetworkLayerForChecksum(ip))
		ls = append(ls, udp)
	case "icmp":
		ip.Protocol = layers.IPProtocolICMPv4
		ls = append(ls, &layers.ICMPv4{TypeCode: layers.CreateICMPv4TypeCode(8, 0), Id: 7, Seq: 1})
	default:
		t.Fatalf("proto %q", p.proto)
	}
	ls = append(ls, gopacket.Payload(bytes.Repeat([]byte{0xab}, p.payload)))
	return serializeLayers(t, ls)
}

func serializeLayers(t testing.TB, ls []gopacket.SerializableLayer) []byte {
	t.Helper()
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{FixLengths: true, ComputeChecksums: true}, ls...))
	return append([]byte(nil), buf.Bytes()...)
}

// writePcap writes the frames as a pcap file of the link type.
func writePcap(t testing.TB, path string, link layers.LinkType, frames [][]byte, ats []time.Duration) {
	t.Helper()
	var b bytes.Buffer
	w := pcapgo.NewWriter(&b)
	require.NoError(t, w.WriteFileHeader(65535, link))
	for i, f := range frames {
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: pcapT0.Add(ats[i]), CaptureLength: len(f), Length: len(f)}, f))
	}
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
}

func pcapOf(t testing.TB, path string, link layers.LinkType, ps []pkt) {
	t.Helper()
	var frames [][]byte
	var ats []time.Duration
	for _, p := range ps {
		frames = append(frames, buildPkt(t, p, link == layers.LinkTypeEthernet))
		ats = append(ats, p.at)
	}
	writePcap(t, path, link, frames, ats)
}

// pcapngOf writes the frames as pcapng with one interface block per
// interface name, in order of first use.
func pcapngOf(t testing.TB, path string, ps []pkt) {
	t.Helper()
	var b bytes.Buffer
	w, err := pcapgo.NewNgWriterInterface(&b, pcapgo.NgInterface{Name: ps[0].in, LinkType: layers.LinkTypeEthernet, SnapLength: 65535}, pcapgo.NgWriterOptions{})
	require.NoError(t, err)
	ids := map[string]int{ps[0].in: 0}
	for _, p := range ps {
		if _, ok := ids[p.in]; !ok {
			ids[p.in], err = w.AddInterface(pcapgo.NgInterface{Name: p.in, LinkType: layers.LinkTypeEthernet, SnapLength: 65535})
			require.NoError(t, err)
		}
		f := buildPkt(t, p, true)
		require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: pcapT0.Add(p.at), CaptureLength: len(f), Length: len(f), InterfaceIndex: ids[p.in]}, f))
	}
	require.NoError(t, w.Flush())
	require.NoError(t, os.WriteFile(path, b.Bytes(), 0o644))
}

// dumpPcap prints a pcap file: its header, then per frame the
// timestamp, the packet as packetwalk decodes it and the bytes.
func dumpPcap(t testing.TB, path string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	r, err := pcapgo.NewReader(f)
	require.NoError(t, err)
	var b strings.Builder
	fmt.Fprintf(&b, "== %s: link type %v, snap length %d, %s\n", filepath.Base(path), r.LinkType(), r.Snaplen(), pcapResolution(t, path))
	dec := netfilter.NewDecoder()
	for n := 1; ; n++ {
		data, ci, err := r.ReadPacketData()
		if err != nil {
			break
		}
		p, err := dec.Decode(data)
		desc := describe(p)
		if err != nil {
			desc = "undecodable: " + err.Error()
		}
		fmt.Fprintf(&b, "%d %s %d bytes: %s\n", n, ci.Timestamp.UTC().Format(time.RFC3339Nano), len(data), desc)
		for i := 0; i < len(data); i += 16 {
			fmt.Fprintf(&b, "  %04x ", i)
			for j := i; j < min(i+16, len(data)); j++ {
				fmt.Fprintf(&b, " %02x", data[j])
			}
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// pcapResolution reads the timestamp unit from a pcap file's magic
// (pcapgo's Reader.Resolution reports it the wrong way round).
func pcapResolution(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.GreaterOrEqual(t, len(data), 4)
	switch string(data[:4]) {
	case "\xd4\xc3\xb2\xa1", "\xa1\xb2\xc3\xd4":
		return "microseconds"
	case "\x4d\x3c\xb2\xa1", "\xa1\xb2\x3c\x4d":
		return "nanoseconds"
	}
	return fmt.Sprintf("magic % x", data[:4])
}

// outFiles lists the files in dir other than the inputs (in.*).
func outFiles(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "in.") {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	return names
}

// clientPackets are the frames of the single-interface capture: a DNAT, a
// TCP reset, an ICMP port unreachable, a drop, an ARP request (skipped)
// and a ping of the node (delivered).
var clientPackets = []pkt{
	{in: "eth0", proto: "tcp", src: "192.168.10.2", dst: "10.96.0.10", sport: 40001, dport: 80, flags: "S", at: time.Second + time.Microsecond},
	{in: "eth0", proto: "tcp", src: "192.168.10.2", dst: "10.244.1.5", sport: 40002, dport: 23, flags: "S", at: 2 * time.Second},
	{in: "eth0", proto: "udp", src: "192.168.10.2", dst: "10.244.1.5", sport: 40003, dport: 69, payload: 12, at: 3 * time.Second},
	{in: "eth0", proto: "tcp", src: "192.168.10.2", dst: "10.244.1.5", sport: 40004, dport: 25, flags: "S", at: 4 * time.Second},
	{in: "eth0", proto: "arp", src: "192.168.10.2", dst: "192.168.10.1", at: 5 * time.Second},
	{in: "eth0", proto: "icmp", src: "192.168.10.2", dst: "192.168.10.1", at: 6 * time.Second},
}

// localPackets are sent by the node itself (pcap --in local): a SYN to
// the pod out eth1, a ping to its own address (through lo), a DNS query
// to the client out eth0, and a SYN to port 25 of the pod, which leaves
// because only FORWARD drops port 25.
var localPackets = []pkt{
	{proto: "tcp", src: "10.244.1.1", dst: "10.244.1.5", sport: 40020, dport: 80, flags: "S", at: time.Second},
	{proto: "icmp", src: "192.168.10.1", dst: "192.168.10.1", at: 2 * time.Second},
	{proto: "udp", src: "192.168.10.1", dst: "192.168.10.2", sport: 40021, dport: 53, payload: 8, at: 3 * time.Second},
	{proto: "tcp", src: "10.244.1.1", dst: "10.244.1.5", sport: 40022, dport: 25, flags: "S", at: 4 * time.Second},
}

// cutIPv4 cuts the IPv4 packet of an Ethernet frame into fragments, each
// {data offset, data length, more fragments}.
func cutIPv4(whole []byte, cuts [][3]int) [][]byte {
	hl := int(whole[14]&0xf) * 4
	data := whole[14+hl:]
	var out [][]byte
	for _, c := range cuts {
		f := append(append([]byte(nil), whole[:14+hl]...), data[c[0]:c[0]+c[1]]...)
		ip := f[14:]
		binary.BigEndian.PutUint16(ip[2:], uint16(hl+c[1]))
		binary.BigEndian.PutUint16(ip[6:], uint16(c[0]/8)|uint16(c[2])<<13)
		ip[10], ip[11] = 0, 0
		var sum uint32
		for i := 0; i < hl; i += 2 {
			sum += uint32(binary.BigEndian.Uint16(ip[i:]))
		}
		for sum > 0xffff {
			sum = sum&0xffff + sum>>16
		}
		binary.BigEndian.PutUint16(ip[10:], ^uint16(sum))
		out = append(out, f)
	}
	return out
}

// pcapngBlockAt returns the file byte of the n-th (1-based) enhanced
// packet block of a little-endian pcapng file.
func pcapngBlockAt(t *testing.T, data []byte, n int) int {
	t.Helper()
	for at := 0; at+8 <= len(data); at += int(binary.LittleEndian.Uint32(data[at+4:])) {
		if binary.LittleEndian.Uint32(data[at:]) == 6 {
			if n--; n == 0 {
				return at
			}
		}
	}
	t.Fatalf("no packet block %d", n)
	return 0
}

// twoIfacePackets are a pcapng capture on eth0 and eth1: the DNATed SYN,
// the pod's SYN-ACK (un-DNATed back out eth0), the client's ACK, and a
// DNS query of the pod forwarded out eth0.
var twoIfacePackets = []pkt{
	{in: "eth0", proto: "tcp", src: "192.168.10.2", dst: "10.96.0.10", sport: 40001, dport: 80, flags: "S", at: time.Second},
	{in: "eth1", proto: "tcp", src: "10.244.1.5", dst: "192.168.10.2", sport: 8080, dport: 40001, flags: "SA", at: time.Second + 250*time.Microsecond},
	{in: "eth0", proto: "tcp", src: "192.168.10.2", dst: "10.96.0.10", sport: 40001, dport: 80, flags: "A", at: time.Second + 500*time.Microsecond},
	{in: "eth1", proto: "udp", src: "10.244.1.5", dst: "192.168.10.53", sport: 5353, dport: 53, payload: 20, at: 2 * time.Second},
}

func TestPcapGolden(t *testing.T) {
	truncated := buildPkt(t, clientPackets[0], true)[:14+12] // the IPv4 header cut short
	for _, tc := range []struct {
		name  string
		setup func(t *testing.T, dir string)
		args  []string // $DIR is the test's directory
	}{
		{"pcap-eth0", func(t *testing.T, dir string) {
			pcapOf(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeEthernet, clientPackets)
		}, []string{"-r", "$DIR/in.pcap", "--in", "eth0", "-w", "$DIR/out"}},
		{"pcap-pcapng-two-ifaces", func(t *testing.T, dir string) {
			pcapngOf(t, filepath.Join(dir, "in.pcapng"), twoIfacePackets)
		}, []string{"-r", "$DIR/in.pcapng", "-w", "$DIR/sim"}},
		{"pcap-raw-ip", func(t *testing.T, dir string) {
			pcapOf(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeRaw, clientPackets[:2])
		}, []string{"-r", "$DIR/in.pcap", "--in", "eth0", "-w", "$DIR/raw"}},
		{"pcap-help", nil, []string{"--help"}},
		{"err-pcap-bad-frame", func(t *testing.T, dir string) {
			good := buildPkt(t, clientPackets[0], true)
			writePcap(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeEthernet, [][]byte{good, truncated}, []time.Duration{0, time.Second})
		}, []string{"-r", "$DIR/in.pcap", "--in", "eth0", "-w", "$DIR/out"}},
		{"err-pcap-no-iface", func(t *testing.T, dir string) {
			pcapOf(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeEthernet, clientPackets[:1])
		}, []string{"-r", "$DIR/in.pcap", "-w", "$DIR/out"}},
		{"err-pcap-unknown-iface", func(t *testing.T, dir string) {
			pcapngOf(t, filepath.Join(dir, "in.pcapng"), []pkt{{in: "eth0", proto: "udp", src: "192.168.10.2", dst: "10.244.1.5", sport: 1, dport: 2},
				{in: "cali9", proto: "udp", src: "10.244.1.9", dst: "192.168.10.2", sport: 1, dport: 2}})
		}, []string{"-r", "$DIR/in.pcapng", "-w", "$DIR/out"}},
		{"err-pcap-sll", func(t *testing.T, dir string) {
			writePcap(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeLinuxSLL, [][]byte{make([]byte, 40)}, []time.Duration{0})
		}, []string{"-r", "$DIR/in.pcap", "--in", "eth0", "-w", "$DIR/out"}},
		{"err-pcap-not-capture", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "in.txt"), []byte("*filter\nCOMMIT\n"), 0o644))
		}, []string{"-r", "$DIR/in.txt", "--in", "eth0", "-w", "$DIR/out"}},
		{"err-pcap-truncated-record", func(t *testing.T, dir string) {
			pcapOf(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeEthernet, clientPackets[:2])
			data, err := os.ReadFile(filepath.Join(dir, "in.pcap"))
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "in.pcap"), data[:len(data)-10], 0o644))
		}, []string{"-r", "$DIR/in.pcap", "--in", "eth0", "-w", "$DIR/out"}},
		{"usage-pcap-no-w", nil, []string{"-r", "in.pcap"}},
		{"pcap-local", func(t *testing.T, dir string) {
			pcapOf(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeEthernet, localPackets)
		}, []string{"-r", "$DIR/in.pcap", "--in", "local", "-w", "$DIR/out"}},
		{"pcap-pcapng-lo", func(t *testing.T, dir string) {
			pcapngOf(t, filepath.Join(dir, "in.pcapng"), []pkt{
				{in: "lo", proto: "tcp", src: "192.168.10.1", dst: "192.168.10.2", sport: 40010, dport: 23, flags: "S", at: time.Second},
				{in: "eth0", proto: "tcp", src: "192.168.10.2", dst: "10.244.1.5", sport: 40011, dport: 23, flags: "S", at: 2 * time.Second},
			})
		}, []string{"-r", "$DIR/in.pcapng", "-w", "$DIR/out"}},
		{"pcap-fragments", func(t *testing.T, dir string) {
			whole := buildPkt(t, pkt{in: "eth0", proto: "udp", src: "192.168.10.2", dst: "10.244.1.5", sport: 40000, dport: 9999, payload: 1400}, true)
			frags := cutIPv4(whole, [][3]int{{1200, 208, 0}, {0, 400, 1}, {400, 800, 1}})
			writePcap(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeEthernet, frags, []time.Duration{0, time.Millisecond, 2 * time.Millisecond})
		}, []string{"-r", "$DIR/in.pcap", "--in", "eth0", "-w", "$DIR/out"}},
		{"err-pcapng-truncated-block", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "in.pcapng")
			pcapngOf(t, path, twoIfacePackets)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(path, data[:len(data)-10], 0o644))
		}, []string{"-r", "$DIR/in.pcapng", "-w", "$DIR/out"}},
		{"err-pcapng-bad-block-length", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "in.pcapng")
			pcapngOf(t, path, twoIfacePackets)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			at := pcapngBlockAt(t, data, 2) // the second packet's block
			data[at+4], data[at+5], data[at+6], data[at+7] = 7, 0, 0, 0
			require.NoError(t, os.WriteFile(path, data, 0o644))
		}, []string{"-r", "$DIR/in.pcapng", "-w", "$DIR/out"}},
		{"pcap-pcapng-gzip", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "in.pcapng")
			pcapngOf(t, path, twoIfacePackets)
			gzipFile(t, path, 0)
		}, []string{"-r", "$DIR/in.pcapng.gz", "-w", "$DIR/sim"}},
		{"err-pcapng-gzip-bad-block-length", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "in.pcapng")
			pcapngOf(t, path, twoIfacePackets)
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			at := pcapngBlockAt(t, data, 2)
			data[at+4], data[at+5], data[at+6], data[at+7] = 7, 0, 0, 0
			require.NoError(t, os.WriteFile(path, data, 0o644))
			gzipFile(t, path, 0)
		}, []string{"-r", "$DIR/in.pcapng.gz", "-w", "$DIR/out"}},
		{"err-pcap-gzip-truncated", func(t *testing.T, dir string) {
			path := filepath.Join(dir, "in.pcap")
			pcapOf(t, path, layers.LinkTypeEthernet, clientPackets[:2])
			data, err := os.ReadFile(path)
			require.NoError(t, err)
			var gz bytes.Buffer
			zw := gzip.NewWriter(&gz)
			_, err = zw.Write(data[:len(data)-10])
			require.NoError(t, err)
			require.NoError(t, zw.Close())
			require.NoError(t, os.WriteFile(path+".gz", gz.Bytes(), 0o644))
		}, []string{"-r", "$DIR/in.pcap.gz", "--in", "eth0", "-w", "$DIR/out"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.setup != nil {
				tc.setup(t, dir)
			}
			args := []string{"pcap"}
			if tc.name != "pcap-help" && !strings.HasPrefix(tc.name, "usage-") {
				args = append(args, pcapNode...)
			}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "$DIR", dir))
			}
			code, stdout, stderr := runCmd(args, "")
			var b strings.Builder
			fmt.Fprintf(&b, "exit: %d\n--- stdout\n%s--- stderr\n%s", code, stdout, stderr)
			files := outFiles(t, dir)
			for _, name := range files {
				require.True(t, strings.HasSuffix(name, ".pcap"), "a temporary file was left: %s", name)
				b.WriteString(dumpPcap(t, filepath.Join(dir, name)))
			}
			got := strings.ReplaceAll(b.String(), dir, "$DIR")
			path := filepath.Join("testdata", "golden", tc.name+".golden")
			golden.Check(t, path, []byte(got))

			switch {
			case strings.HasPrefix(tc.name, "err-"):
				assert.Equal(t, 1, code)
				assert.Empty(t, stdout)
				assert.Empty(t, files, "no output file on error")
				assert.Equal(t, 1, strings.Count(stderr, "\n"), "the error is one line")
			case strings.HasPrefix(tc.name, "usage-"):
				assert.Equal(t, 2, code)
			default:
				assert.Zero(t, code, stderr)
			}
		})
	}
}

// TestPcapFrames checks the frames written against what the netfilter
// package itself produces for the same input, field by field.
func TestPcapFrames(t *testing.T) {
	dir := t.TempDir()
	pcapngOf(t, filepath.Join(dir, "in.pcapng"), twoIfacePackets)
	code, _, stderr := runCmd(append(append([]string{"pcap"}, pcapNode...), "-r", filepath.Join(dir, "in.pcapng"), "-w", filepath.Join(dir, "o")), "")
	require.Equal(t, 0, code, stderr)

	read := func(name string) []gopacket.Packet {
		f, err := os.Open(filepath.Join(dir, name))
		require.NoError(t, err)
		defer f.Close()
		r, err := pcapgo.NewReader(f)
		require.NoError(t, err)
		assert.Equal(t, layers.LinkTypeEthernet, r.LinkType())
		var ps []gopacket.Packet
		for {
			data, ci, err := r.ReadPacketData()
			if err != nil {
				break
			}
			p := gopacket.NewPacket(data, layers.LayerTypeEthernet, gopacket.Default)
			p.Metadata().CaptureInfo = ci
			ps = append(ps, p)
		}
		return ps
	}
	eth1 := read("o-eth1.pcap")
	require.Len(t, eth1, 2, "the SYN and the ACK, DNATed")
	for i, want := range []time.Duration{time.Second, time.Second + 500*time.Microsecond} {
		ip := eth1[i].Layer(layers.LayerTypeIPv4).(*layers.IPv4)
		tcp := eth1[i].Layer(layers.LayerTypeTCP).(*layers.TCP)
		assert.Equal(t, "10.244.1.5", ip.DstIP.String())
		assert.Equal(t, layers.TCPPort(8080), tcp.DstPort)
		assert.Equal(t, uint8(63), ip.TTL, "TTL decremented on forward")
		assert.Equal(t, pcapT0.Add(want), eth1[i].Metadata().Timestamp, "original timestamp")
		assertChecksums(t, eth1[i])
	}
	eth0 := read("o-eth0.pcap")
	require.Len(t, eth0, 2, "the SYN-ACK un-DNATed, and the DNS query")
	ip := eth0[0].Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	tcp := eth0[0].Layer(layers.LayerTypeTCP).(*layers.TCP)
	assert.Equal(t, "10.96.0.10", ip.SrcIP.String())
	assert.Equal(t, layers.TCPPort(80), tcp.SrcPort)
	assertChecksums(t, eth0[0])
	assertChecksums(t, eth0[1])
}

// assertChecksums recomputes a frame's IPv4 and transport checksums with
// gopacket and compares them with the frame's.
func assertChecksums(t *testing.T, p gopacket.Packet) {
	t.Helper()
	ip := *p.Layer(layers.LayerTypeIPv4).(*layers.IPv4)
	ls := []gopacket.SerializableLayer{&ip}
	switch l := p.TransportLayer().(type) {
	case *layers.TCP:
		c := *l
		require.NoError(t, c.SetNetworkLayerForChecksum(&ip))
		ls = append(ls, &c, gopacket.Payload(l.Payload))
	case *layers.UDP:
		c := *l
		require.NoError(t, c.SetNetworkLayerForChecksum(&ip))
		ls = append(ls, &c, gopacket.Payload(l.Payload))
	}
	buf := gopacket.NewSerializeBuffer()
	require.NoError(t, gopacket.SerializeLayers(buf, gopacket.SerializeOptions{ComputeChecksums: true}, ls...))
	assert.Equal(t, p.Data()[14:14+int(ip.Length)], buf.Bytes(), "checksums as gopacket computes them (Ethernet padding left out)")
}

// TestPcapProgress: a progress line every 10000 packets, on stderr only.
func TestPcapProgress(t *testing.T) {
	dir := t.TempDir()
	f := buildPkt(t, pkt{in: "eth0", proto: "udp", src: "192.168.10.2", dst: "10.244.1.5", sport: 1000, dport: 53}, true)
	frames := make([][]byte, 20001)
	ats := make([]time.Duration, len(frames))
	for i := range frames {
		frames[i], ats[i] = f, time.Duration(i)*time.Millisecond
	}
	writePcap(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeEthernet, frames, ats)
	code, stdout, stderr := runCmd(append(append([]string{"pcap"}, pcapNode...), "-r", filepath.Join(dir, "in.pcap"), "--in", "eth0", "-w", filepath.Join(dir, "o")), "")
	require.Equal(t, 0, code, stderr)
	name := filepath.Join(dir, "in.pcap")
	assert.Equal(t, "packetwalk pcap: "+name+": 10000 packets read\npacketwalk pcap: "+name+": 20000 packets read\n", stderr)
	assert.Contains(t, stdout, "packets read: 20001 (")
	assert.Contains(t, stdout, "\nforwarded: 20001\n")
}

// TestPcapStdin reads the capture from standard input and refuses a
// second '-'.
func TestPcapStdin(t *testing.T) {
	dir := t.TempDir()
	pcapOf(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeEthernet, clientPackets[:1])
	data, err := os.ReadFile(filepath.Join(dir, "in.pcap"))
	require.NoError(t, err)
	code, stdout, stderr := runCmd(append(append([]string{"pcap"}, pcapNode...), "-r", "-", "--in", "eth0", "-w", filepath.Join(dir, "o")), string(data))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stdout, "packets read: 1 (<stdin>)\n")
	code, _, stderr = runCmd([]string{"pcap", "--rules", "-", "-r", "-", "--in", "eth0", "-w", filepath.Join(dir, "p")}, string(data))
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "standard input ('-') given to more than one flag")
}

// BenchmarkPcap measures the whole command per packet: read, decode,
// walk, rewrite and write.
func BenchmarkPcap(b *testing.B) {
	dir := b.TempDir()
	var frames [][]byte
	var ats []time.Duration
	for i := range 1000 {
		frames = append(frames, buildPkt(b, pkt{in: "eth0", proto: "tcp", src: "192.168.10.2", dst: "10.96.0.10", sport: uint16(10000 + i), dport: 80, flags: "S"}, true))
		ats = append(ats, time.Duration(i)*time.Microsecond)
	}
	writePcap(b, filepath.Join(dir, "in.pcap"), layers.LinkTypeEthernet, frames, ats)
	args := append(append([]string{"pcap"}, pcapNode...), "-r", filepath.Join(dir, "in.pcap"), "--in", "eth0", "-w", filepath.Join(dir, "o"))
	b.ResetTimer()
	for range b.N {
		if code, _, stderr := runCmd(args, ""); code != 0 {
			b.Fatal(stderr)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(frames)), "ns/packet")
}

// TestPcapNanos: a nanosecond capture is written with nanosecond
// timestamps, unchanged.
func TestPcapNanos(t *testing.T) {
	dir := t.TempDir()
	f := buildPkt(t, clientPackets[0], true)
	ts := pcapT0.Add(123456789 * time.Nanosecond)
	var b bytes.Buffer
	w := pcapgo.NewWriterNanos(&b)
	require.NoError(t, w.WriteFileHeader(65535, layers.LinkTypeEthernet))
	require.NoError(t, w.WritePacket(gopacket.CaptureInfo{Timestamp: ts, CaptureLength: len(f), Length: len(f)}, f))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "in.pcap"), b.Bytes(), 0o644))
	code, _, stderr := runCmd(append(append([]string{"pcap"}, pcapNode...), "-r", filepath.Join(dir, "in.pcap"), "--in", "eth0", "-w", filepath.Join(dir, "o")), "")
	require.Equal(t, 0, code, stderr)
	out, err := os.Open(filepath.Join(dir, "o-eth1.pcap"))
	require.NoError(t, err)
	defer out.Close()
	r, err := pcapgo.NewReader(out)
	require.NoError(t, err)
	assert.Equal(t, "nanoseconds", pcapResolution(t, filepath.Join(dir, "o-eth1.pcap")))
	_, ci, err := r.ReadPacketData()
	require.NoError(t, err)
	assert.Equal(t, ts, ci.Timestamp.UTC())
}

// gzipFile writes path.gz holding path's content less its last cut bytes.
func gzipFile(t *testing.T, path string, cut int) {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	_, err = zw.Write(data[:len(data)-cut])
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	require.NoError(t, os.WriteFile(path+".gz", gz.Bytes(), 0o644))
}
