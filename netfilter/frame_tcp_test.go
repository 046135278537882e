package netfilter

import (
	"encoding/binary"
	"testing"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func sackOpt(edges ...uint32) layers.TCPOption {
	var b []byte
	for _, e := range edges {
		b = binary.BigEndian.AppendUint32(b, e)
	}
	return layers.TCPOption{OptionType: 5, OptionLength: uint8(2 + len(b)), OptionData: b}
}

func TestDecodeTCPSequenceFields(t *testing.T) {
	for _, tc := range []struct {
		name       string
		tcp        layers.TCP
		payload    int
		wantWScale uint8
		wantSACK   uint32
		wantHL     uint8
	}{
		{"plain ack", layers.TCP{Seq: 7, Ack: 9, ACK: true, Window: 502}, 10, 0, 0, 20},
		{"window scale 14", layers.TCP{SYN: true, Seq: 1, Window: 65535,
			Options: []layers.TCPOption{{OptionType: 3, OptionLength: 3, OptionData: []byte{14}}}}, 0, 14, 0, 24},
		{"window scale above 14 kept as sent", layers.TCP{SYN: true, Window: 1,
			Options: []layers.TCPOption{{OptionType: 3, OptionLength: 3, OptionData: []byte{20}}}}, 0, 20, 0, 24},
		{"sack highest right edge", layers.TCP{ACK: true, Seq: 5, Ack: 1000, Window: 10,
			Options: []layers.TCPOption{{OptionType: 1}, {OptionType: 1}, sackOpt(2000, 3000, 4000, 5000, 1500, 1600)}}, 0, 0, 5000, 48},
		{"sack across wrap", layers.TCP{ACK: true, Ack: 0xfffffff0, Window: 10,
			Options: []layers.TCPOption{{OptionType: 1}, {OptionType: 1}, sackOpt(0xfffffff8, 0xfffffffc, 0x10, 0x20)}}, 0, 0, 0x20, 40},
		{"sack of malformed length starts at ack", layers.TCP{ACK: true, Ack: 77, Window: 10,
			Options: []layers.TCPOption{{OptionType: 5, OptionLength: 6, OptionData: []byte{0, 0, 0, 99}}}}, 0, 0, 77, 28},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := tc.tcp
			x.SrcPort, x.DstPort = 1000, 80
			f := mkFrame(t, eth4(), ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolTCP), &x, gopacket.Payload(make([]byte, tc.payload)))
			p, err := NewDecoder().Decode(f)
			require.NoError(t, err)
			assert.Equal(t, tc.tcp.Seq, p.Seq)
			assert.Equal(t, tc.tcp.Ack, p.Ack)
			assert.Equal(t, tc.tcp.Window, p.Window)
			assert.Equal(t, tc.wantWScale, p.WScale)
			assert.Equal(t, tc.wantSACK, p.SACKEnd)
			assert.Equal(t, tc.wantHL, p.TCPHeaderLen)
			assert.Equal(t, uint16(20), p.IPHeaderLen)
			assert.Equal(t, tc.payload, tcpSegmentLen(&p))
		})
	}
}

func TestDecodeIPv6HeaderLenWithExtensions(t *testing.T) {
	// Hop-by-hop (8 bytes) then destination options (8 bytes) then TCP.
	hbh := []byte{60, 0, 1, 4, 0, 0, 0, 0}
	dst := []byte{6, 0, 1, 4, 0, 0, 0, 0}
	tcp := make([]byte, 20)
	binary.BigEndian.PutUint32(tcp[4:], 42)
	tcp[12], tcp[13] = 5<<4, byte(inet.SYN)
	f := mkFrame(t, eth6(), ip6("fd00::2", "fd00::1", 0), gopacket.Payload(append(append(hbh, dst...), tcp...)))
	p, err := NewDecoder().Decode(f)
	require.NoError(t, err)
	assert.Equal(t, inet.TCP, p.Proto)
	assert.Equal(t, uint16(56), p.IPHeaderLen)
	assert.Equal(t, uint8(20), p.TCPHeaderLen)
	assert.Equal(t, uint32(42), p.Seq)
}

func TestAppendFrameSequenceFields(t *testing.T) {
	f := mkFrame(t, eth4(), ip4("192.168.10.2", "10.96.0.10", layers.IPProtocolTCP),
		&layers.TCP{SrcPort: 1000, DstPort: 80, ACK: true, Seq: 100, Ack: 200, Window: 300}, gopacket.Payload("data"))
	d := NewDecoder()
	p, err := d.Decode(f)
	require.NoError(t, err)
	t.Run("kept", func(t *testing.T) {
		q := p
		q.Dst = a("10.244.1.5") // NAT: the numbers stay
		out, err := d.AppendFrame(nil, f, q)
		require.NoError(t, err)
		got, err := NewDecoder().Decode(out)
		require.NoError(t, err)
		assert.Equal(t, [3]uint32{100, 200, 300}, [3]uint32{got.Seq, got.Ack, uint32(got.Window)})
		checkSums(t, out)
	})
	t.Run("rewritten", func(t *testing.T) {
		q := p
		q.Seq, q.Ack, q.Window = 0xdeadbeef, 1, 65535
		out, err := d.AppendFrame(nil, f, q)
		require.NoError(t, err)
		got, err := NewDecoder().Decode(out)
		require.NoError(t, err)
		assert.Equal(t, [3]uint32{0xdeadbeef, 1, 65535}, [3]uint32{got.Seq, got.Ack, uint32(got.Window)})
		checkSums(t, out)
	})
}
