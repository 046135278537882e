package netfilter

import (
	"fmt"
	"strconv"
)

// CgroupMatch is "-m cgroup [!] --cgroup CLASSID" or "[!] --path PATH":
// the cgroup of the local socket the packet belongs to. --cgroup tests
// the net_cls class id, which the caller gives in Packet.CgroupClassID;
// --path tests that the socket's cgroup (v2) lies under PATH. The model
// knows only the root, which every cgroup lies under: "--path /" is
// evaluated, any other path is loaded and printed but refused when the
// ruleset is loaded into a Host. A packet without a socket (HasSocket
// false) never matches, inverted or not. The kernel allows the match in
// INPUT, OUTPUT and POSTROUTING, and refuses a rule with both options or
// neither.
type CgroupMatch struct {
	ClassID  uint32
	HasClass bool
	Path     string
	HasPath  bool
	Invert   bool
}

func init() {
	registerMatch(&module{name: "cgroup",
		opts: []option{
			{name: "cgroup", args: 1, invert: true},
			{name: "path", args: 1, invert: true},
		},
		hooks:      []Hook{Input, Output, Postrouting},
		newBuilder: func(*ruleCtx) builder { return &CgroupMatch{} }})
}

func (m *CgroupMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	if opt == "cgroup" {
		n, ok := parseCUint(args[0], 0xffffffff)
		if !ok {
			return badValue("cgroup", "--cgroup", args[0], "a class id 0-4294967295")
		}
		m.ClassID, m.HasClass = uint32(n), true
	} else {
		m.Path, m.HasPath = args[0], true
	}
	m.Invert = inv
	return nil
}

func (m *CgroupMatch) done(*ruleCtx) (any, error) {
	switch {
	case m.HasClass && m.HasPath:
		return nil, fmt.Errorf("%w: cgroup: --cgroup and --path together (the kernel refuses the rule)", ErrIncompatibleOpts)
	case !m.HasClass && !m.HasPath:
		return nil, fmt.Errorf("%w: cgroup: specify --cgroup or --path (the kernel refuses the rule)", ErrMissingArgument)
	}
	return m, nil
}

func (m *CgroupMatch) unmodelled() string {
	if m.HasPath && m.Path != "/" {
		return "--path " + strconv.Quote(m.Path) + " (the model has no cgroup hierarchy below the root)"
	}
	return ""
}

// Module implements Match.
func (m *CgroupMatch) Module() string { return "cgroup" }

func (m *CgroupMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	if m.HasPath {
		b = append(b, " --path \""...)
		b = append(b, m.Path...)
		return append(b, '"')
	}
	b = append(b, " --cgroup "...)
	return strconv.AppendUint(b, uint64(m.ClassID), 10)
}

func (m *CgroupMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " cgroup "...)
	if m.Invert {
		b = append(b, "! "...)
	}
	if m.HasPath {
		return append(b, m.Path...)
	}
	return strconv.AppendUint(b, uint64(m.ClassID), 10)
}

func (m *CgroupMatch) match(c *evalCtx) bool {
	p := c.pkt
	if !p.HasSocket {
		return false
	}
	if m.HasPath {
		return !m.Invert // only "/" gets here: every cgroup lies under it
	}
	return (p.CgroupClassID == m.ClassID) != m.Invert
}
