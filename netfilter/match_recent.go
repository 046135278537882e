package netfilter

import (
	"fmt"
	"net/netip"
	"strconv"
	"time"
)

// RecentMode is what a recent match does with the address it reads.
type RecentMode uint8

// Recent modes (--set, --rcheck, --update, --remove).
const (
	RecentSet RecentMode = iota + 1
	RecentCheck
	RecentUpdate
	RecentRemove
)

var recentModeNames = map[RecentMode][2]string{
	RecentSet: {"set", "SET"}, RecentCheck: {"rcheck", "CHECK"}, RecentUpdate: {"update", "UPDATE"}, RecentRemove: {"remove", "REMOVE"},
}

// RecentMatch is "-m recent": a list of recently seen addresses per name,
// kept by the host (xt_recent). kube-proxy's ClientIP session affinity is
// built on it.
//
// Every field is exported and printed and tested as it stands, but the
// defaults depend on the family: build one with NewRecentMatch, which
// fills them in (the list "DEFAULT", the family's all-ones --mask,
// --rsource), and set the other fields on the result. An empty Name is
// the list "DEFAULT", and an invalid Mask masks nothing, but iptables
// always prints a --mask, so a RecentMatch literal needs one to print.
type RecentMatch struct {
	Mode     RecentMode
	Invert   bool
	Name     string // "DEFAULT" when not given
	Seconds  uint32 // only with --rcheck and --update
	HitCount uint32 // only with --rcheck and --update
	Reap     bool   // needs Seconds
	TTL      bool   // --rttl: the TTL must also equal the one recorded
	Dest     bool   // --rdest: the destination address instead of the source
	Mask     netip.Addr
}

// NewRecentMatch returns the recent match of family f with mode and the
// defaults of a rule that gives no other option: "-m recent --rcheck" is
// NewRecentMatch(IPv4, RecentCheck).
func NewRecentMatch(f Family, mode RecentMode) *RecentMatch {
	m := &RecentMatch{Mode: mode, Name: "DEFAULT"}
	if f == IPv6 {
		m.Mask = netip.AddrFrom16([16]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff})
	} else {
		m.Mask = netip.AddrFrom4([4]byte{255, 255, 255, 255})
	}
	return m
}

func init() {
	registerMatch(&module{name: "recent", opts: []option{
		{name: "set", invert: true}, {name: "rcheck", invert: true}, {name: "update", invert: true}, {name: "remove", invert: true},
		{name: "seconds", args: 1}, {name: "reap"}, {name: "hitcount", args: 1}, {name: "rttl"},
		{name: "name", args: 1}, {name: "rsource"}, {name: "rdest"}, {name: "mask", args: 1},
	}, newBuilder: func(c *ruleCtx) builder { return NewRecentMatch(c.family, 0) }})
}

// Module implements Match.
func (m *RecentMatch) Module() string { return "recent" }

func (m *RecentMatch) set(c *ruleCtx, opt string, inv bool, args []string) error {
	mode := map[string]RecentMode{"set": RecentSet, "rcheck": RecentCheck, "update": RecentUpdate, "remove": RecentRemove}
	if md, ok := mode[opt]; ok {
		if m.Mode != 0 {
			return fmt.Errorf("%w: recent: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, opt, recentModeNames[m.Mode][0])
		}
		m.Mode, m.Invert = md, inv
		return nil
	}
	switch opt {
	case "seconds", "hitcount":
		n, err := strconv.ParseUint(args[0], 10, 32)
		if err != nil {
			return badValue("recent", "--"+opt, args[0], "a number")
		}
		if opt == "seconds" {
			m.Seconds = uint32(n)
		} else {
			m.HitCount = uint32(n)
		}
	case "reap":
		m.Reap = true
	case "rttl":
		m.TTL = true
	case "name":
		if args[0] == "" { // the kernel refuses it
			return badValue("recent", "--name", args[0], "a name of 1 to 199 characters")
		}
		// libxt_recent cuts a longer name to the 199 characters its
		// XT_RECENT_NAME_LEN buffer holds, as iptables -S then shows.
		m.Name = args[0][:min(len(args[0]), 199)]
	case "rsource":
		m.Dest = false
	case "rdest":
		m.Dest = true
	case "mask":
		// A host address read by getaddrinfo: inet_aton's forms for
		// IPv4 ("80" is 0.0.0.80, "1.2.3" 1.2.0.3).
		a, err := parseHostAddr(c.family, args[0], false)
		if err != nil || a.Is4() != (c.family == IPv4) {
			return badValue("recent", "--mask", args[0], "an address mask such as 255.255.255.0")
		}
		m.Mask = a
	}
	return nil
}

func (m *RecentMatch) done(*ruleCtx) (any, error) {
	switch {
	case m.Mode == 0:
		return nil, fmt.Errorf("%w: recent: you must specify one of --set, --rcheck, --update or --remove", ErrMissingArgument)
	case m.Reap && m.Seconds == 0:
		return nil, fmt.Errorf("%w: recent: option \"--reap\" also requires \"--seconds\"", ErrMissingArgument)
	case m.TTL && (m.Mode == RecentSet || m.Mode == RecentRemove):
		// libxt_recent refuses it in either order.
		return nil, fmt.Errorf("%w: recent: option \"--rttl\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, recentModeNames[m.Mode][0])
	case (m.Seconds != 0 || m.HitCount != 0) && m.Mode != RecentCheck && m.Mode != RecentUpdate:
		// The kernel refuses the rule (EINVAL).
		return nil, fmt.Errorf("%w: recent: --seconds and --hitcount need --rcheck or --update", ErrIncompatibleOpts)
	}
	return m, nil
}

func (m *RecentMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --"...)
	b = append(b, recentModeNames[m.Mode][0]...)
	if m.Seconds != 0 {
		b = append(b, " --seconds "...)
		b = strconv.AppendUint(b, uint64(m.Seconds), 10)
	}
	if m.Reap {
		b = append(b, " --reap"...)
	}
	if m.HitCount != 0 {
		b = append(b, " --hitcount "...)
		b = strconv.AppendUint(b, uint64(m.HitCount), 10)
	}
	if m.TTL {
		b = append(b, " --rttl"...)
	}
	b = append(b, " --name "...)
	b = append(b, m.name()...)
	b = append(b, " --mask "...)
	b = m.Mask.AppendTo(b)
	if m.Dest {
		return append(b, " --rdest"...)
	}
	return append(b, " --rsource"...)
}

func (m *RecentMatch) appendList(b []byte, _ bool) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " recent: "...)
	b = append(b, recentModeNames[m.Mode][1]...)
	if m.Seconds != 0 {
		b = append(b, " seconds: "...)
		b = strconv.AppendUint(b, uint64(m.Seconds), 10)
	}
	if m.Reap {
		b = append(b, " reap"...)
	}
	if m.HitCount != 0 {
		b = append(b, " hit_count: "...)
		b = strconv.AppendUint(b, uint64(m.HitCount), 10)
	}
	if m.TTL {
		b = append(b, " TTL-Match"...)
	}
	b = append(b, " name: "...)
	b = append(b, m.name()...)
	if m.Dest {
		b = append(b, " side: dest"...)
	} else {
		b = append(b, " side: source"...)
	}
	b = append(b, " mask: "...)
	return m.Mask.AppendTo(b)
}

// name is the list's name, "DEFAULT" when none is given.
func (m *RecentMatch) name() string {
	if m.Name == "" {
		return "DEFAULT"
	}
	return m.Name
}

// The kernel's xt_recent module parameters at their defaults.
const (
	recentListTot  = 200 // ip_list_tot: entries per list
	recentPktTotal = 20  // ip_pkt_list_tot: timestamps per entry
)

// recentList is one named list of the host (a /proc/net/xt_recent file).
type recentList struct {
	entries map[netip.Addr]*recentEntry
	lru     []netip.Addr // least recently updated first
}

type recentEntry struct {
	ttl    uint8
	stamps []time.Time // oldest first, at most recentPktTotal
}

type recentKey struct {
	family Family
	name   string
}

func (h *Host) recentList(f Family, name string) *recentList {
	if h.recent == nil {
		h.recent = map[recentKey]*recentList{}
	}
	k := recentKey{f, name}
	l := h.recent[k]
	if l == nil {
		l = &recentList{entries: map[netip.Addr]*recentEntry{}}
		h.recent[k] = l
	}
	return l
}

func (l *recentList) touch(a netip.Addr) {
	for i, x := range l.lru {
		if x == a {
			l.lru = append(l.lru[:i], l.lru[i+1:]...)
			break
		}
	}
	l.lru = append(l.lru, a)
}

func (l *recentList) remove(a netip.Addr) {
	delete(l.entries, a)
	for i, x := range l.lru {
		if x == a {
			l.lru = append(l.lru[:i], l.lru[i+1:]...)
			return
		}
	}
}

func (l *recentList) add(a netip.Addr, ttl uint8, now time.Time) {
	if len(l.entries) >= recentListTot {
		l.remove(l.lru[0])
	}
	l.entries[a] = &recentEntry{ttl: ttl, stamps: []time.Time{now}}
	l.lru = append(l.lru, a)
}

func (e *recentEntry) stamp(now time.Time) {
	if len(e.stamps) == recentPktTotal {
		e.stamps = append(e.stamps[:0], e.stamps[1:]...)
	}
	e.stamps = append(e.stamps, now)
}

// match follows xt_recent's recent_mt.
func (m *RecentMatch) match(c *evalCtx) bool {
	p := c.pkt
	a := p.Src
	if m.Dest {
		a = p.Dst
	}
	a = maskAddr(a, m.Mask)
	ttl := p.TTL
	if p.In == "" {
		ttl++ // a locally generated packet has not been decremented yet
	}
	now := c.host.clock.Now()
	l := c.host.recentList(p.Family, m.name())
	ret := m.Invert
	e := l.entries[a]
	if e != nil && m.TTL && e.ttl != ttl {
		e = nil
	}
	if e == nil {
		if m.Mode != RecentSet {
			return ret
		}
		if !c.host.explaining {
			l.add(a, ttl, now)
		}
		return !ret
	}
	switch {
	case m.Mode == RecentSet:
		ret = !ret
	case m.Mode == RecentRemove:
		if !c.host.explaining {
			l.remove(a)
		}
		return !ret
	case m.Seconds != 0 || m.HitCount != 0:
		since := now.Add(-time.Duration(m.Seconds) * time.Second)
		hits := uint32(0)
		for _, s := range e.stamps {
			if m.Seconds != 0 && s.Before(since) {
				continue
			}
			hits++
			if m.HitCount == 0 || hits >= m.HitCount {
				ret = !ret
				break
			}
		}
		if m.Reap && !c.host.explaining {
			l.reap(since, a)
		}
	default:
		ret = !ret
	}
	if (m.Mode == RecentSet || m.Mode == RecentUpdate && ret) && !c.host.explaining {
		e.stamp(now)
		e.ttl = ttl
		l.touch(a)
	}
	return ret
}

// reap drops the least recently updated entry if it is not the one being
// worked on and its last stamp is older than since (recent_entry_reap).
func (l *recentList) reap(since time.Time, working netip.Addr) {
	if len(l.lru) == 0 || l.lru[0] == working {
		return
	}
	if e := l.entries[l.lru[0]]; e.stamps[len(e.stamps)-1].Before(since) {
		l.remove(l.lru[0])
	}
}

// maskAddr applies an address mask; an invalid one masks nothing.
func maskAddr(a, mask netip.Addr) netip.Addr {
	if !mask.IsValid() {
		return a
	}
	if a.Is4() && mask.Is4() {
		x, y := a.As4(), mask.As4()
		for i := range x {
			x[i] &= y[i]
		}
		return netip.AddrFrom4(x)
	}
	x, y := a.As16(), mask.As16()
	for i := range x {
		x[i] &= y[i]
	}
	return netip.AddrFrom16(x)
}
