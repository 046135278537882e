package main

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/google/gopacket/layers"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPcapngOffsets checks that every packet of a pcapng names the file
// byte of its enhanced packet block, interface blocks in between
// included.
func TestPcapngOffsets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.pcapng")
	ps := append(append([]pkt(nil), twoIfacePackets...), pkt{in: "cali9", proto: "udp", src: "10.244.1.9", dst: "192.168.10.2", sport: 1, dport: 2})
	pcapngOf(t, path, ps)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	c, err := openCapture(bytes.NewReader(data))
	require.NoError(t, err)
	for i := range ps {
		_, info, err := c.next()
		require.NoError(t, err)
		assert.Equal(t, int64(pcapngBlockAt(t, data, i+1)), info.offset, "packet %d", i+1)
		assert.Equal(t, ps[i].in, info.ifname)
	}
	_, _, err = c.next()
	assert.ErrorIs(t, err, io.EOF)
}

// TestPcapngDamage cuts or corrupts a pcapng at every block and checks
// the error names that block's file byte.
func TestPcapngDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "in.pcapng")
	pcapngOf(t, path, twoIfacePackets)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	for n := 1; n <= len(twoIfacePackets); n++ {
		at := pcapngBlockAt(t, data, n)
		for _, tc := range []struct {
			name string
			file []byte
			want string
		}{
			{"cut in the header", data[:at+6], "truncated block: the file ends 6 bytes into it"},
			{"cut in the body", data[:at+30], "truncated block: the file ends inside it"},
			{"bad length", func() []byte {
				d := bytes.Clone(data)
				d[at+4], d[at+5], d[at+6], d[at+7] = 13, 0, 0, 0
				return d
			}(), "block type 0x6: total length 13: expected a multiple of 4, at least 12"},
		} {
			c, err := openCapture(bytes.NewReader(tc.file))
			require.NoError(t, err)
			for i := 1; i < n; i++ {
				_, _, err := c.next()
				require.NoError(t, err)
			}
			_, _, err = c.next()
			require.Error(t, err, "%s, packet %d", tc.name, n)
			assert.Contains(t, err.Error(), "file byte "+itoa(at)+": "+tc.want, "%s, packet %d", tc.name, n)
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func gzipped(t *testing.T, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	_, err := zw.Write(data)
	require.NoError(t, err)
	require.NoError(t, zw.Close())
	return b.Bytes()
}

// TestGzipCapture reads gzipped pcap and pcapng: the format is recognised
// after decompression, and offsets name decompressed bytes, the same
// numbers as in the plain file.
func TestGzipCapture(t *testing.T) {
	dir := t.TempDir()
	pcapngOf(t, filepath.Join(dir, "in.pcapng"), twoIfacePackets)
	ng, err := os.ReadFile(filepath.Join(dir, "in.pcapng"))
	require.NoError(t, err)
	pcapOf(t, filepath.Join(dir, "in.pcap"), layers.LinkTypeRaw, clientPackets[:2])
	pc, err := os.ReadFile(filepath.Join(dir, "in.pcap"))
	require.NoError(t, err)

	t.Run("pcapng", func(t *testing.T) {
		c, err := openCapture(bytes.NewReader(gzipped(t, ng)))
		require.NoError(t, err)
		for i, p := range twoIfacePackets {
			_, info, err := c.next()
			require.NoError(t, err)
			assert.Equal(t, int64(pcapngBlockAt(t, ng, i+1)), info.offset, "packet %d", i+1)
			assert.Equal(t, "decompressed byte", info.where)
			assert.Equal(t, p.in, info.ifname)
			assert.Equal(t, uint32(layers.LinkTypeEthernet), info.link)
		}
		_, _, err = c.next()
		assert.ErrorIs(t, err, io.EOF)
	})
	t.Run("pcap", func(t *testing.T) {
		c, err := openCapture(bytes.NewReader(gzipped(t, pc)))
		require.NoError(t, err)
		off := int64(24)
		for i := range 2 {
			data, info, err := c.next()
			require.NoError(t, err)
			assert.Equal(t, off+16, info.offset, "packet %d", i+1)
			assert.Equal(t, "decompressed byte", info.where)
			// Read from the header, not pcapgo's low 8 bits of it.
			assert.Equal(t, uint32(layers.LinkTypeRaw), info.link)
			off += 16 + int64(len(data))
		}
	})
	t.Run("pcapng cut inside a block", func(t *testing.T) {
		at := pcapngBlockAt(t, ng, 2)
		c, err := openCapture(bytes.NewReader(gzipped(t, ng[:at+30])))
		require.NoError(t, err)
		_, _, err = c.next()
		require.NoError(t, err)
		_, _, err = c.next()
		require.Error(t, err)
		assert.Equal(t, "decompressed byte "+itoa(at)+": truncated block: the file ends inside it", err.Error())
	})
	t.Run("pcapng bad block length", func(t *testing.T) {
		d := bytes.Clone(ng)
		at := pcapngBlockAt(t, d, 1)
		d[at+4], d[at+5], d[at+6], d[at+7] = 13, 0, 0, 0
		c, err := openCapture(bytes.NewReader(gzipped(t, d)))
		require.NoError(t, err)
		_, _, err = c.next()
		require.Error(t, err)
		assert.Equal(t, "decompressed byte "+itoa(at)+": block type 0x6: total length 13: expected a multiple of 4, at least 12", err.Error())
	})
	for _, tc := range []struct {
		name string
		file []byte
		want string
	}{
		{"not a capture", gzipped(t, []byte("*filter\nCOMMIT\n")), "decompressed byte 0: magic 0x2a66696c: expected a pcap (0xa1b2c3d4, 0xa1b23c4d) or pcapng (0x0a0d0d0a) file"},
		{"gzip in gzip", gzipped(t, gzipped(t, pc)), "decompressed byte 0: gzip inside gzip: expected a pcap or pcapng header"},
		{"short content", gzipped(t, []byte{0x0a, 0x0d}), "decompressed byte 0: truncated header: expected a pcap or pcapng header"},
		{"bad gzip header", []byte{0x1f, 0x8b, 0x01}, "file byte 0: bad gzip header: unexpected EOF"},
		{"cut gzip stream", gzipped(t, ng)[:20], "decompressed byte 0: bad pcapng section header: unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openCapture(bytes.NewReader(tc.file))
			require.Error(t, err)
			assert.Equal(t, tc.want, err.Error())
		})
	}
}
