package netfilter

import (
	"encoding/binary"
	"fmt"
	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/internal/jhash"
)

// HMARKTarget is "-j HMARK": it sets the packet mark to a hash of the
// packet's addresses, ports (or ESP/AH SPI) and protocol, scaled into
// [Offset, Offset+Mod). The options choose and mask the fields:
//
//	--hmark-tuple src,dst,sport,dport,spi,proto,ct  whole fields (ct: from
//	                                  the connection's tuples)
//	--hmark-src-prefix N, --hmark-dst-prefix N      address prefixes
//	--hmark-sport-mask M, --hmark-dport-mask M, --hmark-spi-mask M,
//	--hmark-proto-mask M              field masks
//	--hmark-sport V, --hmark-dport V, --hmark-spi V  bits ORed in
//	--hmark-mod N (1 or more), --hmark-offset N, --hmark-rnd SEED (required)
//
// The hash is the kernel's (net/netfilter/xt_HMARK.c): the two addresses
// and the two ports each in ascending order, jhash of (low address, high
// address, ports) with the seed, XORed with the masked protocol; IPv6
// addresses are folded to 32 bits by XORing their masked words; ICMP errors
// hash the header they quote. With ct the fields come from the packet's
// connection instead (the original source, the reply source, their ports
// or ICMP ids), and a packet without one keeps its mark. The rule
// continues.
type HMARKTarget struct {
	Flags      HMARKFlags
	SrcPrefix  uint8
	DstPrefix  uint8
	SPortMask  uint16
	DPortMask  uint16
	SPIMask    uint32 // the port masks seen as one 32-bit word
	SPort      uint16
	DPort      uint16
	SPI        uint32
	ProtoMask  uint16
	Rnd        uint32
	Mod        uint32
	Offset     uint32
	srcM, dstM [4]uint32 // address masks in network order, from the prefixes
	v6         bool
}

// HMARKFlags says which HMARK fields were given.
type HMARKFlags uint16

// HMARK fields.
const (
	HMARKSrc HMARKFlags = 1 << iota
	HMARKDst
	HMARKSPortMask
	HMARKDPortMask
	HMARKSPIMask
	HMARKSPort
	HMARKDPort
	HMARKSPI
	HMARKProtoMask
	HMARKRnd
	HMARKMod
	HMARKOffset
	HMARKCT
)

func init() {
	names := []string{"tuple", "mod", "offset", "src-prefix", "dst-prefix", "sport-mask", "dport-mask",
		"spi-mask", "sport", "dport", "spi", "proto-mask", "rnd"}
	opts := make([]option, len(names))
	for i, n := range names {
		opts[i] = option{name: "hmark-" + n, args: 1}
	}
	registerTarget(&module{name: "HMARK", opts: opts,
		newBuilder: func(*ruleCtx) builder { return &HMARKTarget{} }})
}

func (t *HMARKTarget) once(f HMARKFlags, opt string) error {
	if t.Flags&f != 0 {
		return fmt.Errorf("%w: HMARK: option \"--%s\" can only be used once", ErrMultipleFlags, opt)
	}
	t.Flags |= f
	return nil
}

// hmarkTupleWord names the field a --hmark-tuple word stands for:
// iptables takes any case-insensitive prefix of a name, trying ct, src,
// dst, sport, dport, proto and spi in that order ("s" is src, "sp" sport).
func hmarkTupleWord(w string) string {
	if w == "" {
		return ""
	}
	for _, name := range []string{"ct", "src", "dst", "sport", "dport", "proto", "spi"} {
		if len(w) <= len(name) && strings.EqualFold(w, name[:len(w)]) {
			return name
		}
	}
	return ""
}

func (t *HMARKTarget) set(c *ruleCtx, opt string, _ bool, args []string) error {
	arg := args[0]
	bitsMax := uint64(32)
	if c.family == IPv6 {
		bitsMax = 128
	}
	num := func(max uint64, min uint64) (uint64, error) {
		n, ok := parseCUint(arg, max)
		if !ok || n < min {
			return 0, badValue("HMARK", "--"+opt, arg, fmt.Sprintf("a number %d-%d", min, max))
		}
		return n, nil
	}
	var err error
	var n uint64
	switch opt[len("hmark-"):] {
	case "tuple":
		// The words set the fields' flags without the once check (the
		// word may repeat, and may follow the field's own option), but a
		// field's own option after them is refused (docs/kernel-notes.md).
		for _, f := range strings.Split(arg, ",") {
			switch hmarkTupleWord(f) {
			case "src":
				t.Flags |= HMARKSrc
				t.SrcPrefix = uint8(bitsMax)
			case "dst":
				t.Flags |= HMARKDst
				t.DstPrefix = uint8(bitsMax)
			case "sport":
				t.Flags |= HMARKSPortMask
				t.SPortMask = 0xffff
			case "dport":
				t.Flags |= HMARKDPortMask
				t.DPortMask = 0xffff
			case "spi":
				t.Flags |= HMARKSPIMask
				t.SPIMask = 0xffffffff
			case "proto":
				t.Flags |= HMARKProtoMask
				t.ProtoMask = 0xffff
			case "ct":
				t.Flags |= HMARKCT
			default:
				return badValue("HMARK", "--hmark-tuple", arg, "a list of src, dst, sport, dport, spi, proto, ct")
			}
		}
		return nil
	case "mod":
		if n, err = num(0xffffffff, 1); err == nil {
			t.Mod, t.Flags = uint32(n), t.Flags|HMARKMod
		}
	case "offset":
		if n, err = num(0xffffffff, 0); err == nil {
			t.Offset, t.Flags = uint32(n), t.Flags|HMARKOffset
		}
	case "rnd":
		if n, err = num(0xffffffff, 0); err == nil {
			t.Rnd, t.Flags = uint32(n), t.Flags|HMARKRnd
		}
	case "src-prefix", "dst-prefix":
		if n, err = num(bitsMax, 0); err == nil {
			if opt == "hmark-src-prefix" {
				err, t.SrcPrefix = t.once(HMARKSrc, opt), uint8(n)
			} else {
				err, t.DstPrefix = t.once(HMARKDst, opt), uint8(n)
			}
		}
	case "sport-mask", "dport-mask", "sport", "dport":
		if n, err = num(0xffff, 0); err == nil {
			switch opt {
			case "hmark-sport-mask":
				err, t.SPortMask = t.once(HMARKSPortMask, opt), uint16(n)
			case "hmark-dport-mask":
				err, t.DPortMask = t.once(HMARKDPortMask, opt), uint16(n)
			case "hmark-sport":
				err, t.SPort = t.once(HMARKSPort, opt), uint16(n)
			default:
				err, t.DPort = t.once(HMARKDPort, opt), uint16(n)
			}
		}
	case "spi-mask", "spi":
		if n, err = num(0xffffffff, 0); err == nil {
			if opt == "hmark-spi-mask" {
				err, t.SPIMask = t.once(HMARKSPIMask, opt), uint32(n)
			} else {
				err, t.SPI = t.once(HMARKSPI, opt), uint32(n)
			}
		}
	case "proto-mask":
		if n, err = num(0xffff, 0); err == nil {
			err, t.ProtoMask = t.once(HMARKProtoMask, opt), uint16(n)
		}
	}
	return err
}

func (t *HMARKTarget) done(c *ruleCtx) (any, error) {
	f := t.Flags
	if f&HMARKMod == 0 {
		return nil, fmt.Errorf("%w: HMARK: --hmark-mod is mandatory", ErrMissingArgument)
	}
	if f&HMARKRnd == 0 {
		return nil, fmt.Errorf("%w: HMARK: --hmark-rnd is mandatory", ErrMissingArgument)
	}
	if f&HMARKSPIMask != 0 && f&(HMARKSPortMask|HMARKDPortMask) != 0 {
		return nil, fmt.Errorf("%w: HMARK: you cannot use --hmark-spi-mask and --hmark-?port-mask,at the same time", ErrIncompatibleOpts)
	}
	if f&HMARKSPI != 0 && f&(HMARKSPort|HMARKDPort) != 0 {
		return nil, fmt.Errorf("%w: HMARK: you cannot use --hmark-spi and --hmark-?port,at the same time", ErrIncompatibleOpts)
	}
	if f&(HMARKSrc|HMARKDst|HMARKSPortMask|HMARKDPortMask|HMARKSPIMask|HMARKProtoMask|HMARKSPort|HMARKDPort|HMARKSPI|HMARKCT) == 0 {
		return nil, fmt.Errorf("%w: HMARK: you have to specify --hmark-tuple at least", ErrMissingArgument)
	}
	bits := 32
	if c.family == IPv6 {
		bits = 128
	}
	t.v6 = c.family == IPv6
	t.srcM = prefixWords(bits, int(t.SrcPrefix), f&HMARKSrc != 0)
	t.dstM = prefixWords(bits, int(t.DstPrefix), f&HMARKDst != 0)
	return t, nil
}

// prefixWords is the address mask of a prefix as 32-bit words in network
// order; no prefix given means no address bits.
func prefixWords(bits, n int, given bool) [4]uint32 {
	var m [4]uint32
	if !given {
		return m
	}
	for i := 0; i < bits/32; i++ {
		switch k := n - 32*i; {
		case k >= 32:
			m[i] = 0xffffffff
		case k > 0:
			m[i] = ^uint32(0) << (32 - k)
		}
	}
	return m
}

// Name implements Target.
func (t *HMARKTarget) Name() string { return "HMARK" }

func hex0(b []byte, v uint32, width int) []byte {
	b = append(b, "0x"...)
	if width > 0 {
		return appendHexPad(b, v, width)
	}
	return strconv.AppendUint(b, uint64(v), 16)
}

func (t *HMARKTarget) appendFields(b []byte, pre, sep string, width bool) []byte {
	w := func(n int) int {
		if width {
			return n
		}
		return 0
	}
	f := t.Flags
	field := func(name string) {
		b = append(append(append(b, pre...), name...), ' ')
	}
	// ip6tables -L prints a /128 prefix as nothing.
	prefix := func(n uint8) {
		if !width && t.v6 && n == 128 {
			b = append(b, sep...)
			return
		}
		b = append(strconv.AppendUint(b, uint64(n), 10), sep...)
	}
	if f&HMARKSrc != 0 {
		field("src-prefix")
		prefix(t.SrcPrefix)
	}
	if f&HMARKDst != 0 {
		field("dst-prefix")
		prefix(t.DstPrefix)
	}
	if f&HMARKSPortMask != 0 {
		field("sport-mask")
		b = append(hex0(b, uint32(t.SPortMask), w(4)), sep...)
	}
	if f&HMARKDPortMask != 0 {
		field("dport-mask")
		b = append(hex0(b, uint32(t.DPortMask), w(4)), sep...)
	}
	if f&HMARKSPIMask != 0 {
		field("spi-mask")
		b = append(hex0(b, t.SPIMask, w(8)), sep...)
	}
	if f&HMARKSPort != 0 {
		field("sport")
		b = append(hex0(b, uint32(t.SPort), w(4)), sep...)
	}
	if f&HMARKDPort != 0 {
		field("dport")
		b = append(hex0(b, uint32(t.DPort), w(4)), sep...)
	}
	if f&HMARKSPI != 0 {
		field("spi")
		b = append(hex0(b, t.SPI, w(8)), sep...)
	}
	if f&HMARKProtoMask != 0 {
		field("proto-mask")
		b = append(hex0(b, uint32(t.ProtoMask), w(2)), sep...)
	}
	field("rnd")
	return append(hex0(b, t.Rnd, w(8)), sep...)
}

func (t *HMARKTarget) appendSave(b []byte) []byte {
	b = t.appendFields(b, " --hmark-", "", true)
	b = strconv.AppendUint(append(b, " --hmark-mod "...), uint64(t.Mod), 10)
	if t.Flags&HMARKOffset != 0 {
		b = strconv.AppendUint(append(b, " --hmark-offset "...), uint64(t.Offset), 10)
	}
	if t.Flags&HMARKCT != 0 {
		b = append(b, " --hmark-tuple ct"...)
	}
	return b
}

func (t *HMARKTarget) appendList(b []byte, _ bool) []byte {
	b = append(strconv.AppendUint(append(b, " HMARK mod "...), uint64(t.Mod), 10), ' ')
	if t.Flags&HMARKOffset != 0 {
		b = append(strconv.AppendUint(append(b, "+ 0x"...), uint64(t.Offset), 16), ' ')
	}
	if t.Flags&HMARKCT != 0 {
		b = append(b, "ct, "...)
	}
	return t.appendFields(b, "", " ", false)
}

// addrWord folds an address into the 32-bit word the kernel hashes: the
// masked IPv4 address, or the XOR of the masked words of an IPv6 one.
func addrWord(a netip.Addr, m *[4]uint32) uint32 {
	if a.Is4() {
		b := a.As4()
		return binary.BigEndian.Uint32(b[:]) & m[0]
	}
	b := a.As16()
	var w uint32
	for i := 0; i < 4; i++ {
		// The kernel XORs the words in network order and converts once.
		w ^= binary.BigEndian.Uint32(b[4*i:]) & m[i]
	}
	return w
}

// ports returns the ports word the kernel hashes: the two ports after
// the masks and set bits, in the order xt_HMARK puts them.
func (t *HMARKTarget) ports(sport, dport uint16) uint32 {
	raw := uint32(sport)<<16 | uint32(dport)
	mask := t.SPIMask
	if t.Flags&HMARKSPIMask == 0 {
		mask = uint32(t.SPortMask)<<16 | uint32(t.DPortMask)
	}
	set := t.SPI
	if t.Flags&HMARKSPI == 0 {
		set = uint32(t.SPort)<<16 | uint32(t.DPort)
	}
	v := raw&mask | set
	s, d := uint16(v>>16), uint16(v)
	if d > s {
		return uint32(d)<<16 | uint32(s)
	}
	return uint32(s)<<16 | uint32(d)
}

// mark scales the hash of the three words and the protocol into the mark.
func (t *HMARKTarget) mark(p *Packet, a, b, uports uint32, proto inet.Proto) {
	if b < a {
		a, b = b, a
	}
	k := [3]uint32{a, b, uports}
	h := jhash.Words(k[:], t.Rnd) ^ uint32(uint16(proto)&t.ProtoMask)
	p.Mark = uint32(uint64(h)*uint64(t.Mod)>>32) + t.Offset
}

// applyCT is "--hmark-tuple ct" (xt_HMARK's hmark_ct_set_htuple): the
// original tuple's source and the reply tuple's source (the other end
// after NAT), their ports or ICMP ids (none for IPv4 ICMP), and the
// connection's protocol. A packet without a connection (before the
// conntrack hook, untracked, or conntrack off: HMARK does not turn it on)
// keeps its mark; a CT template's tuples are all zero.
func (t *HMARKTarget) applyCT(c *evalCtx) verdict {
	ct := c.conn()
	if !ct.tracked {
		return vContinue
	}
	var orig, repl conntrack.Tuple
	if ct.tmpl {
		orig.Src = netip.IPv4Unspecified()
		if c.pkt.Family == IPv6 {
			orig.Src = netip.IPv6Unspecified()
		}
		repl.Src = orig.Src
	} else {
		e := c.walk.cur.Entry
		orig, repl = e.Original(), e.Reply()
	}
	var uports uint32
	if orig.Proto != inet.ICMP {
		uports = t.ports(orig.SrcPort, repl.SrcPort)
	}
	t.mark(c.pkt, addrWord(orig.Src, &t.srcM), addrWord(repl.Src, &t.dstM), uports, orig.Proto)
	return vContinue
}

func (t *HMARKTarget) apply(c *evalCtx) verdict {
	if t.Flags&HMARKCT != 0 {
		return t.applyCT(c)
	}
	p := c.pkt
	proto, src, dst := p.Proto, p.Src, p.Dst
	sport, dport, ports := p.SrcPort, p.DstPort, (p.Proto).HasPorts()
	if (proto == inet.ICMP || proto == inet.ICMPv6) && p.Inner.Proto != 0 {
		// An error hashes the header it quotes.
		in := &p.Inner
		proto, src, dst, sport, dport, ports = in.Proto, in.Src, in.Dst, in.SrcPort, in.DstPort, (in.Proto).HasPorts()
	}
	var uports uint32
	switch {
	case proto == inet.ICMP || proto == inet.ICMPv6 || p.FragOffset != 0:
	case ports || proto == 50 /* esp */ || proto == 51 /* ah */ :
		if !ports {
			// Packet does not carry the ESP/AH SPI: such packets keep
			// their mark (docs/kernel-notes.md).
			return vContinue
		}
		uports = t.ports(sport, dport)
	}
	t.mark(p, addrWord(src, &t.srcM), addrWord(dst, &t.dstM), uports, proto)
	return vContinue
}
