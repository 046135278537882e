package ipset

import "time"

// CounterOp compares an entry counter with a value, as the set match's
// --packets-eq/-lt/-gt and --bytes-eq/-lt/-gt options do ("! --packets-eq"
// is CounterNE).
type CounterOp uint8

// Counter comparisons.
const (
	CounterNone CounterOp = iota // no comparison
	CounterEQ
	CounterNE
	CounterLT
	CounterGT
)

func (op CounterOp) holds(counter, v uint64) bool {
	switch op {
	case CounterEQ:
		return counter == v
	case CounterNE:
		return counter != v
	case CounterLT:
		return counter < v
	case CounterGT:
		return counter > v
	}
	return true
}

// MatchOptions is how the set match looks a packet up (see Set.Match).
type MatchOptions struct {
	// Dims is the number of src/dst flags the match gives; a set with more
	// dimensions never matches. 0 skips the check.
	Dims int
	// Len is the packet length the entry's byte counter grows by.
	Len int
	// NoUpdate and NoUpdateSub are "! --update-counters" and
	// "! --update-subcounters" (the members of a list:set).
	NoUpdate, NoUpdateSub bool
	// ReturnNomatch is --return-nomatch: in types that have nomatch
	// entries, a nomatch entry matches and a plain entry does not.
	ReturnNomatch bool
	// PacketsOp and BytesOp compare a candidate entry's counters (this
	// packet already counted) with Packets and Bytes. An entry failing the
	// comparison does not decide: the lookup goes on past it, to a shorter
	// prefix in the net types. No effect on a set without counters.
	PacketsOp, BytesOp CounterOp
	Packets, Bytes     uint64
}

// accept is the kernel's extension check on a live candidate entry (o may
// be nil: no side effects). The entry is counted first, then compared: an
// entry whose counters fail the comparison is passed over, but keeps the
// count, as on kernel 6.18.
func (s *Set) accept(o *MatchOptions, e *entry) bool {
	if o == nil || !s.counters {
		return true
	}
	if !o.NoUpdate {
		e.packets++
		e.bytes += uint64(o.Len)
	}
	return o.PacketsOp.holds(e.packets, o.Packets) && o.BytesOp.holds(e.bytes, o.Bytes)
}

// Match answers the set match for a packet key at time now, with the
// kernel's side effects: unless o.NoUpdate, each candidate entry visited
// (nomatch entries included) is counted, the deciding one and those passed
// over by a failed comparison. It does not allocate.
func (s *Set) Match(k Key, now time.Time, o *MatchOptions) bool {
	if o.Dims > 0 && o.Dims < s.Dimension() {
		return false
	}
	if s.typ.kind == kindList {
		return s.listMatch(k, now, o)
	}
	var match bool
	if s.typ.kind == kindHash {
		if found, nm, ok := s.kidxLookup(&k, true); ok {
			if !found {
				return false
			}
			match = !nm
		} else {
			id, _ := s.packetFind(&k, now, o)
			if id < 0 {
				return false
			}
			match = *s.flag(uint32(id))&recNomatch == 0
		}
	} else {
		ek, ok := s.keyFromPacket(k)
		if !ok {
			return false
		}
		e := s.bfind(ek, now, o)
		if e == nil {
			return false
		}
		match = !e.nomatch
	}
	if o.ReturnNomatch && s.typ.nomatch {
		match = !match
	}
	return match
}

// listMatch tests the members in order without counter comparisons; the
// first member that matches decides if the list's own entry passes them.
func (s *Set) listMatch(k Key, now time.Time, o *MatchOptions) bool {
	sub := *o
	sub.PacketsOp, sub.BytesOp = CounterNone, CounterNone
	sub.NoUpdate = o.NoUpdate || o.NoUpdateSub
	for _, e := range s.order {
		if e.dead {
			continue
		}
		m := s.reg.Get(e.k.name)
		if m == nil || !m.Match(k, now, &sub) {
			continue
		}
		// The kernel tests the member before the list entry's timeout
		// (list_set_ktest, ip_set_match_extensions): an expired member
		// still counts the packet in its own set.
		if e.expired(now) {
			continue
		}
		if s.accept(o, e) {
			return true
		}
	}
	return false
}

// Dimension returns the number of src/dst flags a set match or SET target
// needs for this set's type; with fewer the kernel neither matches nor
// adds or deletes.
func (s *Set) Dimension() int { return len(s.typ.dims) }
