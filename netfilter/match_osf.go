package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"strconv"
)

// OSFMatch is "-m osf": passive OS fingerprinting of TCP SYNs against
// the fingerprints loaded into the kernel (nfnl_osf). packetwalk has no
// fingerprints, so it parses and prints the rule but refuses to load it
// into a Host.
type OSFMatch struct {
	Genre          string
	Invert         bool
	TTL, Log       uint8
	HasTTL, HasLog bool
}

func init() {
	registerMatch(&module{name: "osf",
		opts:       []option{{name: "genre", args: 1, invert: true}, {name: "ttl", args: 1}, {name: "log", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &osfBuilder{} },
		hooks:      []Hook{Prerouting, Input, Forward},
		unmodelled: true})
}

type osfBuilder struct {
	m     OSFMatch
	given bool
}

func (b *osfBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "genre":
		// iptables keeps the first 31 characters of a longer genre
		// (the kernel's field holds 32 with the NUL; docs/kernel-notes.md).
		g := args[0]
		if len(g) > 31 {
			g = g[:31]
		}
		b.m.Genre, b.m.Invert, b.given = g, inv, true
	case "ttl", "log":
		n, ok := parseCUint(args[0], 2)
		if !ok {
			return badValue("osf", "--"+opt, args[0], "a level 0, 1 or 2")
		}
		if opt == "ttl" {
			b.m.TTL, b.m.HasTTL = uint8(n), true
		} else {
			b.m.Log, b.m.HasLog = uint8(n), true
		}
	}
	return nil
}

func (b *osfBuilder) done(c *ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("osf", "--genre")
	}
	if c.ip == nil || c.ip.Proto != inet.TCP || c.ip.InvProto {
		// xt_osf is registered for TCP only: the kernel refuses it
		// without "-p tcp" (Invalid argument).
		return nil, fmt.Errorf("%w: osf: needs \"-p tcp\"", ErrNotAllowed)
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *OSFMatch) Module() string { return "osf" }

func (m *OSFMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --genre "...)
	b = append(b, m.Genre...)
	if m.HasTTL {
		b = append(b, " --ttl "...)
		b = strconv.AppendUint(b, uint64(m.TTL), 10)
	}
	if m.HasLog {
		b = append(b, " --log "...)
		b = strconv.AppendUint(b, uint64(m.Log), 10)
	}
	return b
}

func (m *OSFMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " OS fingerprint match "...)
	if m.Invert {
		b = append(b, "! "...)
	}
	return append(b, m.Genre...)
}

func (m *OSFMatch) refuse() error {
	return fmt.Errorf("%w: -m osf --genre %s: passive OS fingerprinting needs the kernel's fingerprint database", ErrNotModelled, m.Genre)
}

func (m *OSFMatch) match(*evalCtx) bool { return false }
