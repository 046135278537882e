package ipset

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"go4.org/netipx"
)

// Clock supplies the time that entry timeouts count against.
type Clock interface{ Now() time.Time }

// Registry holds the sets of one network namespace, in kernel index order.
type Registry struct {
	clock Clock
	rnd   *rand.Rand
	slots []*Set // nil slots are free; a new set takes the first free one
	// filterMin is the size from which a set keeps a pfilter (tests
	// lower it to exercise the filter on small sets).
	filterMin int
	// bulk is set during Restore: sets defer their filter to the end.
	bulk bool
}

// endBulk builds the filters and indexes that a Restore deferred.
func (r *Registry) endBulk() {
	r.bulk = false
	for _, s := range r.slots {
		if s != nil && s.filterDirty {
			s.filterDirty = false
			if s.filtered() && s.filter == nil && s.rec.live >= r.filterMin {
				s.buildFilter()
			}
			if s.indexed() && s.kidx == nil {
				s.buildKidx()
			}
		}
	}
}

// NewRegistry returns an empty registry. rnd draws the initval of hash sets
// created without one; nil uses a fixed seed so runs are reproducible.
func NewRegistry(clock Clock, rnd *rand.Rand) *Registry {
	if rnd == nil {
		rnd = rand.New(rand.NewPCG(1, 2))
	}
	return &Registry{clock: clock, rnd: rnd, filterMin: pfilterMin}
}

// Get returns the named set, or nil.
func (r *Registry) Get(name string) *Set {
	for _, s := range r.slots {
		if s != nil && s.name == name {
			return s
		}
	}
	return nil
}

func (r *Registry) must(name string) (*Set, error) {
	if s := r.Get(name); s != nil {
		return s, nil
	}
	return nil, ErrNotFound
}

// Names returns the set names sorted.
func (r *Registry) Names() []string {
	var n []string
	for _, s := range r.slots {
		if s != nil {
			n = append(n, s.name)
		}
	}
	slices.Sort(n)
	return n
}

// Ref takes a reference on a set, as an iptables set match does.
func (r *Registry) Ref(name string) (*Set, error) {
	s, err := r.must(name)
	if err != nil {
		return nil, err
	}
	s.refs++
	return s, nil
}

// Unref drops a reference taken with Ref.
func (r *Registry) Unref(name string) error {
	s, err := r.must(name)
	if err != nil {
		return err
	}
	if s.refs > 0 {
		s.refs--
	}
	return nil
}

func (r *Registry) forMembers(l *Set, fn func(*Set) error) error {
	var last error = ErrNotAdded
	for _, e := range l.members(r.clock.Now()) {
		if m := r.Get(e.k.name); m != nil {
			if err := fn(m); err == nil {
				return nil
			} else {
				last = err
			}
		}
	}
	return last
}

// Create makes a set from the ipset create arguments, such as
// Create("S", "hash:net", "family", "inet", "hashsize", "1024"). With exist,
// creating a set identical to an existing one is not an error.
func (r *Registry) Create(name, typeName string, exist bool, opts ...string) error {
	if len(name) > 31 {
		return syntaxError("setname '%s' is longer than 31 characters", name)
	}
	t := setTypes[typeName]
	if t == nil {
		if refusedTypes[typeName] {
			return ErrNotModelled
		}
		return syntaxError("Unknown set type %s", typeName)
	}
	s := &Set{reg: r, name: name}
	s.typ = t
	s.family, s.hashsize, s.maxelem, s.bucketsize = 4, 1024, 65536, 12
	s.size = 8
	hasInitval, hasRange := false, false
	for i := 0; i < len(opts); i++ {
		o := opts[i]
		val := func() (string, error) { return optValue(opts, &i, o) }
		num := func(max uint64) (uint64, error) { return optNumber(opts, &i, o, max) }
		var err error
		var n uint64
		switch {
		case o == "family" && t.kind == kindHash:
			var v string
			if v, err = val(); err == nil {
				switch v {
				case "inet", "ipv4":
					s.family = 4
				case "inet6", "ipv6":
					s.family = 6
				default:
					err = syntaxError("unknown family %s", v)
				}
			}
		case o == "hashsize" && t.kind == kindHash:
			if n, err = num(1<<31 - 1); err == nil {
				s.hashsize = roundHashsize(int(n))
			}
		case o == "maxelem" && t.kind == kindHash:
			if n, err = num(1<<32 - 1); err == nil {
				s.maxelem = int(n)
			}
		case o == "bucketsize" && t.kind == kindHash:
			if n, err = num(255); err == nil {
				// The kernel keeps it even, within 2..12 (observed: 1 -> 2,
				// 3 -> 4, 200 -> 12).
				s.bucketsize = min(max(int(n), ahashInitSize), ahashMaxSize)
				s.bucketsize += s.bucketsize % 2
			}
		case o == "initval" && t.kind == kindHash:
			if n, err = num(1<<32 - 1); err == nil {
				s.initval, hasInitval = uint32(n), true
			}
		case o == "timeout":
			if n, err = num(2147483); err == nil {
				s.hasTimeout, s.timeout = true, int(n)
			}
		case o == "counters":
			s.counters = true
		case o == "comment":
			s.comment = true
		case o == "skbinfo":
			s.skbinfo = true
		case o == "forceadd" && t.kind == kindHash:
			s.forceadd = true
		case o == "netmask" && t.netmask:
			if n, err = num(128); err == nil {
				s.netmask = int(n)
			}
		case o == "size" && t.kind == kindList:
			if n, err = num(1<<31 - 1); err == nil {
				s.size = max(int(n), 4)
			}
		case o == "range" && t.kind == kindBitmap:
			var v string
			if v, err = val(); err == nil {
				err = s.parseRange(v)
				hasRange = true
			}
		default:
			err = unknownArg(o)
		}
		if err != nil {
			return err
		}
	}
	if s.family == 6 && !t.inet6 {
		return syntaxError("family inet6 is not supported by %s", t.name)
	}
	if t.kind == kindBitmap && !hasRange {
		return syntaxError("Missing mandatory option: range")
	}
	if s.netmask != 0 {
		if s.netmask > s.maxBits() || s.netmask < 1 {
			return syntaxError("'%d' is out of range 1-%d", s.netmask, s.maxBits())
		}
		if s.netmask == s.maxBits() {
			s.netmask = 0
		}
	}
	if t.kind == kindBitmap && t.dims[0] == dimIP {
		if s.netmask != 0 {
			s.rangeLo = netip.PrefixFrom(s.rangeLo, s.netmask).Masked().Addr()
			s.rangeHi = netipx.PrefixLastIP(netip.PrefixFrom(s.rangeHi, s.netmask).Masked())
		}
		if s.netmask != 0 {
			// bitmap_ip_create: the masked range must start on the
			// boundary of the smallest prefix covering it, and netmask
			// must be longer than that prefix (one element is refused).
			bits, mask := rangeToMask(addr4(s.rangeLo), addr4(s.rangeHi))
			if (mask == 0 && (addr4(s.rangeLo) != 0 || addr4(s.rangeHi) != 0xffffffff)) || s.netmask <= bits {
				return ErrOutOfRange
			}
		}
		if bitmapCount(s.rangeLo, s.rangeHi, s.netmask) > 65536 {
			return ErrRangeTooBig
		}
	}
	if t.kind == kindHash && !hasInitval {
		s.initval = r.rnd.Uint32()
	}
	s.entries = map[ekey]*entry{}
	if t.kind == kindHash {
		s.epoch = r.clock.Now()
		s.initHash()
	}
	if old := r.Get(name); old != nil {
		if exist && old.sameAs(s) {
			return nil
		}
		return ErrSetExists
	}
	for i, x := range r.slots {
		if x == nil {
			r.slots[i] = s
			return nil
		}
	}
	r.slots = append(r.slots, s)
	return nil
}

// bitmapCount is how many elements a bitmap:ip allocates: every address
// of the range, or with a netmask 2^(netmask - bits) for the prefix of
// length bits covering the range (more than the range holds when it is
// not a prefix itself, e.g. 4 for 10.0.0.0-10.0.0.47 netmask 28).
func bitmapCount(lo, hi netip.Addr, netmask int) uint64 {
	a, b := addr4(lo), addr4(hi)
	if netmask == 0 {
		return uint64(b) - uint64(a) + 1
	}
	bits, _ := rangeToMask(a, b)
	return 1 << uint(netmask-bits)
}

func addr4(a netip.Addr) uint32 {
	x := a.As4()
	return uint32(x[0])<<24 | uint32(x[1])<<16 | uint32(x[2])<<8 | uint32(x[3])
}

// rangeToMask is the kernel's range_to_mask: the longest mask under which
// to falls back on from, and its length (0 with mask 0 when none does).
func rangeToMask(from, to uint32) (bits int, mask uint32) {
	mask, bits = 0xfffffffe, 32
	for {
		bits--
		if bits <= 0 || mask == 0 || to&mask == from {
			return bits, mask
		}
		mask <<= 1
	}
}

func roundHashsize(n int) int {
	h := 64
	for h < n {
		h <<= 1
	}
	return h
}

// sameAs is the kernel's test for `create -exist` on an existing name:
// hashsize and initval may differ.
func (s *Set) sameAs(o *Set) bool {
	return s.typ == o.typ && s.family == o.family && s.maxelem == o.maxelem &&
		s.hasTimeout == o.hasTimeout && s.timeout == o.timeout && s.counters == o.counters &&
		s.comment == o.comment && s.skbinfo == o.skbinfo && s.netmask == o.netmask &&
		s.rangeLo == o.rangeLo && s.rangeHi == o.rangeHi && s.portLo == o.portLo &&
		s.portHi == o.portHi && s.size == o.size && s.forceadd == o.forceadd
}

func (s *Set) parseRange(v string) error {
	if s.typ.dims[0] == dimBPort {
		as, bs, ok := strings.Cut(v, "-")
		if !ok {
			return syntaxError("Missing range separator in %s", v)
		}
		lo, err := parsePortNum(as, "tcp")
		if err != nil {
			return err
		}
		hi, err := parsePortNum(bs, "tcp")
		if err != nil {
			return err
		}
		if hi < lo {
			lo, hi = hi, lo
		}
		s.portLo, s.portHi = lo, hi
		return nil
	}
	if strings.Contains(v, "/") {
		p, err := netip.ParsePrefix(v)
		if err != nil || !p.Addr().Is4() {
			return syntaxError("cannot parse %s: resolving to IPv4 address failed", v)
		}
		p = p.Masked()
		s.rangeLo, s.rangeHi = p.Addr(), netipx.PrefixLastIP(p)
		return nil
	}
	as, bs, ok := strings.Cut(v, "-")
	if !ok {
		return syntaxError("Missing range separator in %s", v)
	}
	a, b, err := s.parseAddrRange(as, bs)
	if err != nil {
		return err
	}
	s.rangeLo, s.rangeHi = a, b
	return nil
}

// Destroy removes the named set, or every set when name is empty. A set
// with references cannot be destroyed.
func (r *Registry) Destroy(name string) error {
	if name == "" {
		for _, s := range r.slots {
			if s != nil && s.refs > 0 {
				return ErrInUse
			}
		}
		r.slots = nil
		return nil
	}
	for i, s := range r.slots {
		if s != nil && s.name == name {
			if s.refs > 0 {
				return ErrInUse
			}
			if s.typ.kind == kindList {
				for _, e := range s.members(r.clock.Now()) {
					_ = r.Unref(e.k.name)
				}
			}
			r.slots[i] = nil
			for len(r.slots) > 0 && r.slots[len(r.slots)-1] == nil {
				r.slots = r.slots[:len(r.slots)-1]
			}
			return nil
		}
	}
	return ErrNotFound
}

// Flush empties the named set, or every set when name is empty.
func (r *Registry) Flush(name string) error {
	for _, s := range r.slots {
		if s != nil && (name == "" || s.name == name) {
			if s.typ.kind == kindList {
				for _, e := range s.members(r.clock.Now()) {
					_ = r.Unref(e.k.name)
				}
			}
			s.entries = map[ekey]*entry{}
			s.order, s.dead = nil, 0
			s.cidr1, s.cidr2 = [129]int{}, [129]int{}
			s.lens1, s.lens2, s.pres1, s.pres2 = nil, nil, 0, 0
			if s.typ.kind == kindHash {
				// Flush frees the buckets; the table keeps its size.
				s.initHash()
			}
			if name != "" {
				return nil
			}
		}
	}
	if name != "" {
		return ErrNotFound
	}
	return nil
}

// Rename renames a set that has no references.
func (r *Registry) Rename(from, to string) error {
	s, err := r.must(from)
	if err != nil {
		return err
	}
	if s.refs > 0 {
		return ErrRenameInUse
	}
	if r.Get(to) != nil {
		return ErrRenameExists
	}
	s.name = to
	return nil
}

// Swap exchanges the contents of two sets of the same type and family.
// Names, references and *Set handles stay, so a rule that refers to a
// name sees the other content afterwards, as in the kernel.
func (r *Registry) Swap(a, b string) error {
	sa, err := r.must(a)
	if err != nil {
		return err
	}
	sb, err := r.must(b)
	if err != nil {
		return err
	}
	if sa.typ != sb.typ || sa.family != sb.family {
		return ErrTypeMismatch
	}
	sa.setContent, sb.setContent = sb.setContent, sa.setContent
	return nil
}

// Add adds an element given as ipset text, with optional per-entry options
// (timeout, nomatch, packets, bytes, comment, skbmark, skbprio, skbqueue,
// before/after for list:set).
func (r *Registry) Add(name, elem string, exist bool, opts ...string) error {
	s, err := r.must(name)
	if err != nil {
		return err
	}
	o, err := s.parseAddOpts(opts)
	if err != nil {
		return err
	}
	if s.typ.kind == kindList {
		return r.listAdd(s, elem, o, exist)
	}
	return s.eachElem(elem, func(k ekey) error {
		err := s.insertKey(k, o, exist)
		if err == ErrExists && exist {
			return nil
		}
		return err
	})
}

// Del deletes an element given as ipset text. With exist, deleting an
// absent element is not an error.
func (r *Registry) Del(name, elem string, exist bool) error {
	s, err := r.must(name)
	if err != nil {
		return err
	}
	if s.typ.kind == kindList {
		e := s.entries[ekey{name: elem}]
		if e == nil || e.expired(r.clock.Now()) {
			if r.Get(elem) == nil {
				return ErrMemberMissing
			}
			if exist {
				return nil
			}
			return ErrNotAdded
		}
		s.removeEntry(e)
		return r.Unref(elem)
	}
	return s.eachElem(elem, func(k ekey) error {
		err := s.deleteKey(k)
		if err == ErrNotAdded && exist {
			return nil
		}
		return err
	})
}

// Test answers `ipset test`: true for "is in set" (exit 0), false for
// "is NOT in set" (exit 1). As in the kernel, a CIDR, address range or port
// range given to a type that expands them tests only its first element.
func (r *Registry) Test(name, elem string) (bool, error) {
	s, err := r.must(name)
	if err != nil {
		return false, err
	}
	now := r.clock.Now()
	if s.typ.kind == kindList {
		e := s.entries[ekey{name: elem}]
		return e != nil && !e.expired(now), nil
	}
	in := true
	err = s.eachElem(elem, func(k ekey) error {
		in = s.testKey(k, now)
		return errStop
	})
	if err == errStop {
		err = nil
	}
	return in && err == nil, err
}

func (r *Registry) listAdd(s *Set, elem string, o *addOpts, exist bool) error {
	m := r.Get(elem)
	if m == nil {
		return ErrMemberMissing
	}
	if m.typ.kind == kindList {
		return ErrListInList
	}
	ref := o.before + o.after
	if ref != "" && s.entries[ekey{name: ref}] == nil {
		return ErrMemberMissing
	}
	k := ekey{name: elem}
	had := s.entries[k] != nil && !s.entries[k].expired(r.clock.Now())
	if err := s.insertKey(k, o, exist); err != nil {
		if err == ErrExists && exist {
			return nil
		}
		return err
	}
	if had {
		return nil
	}
	m.refs++
	if ref != "" { // move the new entry next to ref
		e := s.entries[k]
		s.order = slices.DeleteFunc(s.order, func(x *entry) bool { return x == e })
		i := slices.IndexFunc(s.order, func(x *entry) bool { return x.k.name == ref && !x.dead })
		if o.after != "" {
			i++
		}
		s.order = slices.Insert(s.order, i, e)
	}
	return nil
}

func (s *Set) parseAddOpts(opts []string) (*addOpts, error) {
	o := &addOpts{}
	for i := 0; i < len(opts); i++ {
		tok := opts[i]
		val := func() (string, error) { return optValue(opts, &i, tok) }
		num := func(max uint64) (uint64, error) { return optNumber(opts, &i, tok, max) }
		var err error
		var n uint64
		switch tok {
		case "timeout":
			if !s.hasTimeout {
				return nil, ErrNoTimeout
			}
			if n, err = num(2147483); err == nil {
				o.timeout, o.hasTimeout = int(n), true
			}
		case "nomatch":
			if !s.typ.nomatch {
				return nil, unknownArg(tok)
			}
			o.nomatch = true
		case "packets", "bytes":
			if !s.counters {
				return nil, ErrNoCounters
			}
			if n, err = num(1<<64 - 1); err == nil {
				o.hasCounter = true
				if tok == "packets" {
					o.packets = n
				} else {
					o.bytes = n
				}
			}
		case "comment":
			if !s.comment {
				return nil, ErrNoComment
			}
			var v string
			if v, err = val(); err == nil {
				if len(v) > 255 {
					v = v[:255]
				}
				o.comment, o.hasComment = v, true
			}
		case "skbmark", "skbprio", "skbqueue":
			if !s.skbinfo {
				return nil, ErrNoSkbinfo
			}
			err = o.parseSkb(tok, opts, &i)
		case "before", "after":
			if s.typ.kind != kindList {
				return nil, unknownArg(tok)
			}
			var v string
			if v, err = val(); err == nil {
				if tok == "before" {
					o.before = v
				} else {
					o.after = v
				}
			}
		default:
			return nil, unknownArg(tok)
		}
		if err != nil {
			return nil, err
		}
	}
	return o, nil
}

func (o *addOpts) parseSkb(tok string, opts []string, i *int) error {
	if *i+1 >= len(opts) {
		return syntaxError("Missing value for option %s", tok)
	}
	*i++
	v := opts[*i]
	bad := syntaxError("Invalid %s value: %s", tok, v)
	switch tok {
	case "skbmark":
		ms, ks, hasMask := strings.Cut(v, "/")
		m, err := strconv.ParseUint(ms, 0, 32)
		if err != nil {
			return bad
		}
		o.skbmark, o.skbmask = uint32(m), 0xffffffff
		if hasMask {
			k, err := strconv.ParseUint(ks, 0, 32)
			if err != nil {
				return bad
			}
			o.skbmask = uint32(k)
		}
	case "skbprio":
		as, bs, ok := strings.Cut(v, ":")
		a, err1 := strconv.ParseUint(as, 16, 16)
		b, err2 := strconv.ParseUint(bs, 16, 16)
		if !ok || err1 != nil || err2 != nil {
			return bad
		}
		o.skbprio = uint32(a)<<16 | uint32(b)
	case "skbqueue":
		q, err := strconv.ParseUint(v, 10, 16)
		if err != nil {
			return bad
		}
		o.skbqueue = uint16(q)
	}
	return nil
}

// sets returns the sets in kernel index order.
func (r *Registry) sets() []*Set {
	var out []*Set
	for _, s := range r.slots {
		if s != nil {
			out = append(out, s)
		}
	}
	return out
}

func (r *Registry) String() string { return fmt.Sprintf("ipset.Registry(%d sets)", len(r.sets())) }

// optValue returns the value after option name at opts[*i], advancing *i.
func optValue(opts []string, i *int, name string) (string, error) {
	if *i+1 >= len(opts) {
		return "", syntaxError("Missing value for option %s", name)
	}
	*i++
	return opts[*i], nil
}

// optNumber is optValue for a number from 0 to max, read as strtoull
// with base 0 does.
func optNumber(opts []string, i *int, name string, max uint64) (uint64, error) {
	v, err := optValue(opts, i, name)
	if err != nil {
		return 0, err
	}
	n, perr := strconv.ParseUint(v, 0, 64)
	if perr != nil {
		return 0, syntaxError("'%s' is invalid as number", v)
	}
	if n > max {
		return 0, syntaxError("'%s' is out of range 0-%d", v, max)
	}
	return n, nil
}
