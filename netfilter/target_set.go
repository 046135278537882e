package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// SetRef names an ipset and how a packet is read along its dimensions:
// Dirs has one entry per dimension, true for "src" and false for "dst".
type SetRef struct {
	Name string
	Dirs []bool
}

// SetTarget is "-j SET": it adds the packet to one set and/or deletes it
// from another in the host's registry, and continues with the next rule.
// Like xt_SET it ignores failures (a full set, an element already there
// without --exist). --map-set is refused.
type SetTarget struct {
	Add, Del SetRef // an empty Name means not given
	// Exist (--exist) refreshes the timeout of an entry already present.
	Exist bool
	// Timeout is the entry timeout given to --add-set when HasTimeout.
	Timeout    uint32
	HasTimeout bool
}

func init() {
	// libxt_SET's parsers ignore a "!" before any of its options: the rule
	// loads and prints without it (iptables 1.8.9).
	registerTarget(&module{name: "SET", opts: []option{
		{name: "add-set", args: 2, invert: true}, {name: "del-set", args: 2, invert: true}, {name: "exist", invert: true},
		{name: "timeout", args: 1, invert: true}, {name: "map-set", args: 2, invert: true}, {name: "map-mark", invert: true},
		{name: "map-prio", invert: true}, {name: "map-queue", invert: true},
	}, newBuilder: func(*ruleCtx) builder { return &SetTarget{} }})
}

func (t *SetTarget) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	switch opt {
	case "add-set", "del-set":
		ref := &t.Add
		if opt == "del-set" {
			ref = &t.Del
		}
		if ref.Name != "" {
			return fmt.Errorf("%w: SET: --%s can be specified only once", ErrMultipleFlags, opt)
		}
		if args[0] == "" || len(args[0]) > 31 {
			return badValue("SET", "--"+opt, args[0], "a set name of 1 to 31 characters")
		}
		var dirs []bool
		for _, f := range strings.Split(args[1], ",") {
			switch f {
			case "src":
				dirs = append(dirs, true)
			case "dst":
				dirs = append(dirs, false)
			default:
				return badValue("SET", "--"+opt, args[1], "a comma-separated list of src and dst")
			}
		}
		if len(dirs) > 6 {
			return badValue("SET", "--"+opt, args[1], "at most 6 src/dst flags")
		}
		*ref = SetRef{Name: args[0], Dirs: dirs}
	case "exist":
		t.Exist = true
	case "timeout":
		n, err := strconv.ParseUint(args[0], 10, 32)
		if err != nil || n > 0xfffffffe {
			return badValue("SET", "--timeout", args[0], "a number of seconds 0-4294967294")
		}
		t.Timeout, t.HasTimeout = uint32(n), true
	default:
		return fmt.Errorf("%w: SET --%s (mapping set entries to packet marks, priorities and queues)", ErrNotModelled, opt)
	}
	return nil
}

func (t *SetTarget) done(*ruleCtx) (any, error) {
	switch {
	case t.Add.Name == "" && t.Del.Name == "":
		return nil, fmt.Errorf("%w: SET: you must specify either --add-set or --del-set", ErrMissingArgument)
	case t.Add.Name == "" && t.Exist:
		return nil, fmt.Errorf("%w: SET: --exist can be used with --add-set only", ErrIncompatibleOpts)
	case t.Add.Name == "" && t.HasTimeout:
		return nil, fmt.Errorf("%w: SET: --timeout can be used with --add-set only", ErrIncompatibleOpts)
	}
	return t, nil
}

// Name implements Target.
func (t *SetTarget) Name() string { return "SET" }

func appendSetRef(b []byte, prefix, op string, r SetRef) []byte {
	b = append(b, prefix...)
	b = append(b, op...)
	b = append(b, ' ')
	b = append(b, r.Name...)
	for i, src := range r.Dirs {
		if i == 0 {
			b = append(b, ' ')
		} else {
			b = append(b, ',')
		}
		if src {
			b = append(b, "src"...)
		} else {
			b = append(b, "dst"...)
		}
	}
	return b
}

func (t *SetTarget) appendOpts(b []byte, prefix string) []byte {
	if t.Add.Name != "" {
		b = appendSetRef(b, prefix, "add-set", t.Add)
		if t.Exist {
			b = append(b, prefix...)
			b = append(b, "exist"...)
		}
		if t.HasTimeout {
			b = append(b, prefix...)
			b = append(b, "timeout "...)
			b = strconv.AppendUint(b, uint64(t.Timeout), 10)
		}
	}
	if t.Del.Name != "" {
		b = appendSetRef(b, prefix, "del-set", t.Del)
	}
	return b
}

func (t *SetTarget) appendSave(b []byte) []byte         { return t.appendOpts(b, " --") }
func (t *SetTarget) appendList(b []byte, _ bool) []byte { return t.appendOpts(b, " ") }

func (t *SetTarget) apply(c *evalCtx) verdict {
	if c.host.explaining {
		return vContinue
	}
	if t.Add.Name != "" {
		if s := c.host.sets.Get(t.Add.Name); s != nil && len(t.Add.Dirs) >= s.Dimension() {
			timeout := -1 // the set's default
			if t.HasTimeout {
				timeout = int(t.Timeout)
			}
			_ = s.AddPacket(setKey(s, t.Add.Dirs, c.pkt), c.pkt.Length, timeout, t.Exist)
		}
	}
	if t.Del.Name != "" {
		if s := c.host.sets.Get(t.Del.Name); s != nil && len(t.Del.Dirs) >= s.Dimension() {
			_ = s.DelKey(setKey(s, t.Del.Dirs, c.pkt))
		}
	}
	return vContinue
}
