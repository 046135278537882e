package netfilter

import (
	"fmt"
	"strconv"
)

// ConnlabelMatch is "-m connlabel [!] --label N [--set]": label bit N
// (0-127) of the packet's connection (conntrack Entry.Labels) is set;
// with --set the match sets it when clear and then matches, as the
// kernel's xt_connlabel does. A packet without a connection matches only
// inverted. Labels are given by number: the name table
// /etc/xtables/connlabel.conf is not installed, so iptables knows no
// names.
type ConnlabelMatch struct {
	Label  uint16
	Set    bool
	Invert bool
}

type connlabelBuilder struct {
	m     ConnlabelMatch
	given bool
}

func init() {
	registerMatch(&module{name: "connlabel",
		opts: []option{
			{name: "label", args: 1, invert: true},
			{name: "set", args: 0},
		},
		newBuilder: func(*ruleCtx) builder { return &connlabelBuilder{} }})
}

func (b *connlabelBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	if opt == "set" {
		b.m.Set = true
		return nil
	}
	n, ok := parseCUint(args[0], 0xffff)
	if !ok {
		return badValue("connlabel", "--label", args[0], "a label number (no label names are configured)")
	}
	if n > 127 {
		return fmt.Errorf("%w: connlabel: label %d out of range 0-127 (the kernel refuses it)", ErrBadValue, n)
	}
	b.m.Label, b.m.Invert, b.given = uint16(n), inv, true
	return nil
}

func (b *connlabelBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("connlabel", "--label")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *ConnlabelMatch) Module() string { return "connlabel" }

func (m *ConnlabelMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --label \""...)
	b = strconv.AppendUint(b, uint64(m.Label), 10)
	b = append(b, '"')
	if m.Set {
		b = append(b, " --set"...)
	}
	return b
}

func (m *ConnlabelMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " connlabel"...)
	if m.Invert {
		b = append(b, " !"...)
	}
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(m.Label), 10)
	if m.Set {
		b = append(b, " set"...)
	}
	return b
}

func (m *ConnlabelMatch) match(c *evalCtx) bool {
	e := c.walk.cur.Entry
	if e == nil {
		return m.Invert
	}
	w, bit := m.Label/64, uint64(1)<<(m.Label%64)
	labels := e.Labels()
	if labels[w]&bit != 0 {
		return !m.Invert
	}
	if m.Set {
		// Explain leaves confirmed connections as they are.
		if !c.host.explaining || !e.Confirmed() {
			labels[w] |= bit
			e.SetLabels(labels)
		}
		return !m.Invert
	}
	return m.Invert
}
