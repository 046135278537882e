package main

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"
)

// capInfo is what the command needs to know about one captured frame.
type capInfo struct {
	ts      time.Time
	capLen  int
	origLen int
	ifname  string // pcapng interface name, "" for pcap
	// link is the link type; pcapgo keeps only its low 8 bits, so pcap
	// files' is read from the header here.
	link  uint32
	where string // what offset counts ("file byte", "decompressed byte")
	// offset is the file byte where the frame's record (pcap) or block
	// (pcapng) starts (in a gzipped capture: in the decompressed data),
	// -1 when unknown.
	offset int64
}

// captureReader reads pcap or pcapng through pcapgo, reusing its buffer
// for every frame.
type captureReader struct {
	pcap *pcapgo.Reader
	ng   *pcapgo.NgReader
	off  int64 // pcap: the file byte of the next record
	link uint32
	// pcapng: the buffered reader pcapgo reads through (it keeps ours,
	// being large enough) over a byte counter, so the file byte of the
	// next block is counted minus buffered; order is the current
	// section's byte order.
	br    *bufio.Reader
	count *countingReader
	order binary.ByteOrder
	// where names what offsets count: "file byte", or "decompressed
	// byte" in a gzipped capture.
	where string
	// nanoPcap: the pcap magic says nanosecond timestamps (read here:
	// pcapgo's Reader.Resolution has them the wrong way round).
	nanoPcap bool
}

// Magic numbers of the capture formats, as the first 4 bytes read
// big-endian.
const (
	magicPcapngSHB = 0x0a0d0d0a
	magicPcapUs    = 0xa1b2c3d4
	magicPcapNs    = 0xa1b23c4d
	magicPcapUsLE  = 0xd4c3b2a1
	magicPcapNsLE  = 0x4d3cb2a1
)

// openCapture recognises the format by its magic number and reads the
// file header. A gzipped file (tcpdump -w - | gzip) is decompressed here
// and its content recognised the same way, pcap or pcapng; offsets then
// count decompressed bytes, the only ones a reader can seek to with zcat.
func openCapture(r io.Reader) (*captureReader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	if head, _ := br.Peek(2); len(head) == 2 && head[0] == 0x1f && head[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("file byte 0: bad gzip header: %v", err)
		}
		return openStream(zr, "decompressed byte")
	}
	return openStream(br, "file byte")
}

// openStream reads the header of an uncompressed pcap or pcapng stream;
// where names what its offsets count.
func openStream(r io.Reader, where string) (*captureReader, error) {
	cr := &countingReader{r: r}
	br := bufio.NewReaderSize(cr, 1<<16)
	head, err := br.Peek(24)
	if len(head) == 0 {
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s 0: %v: expected a pcap or pcapng header", where, err)
		}
		return nil, fmt.Errorf("empty file: expected a pcap or pcapng header")
	}
	if len(head) < 4 {
		return nil, fmt.Errorf("%s 0: truncated header: expected a pcap or pcapng header", where)
	}
	switch {
	case head[0] == 0x1f && head[1] == 0x8b:
		return nil, fmt.Errorf("%s 0: gzip inside gzip: expected a pcap or pcapng header", where)
	case binary.BigEndian.Uint32(head) == magicPcapngSHB:
		ng, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, fmt.Errorf("%s 0: bad pcapng section header: %v", where, err)
		}
		order := binary.ByteOrder(binary.LittleEndian)
		if len(head) >= 12 && binary.BigEndian.Uint32(head[8:12]) == 0x1a2b3c4d {
			order = binary.BigEndian
		}
		return &captureReader{ng: ng, off: -1, br: br, count: cr, order: order, where: where}, nil
	default:
		switch binary.BigEndian.Uint32(head) {
		case magicPcapUs, magicPcapNs, magicPcapUsLE, magicPcapNsLE:
		default:
			return nil, fmt.Errorf("%s 0: magic 0x%08x: expected a pcap (0xa1b2c3d4, 0xa1b23c4d) or pcapng (0x0a0d0d0a) file", where, binary.BigEndian.Uint32(head))
		}
	}
	pr, err := pcapgo.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("%s 0: bad pcap header: %v", where, err)
	}
	// pcapgo sizes its buffer by the header's snap length and refuses
	// longer records: bound it so a corrupt header cannot allocate GiBs.
	if s := pr.Snaplen(); s == 0 || s > pcapSnaplen {
		pr.SetSnaplen(pcapSnaplen)
	}
	c := &captureReader{pcap: pr, off: 24, link: uint32(pr.LinkType()), where: where}
	if len(head) == 24 {
		order := binary.ByteOrder(binary.BigEndian)
		if head[0] == 0xd4 || head[0] == 0x4d {
			order = binary.LittleEndian
		}
		c.link = order.Uint32(head[20:24])
		m := binary.BigEndian.Uint32(head)
		c.nanoPcap = m == magicPcapNs || m == magicPcapNsLE
	}
	return c, nil
}

// next returns the next frame (valid until the following call), or
// io.EOF at the clean end of the file.
func (c *captureReader) next() (data []byte, info capInfo, err error) {
	defer func() {
		if r := recover(); r != nil { // a malformed file must not crash the run
			data, err = nil, fmt.Errorf("malformed record: %v", r)
		}
	}()
	var ci gopacket.CaptureInfo
	if c.ng != nil {
		block, berr := c.nextPacketBlock()
		data, ci, err = c.ng.ZeroCopyReadPacketData()
		if err != nil && !(errors.Is(err, io.EOF) && ci.CaptureLength == 0 && berr == nil) {
			if berr != nil {
				err = berr
			} else if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				err = fmt.Errorf("truncated block: the file ends inside it")
			}
			return nil, info, fmt.Errorf("%s %d: %w", c.where, block, err)
		}
		c.off = block // for the capInfo below
	} else {
		data, ci, err = c.pcap.ZeroCopyReadPacketData()
	}
	if err != nil {
		if errors.Is(err, io.EOF) && ci.CaptureLength == 0 {
			return nil, info, io.EOF
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			err = fmt.Errorf("truncated record: the file ends inside it")
		}
		if c.off >= 0 {
			err = fmt.Errorf("%s %d: %w", c.where, c.off, err)
		}
		return nil, info, err
	}
	info = capInfo{ts: ci.Timestamp, capLen: ci.CaptureLength, origLen: ci.Length, offset: -1, where: c.where}
	if c.ng != nil {
		info.offset, c.off = c.off, -1
		if len(ci.AncillaryData) > 0 {
			l, _ := ci.AncillaryData[0].(layers.LinkType)
			info.link = uint32(l)
		}
		if i, err := c.ng.Interface(ci.InterfaceIndex); err == nil {
			info.ifname = i.Name
		}
	} else {
		info.link = c.link
		if c.off >= 0 {
			info.offset = c.off + 16
			c.off += 16 + int64(len(data))
		}
	}
	return data, info, nil
}

// nanos reports whether the input's timestamps are finer than a
// microsecond, so the output keeps them.
func (c *captureReader) nanos() bool {
	if c.pcap != nil {
		return c.nanoPcap
	}
	for i := range c.ng.NInterfaces() {
		if f, err := c.ng.Interface(i); err == nil && f.Resolution().ToDuration() < time.Microsecond {
			return true
		}
	}
	return false
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// pcapng block types.
const (
	ngSectionHeader    = 0x0a0d0d0a
	ngPacketObsolete   = 2
	ngSimplePacket     = 3
	ngEnhancedPacket   = 6
	ngMinBlockLen      = 12
	ngMaxPeekBlockSize = 1 << 16
)

// nextPacketBlock returns the file byte of the block pcapgo's next read
// returns a packet from, walking the headers of the blocks it skips
// (interface descriptions, statistics, name resolution, new sections).
// A block header that is cut short or announces an impossible length is
// an error naming that block's file byte, which pcapgo would report with
// no position at all.
func (c *captureReader) nextPacketBlock() (int64, error) {
	pos := c.count.n - int64(c.br.Buffered())
	for skip := 0; ; {
		h, err := c.br.Peek(skip + 12)
		at := pos + int64(skip)
		if len(h) == skip {
			return at, nil // the clean end, or what pcapgo reports
		}
		if err != nil {
			return at, fmt.Errorf("truncated block: the file ends %d bytes into it, before its 12-byte minimum", len(h)-skip)
		}
		h = h[skip:]
		typ := binary.BigEndian.Uint32(h[0:4])
		if typ == ngSectionHeader {
			switch binary.BigEndian.Uint32(h[8:12]) {
			case 0x1a2b3c4d:
				c.order = binary.BigEndian
			case 0x4d3c2b1a:
				c.order = binary.LittleEndian
			default:
				return at, fmt.Errorf("section header byte-order magic 0x%08x: expected 0x1a2b3c4d", binary.BigEndian.Uint32(h[8:12]))
			}
		}
		if c.order == nil {
			c.order = binary.LittleEndian
		}
		typ = c.order.Uint32(h[0:4])
		n := int(c.order.Uint32(h[4:8]))
		if n < ngMinBlockLen || n%4 != 0 {
			return at, fmt.Errorf("block type 0x%x: total length %d: expected a multiple of 4, at least %d", typ, n, ngMinBlockLen)
		}
		switch typ {
		case ngEnhancedPacket, ngSimplePacket, ngPacketObsolete:
			return at, nil
		}
		if skip+n > ngMaxPeekBlockSize {
			return at, nil // too long to look past: pcapgo reads it
		}
		skip += n
	}
}
