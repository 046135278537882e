package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// CgroupMatch is "-m cgroup [!] --cgroup CLASSID" or "[!] --path PATH":
// the cgroup of the local socket the packet belongs to. --cgroup tests
// the net_cls class id (Packet.CgroupClassID); --path tests that the
// socket's cgroup v2 (Packet.CgroupPath) is PATH or lies below it. The
// kernel resolves PATH when the rule is loaded and refuses a path that
// does not exist on the machine; packetwalk has no cgroup hierarchy and
// takes any path. A packet without a socket (HasSocket false) never
// matches, inverted or not. The kernel allows the match in INPUT,
// OUTPUT and POSTROUTING, and refuses a rule with both options or
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
		return cgroupUnder(p.CgroupPath, m.Path) != m.Invert
	}
	return (p.CgroupClassID == m.ClassID) != m.Invert
}

// cgroupUnder reports whether cgroup path is ancestor or lies below it,
// as cgroup_is_descendant does; paths are compared by their components,
// so "/a" is not under "/a/b" nor "/ab" under "/a".
func cgroupUnder(path, ancestor string) bool {
	p, a := strings.Trim(path, "/"), strings.Trim(ancestor, "/")
	return a == "" || p == a || len(p) > len(a) && p[:len(a)] == a && p[len(a)] == '/'
}
