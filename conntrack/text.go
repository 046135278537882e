package conntrack

import (
	"bufio"
	"errors"
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"io"
	"net/netip"
	"strconv"
	"strings"
	"time"
)

// Format selects the variant of the `conntrack -L` text (conntrack-tools
// 1.4.7, libnetfilter_conntrack's default output).
type Format struct {
	// Extended is `-o extended`: each line starts with the layer-3
	// protocol, "ipv4     2 " or "ipv6     10 ".
	Extended bool
	// ID is `-o id`: " id=N" at the end.
	ID bool
	// Counters prints "packets=N bytes=N" after each tuple, as conntrack
	// does when net.netfilter.nf_conntrack_acct=1.
	Counters bool
	// TableOrder lists in table order (hash order, as the kernel does)
	// instead of sorted: [Table.Dump] then streams, holding no list of
	// the entries, for tables of millions.
	TableOrder bool
}

// appendPadded appends s left-aligned in a field of width w ("%-8s").
func appendPadded(b []byte, s string, w int) []byte {
	b = append(b, s...)
	for i := len(s); i < w; i++ {
		b = append(b, ' ')
	}
	return b
}

// appendTuple appends "src=A dst=B " and the protocol part, each followed
// by a space.
func appendTuple(b []byte, t Tuple) []byte {
	b = append(b, "src="...)
	b = t.Src.AppendTo(b)
	b = append(b, " dst="...)
	b = t.Dst.AppendTo(b)
	b = append(b, ' ')
	switch {
	case t.IsICMP():
		b = append(b, "type="...)
		b = strconv.AppendUint(b, uint64(t.ICMPType), 10)
		b = append(b, " code="...)
		b = strconv.AppendUint(b, uint64(t.ICMPCode), 10)
		b = append(b, " id="...)
		b = strconv.AppendUint(b, uint64(t.SrcPort), 10)
		b = append(b, ' ')
	case t.Proto.HasPorts():
		b = append(b, "sport="...)
		b = strconv.AppendUint(b, uint64(t.SrcPort), 10)
		b = append(b, " dport="...)
		b = strconv.AppendUint(b, uint64(t.DstPort), 10)
		b = append(b, ' ')
	}
	return b
}

func appendCounter(b []byte, c Counter) []byte {
	b = append(b, "packets="...)
	b = strconv.AppendUint(b, c.Packets, 10)
	b = append(b, " bytes="...)
	b = strconv.AppendUint(b, c.Bytes, 10)
	return append(b, ' ')
}

// AppendText appends the entry as one `conntrack -L` line (without the
// newline), with the timeout as the whole seconds left at now, e.g.
//
//	tcp      6 119 TIME_WAIT src=192.168.10.2 dst=10.96.0.10 sport=46652 dport=80 src=10.244.1.6 dst=10.244.1.1 sport=8080 dport=59584 [ASSURED] mark=26 use=1
func (e *Entry) AppendText(b []byte, now time.Time, f Format) []byte {
	if f.Extended {
		if e.addr(0).Is4() {
			b = append(b, "ipv4     2 "...)
		} else {
			b = append(b, "ipv6     10 "...)
		}
	}
	b = appendPadded(b, e.proto.ConntrackName(), 8)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(e.proto), 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, int64(e.Timeout(now)/time.Second), 10)
	b = append(b, ' ')
	if e.proto == inet.TCP {
		b = append(b, e.TCPState.String()...)
		b = append(b, ' ')
	}
	b = appendTuple(b, e.Original())
	if f.Counters {
		b = appendCounter(b, e.Counters[Original])
	}
	if e.Status&StatusSeenReply == 0 {
		b = append(b, "[UNREPLIED] "...)
	}
	b = appendTuple(b, e.Reply())
	if f.Counters {
		b = appendCounter(b, e.Counters[Reply])
	}
	switch {
	case e.Status&StatusHWOffload != 0:
		b = append(b, "[HW_OFFLOAD] "...)
	case e.Status&StatusOffload != 0:
		b = append(b, "[OFFLOAD] "...)
	case e.Status&StatusAssured != 0:
		b = append(b, "[ASSURED] "...)
	}
	b = append(b, "mark="...)
	b = strconv.AppendUint(b, uint64(e.Mark), 10)
	b = append(b, ' ')
	if e.zone != 0 {
		b = append(b, "zone="...)
		b = strconv.AppendUint(b, uint64(e.zone), 10)
		b = append(b, ' ')
	}
	b = append(b, "use="...)
	b = strconv.AppendUint(b, uint64(e.Use()), 10)
	if f.ID {
		b = append(b, " id="...)
		b = strconv.AppendUint(b, uint64(e.ID), 10)
	}
	return b
}

// Dump writes the live entries, one `conntrack -L` line each, in
// [Table.Entries] order, or table order with f.TableOrder. It writes in
// pieces of about 64 KiB, never the whole listing at once.
func (t *Table) Dump(w io.Writer, f Format) error {
	now := t.clock.Now()
	const chunk = 64 << 10
	b := make([]byte, 0, chunk+1024)
	var err error
	write := func(e *Entry) bool {
		b = e.AppendText(b, now, f)
		b = append(b, '\n')
		if len(b) >= chunk {
			_, err = w.Write(b)
			b = b[:0]
		}
		return err == nil
	}
	if f.TableOrder {
		t.Expire()
		for e := range t.All() {
			if !write(e) {
				return err
			}
		}
	} else {
		for _, e := range t.Entries() {
			if !write(e) {
				return err
			}
		}
	}
	if len(b) > 0 {
		_, err = w.Write(b)
	}
	return err
}

// WriteTo writes the table as `conntrack -L` prints it. It implements
// io.WriterTo.
func (t *Table) WriteTo(w io.Writer) (int64, error) {
	cw := &countWriter{w: w}
	err := t.Dump(cw, Format{})
	return cw.n, err
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// ErrSyntax is wrapped by every [ParseError] about malformed text;
// ErrNotModelled by those about valid conntrack output the model does not
// represent (sctp/dccp/gre entries, labels, secmark, ...).
var (
	ErrSyntax      = errors.New("syntax error")
	ErrNotModelled = inet.NotModelled("not modelled") // errors.Is(err, inet.ErrNotModelled)
)

// ParseError reports a bad `conntrack -L` line.
type ParseError struct {
	Line  int    // 1-based line number
	Token string // the offending token ("" at end of line)
	Text  string // the whole line
	Err   error  // wraps ErrSyntax or ErrNotModelled
}

// Error returns e.g. `conntrack: line 3: token "sport=x": bad port: ...`.
func (e *ParseError) Error() string {
	tok := "end of line"
	if e.Token != "" {
		tok = "token " + strconv.Quote(e.Token)
	}
	return fmt.Sprintf("conntrack: line %d: %s: %v in %q", e.Line, tok, e.Err, e.Text)
}

// Unwrap returns the underlying error.
func (e *ParseError) Unwrap() error { return e.Err }

// Parse reads `conntrack -L` output (any [Format]; blank lines and the
// "conntrack v1.4.7 (conntrack-tools): N flow entries have been shown."
// summary are skipped) and returns the entries, confirmed, with Expires =
// now + the printed timeout. Errors are *ParseError.
func Parse(r io.Reader, now time.Time) ([]*Entry, error) {
	var out []*Entry
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "conntrack v") {
			continue
		}
		e, _, err := parseLine(line, n, now)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// ParseEntry parses one `conntrack -L` line and reports the [Format] it
// was printed in, so that AppendText can reproduce it. Errors are
// *ParseError with Line 1.
func ParseEntry(line string, now time.Time) (*Entry, Format, error) {
	return parseLine(line, 1, now)
}

// Restore parses a `conntrack -L` listing and inserts its entries.
func (t *Table) Restore(r io.Reader) error {
	es, err := Parse(r, t.clock.Now())
	if err != nil {
		return err
	}
	for _, e := range es {
		if err := t.Insert(e); err != nil {
			return err
		}
	}
	return nil
}

type lineParser struct {
	toks []string
	i    int
	line int
	text string
}

func (p *lineParser) errf(tok string, sentinel error, format string, args ...any) error {
	return &ParseError{Line: p.line, Token: tok, Text: p.text,
		Err: fmt.Errorf("%w: "+format, append([]any{sentinel}, args...)...)}
}

func (p *lineParser) peek() string {
	if p.i < len(p.toks) {
		return p.toks[p.i]
	}
	return ""
}

func (p *lineParser) next() string {
	t := p.peek()
	if p.i < len(p.toks) {
		p.i++
	}
	return t
}

// uint parses the next token as a bare unsigned number below max.
func (p *lineParser) uint(what string, bits int) (uint64, error) {
	tok := p.next()
	v, err := strconv.ParseUint(tok, 10, bits)
	if err != nil || tok == "" {
		return 0, p.errf(tok, ErrSyntax, "expected %s", what)
	}
	return v, nil
}

// kv parses the next token as key=value with the given key.
func (p *lineParser) kv(key string) (string, string, error) {
	tok := p.next()
	k, v, ok := strings.Cut(tok, "=")
	if !ok || k != key || v == "" {
		return tok, "", p.errf(tok, ErrSyntax, "expected %s=", key)
	}
	return tok, v, nil
}

func (p *lineParser) kvUint(key string, bits int) (uint64, error) {
	tok, v, err := p.kv(key)
	if err != nil {
		return 0, err
	}
	n, perr := strconv.ParseUint(v, 10, bits)
	if perr != nil {
		return 0, p.errf(tok, ErrSyntax, "%s must be a number below 2^%d", key, bits)
	}
	return n, nil
}

func (p *lineParser) addr(key string, v4 bool) (netip.Addr, error) {
	tok, v, err := p.kv(key)
	if err != nil {
		return netip.Addr{}, err
	}
	a, perr := netip.ParseAddr(v)
	if perr != nil || a.Zone() != "" {
		return a, p.errf(tok, ErrSyntax, "bad address")
	}
	if a.Is4() != v4 {
		return a, p.errf(tok, ErrSyntax, "address family differs from the entry's")
	}
	return a, nil
}

func (p *lineParser) tuple(proto inet.Proto, v4 bool) (Tuple, error) {
	t := Tuple{Proto: proto}
	var err error
	if t.Src, err = p.addr("src", v4); err != nil {
		return t, err
	}
	if t.Dst, err = p.addr("dst", v4); err != nil {
		return t, err
	}
	switch {
	case proto == inet.ICMP || proto == inet.ICMPv6:
		var v uint64
		if v, err = p.kvUint("type", 8); err != nil {
			return t, err
		}
		t.ICMPType = uint8(v)
		if v, err = p.kvUint("code", 8); err != nil {
			return t, err
		}
		t.ICMPCode = uint8(v)
		if v, err = p.kvUint("id", 16); err != nil {
			return t, err
		}
		t.SrcPort = uint16(v)
	case proto.HasPorts():
		var v uint64
		if v, err = p.kvUint("sport", 16); err != nil {
			return t, err
		}
		t.SrcPort = uint16(v)
		if v, err = p.kvUint("dport", 16); err != nil {
			return t, err
		}
		t.DstPort = uint16(v)
	}
	return t, nil
}

func (p *lineParser) counters(c *Counter) (bool, error) {
	if !strings.HasPrefix(p.peek(), "packets=") {
		return false, nil
	}
	var err error
	if c.Packets, err = p.kvUint("packets", 64); err != nil {
		return true, err
	}
	if c.Bytes, err = p.kvUint("bytes", 64); err != nil {
		return true, err
	}
	return true, nil
}

func parseLine(line string, n int, now time.Time) (*Entry, Format, error) {
	p := &lineParser{toks: strings.Fields(line), line: n, text: line}
	var f Format
	e := &Entry{Status: StatusConfirmed | StatusSeenReply | StatusSrcNATDone | StatusDstNATDone}
	v4 := true
	switch tok := p.peek(); tok {
	case "ipv4", "ipv6":
		p.next()
		f.Extended = true
		v4 = tok == "ipv4"
		want := map[bool]uint64{true: 2, false: 10}[v4]
		if num, err := p.uint("layer-3 protocol number", 8); err != nil {
			return nil, f, err
		} else if num != want {
			return nil, f, p.errf(p.toks[p.i-1], ErrSyntax, "%s is protocol %d", tok, want)
		}
	}
	nameTok := p.next()
	if nameTok == "" {
		return nil, f, p.errf("", ErrSyntax, "expected a protocol name")
	}
	num, err := p.uint("protocol number", 8)
	if err != nil {
		return nil, f, err
	}
	proto := inet.Proto(num)
	if proto.ConntrackName() != nameTok {
		return nil, f, p.errf(nameTok, ErrSyntax, "protocol %d is printed as %q", proto, proto.ConntrackName())
	}
	switch proto {
	case 132, 33, 47, 136:
		return nil, f, p.errf(nameTok, ErrNotModelled, "protocol %s", nameTok)
	case inet.ICMPv6:
		if f.Extended && v4 {
			return nil, f, p.errf(nameTok, ErrSyntax, "icmpv6 in an ipv4 entry")
		}
		v4 = false
	case inet.ICMP:
		if f.Extended && !v4 {
			return nil, f, p.errf(nameTok, ErrSyntax, "icmp in an ipv6 entry")
		}
	}
	secs, err := p.uint("timeout in seconds", 32)
	if err != nil {
		return nil, f, err
	}
	if proto == inet.TCP {
		tok := p.next()
		st := -1
		for i, name := range tcpStateNames {
			if name == tok {
				st = i
			}
		}
		if st < 0 {
			return nil, f, p.errf(tok, ErrSyntax, "expected a TCP state")
		}
		e.TCPState = TCPState(st)
	}
	if !f.Extended && proto != inet.ICMPv6 && proto != inet.ICMP {
		// The family comes from the first address.
		if _, v, ok := strings.Cut(p.peek(), "="); ok {
			if a, err := netip.ParseAddr(v); err == nil {
				v4 = a.Is4()
			}
		}
	}
	orig, err := p.tuple(proto, v4)
	if err != nil {
		return nil, f, err
	}
	e.setTuple(Original, &orig)
	if f.Counters, err = p.counters(&e.Counters[Original]); err != nil {
		return nil, f, err
	}
	if p.peek() == "[UNREPLIED]" {
		p.next()
		e.Status &^= StatusSeenReply
	}
	reply, err := p.tuple(proto, v4)
	if err != nil {
		return nil, f, err
	}
	e.setTuple(Reply, &reply)
	if has, err := p.counters(&e.Counters[Reply]); err != nil {
		return nil, f, err
	} else if has != f.Counters {
		return nil, f, p.errf(p.peek(), ErrSyntax, "counters must follow both tuples or neither")
	}
	switch p.peek() {
	case "[ASSURED]":
		e.Status |= StatusAssured
		p.next()
	case "[OFFLOAD]":
		e.Status |= StatusAssured | StatusOffload
		p.next()
	case "[HW_OFFLOAD]":
		e.Status |= StatusAssured | StatusOffload | StatusHWOffload
		p.next()
	}
	for p.peek() != "" {
		tok := p.peek()
		key, _, _ := strings.Cut(tok, "=")
		switch key {
		case "mark":
			v, err := p.kvUint("mark", 32)
			if err != nil {
				return nil, f, err
			}
			e.Mark = uint32(v)
		case "zone":
			v, err := p.kvUint("zone", 16)
			if err != nil {
				return nil, f, err
			}
			e.zone = uint16(v)
		case "use":
			v, err := p.kvUint("use", 32)
			if err != nil {
				return nil, f, err
			}
			e.SetUse(uint32(v))
		case "id":
			v, err := p.kvUint("id", 32)
			if err != nil {
				return nil, f, err
			}
			e.ID = uint32(v)
			f.ID = true
			if p.peek() != "" {
				return nil, f, p.errf(p.peek(), ErrSyntax, "nothing may follow id=")
			}
		case "secmark", "secctx", "labels", "helper", "delta-time", "zone-orig", "zone-reply":
			return nil, f, p.errf(tok, ErrNotModelled, "field %s", key)
		default:
			return nil, f, p.errf(tok, ErrSyntax, "expected mark=, zone=, use= or id=")
		}
	}
	deriveNATStatus(e)
	if e.TCPState >= TCPFinWait && e.TCPState <= TCPClose {
		e.tcp.seen[Original].flags |= seenCloseInit // a FIN (or RST) was seen; which side is not printed
	}
	e.SetExpires(now.Add(time.Duration(secs) * time.Second))
	return e, f, nil
}

// deriveNATStatus sets SRC_NAT/DST_NAT from the tuples, as they are not
// printed.
func deriveNATStatus(e *Entry) {
	id := e.Original().Reverse()
	r := e.Reply()
	if r.Src != id.Src || (r.Proto.HasPorts() && r.SrcPort != id.SrcPort) {
		e.Status |= StatusDstNAT
	}
	if r.Dst != id.Dst || (r.Proto.HasPorts() && r.DstPort != id.DstPort) || (r.IsICMP() && r.SrcPort != id.SrcPort) {
		e.Status |= StatusSrcNAT
	}
}
