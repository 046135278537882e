package ipset

import "time"

// The "Size in memory" figure of `ipset list`, as kernel 6.18 (amd64)
// computes it in each type's head function:
//
//	hash:   sizeof(struct htype) + sizeof(struct htable)
//	        + one ip_set_region (24 bytes) per 1024 buckets (at least one)
//	        + the bytes booked for buckets (htable.go: 32 + 2 slots for a
//	          new bucket and again for every growth or shrink step, a freed
//	          bucket gives back 32 + its slots)
//	bitmap: sizeof(struct bitmap_*) + the bit array in whole longs
//	        + one extension record (dsize) per possible element
//	list:   sizeof(struct list_set) + dsize per member
//
// plus, for every type, the comments stored (16-byte rcu header, the text
// and its NUL each). The struct sizes were measured with the real tool on
// empty sets; dsize follows ip_set_elem_len: the element, then timeout (8),
// counters (16), comment pointer (8) and skbinfo (16), each aligned to its
// alignment, the total aligned to the largest.

// hashLayout is what a hash type's figure is built from, per family.
type hashLayout struct {
	base [2]int // struct htype + struct htable + one region, inet/inet6
	elem [2]int // sizeof(struct mtype_elem), inet/inet6 (all 4-aligned)
}

var hashLayouts = map[string]hashLayout{
	"hash:ip":          {base: [2]int{216, 224}, elem: [2]int{4, 16}},
	"hash:net":         {base: [2]int{456, 1240}, elem: [2]int{8, 20}},
	"hash:ip,port":     {base: [2]int{216, 232}, elem: [2]int{8, 20}},
	"hash:net,port":    {base: [2]int{456, 1240}, elem: [2]int{8, 20}},
	"hash:ip,port,ip":  {base: [2]int{208, 232}, elem: [2]int{12, 36}},
	"hash:ip,port,net": {base: [2]int{464, 1256}, elem: [2]int{12, 36}},
	"hash:net,iface":   {base: [2]int{488, 1264}, elem: [2]int{28, 40}},
}

const (
	hbucketHeader   = 32 // struct hbucket before its values
	ahashInitSize   = 2  // slots per bucket allocation step
	regionSize      = 24 // struct ip_set_region
	regionBits      = 10 // one region lock per 1024 buckets
	bitmapIPStruct  = 88 // struct bitmap_ip
	bitmapPortBase  = 72 // struct bitmap_port
	listSetStruct   = 80 // struct list_set
	listSetElem     = 48 // struct set_elem
	commentOverhead = 17 // struct ip_set_comment_rcu (16) and the NUL
)

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// dsize is the kernel's per-element record size: the element of elemLen
// bytes aligned to elemAlign, then the extensions the set was created with.
func (s *Set) dsize(elemLen, elemAlign int) int {
	n, al := elemLen, max(elemAlign, 1)
	ext := func(size, align int) {
		n = alignUp(n, align) + size
		al = max(al, align)
	}
	if s.hasTimeout {
		ext(8, 8)
	}
	if s.counters {
		ext(16, 8)
	}
	if s.comment {
		ext(8, 8)
	}
	if s.skbinfo {
		ext(16, 4)
	}
	return alignUp(n, al)
}

// memSize is the "Size in memory" of the set at now.
func (s *Set) memSize(now time.Time) int {
	comments := 0
	var ms []*entry
	if s.typ.kind != kindHash {
		ms = s.members(now)
	}
	for _, e := range ms {
		if e.comment != "" {
			comments += commentOverhead + len(e.comment)
		}
	}
	switch s.typ.kind {
	case kindBitmap:
		n := s.bitmapElements()
		base := bitmapPortBase
		if s.typ.dims[0] == dimIP {
			base = bitmapIPStruct
		}
		return base + (n+63)/64*8 + n*s.dsize(0, 1) + comments
	case kindList:
		return listSetStruct + len(ms)*s.dsize(listSetElem, 8) + comments
	}
	l := hashLayouts[s.typ.name]
	fam := 0
	if s.family == 6 {
		fam = 1
	}
	// Comments of expired entries still waiting for the gc count too.
	comments = 0
	if s.comment {
		s.eachHashMember(now, true, func(id uint32) {
			if c := s.rec.cmt[id]; c != 0 {
				comments += commentOverhead + len(s.comments.str(c))
			}
		})
	}
	regions := 1
	if s.tbl.bits > regionBits {
		regions = 1 << (s.tbl.bits - regionBits)
	}
	return l.base[fam] + (regions-1)*regionSize + s.tbl.extSize + comments
}

// bitmapElements is how many elements the bitmap can hold.
func (s *Set) bitmapElements() int {
	if s.typ.dims[0] == dimBPort {
		return int(s.portHi) - int(s.portLo) + 1
	}
	return int(bitmapCount(s.rangeLo, s.rangeHi, s.netmask))
}
