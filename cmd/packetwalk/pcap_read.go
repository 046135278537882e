package main

import (
	"bufio"
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
	link uint32
	// offset is the file byte where the frame starts, -1 when unknown
	// (pcapng and gzipped pcap: their readers buffer ahead).
	offset int64
}

// captureReader reads pcap or pcapng through pcapgo, reusing its buffer
// for every frame.
type captureReader struct {
	pcap *pcapgo.Reader
	ng   *pcapgo.NgReader
	off  int64 // pcap: the file byte of the next record, -1 when gzipped
	link uint32
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
// file header.
func openCapture(r io.Reader) (*captureReader, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	head, err := br.Peek(24)
	if len(head) == 0 {
		return nil, fmt.Errorf("empty file: expected a pcap or pcapng header")
	}
	if err != nil && len(head) < 2 {
		return nil, fmt.Errorf("file byte 0: truncated header: expected a pcap or pcapng header")
	}
	gz := head[0] == 0x1f && head[1] == 0x8b
	if len(head) < 4 && !gz {
		return nil, fmt.Errorf("file byte 0: truncated header: expected a pcap or pcapng header")
	}
	switch {
	case gz:
	case binary.BigEndian.Uint32(head) == magicPcapngSHB:
		ng, err := pcapgo.NewNgReader(br, pcapgo.NgReaderOptions{WantMixedLinkType: true})
		if err != nil {
			return nil, fmt.Errorf("file byte 0: bad pcapng section header: %v", err)
		}
		return &captureReader{ng: ng, off: -1}, nil
	default:
		switch binary.BigEndian.Uint32(head) {
		case magicPcapUs, magicPcapNs, magicPcapUsLE, magicPcapNsLE:
		default:
			return nil, fmt.Errorf("file byte 0: magic 0x%08x: expected a pcap (0xa1b2c3d4, 0xa1b23c4d) or pcapng (0x0a0d0d0a) file", binary.BigEndian.Uint32(head))
		}
	}
	pr, err := pcapgo.NewReader(br)
	if err != nil {
		return nil, fmt.Errorf("file byte 0: bad pcap header: %v", err)
	}
	// pcapgo sizes its buffer by the header's snap length and refuses
	// longer records: bound it so a corrupt header cannot allocate GiBs.
	if s := pr.Snaplen(); s == 0 || s > pcapSnaplen {
		pr.SetSnaplen(pcapSnaplen)
	}
	c := &captureReader{pcap: pr, off: 24, link: uint32(pr.LinkType())}
	if gz {
		c.off = -1
	} else if len(head) == 24 {
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
		data, ci, err = c.ng.ZeroCopyReadPacketData()
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
			err = fmt.Errorf("file byte %d: %w", c.off, err)
		}
		return nil, info, err
	}
	info = capInfo{ts: ci.Timestamp, capLen: ci.CaptureLength, origLen: ci.Length, offset: -1}
	if c.ng != nil {
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
