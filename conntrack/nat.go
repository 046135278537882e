package conntrack

import (
	"encoding/binary"
	"fmt"
	"net/netip"

	"github.com/packetwalk/packetwalk/internal/jhash"
)

// NATKind is the manipulation a binding performs: SNAT rewrites the
// source of original-direction packets (SNAT, MASQUERADE), DNAT their
// destination (DNAT, REDIRECT).
type NATKind uint8

// NAT kinds (kernel enum nf_nat_manip_type).
const (
	SNAT NATKind = iota
	DNAT
)

// String returns "SNAT" or "DNAT".
func (k NATKind) String() string {
	if k == DNAT {
		return "DNAT"
	}
	return "SNAT"
}

// NATFlags are the target options that change port and address choice.
type NATFlags uint8

// NAT flags.
const (
	// NATRandom is --random: the port is picked at random from the start
	// (kernel NF_NAT_RANGE_PROTO_RANDOM).
	NATRandom NATFlags = 1 << iota
	// NATRandomFully is --random-fully (NF_NAT_RANGE_PROTO_RANDOM_FULLY).
	// The model draws from the table's seeded source in both cases.
	NATRandomFully
	// NATPersistent is --persistent: the address chosen from a range
	// depends on the client address only.
	NATPersistent
	// NATOffset maps the port by its offset from NATRange.Base
	// (PORT-PORT/BASE, kernel NF_NAT_RANGE_PROTO_OFFSET): MinPort +
	// (original - Base) mod the range size, counted in 16 bits, then
	// upwards while taken. It applies even to a port already in range.
	NATOffset
)

// NATRange is the target of a binding (`--to-source A[-B][:P[-Q]]`).
// An invalid MinAddr keeps the address (MASQUERADE's address is filled in
// by the caller). MinPort 0 means no port range: the port is kept, and for
// SNAT it is changed only if the resulting reply tuple is already in use.
type NATRange struct {
	MinAddr, MaxAddr netip.Addr // MaxAddr invalid means MinAddr
	MinPort, MaxPort uint16     // MaxPort 0 means MinPort
	Flags            NATFlags
	Base             uint16 // the base port of NATOffset
}

// SetupNAT records a NAT binding on a new, unconfirmed entry, as a nat
// table target does for the first packet of a connection (kernel
// nf_nat_setup_info). It chooses the translated tuple like the kernel's
// get_unique_tuple:
//
//  1. SNAT without random flags keeps the source when it is in the range
//     and unused, or reuses the mapping of an earlier connection from the
//     same source address and port;
//  2. otherwise the address is picked in the range (a hash of the client
//     address, and of the destination unless NATPersistent);
//  3. the port is kept if in range and unused; else a free one is searched
//     from an offset drawn from the table's seeded source (always with
//     NATRandom/NATRandomFully), in the range given, or for SNAT in the
//     kernel's default class (1–511, 600–1023 or 1024–65535) of the
//     original port. DNAT without a port range never changes the port.
//
// The entry's Reply tuple is rewritten and StatusSrcNAT/StatusDstNAT set
// when the binding changes something; StatusSrcNATDone/StatusDstNATDone is
// set either way. If no free tuple exists the last candidate is kept and
// Confirm will fail with ErrClash, as in the kernel.
func (t *Table) SetupNAT(e *Entry, k NATKind, r NATRange) error {
	if e == nil {
		return fmt.Errorf("setup %v: nil entry", k)
	}
	if e.Confirmed() {
		return fmt.Errorf("setup %v for %v: %w", k, e.Original(), ErrConfirmed)
	}
	done := StatusSrcNATDone
	if k == DNAT {
		done = StatusDstNATDone
	}
	if e.Status&done != 0 {
		return fmt.Errorf("setup %v for %v: %w", k, e.Original(), ErrNATDone)
	}
	if err := r.normalize(e.addr(0)); err != nil {
		return fmt.Errorf("setup %v for %v: %w", k, e.Original(), err)
	}
	var curr Tuple
	reply := e.Reply()
	reply.reverseInto(&curr)
	next := t.uniqueTuple(curr, r, k, e)
	if next != curr {
		next.reverseInto(&reply)
		e.setTuple(Reply, &reply)
		if k == SNAT {
			e.Status |= StatusSrcNAT
		} else {
			e.Status |= StatusDstNAT
		}
	}
	e.Status |= done
	return nil
}

// SetupNullNAT records the identity binding the kernel installs when no
// nat rule fired for kind k at this hook (nf_nat_alloc_null_binding). For
// SNAT this still moves the source port if the reply tuple is taken.
// It does nothing if a binding of kind k already exists.
func (t *Table) SetupNullNAT(e *Entry, k NATKind) error {
	if e == nil || e.NATDone(k) {
		return nil
	}
	addr := e.addr(2) // DNAT: keep the current destination (the reply's source)
	if k == SNAT {
		addr = e.addr(3)
	}
	return t.SetupNAT(e, k, NATRange{MinAddr: addr, MaxAddr: addr})
}

// NATDone reports whether a binding of kind k (possibly the identity) has
// been set up, i.e. whether the nat table has been consulted for it.
func (e *Entry) NATDone(k NATKind) bool {
	if k == SNAT {
		return e.Status&StatusSrcNATDone != 0
	}
	return e.Status&StatusDstNATDone != 0
}

func (r *NATRange) normalize(fam netip.Addr) error {
	if r.MinAddr.IsValid() {
		if !r.MaxAddr.IsValid() {
			r.MaxAddr = r.MinAddr
		}
		if r.MinAddr.Is4() != fam.Is4() || r.MaxAddr.Is4() != fam.Is4() {
			return fmt.Errorf("%w: %v-%v for an %s connection", ErrBadRange, r.MinAddr, r.MaxAddr, familyName(fam))
		}
		// A single address (DNAT to a pod, MASQUERADE) needs no ordering:
		// netip's Compare is not cheap, and this runs per connection.
		if r.MaxAddr != r.MinAddr && r.MaxAddr.Less(r.MinAddr) {
			return fmt.Errorf("%w: %v-%v is reversed", ErrBadRange, r.MinAddr, r.MaxAddr)
		}
		if !r.MinAddr.Is4() && r.MaxAddr != r.MinAddr && prefix64(r.MinAddr) != prefix64(r.MaxAddr) {
			return fmt.Errorf("%w: IPv6 range %v-%v spans more than a /64 (not modelled)", ErrBadRange, r.MinAddr, r.MaxAddr)
		}
	}
	if r.MaxPort == 0 {
		r.MaxPort = r.MinPort
	}
	if r.MaxPort < r.MinPort {
		r.MinPort, r.MaxPort = r.MaxPort, r.MinPort // the kernel swaps too
	}
	return nil
}

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func prefix64(a netip.Addr) uint64 {
	b := a.As16()
	return binary.BigEndian.Uint64(b[:8])
}

// used reports whether tuple tp (an original-direction view) would clash:
// its reverse is held by another live entry (nf_nat_used_tuple).
func (t *Table) used(tp *Tuple, e *Entry) bool {
	var rev Tuple
	tp.reverseInto(&rev)
	x, _, ok := t.idx.get(&rev)
	if !ok || x == e {
		return false
	}
	if x.expired(t.clock.Now()) {
		t.Remove(x) // as lookup does: an expired entry holds nothing
		return false
	}
	return true
}

func (r *NATRange) protoSpecified() bool { return r.MinPort != 0 }

// inRange reports whether the part of tp that kind k rewrites lies in r.
func (r *NATRange) inRange(tp *Tuple, k NATKind) bool {
	a, p := tp.Src, tp.SrcPort
	if k == DNAT {
		a, p = tp.Dst, tp.DstPort
		if tp.IsICMP() {
			p = tp.SrcPort
		}
	}
	switch {
	case !r.MinAddr.IsValid():
	case r.MinAddr == r.MaxAddr:
		if a != r.MinAddr {
			return false
		}
	case a.Less(r.MinAddr) || r.MaxAddr.Less(a):
		return false
	}
	if !r.protoSpecified() {
		return true
	}
	if !tp.IsICMP() && !tp.Proto.HasPorts() {
		return true
	}
	return p >= r.MinPort && p <= r.MaxPort
}

func (t *Table) uniqueTuple(orig Tuple, r NATRange, k NATKind, e *Entry) Tuple {
	randomAll := r.Flags&(NATRandom|NATRandomFully) != 0
	if k == SNAT && !randomAll {
		if r.inRange(&orig, k) {
			if !t.used(&orig, e) {
				return orig
			}
		} else if x, _, ok := t.bySrc.get(&orig); ok && x != e {
			cand := x.Reply().Reverse()
			cand.Dst, cand.DstPort = orig.Dst, orig.DstPort
			if orig.IsICMP() {
				cand.ICMPType, cand.ICMPCode = orig.ICMPType, orig.ICMPCode
			}
			if r.inRange(&cand, k) && !t.used(&cand, e) {
				return cand
			}
		}
	}
	tp := orig
	r.pickAddr(&tp, k)
	if !randomAll {
		if r.protoSpecified() {
			if r.Flags&NATOffset == 0 && r.inRange(&tp, k) && (r.MinPort == r.MaxPort || !t.used(&tp, e)) {
				return tp
			}
		} else if !t.used(&tp, e) {
			return tp
		}
	}
	t.uniquePort(&tp, r, k, e)
	return tp
}

// pickAddr chooses the address in the range as the kernel's
// find_best_ips_proto does: jhash2 over the source address (the 16 bytes
// of the tuple's address union, IPv4 in the first word), seeded by the
// last word of the destination unless persistent, scaled into the range
// word by word. Words are read in the host's byte order; this reproduces
// a little-endian (x86, arm64) kernel, with conntrack zone 0 in the seed
// as Tuple.Zone.
func (r *NATRange) pickAddr(tp *Tuple, k NATKind) {
	if !r.MinAddr.IsValid() {
		return
	}
	dst := &tp.Src
	if k == DNAT {
		dst = &tp.Dst
	}
	if r.MinAddr == r.MaxAddr {
		*dst = r.MinAddr
		return
	}
	persistent := r.Flags&NATPersistent != 0
	v4 := r.MinAddr.Is4()
	words := func(a netip.Addr) (w [4]uint32) {
		var b [16]byte
		if a.Is4() {
			a4 := a.As4()
			copy(b[:], a4[:])
		} else {
			b = a.As16()
		}
		for i := range w {
			w[i] = binary.LittleEndian.Uint32(b[4*i:])
		}
		return w
	}
	src, dw := words(tp.Src), words(tp.Dst)
	last := 3
	if v4 {
		last = 0
	}
	var seed uint32
	if !persistent {
		seed = dw[last] ^ uint32(tp.Zone)
	}
	j := jhash.Words(src[:], seed)
	minB, maxB := r.MinAddr.As16(), r.MaxAddr.As16()
	if v4 {
		m4, x4 := r.MinAddr.As4(), r.MaxAddr.As4()
		minB, maxB = [16]byte{}, [16]byte{}
		copy(minB[:], m4[:])
		copy(maxB[:], x4[:])
	}
	var out [16]byte
	full := false
	for i := 0; i <= last; i++ {
		var lo, dist uint32
		if !full {
			lo = binary.BigEndian.Uint32(minB[4*i:])
			dist = binary.BigEndian.Uint32(maxB[4*i:]) - lo + 1
		} else {
			dist = ^uint32(0)
		}
		v := lo + uint32(uint64(j)*uint64(dist)>>32)
		binary.BigEndian.PutUint32(out[4*i:], v)
		if v != binary.BigEndian.Uint32(maxB[4*i:]) {
			full = true
		}
		if !persistent {
			j ^= dw[i]
		}
	}
	if v4 {
		*dst = netip.AddrFrom4([4]byte(out[:4]))
		return
	}
	*dst = netip.AddrFrom16(out)
}

// uniquePort searches a free port or ICMP id (kernel
// nf_nat_l4proto_unique_tuple): up to 128 tries from a random offset, then
// rounds with half as many tries from a new offset, down to 16.
func (t *Table) uniquePort(tp *Tuple, r NATRange, k NATKind, e *Entry) {
	var key *uint16
	var lo, size uint32
	switch {
	case tp.IsICMP():
		key = &tp.SrcPort
		if !r.protoSpecified() {
			lo, size = 0, 65536
		} else {
			lo, size = uint32(r.MinPort), uint32(r.MaxPort-r.MinPort)+1
		}
	case tp.Proto.HasPorts():
		key = &tp.SrcPort
		if k == DNAT {
			key = &tp.DstPort
		}
		switch {
		case r.protoSpecified():
			lo, size = uint32(r.MinPort), uint32(r.MaxPort-r.MinPort)+1
		case k == DNAT:
			return
		case *key < 512:
			lo, size = 1, 511
		case *key < 1024:
			lo, size = 600, 1023-600+1
		default:
			lo, size = 1024, 65535-1024+1
		}
	default:
		return
	}
	var off uint16
	switch {
	case r.Flags&NATOffset != 0 && r.protoSpecified():
		off = *key - r.Base
	case r.Flags&(NATRandom|NATRandomFully) != 0 || k != DNAT:
		off = uint16(t.rng.Uint32())
	}
	attempts := min(size, 128)
	for {
		for i := uint32(0); i < attempts; i, off = i+1, off+1 {
			*key = uint16(lo + uint32(off)%size)
			if !t.used(tp, e) {
				return
			}
		}
		if attempts >= size || attempts < 16 {
			return
		}
		attempts /= 2
		off = uint16(t.rng.Uint32())
	}
}

// Translate returns pkt, the tuple of a packet of this entry travelling in
// direction dir, after the manipulation of kind k (kernel nf_nat_packet):
// call it with DNAT at PREROUTING and OUTPUT and with SNAT at INPUT and
// POSTROUTING. In the original direction it applies the entry's own
// binding of that kind; in the reply direction it undoes the other kind
// (a reply's destination is de-SNATed at PREROUTING, its source de-DNATed
// at POSTROUTING). The second result reports whether pkt changed.
func (e *Entry) Translate(k NATKind, dir Dir, pkt Tuple) (Tuple, bool) {
	addr, port, ok := e.Rewrite(k, dir)
	if !ok {
		return pkt, false
	}
	out := pkt
	if k == SNAT {
		out.Src = addr
		if pkt.Proto.HasPorts() {
			out.SrcPort = port
		}
	} else {
		out.Dst = addr
		if pkt.Proto.HasPorts() {
			out.DstPort = port
		}
	}
	if pkt.IsICMP() {
		out.SrcPort = port // the echo id follows the binding
	}
	return out, out != pkt
}

// Rewrite returns what the manipulation of kind k writes into a packet of
// this entry travelling in direction dir (see Translate): the address (the
// source for SNAT, the destination for DNAT) and the port on that side,
// or for ICMP the echo identifier. ok is false when such packets are not
// rewritten. It reads the other direction's tuple, reversed, field by
// field, as it runs for every packet of a NATed connection.
func (e *Entry) Rewrite(k NATKind, dir Dir) (addr netip.Addr, port uint16, ok bool) {
	if !e.manips(k, dir) {
		return netip.Addr{}, 0, false
	}
	o := 1 - dir&1 // the other direction
	i := 2 * int(o)
	switch {
	case e.proto.IsICMP():
		port = e.port[i]
	case k == SNAT:
		port = e.port[i+1]
	default:
		port = e.port[i]
	}
	if k == SNAT {
		return e.addr(i + 1), port, true
	}
	return e.addr(i), port, true
}

// TranslateRelated rewrites an ICMP error RELATED to this entry (kernel
// nf_nat_icmp_reply_translation): outer is the error's own tuple, inner
// the embedded packet's. The inner packet gets the opposite manipulation,
// so the receiver sees the header of the packet it actually sent.
func (e *Entry) TranslateRelated(k NATKind, dir Dir, outer, inner Tuple) (Tuple, Tuple, bool) {
	if !e.manips(k, dir) {
		return outer, inner, false
	}
	other := e.Tuple(1 - dir)
	o, in := outer, inner
	if k == SNAT {
		in.Dst = other.Dst
		if in.Proto.HasPorts() {
			in.DstPort = other.DstPort
		}
	} else {
		in.Src = other.Src
		if in.Proto.HasPorts() {
			in.SrcPort = other.SrcPort
		}
	}
	if in.IsICMP() {
		in.SrcPort = other.SrcPort
	}
	target := other.Reverse()
	if k == SNAT {
		o.Src = target.Src
	} else {
		o.Dst = target.Dst
	}
	return o, in, o != outer || in != inner
}

// manips reports whether a packet in dir gets a manipulation of kind k.
func (e *Entry) manips(k NATKind, dir Dir) bool {
	bit := StatusSrcNAT
	if k == DNAT {
		bit = StatusDstNAT
	}
	if dir == Reply {
		bit ^= StatusNATMask
	}
	return e.Status&bit != 0
}
