package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// CTEvents is a set of conntrack event types (--ctevents).
type CTEvents uint16

// ctEventNames are the event names in bit order, as iptables prints them.
var ctEventNames = []string{"new", "related", "destroy", "reply", "assured", "protoinfo", "helper", "mark", "natseqinfo", "secmark"}

// CTZoneDir says for which direction a CT zone applies.
type CTZoneDir uint8

// Zone directions.
const (
	CTZoneBoth CTZoneDir = iota
	CTZoneOrig
	CTZoneReply
)

// CTTarget is "-j CT" in the raw table: it sets up how the packet's
// connection is tracked. NoTrack leaves the packet untracked; the other
// forms attach a template that the rules after it in the chain see.
// Zones and events are printed and kept but not modelled: packetwalk's
// conntrack has a single zone and delivers no events. --helper and --timeout are
// refused.
type CTTarget struct {
	NoTrack bool
	// Zone is the conntrack zone; ZoneFromMark takes it from the packet
	// mark instead (--zone mark).
	Zone         uint16
	ZoneFromMark bool
	ZoneDir      CTZoneDir
	Events       CTEvents
	// ExpNew is --expevents new, the only expectation event.
	ExpNew bool
}

// NotrackTarget is "-j NOTRACK", the old spelling of "CT --notrack".
// iptables -L shows it as target CT with the text NOTRACK.
type NotrackTarget struct{}

// listNamer is implemented by targets whose -L target column differs from
// the name iptables-save prints.
type listNamer interface {
	listName() string
}

func init() {
	raw := []TableID{Raw}
	registerTarget(&module{name: "CT", tables: raw, opts: []option{
		{name: "notrack"}, {name: "zone", args: 1}, {name: "zone-orig", args: 1}, {name: "zone-reply", args: 1},
		{name: "ctevents", args: 1}, {name: "expevents", args: 1},
		{name: "helper", args: 1}, {name: "timeout", args: 1},
	}, newBuilder: func(*ruleCtx) builder { return &ctBuilder{} }})
	registerTarget(&module{name: "NOTRACK", tables: raw,
		newBuilder: func(*ruleCtx) builder { return &NotrackTarget{} }})
}

type ctBuilder struct {
	t          CTTarget
	orig, repl bool
}

func (b *ctBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	switch opt {
	case "notrack":
		b.t.NoTrack = true
	case "helper", "timeout":
		return fmt.Errorf("%w: CT --%s (connection tracking helpers and timeout policies)", ErrNotModelled, opt)
	case "zone", "zone-orig", "zone-reply":
		// Like libxt_CT, the direction flags accumulate and "mark" sticks.
		b.orig = b.orig || opt == "zone-orig"
		b.repl = b.repl || opt == "zone-reply"
		if args[0] == "mark" {
			b.t.ZoneFromMark = true
		} else {
			n, ok := parseCUint(args[0], 0xffff)
			if !ok {
				return badValue("CT", "--"+opt, args[0], "a zone ID 0-65535 or \"mark\"")
			}
			b.t.Zone = uint16(n)
		}
		switch {
		case b.orig && !b.repl:
			b.t.ZoneDir = CTZoneOrig
		case b.repl && !b.orig:
			b.t.ZoneDir = CTZoneReply
		default:
			b.t.ZoneDir = CTZoneBoth
		}
	case "ctevents":
		for _, name := range strings.Split(args[0], ",") {
			i := indexOf(ctEventNames, name)
			if i < 0 {
				return badValue("CT", "--ctevents", args[0], "event types among "+strings.Join(ctEventNames, ","))
			}
			b.t.Events |= 1 << i
		}
	case "expevents":
		for _, name := range strings.Split(args[0], ",") {
			if name != "new" {
				return badValue("CT", "--expevents", args[0], "the event type new")
			}
		}
		b.t.ExpNew = true
	}
	return nil
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return -1
}

func (b *ctBuilder) done(*ruleCtx) (any, error) {
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *CTTarget) Name() string { return "CT" }

func (t *CTTarget) appendOpts(b []byte, prefix string) []byte {
	if t.NoTrack {
		b = append(b, prefix...)
		b = append(b, "notrack"...)
	}
	if t.Events != 0 {
		b = append(b, prefix...)
		b = append(b, "ctevents "...)
		first := true
		for i, n := range ctEventNames {
			if t.Events&(1<<i) != 0 {
				if !first {
					b = append(b, ',')
				}
				b, first = append(b, n...), false
			}
		}
	}
	if t.ExpNew {
		b = append(b, prefix...)
		b = append(b, "expevents new"...)
	}
	if t.Zone != 0 || t.ZoneFromMark {
		b = append(b, prefix...)
		switch t.ZoneDir {
		case CTZoneOrig:
			b = append(b, "zone-orig "...)
		case CTZoneReply:
			b = append(b, "zone-reply "...)
		default:
			b = append(b, "zone "...)
		}
		if t.ZoneFromMark {
			b = append(b, "mark"...)
		} else {
			b = strconv.AppendUint(b, uint64(t.Zone), 10)
		}
	}
	return b
}

func (t *CTTarget) appendSave(b []byte) []byte { return t.appendOpts(b, " --") }

func (t *CTTarget) appendList(b []byte, _ bool) []byte {
	return t.appendOpts(append(b, " CT"...), " ")
}

// apply attaches what the target asks for, as xt_ct does: a packet that
// already has a conntrack (untracked, a template from an earlier CT rule,
// or the connection a looped-back or generated packet carries) is left
// alone. The next rules see the change at once (docs/kernel-notes.md).
func (t *CTTarget) apply(c *evalCtx) verdict {
	if c.hasConntrack() {
		return vContinue
	}
	if t.NoTrack {
		c.notrack = true
	} else {
		c.tmpl, c.tmplMark = true, 0
	}
	c.ctReady = false
	return vContinue
}

// hasConntrack reports whether the packet already carries a conntrack in
// raw: the kernel's skb->_nfct is set.
func (c *evalCtx) hasConntrack() bool {
	w := c.walk
	return c.notrack || c.tmpl || w.notrack || w.cur.Entry != nil
}

func (t *NotrackTarget) set(*ruleCtx, string, bool, []string) error { return nil }
func (t *NotrackTarget) done(*ruleCtx) (any, error)                 { return t, nil }

// Name implements Target.
func (t *NotrackTarget) Name() string { return "NOTRACK" }

func (t *NotrackTarget) listName() string { return "CT" }

func (t *NotrackTarget) appendSave(b []byte) []byte         { return b }
func (t *NotrackTarget) appendList(b []byte, _ bool) []byte { return append(b, " NOTRACK"...) }

func (t *NotrackTarget) apply(c *evalCtx) verdict {
	if !c.hasConntrack() {
		c.notrack, c.ctReady = true, false
	}
	return vContinue
}
