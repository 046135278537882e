package netfilter

import (
	"encoding/binary"
	"net/netip"
	"testing"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// cut is one fragment to make: data offset, data length, more fragments,
// DF.
type cut struct {
	off, n int
	mf, df bool
}

// fragments4 cuts the IPv4 packet of an Ethernet frame into fragments.
func fragments4(t testing.TB, whole []byte, cuts ...cut) [][]byte {
	t.Helper()
	ip := whole[14:]
	hl := int(ip[0]&0xf) * 4
	data := ip[hl:]
	var out [][]byte
	for _, c := range cuts {
		f := append(append([]byte(nil), whole[:14+hl]...), data[c.off:c.off+c.n]...)
		h := f[14:]
		binary.BigEndian.PutUint16(h[2:], uint16(hl+c.n))
		ff := uint16(c.off / 8)
		if c.mf {
			ff |= 0x2000
		}
		if c.df {
			ff |= 0x4000
		}
		binary.BigEndian.PutUint16(h[6:], ff)
		ipChecksum(h[:hl])
		out = append(out, f)
	}
	return out
}

// fragments6 cuts the IPv6 packet of an Ethernet frame (no extension
// headers) into fragments with fragment headers of identification id.
func fragments6(t testing.TB, whole []byte, id uint32, cuts ...cut) [][]byte {
	t.Helper()
	ip := whole[14:]
	next, data := ip[6], ip[40:]
	var out [][]byte
	for _, c := range cuts {
		f := append([]byte(nil), whole[:14+40]...)
		fo := uint16(c.off/8) << 3
		if c.mf {
			fo |= 1
		}
		f = append(f, next, 0, byte(fo>>8), byte(fo), 0, 0, 0, 0)
		binary.BigEndian.PutUint32(f[len(f)-4:], id)
		f = append(f, data[c.off:c.off+c.n]...)
		f[14+6] = 44
		binary.BigEndian.PutUint16(f[14+4:], uint16(8+c.n))
		out = append(out, f)
	}
	return out
}

func udpDatagram4(t testing.TB, dst string, dport layers.UDPPort, n int) []byte {
	payload := make([]byte, n)
	for i := range payload {
		payload[i] = byte(i * 7)
	}
	return mkFrame(t, eth4(), ip4("192.168.10.2", dst, layers.IPProtocolUDP), &layers.UDP{SrcPort: 40000, DstPort: dport}, gopacket.Payload(payload))
}

// labCuts is the geometry of the kernel lab's experiment: 400, 800 and
// 208 bytes of the 1408-byte UDP datagram (1400 bytes of payload).
var labCuts = []cut{{0, 400, true, false}, {400, 800, true, false}, {1200, 208, false, false}}

func TestDefragDNAT(t *testing.T) {
	fh := dnatHost(t)
	whole := udpDatagram4(t, "10.96.0.10", 53, 1400)
	frags := fragments4(t, whole, labCuts...)
	// Out of order: the last first, then the middle, then the head.
	for _, i := range []int{2, 1} {
		res, err := fh.ReceiveFrame("eth0", frags[i])
		require.NoError(t, err)
		assert.Equal(t, Held, res.Disposition)
		assert.Equal(t, reasonHeld, res.Reason)
		assert.Nil(t, res.Frame)
	}
	res, err := fh.ReceiveFrame("eth0", frags[0])
	require.NoError(t, err)
	require.Equal(t, Forwarded, res.Disposition, res.Reason)
	assert.Equal(t, 20+1408, res.Packet.Length, "the hooks see the whole datagram")
	assert.Equal(t, uint16(0), res.Packet.FragOffset)
	assert.Equal(t, uint16(5353), res.Packet.DstPort)
	dnat := fh.Host.Ruleset(IPv4).Table(NAT).Chain("PREROUTING").Rules[1].Counters
	assert.Equal(t, Counters{Packets: 1, Bytes: 1428}, dnat)
	require.Len(t, res.Fragments, 3, "cut along the fragments received, in offset order")
	d := NewDecoder()
	var data []byte
	for i, f := range res.Fragments {
		p, err := d.Decode(f)
		require.NoError(t, err)
		assert.Equal(t, a("10.244.1.6"), p.Dst)
		assert.Equal(t, a("10.244.1.1"), p.Src, "MASQUERADE")
		assert.Equal(t, uint8(63), p.TTL)
		assert.Equal(t, uint16(0x1234), p.ID)
		assert.Equal(t, 20+labCuts[i].n, p.Length)
		assert.Equal(t, uint16(labCuts[i].off/8), p.FragOffset)
		ff := binary.BigEndian.Uint16(f[14+6:])
		assert.Equal(t, labCuts[i].mf, ff&0x2000 != 0, "MF")
		assert.Zero(t, ff&0x4000, "no DF")
		checkIPSum(t, f[14:34])
		data = append(data, f[34:]...)
	}
	// The UDP checksum, over the whole datagram, is right after NAT.
	w, err := d.Decode(res.Frame)
	require.NoError(t, err)
	assert.Equal(t, 1428, w.Length)
	assert.Equal(t, res.Frame[34:], data)
	checkSums(t, res.Frame)
}

func checkIPSum(t *testing.T, h []byte) {
	t.Helper()
	c := append([]byte(nil), h...)
	ipChecksum(c)
	assert.Equal(t, h[10:12], c[10:12], "IPv4 header checksum")
}

func TestDefragStatelessFragmentsCrossOneByOne(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.Exec("iptables -A FORWARD -p udp -m udp --dport 9999 -j ACCEPT"))
	require.NoError(t, h.Exec("iptables -A FORWARD -f -j ACCEPT"))
	fh := NewFrameHost(h)
	for _, f := range fragments4(t, udpDatagram4(t, "10.244.1.5", 9999, 1400), labCuts...) {
		res, err := fh.ReceiveFrame("eth0", f)
		require.NoError(t, err)
		assert.Equal(t, Forwarded, res.Disposition)
		assert.Nil(t, res.Fragments)
		assert.Len(t, res.Frame, len(f))
	}
	rules := h.Ruleset(IPv4).Table(Filter).Chain("FORWARD").Rules
	assert.Equal(t, Counters{Packets: 1, Bytes: 420}, rules[0].Counters)
	assert.Equal(t, Counters{Packets: 2, Bytes: 1048}, rules[1].Counters)
}

func TestDefragQueueRules(t *testing.T) {
	whole := udpDatagram4(t, "10.96.0.10", 53, 1400)
	for _, tc := range []struct {
		name  string
		cuts  []cut
		dispo []Disposition
		why   Reason // the reason of the last fragment
	}{
		{"exact duplicate ignored", []cut{labCuts[0], labCuts[1], labCuts[1], labCuts[2]},
			[]Disposition{Held, Held, Dropped, Forwarded}, NoReason},
		{"duplicate inside a run ignored", []cut{labCuts[0], labCuts[1], {0, 200, true, false}, labCuts[2]},
			[]Disposition{Held, Held, Dropped, Forwarded}, NoReason},
		{"partial overlap discards the queue", []cut{labCuts[0], {200, 400, true, false}, labCuts[1], labCuts[2]},
			[]Disposition{Held, Dropped, Held, Held}, reasonHeld},
		{"overlap then all again", []cut{labCuts[0], {200, 400, true, false}, labCuts[0], labCuts[1], labCuts[2]},
			[]Disposition{Held, Dropped, Held, Held, Forwarded}, NoReason},
		{"two different ends", []cut{labCuts[2], {1200, 200, false, false}},
			[]Disposition{Held, Dropped}, reasonBadFrag},
		{"last fragment ends before queued data", []cut{labCuts[1], {200, 200, false, false}},
			[]Disposition{Held, Dropped}, reasonBadFrag},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fh := dnatHost(t)
			frags := fragments4(t, whole, tc.cuts...)
			var res FrameResult
			for i, f := range frags {
				var err error
				res, err = fh.ReceiveFrame("eth0", f)
				require.NoError(t, err)
				assert.Equal(t, tc.dispo[i], res.Disposition, "fragment %d: %s", i+1, res.Reason)
			}
			assert.Equal(t, tc.why, res.Reason)
		})
	}
}

func TestDefragTimeout(t *testing.T) {
	fh := dnatHost(t)
	clock := fh.Host.Clock().(*ManualClock)
	frags := fragments4(t, udpDatagram4(t, "10.96.0.10", 53, 1400), labCuts...)
	for _, f := range frags[:2] {
		_, err := fh.ReceiveFrame("eth0", f)
		require.NoError(t, err)
	}
	clock.Advance(30 * time.Second) // ipfrag_time
	res, err := fh.ReceiveFrame("eth0", frags[2])
	require.NoError(t, err)
	assert.Equal(t, Held, res.Disposition, "the queue expired: a new one starts")
	clock.Advance(29 * time.Second)
	for _, f := range frags[:2] {
		res, err = fh.ReceiveFrame("eth0", f)
		require.NoError(t, err)
	}
	assert.Equal(t, Forwarded, res.Disposition, "within 30 s of its first fragment")
}

func TestDefragIPv6(t *testing.T) {
	fh := dnatHost(t)
	payload := make([]byte, 1000)
	whole := mkFrame(t, eth6(), ip6("fd00::1:2", "fd00:96::10", layers.IPProtocolUDP), &layers.UDP{SrcPort: 40003, DstPort: 53}, gopacket.Payload(payload))
	cuts := []cut{{0, 512, true, false}, {512, 496, false, false}}
	frags := fragments6(t, whole, 0xabcdef01, cuts...)
	res, err := fh.ReceiveFrame("eth0", frags[1])
	require.NoError(t, err)
	assert.Equal(t, Held, res.Disposition)
	res, err = fh.ReceiveFrame("eth0", frags[0])
	require.NoError(t, err)
	require.Equal(t, Forwarded, res.Disposition, res.Reason)
	assert.Equal(t, 40+1008, res.Packet.Length)
	assert.Equal(t, uint16(5353), res.Packet.DstPort)
	checkSums(t, res.Frame)
	require.Len(t, res.Fragments, 2)
	for i, f := range res.Fragments {
		ip := f[14:]
		assert.Equal(t, byte(44), ip[6], "fragment header")
		assert.Equal(t, [16]byte(a("fd00:244::5").As16()), [16]byte(ip[24:40]))
		assert.Equal(t, 8+cuts[i].n, int(binary.BigEndian.Uint16(ip[4:6])))
		fh := ip[40:48]
		assert.Equal(t, byte(inet.UDP), fh[0])
		assert.Equal(t, uint16(cuts[i].off)|uint16(b2i(cuts[i].mf)), binary.BigEndian.Uint16(fh[2:4]))
		assert.Equal(t, uint32(0xabcdef01), binary.BigEndian.Uint32(fh[4:8]))
		assert.Equal(t, res.Frame[14+40+cuts[i].off:14+40+cuts[i].off+cuts[i].n], ip[48:])
	}
}

func TestReceiveFragmentPacketWithConntrackIsHeld(t *testing.T) {
	fh := dnatHost(t)
	p := Packet{Proto: inet.UDP, Src: a("192.168.10.2"), Dst: a("10.96.0.10"), FragOffset: 50, Length: 100, TTL: 64}
	res := fh.Host.Receive("eth0", p)
	assert.Equal(t, Held, res.Disposition)
	assert.Equal(t, "held", res.Disposition.String())
	assert.Equal(t, reasonHeld, res.Reason)
	assert.Zero(t, fh.Host.Conntrack().Len())
}

// TestDefragProperty cuts a datagram into random 8-byte-aligned pieces,
// sends them in a random order, and checks that only the last one
// completes the packet, which the hooks see whole and which leaves cut
// exactly as it came, in offset order.
func TestDefragProperty(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		h := NewHost(HostConfig{})
		require.NoError(rt, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
		require.NoError(rt, h.AddInterface("cni0", netip.MustParsePrefix("10.244.1.1/24")))
		require.NoError(rt, h.Exec("iptables -A FORWARD -m conntrack --ctstate NEW -j ACCEPT"))
		fh := NewFrameHost(h)
		size := rapid.IntRange(16, 3000).Draw(rt, "payload")
		whole := udpDatagram4(t, "10.244.1.5", 7, size)
		total := 8 + size
		var cuts []cut
		for off := 0; off < total; {
			n := min(8*rapid.IntRange(1, 100).Draw(rt, "units"), total-off)
			cuts = append(cuts, cut{off: off, n: n, mf: off+n < total})
			off += n
		}
		if len(cuts) == 1 {
			return // not fragmented
		}
		frags := fragments4(t, whole, cuts...)
		order := rapid.Permutation(func() []int {
			o := make([]int, len(cuts))
			for i := range o {
				o[i] = i
			}
			return o
		}()).Draw(rt, "order")
		for k, i := range order {
			res, err := fh.ReceiveFrame("eth0", frags[i])
			require.NoError(rt, err)
			if k < len(order)-1 {
				require.Equal(rt, Held, res.Disposition)
				continue
			}
			require.Equal(rt, Forwarded, res.Disposition, res.Reason)
			require.Equal(rt, 20+total, res.Packet.Length)
			require.Len(rt, res.Fragments, len(cuts))
			for j, f := range res.Fragments {
				want := append([]byte(nil), frags[j]...)
				want[14+8]-- // TTL
				ipChecksum(want[14:34])
				require.Equal(rt, want, f, "fragment %d", j)
			}
		}
	})
}

// FuzzDefrag feeds arbitrary raw IP packets, two at a time, to a host
// that reassembles: nothing may panic, and a completed packet's
// fragments must add up to it.
func FuzzDefrag(f *testing.F) {
	whole := udpDatagram4(f, "10.96.0.10", 53, 100)
	for _, fr := range fragments4(f, whole, cut{0, 56, true, false}, cut{56, 52, false, false}) {
		f.Add(fr[14:], fr[14:])
	}
	frags := fragments4(f, whole, cut{0, 56, true, false}, cut{56, 52, false, false})
	f.Add(frags[1][14:], frags[0][14:])
	v6 := mkFrame(f, eth6(), ip6("fd00::1:2", "fd00:96::10", layers.IPProtocolUDP), &layers.UDP{SrcPort: 1, DstPort: 53}, gopacket.Payload(make([]byte, 40)))
	f6 := fragments6(f, v6, 7, cut{0, 24, true, false}, cut{24, 24, false, false})
	f.Add(f6[0][14:], f6[1][14:])
	f.Fuzz(func(t *testing.T, a, b []byte) {
		fh := dnatHost(t)
		fh.Raw = true
		for _, p := range [][]byte{a, b} {
			res, err := fh.ReceiveFrame("eth0", p)
			if err != nil || res.Fragments == nil {
				continue
			}
			n := 0
			for _, x := range res.Fragments {
				n += len(x)
			}
			require.GreaterOrEqual(t, n, len(res.Frame))
		}
	})
}

// TestRefragmentOptions: the reassembled packet leaves with its IPv4
// options in the first fragment only; later fragments keep the header
// length but carry NOPs where options without the copied flag were
// (ip_options_fragment; TestKernelDefrag's conntrack-ip-options case).
func TestRefragmentOptions(t *testing.T) {
	fh := dnatHost(t)
	whole := withIPv4Options(udpDatagram4(t, "10.96.0.10", 53, 1400), labOptions)
	var res FrameResult
	for _, f := range fragments4(t, whole, labCuts...) {
		var err error
		res, err = fh.ReceiveFrame("eth0", f)
		require.NoError(t, err)
	}
	require.Equal(t, Forwarded, res.Disposition, res.Reason)
	require.Len(t, res.Fragments, 3)
	for i, f := range res.Fragments {
		want := labOptions
		if i > 0 {
			want = []byte{0x9e, 4, 0xaa, 0xbb, 1, 1, 1, 1}
		}
		assert.Equal(t, byte(0x47), f[14], "fragment %d: IHL 7", i+1)
		assert.Equal(t, want, f[34:42], "fragment %d options", i+1)
		assert.Equal(t, 28+labCuts[i].n, int(binary.BigEndian.Uint16(f[16:18])), "fragment %d total length", i+1)
		checkIPSum(t, f[14:42])
	}
}

func TestNopUncopiedOptions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		in, want []byte
	}{
		{"copied kept, other NOPed", []byte{0x9e, 4, 1, 2, 0x1e, 4, 3, 4}, []byte{0x9e, 4, 1, 2, 1, 1, 1, 1}},
		{"record route NOPed", []byte{7, 7, 4, 0, 0, 0, 0, 0}, []byte{1, 1, 1, 1, 1, 1, 1, 0}},
		{"stops at End of Options", []byte{0, 0x1e, 4, 0}, []byte{0, 0x1e, 4, 0}},
		{"NOPs skipped", []byte{1, 1, 0x1e, 2}, []byte{1, 1, 1, 1}},
		{"malformed length stops", []byte{0x1e, 9, 0, 0}, []byte{0x1e, 9, 0, 0}},
		{"length below 2 stops", []byte{0x1e, 1, 0x1e, 2}, []byte{0x1e, 1, 0x1e, 2}},
		{"type without length byte", []byte{1, 1, 1, 0x1e}, []byte{1, 1, 1, 0x1e}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := append([]byte(nil), tc.in...)
			nopUncopiedOptions(b)
			assert.Equal(t, tc.want, b)
		})
	}
}
