package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/google/gopacket"
	"github.com/google/gopacket/layers"
	"github.com/google/gopacket/pcapgo"

	"github.com/packetwalk/packetwalk/netfilter"
)

var pcapCmd = command{
	usage: "packetwalk pcap [node input] -r IN.pcap|IN.pcapng [--in IFACE|local] -w OUT_PREFIX",
	about: `
Runs every packet of a capture file through one simulated node, in order
(conntrack state carries over, and the clock follows the capture's
timestamps), and writes what leaves the node, per output interface, to
OUT_PREFIX-IFACE.pcap (Ethernet link type, original timestamps).
REJECT's replies (TCP reset, ICMP error) go to the file of the interface
the rejected packet came in on.

-r reads pcap (microsecond or nanosecond) or pcapng, either one plain or
gzipped, with Ethernet or raw IP link types ('-' = stdin). A packet's receiving
interface is --in IFACE, or else the name in the pcapng interface block
it was captured on ('tcpdump -i eth0 -w', 'dumpcap -i eth0 -i eth1'). A
capture of 'tcpdump -i any' (Linux cooked link type) is refused: capture
on each interface instead. '--in local' says every packet is sent by a
local process: it crosses OUTPUT and POSTROUTING (and, to a local
address, PREROUTING and INPUT on lo) instead of arriving on an
interface; packets of a pcapng interface named lo are sent locally too,
since lo only carries what the host itself sends. A REJECT reply to a
locally sent packet goes to OUT_PREFIX-lo.pcap.

When a rule needs conntrack, fragments are reassembled before the hooks
as the kernel does: a fragment that does not complete its packet is
counted as held, and the reassembled packet leaves cut along the
fragments it was made of.

Ethernet addresses are copied from the input frame (the node's neighbours
are not modelled; a REJECT reply swaps them); raw IP packets leave with
zero Ethernet addresses. Frames are written without Ethernet padding, as
a capture of the kernel's transmit path shows them. Frames that are not
IPv4 or IPv6 (ARP, LLDP...) do not reach netfilter: they are counted as
skipped.

The summary (packets read, count per disposition, files written) goes to
stdout, a progress line to stderr every 10000 packets. A frame that
cannot be decoded, or a damaged record or block, stops the run with its
packet number, its byte offset in the file (of the record's frame in a
pcap, of the block in a pcapng; "decompressed byte N" in a gzipped
file) and the offending byte in the frame; output files are written to
temporary files and renamed only when the whole capture ran.
` + nodeFlagsHelp,
	examples: `  packetwalk pcap --node ./node1 -r eth0.pcap --in eth0 -w out
      (writes out-eth1.pcap, out-cali7.pcap, ...)
  dumpcap -i eth0 -i eth1 -w trace.pcapng
  packetwalk pcap --rules iptables-save --addr eth0=192.168.10.1/24 \
      --addr eth1=10.244.1.1/24 -r trace.pcapng -w sim
  tcpdump -i eth0 -w - | packetwalk pcap --node ./node1 --in eth0 -r - -w live
`,
}

// pcapSnaplen is the snap length of the files written, tcpdump's default;
// longer input records are refused, so nothing is cut.
const pcapSnaplen = 262144

// pcapProgressEvery is how often (in packets) the progress line is written.
const pcapProgressEvery = 10000

func runPcap(c *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("pcap", flag.ContinueOnError)
	var ni nodeInput
	ni.register(fs)
	inFile := fs.String("r", "", "read packets from capture `FILE` (pcap or pcapng; '-' = stdin)")
	inIface := fs.String("in", "", "receiving interface `IFACE` of every packet (default: the pcapng interface name)")
	prefix := fs.String("w", "", "write OUT_PREFIX-IFACE.pcap per output interface (`OUT_PREFIX`)")
	pos, err := c.parseFlags(fs, pcapCmd, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q (packets for pcap come from -r FILE)", pos[0])
	}
	if *inFile == "" {
		return usagef("missing -r IN.pcap: the capture to read")
	}
	if *prefix == "" {
		return usagef("missing -w OUT_PREFIX: where to write the output files")
	}
	if *inIface != "" && !isLocalIface(*inIface) {
		if err := checkIfaceName(*inIface); err != nil {
			return usagef("--in: %v", err)
		}
	}
	if *inFile == "-" {
		ni.stdinUsed = true // a second '-' among the node flags is refused
	}
	nd, err := c.buildNode(&ni)
	if err != nil {
		return err
	}
	if *inIface != "" && !isLocalIface(*inIface) && nd.host.Interface(*inIface) == nil {
		return fmt.Errorf("--in %s: the node has no such interface (add it with --addr or --iface)", *inIface)
	}

	var in io.Reader = c.stdin
	if *inFile != "-" {
		f, err := os.Open(*inFile)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	p := &pcapRun{
		nd:     nd,
		fh:     netfilter.NewFrameHost(nd.host),
		name:   displayName(*inFile),
		iface:  *inIface,
		prefix: *prefix,
		outs:   map[string]*pcapOut{},
		stderr: c.stderr,
	}
	defer p.discard()
	if err := p.run(in); err != nil {
		return err
	}
	if err := p.commit(); err != nil {
		return err
	}
	p.writeSummary(c)
	return nil
}

// pcapRun is one run of a capture through a node.
type pcapRun struct {
	nd     *node
	fh     *netfilter.FrameHost
	name   string // the input file as named in messages
	iface  string // --in, or "" for the pcapng interface names
	prefix string
	stderr io.Writer

	src     *captureReader
	outs    map[string]*pcapOut
	nanos   bool // write nanosecond timestamps
	eth     []byte
	read    int
	skipped int
	byDisp  [6]int
	emitted int
	started bool
	last    time.Time // the latest timestamp, which the clock follows
}

// pcapOut is one output file, written to a temporary file until commit.
type pcapOut struct {
	iface   string
	path    string
	tmp     *os.File
	bw      *bufio.Writer
	w       *pcapgo.Writer
	n       int
	emitted int
}

func (p *pcapRun) run(in io.Reader) error {
	src, err := openCapture(in)
	if err != nil {
		return fmt.Errorf("%s: %w", p.name, err)
	}
	p.src = src
	for {
		data, ci, err := src.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		n := p.read + 1
		if err != nil {
			return fmt.Errorf("%s: packet %d: %w", p.name, n, err)
		}
		p.read = n
		if err := p.packet(n, data, ci); err != nil {
			return err
		}
		if n%pcapProgressEvery == 0 {
			fmt.Fprintf(p.stderr, "packetwalk pcap: %s: %d packets read\n", p.name, n)
		}
	}
}

// packet runs one captured frame through the node.
func (p *pcapRun) packet(n int, data []byte, ci capInfo) error {
	where := func() string {
		s := fmt.Sprintf("%s: packet %d", p.name, n)
		if ci.offset >= 0 {
			s += fmt.Sprintf(" (%s %d)", ci.where, ci.offset)
		}
		return s
	}
	iface := p.iface
	if iface == "" {
		iface = ci.ifname
		if iface == "" {
			return fmt.Errorf("%s: no interface name (a pcap file, or a pcapng interface block without if_name): give --in IFACE", where())
		}
		if !isLocalIface(iface) && p.nd.host.Interface(iface) == nil {
			return fmt.Errorf("%s: captured on %q, which the node does not have (add it with --addr or --iface, or give --in IFACE)", where(), iface)
		}
	}
	switch ci.link {
	case linkEthernet:
		if len(data) >= 14 && !isIPEtherType(uint16(data[12])<<8|uint16(data[13])) && !isVLANEtherType(uint16(data[12])<<8|uint16(data[13])) {
			p.skipped++ // ARP and friends never reach the IP hooks
			return nil
		}
		p.fh.Raw = false
	case linkRaw, linkIPv4, linkIPv6, 12, 14: // 12, 14: DLT_RAW on some BSDs
		p.fh.Raw = true
	case linkLinuxSLL, linkLinuxSLL2:
		return fmt.Errorf("%s: link type %s ('tcpdump -i any') is not supported: expected Ethernet or raw IP; capture on each interface instead", where(), linkName(ci.link))
	default:
		return fmt.Errorf("%s: link type %s is not supported: expected Ethernet or raw IP", where(), linkName(ci.link))
	}

	// The clock follows the capture; time never runs backwards.
	if p.started && ci.ts.After(p.last) {
		p.nd.clock.Advance(ci.ts.Sub(p.last))
	}
	if !p.started || ci.ts.After(p.last) {
		p.last, p.started = ci.ts, true
	}

	local := isLocalIface(iface)
	var res netfilter.FrameResult
	var err error
	if local {
		res, err = p.fh.SendFrame(data)
	} else {
		res, err = p.fh.ReceiveFrame(iface, data)
	}
	if err != nil {
		msg := err.Error()
		if ci.capLen < ci.origLen {
			msg = fmt.Sprintf("captured %d of %d bytes (snap length): %s", ci.capLen, ci.origLen, msg)
		}
		return fmt.Errorf("%s, %d bytes on %s: %s", where(), len(data), iface, msg)
	}
	if d := int(res.Disposition); d < len(p.byDisp) {
		p.byDisp[d]++
	}
	switch {
	case res.Fragments != nil:
		// Reassembled for conntrack, it leaves as fragments again.
		for _, f := range res.Fragments {
			if err := p.write(res.Packet.Out, ci, f, false); err != nil {
				return err
			}
		}
	case res.Frame != nil:
		if err := p.write(res.Packet.Out, ci, res.Frame, false); err != nil {
			return err
		}
	}
	for i, f := range res.Emitted {
		out := res.Result.Emitted[i].Out
		if out == "" {
			out = iface
			if local {
				out = "lo" // the reply goes back to the local sender
			}
		}
		p.emitted++
		if err := p.write(out, ci, f, true); err != nil {
			return err
		}
	}
	return nil
}

// trimPadding cuts an Ethernet frame after its IP packet: the kernel
// trims padding on receive (ip_rcv) and leaves it to the NIC on
// transmit, so a capture on the way out shows none.
func trimPadding(f []byte) []byte {
	if len(f) < 14+20 {
		return f
	}
	n := len(f)
	switch binary.BigEndian.Uint16(f[12:14]) {
	case 0x0800:
		n = 14 + int(binary.BigEndian.Uint16(f[16:18]))
	case 0x86dd:
		if pl := int(binary.BigEndian.Uint16(f[18:20])); pl > 0 { // 0: a jumbogram
			n = 14 + 40 + pl
		}
	}
	if n < len(f) && n >= 14+20 {
		return f[:n]
	}
	return f
}

// isLocalIface reports whether a capture's interface means "sent by a
// local process": --in local, or a capture on lo, which only carries
// packets the host itself sent (each appears once, on its way out).
func isLocalIface(name string) bool { return name == "local" || name == "lo" }

func isIPEtherType(t uint16) bool   { return t == 0x0800 || t == 0x86dd }
func isVLANEtherType(t uint16) bool { return t == 0x8100 || t == 0x88a8 }

// Link types (tcpdump.org LINKTYPE_ values) the command knows.
const (
	linkEthernet  = 1
	linkRaw       = 101
	linkLinuxSLL  = 113
	linkIPv4      = 228
	linkIPv6      = 229
	linkLinuxSLL2 = 276
)

func linkName(l uint32) string {
	if l <= 255 {
		if s := layers.LinkType(l).String(); !strings.HasPrefix(s, "UnknownLinkType") {
			return fmt.Sprintf("%d (%s)", l, s)
		}
	}
	if l == linkLinuxSLL2 {
		return "276 (Linux SLL2)"
	}
	return fmt.Sprint(l)
}

// write appends a frame to iface's output file, opening it on first use.
func (p *pcapRun) write(iface string, ci capInfo, frame []byte, emitted bool) error {
	o := p.outs[iface]
	if o == nil {
		var err error
		if o, err = p.open(iface); err != nil {
			return err
		}
	}
	if p.fh.Raw {
		// Raw IP leaves as Ethernet with zero addresses: the node's
		// neighbours are not modelled.
		p.eth = append(p.eth[:0], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x08, 0x00)
		if len(frame) > 0 && frame[0]>>4 == 6 {
			p.eth[12], p.eth[13] = 0x86, 0xdd
		}
		p.eth = append(p.eth, frame...)
		frame = p.eth
	}
	frame = trimPadding(frame)
	out := gopacket.CaptureInfo{Timestamp: ci.ts, CaptureLength: len(frame), Length: len(frame)}
	if err := o.w.WritePacket(out, frame); err != nil {
		return fmt.Errorf("%s: %w", o.path, err)
	}
	o.n++
	if emitted {
		o.emitted++
	}
	return nil
}

func (p *pcapRun) open(iface string) (*pcapOut, error) {
	if len(p.outs) == 0 {
		p.nanos = p.src.nanos()
	}
	path := p.prefix + "-" + iface + ".pcap"
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	o := &pcapOut{iface: iface, path: path, tmp: tmp, bw: bufio.NewWriterSize(tmp, 1<<16)}
	p.outs[iface] = o
	if p.nanos {
		o.w = pcapgo.NewWriterNanos(o.bw)
	} else {
		o.w = pcapgo.NewWriter(o.bw)
	}
	if err := o.w.WriteFileHeader(pcapSnaplen, layers.LinkTypeEthernet); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return o, nil
}

// sortedOuts lists the output files by interface name.
func (p *pcapRun) sortedOuts() []*pcapOut {
	outs := make([]*pcapOut, 0, len(p.outs))
	for _, o := range p.outs {
		outs = append(outs, o)
	}
	sort.Slice(outs, func(i, j int) bool { return outs[i].iface < outs[j].iface })
	return outs
}

// commit flushes the temporary files and renames them into place.
func (p *pcapRun) commit() error {
	outs := p.sortedOuts()
	for _, o := range outs {
		if err := o.bw.Flush(); err != nil {
			return fmt.Errorf("%s: %w", o.path, err)
		}
		if err := o.tmp.Close(); err != nil {
			return fmt.Errorf("%s: %w", o.path, err)
		}
	}
	for _, o := range outs {
		if err := os.Rename(o.tmp.Name(), o.path); err != nil {
			return err
		}
		o.tmp = nil
	}
	return nil
}

// discard removes the temporary files that were not committed.
func (p *pcapRun) discard() {
	for _, o := range p.outs {
		if o.tmp != nil {
			o.tmp.Close()
			os.Remove(o.tmp.Name())
		}
	}
}

func (p *pcapRun) writeSummary(c *cmdEnv) {
	b := &c.out
	fmt.Fprintf(b, "packets read: %d (%s)\n", p.read, p.name)
	for d := netfilter.Delivered; d <= netfilter.Rejected; d++ {
		fmt.Fprintf(b, "%s: %d\n", d, p.byDisp[d])
	}
	if n := p.byDisp[netfilter.Held]; n > 0 {
		fmt.Fprintf(b, "held (fragments queued for reassembly): %d\n", n)
	}
	fmt.Fprintf(b, "skipped (not IP): %d\n", p.skipped)
	fmt.Fprintf(b, "emitted: %d\n", p.emitted)
	outs := p.sortedOuts()
	fmt.Fprintf(b, "files written: %d\n", len(outs))
	for _, o := range outs {
		fmt.Fprintf(b, "  %s: %d %s", o.path, o.n, plural(o.n, "packet"))
		if o.emitted > 0 {
			fmt.Fprintf(b, " (%d emitted)", o.emitted)
		}
		b.WriteByte('\n')
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
