package netfilter

import (
	"fmt"
	"strconv"
	"strings"
)

// Rateest flag bits (XT_RATEEST_MATCH_*).
const (
	rateestInvert uint16 = 1 << iota
	rateestAbs
	rateestRel
	rateestDelta
	rateestBPS
	rateestPPS
)

// RateestMatch is "-m rateest": it compares the rates measured by the
// RATEEST target's named estimators, with given rates (--rateest NAME)
// or with another estimator (--rateest1 A ... --rateest2 B). packetwalk
// does not model the RATEEST target, so no estimator exists: the rule is
// parsed and printed as iptables 1.8.9 does, and a host refuses to load
// it, as the kernel would without the estimator (No such file or
// directory).
type RateestMatch struct {
	Name1, Name2 string
	Flags        uint16
	// Mode is "lt", "gt" or "eq".
	Mode       string
	BPS1, BPS2 uint32 // bytes per second
	PPS1, PPS2 uint32
}

func init() {
	registerMatch(&module{name: "rateest",
		opts: []option{
			{name: "rateest1", args: 1, aliases: []string{"rateest"}}, {name: "rateest2", args: 1},
			{name: "rateest-bps1", optional: true}, {name: "rateest-pps1", optional: true},
			{name: "rateest-bps2", optional: true, aliases: []string{"rateest-bps"}},
			{name: "rateest-pps2", optional: true, aliases: []string{"rateest-pps"}},
			{name: "rateest-delta"},
			{name: "rateest-lt", invert: true}, {name: "rateest-gt", invert: true}, {name: "rateest-eq", invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &rateestBuilder{} },
		unmodelled: true})
}

type rateestBuilder struct {
	m    RateestMatch
	seen bool
}

// rateSuffixes are the units libxt_rateest reads (in bits per second).
var rateSuffixes = []struct {
	name  string
	scale float64
}{
	{"bit", 1}, {"Kibit", 1024}, {"kbit", 1000}, {"mibit", 1024 * 1024}, {"mbit", 1e6},
	{"gibit", 1024 * 1024 * 1024}, {"gbit", 1e9}, {"tibit", 1024 * 1024 * 1024 * 1024}, {"tbit", 1e12},
	{"Bps", 8}, {"KiBps", 8 * 1024}, {"KBps", 8000}, {"MiBps", 8 * 1024 * 1024}, {"MBps", 8e6},
	{"GiBps", 8 * 1024 * 1024 * 1024}, {"GBps", 8e9}, {"TiBps", 8 * 1024 * 1024 * 1024 * 1024}, {"TBps", 8e12},
}

// parseRateestRate reads a rate in bits per second (a bare number is
// bits) and returns bytes per second.
func parseRateestRate(s string) (uint32, bool) {
	end := 0
	for end < len(s) && (s[end] >= '0' && s[end] <= '9' || s[end] == '.' || end == 0 && (s[end] == '+' || s[end] == '-')) {
		end++
	}
	v, err := strconv.ParseFloat(s[:end], 64)
	if err != nil {
		return 0, false
	}
	if end == len(s) {
		return uint32(v / 8), true
	}
	for _, u := range rateSuffixes {
		if strings.EqualFold(u.name, s[end:]) {
			return uint32(v * u.scale / 8), true
		}
	}
	return 0, false
}

func (b *rateestBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	b.seen = true
	m := &b.m
	switch opt {
	case "rateest1", "rateest2":
		name := args[0]
		if len(name) > 15 {
			name = name[:15] // strncpy into IFNAMSIZ
		}
		if opt == "rateest1" {
			m.Name1 = name
		} else {
			m.Name2 = name
			m.Flags |= rateestRel
		}
	case "rateest-bps1", "rateest-bps2":
		m.Flags |= rateestBPS
		if len(args) == 1 {
			r, ok := parseRateestRate(args[0])
			if !ok {
				return badValue("rateest", "--"+opt, args[0], "a rate such as 1mbit, 100kbit or 12000 (bits per second)")
			}
			if opt == "rateest-bps1" {
				m.BPS1 = r
			} else {
				m.BPS2 = r
			}
		}
	case "rateest-pps1", "rateest-pps2":
		m.Flags |= rateestPPS
		if len(args) == 1 {
			n, ok := parseCUint(args[0], 0xffffffff)
			if !ok {
				return badValue("rateest", "--"+opt, args[0], "a number of packets per second")
			}
			if opt == "rateest-pps1" {
				m.PPS1 = uint32(n)
			} else {
				m.PPS2 = uint32(n)
			}
		}
	case "rateest-delta":
		m.Flags |= rateestDelta
	case "rateest-lt", "rateest-gt", "rateest-eq":
		m.Mode = opt[len("rateest-"):]
		m.Flags &^= rateestInvert
		if inv {
			m.Flags |= rateestInvert
		}
	}
	return nil
}

func (b *rateestBuilder) done(*ruleCtx) (any, error) {
	m := b.m
	if !b.seen {
		return nil, fmt.Errorf("%w: rateest match: you need to specify some flags", ErrMissingArgument)
	}
	if m.Flags&rateestRel == 0 {
		m.Flags |= rateestAbs
	}
	// What the kernel's checkentry refuses (Invalid argument).
	if m.Flags&(rateestBPS|rateestPPS) == 0 || m.Mode == "" {
		return nil, fmt.Errorf("%w: rateest: needs --rateest-bps or --rateest-pps and one of --rateest-lt, --rateest-gt, --rateest-eq (the kernel refuses the rule)", ErrMissingArgument)
	}
	return &m, nil
}

// Module implements Match.
func (m *RateestMatch) Module() string { return "rateest" }

func appendRateestRate(b []byte, rate uint32, numeric bool) []byte {
	b = append(b, ' ')
	if numeric {
		return strconv.AppendUint(b, uint64(rate), 10)
	}
	bits := float64(rate) * 8
	switch {
	case bits >= 1e9:
		b = strconv.AppendFloat(b, bits/1e6, 'f', 0, 64)
		return append(b, "Mbit"...)
	case bits >= 1e6:
		b = strconv.AppendFloat(b, bits/1e3, 'f', 0, 64)
		return append(b, "Kbit"...)
	}
	b = strconv.AppendFloat(b, bits, 'f', 0, 64)
	return append(b, "bit"...)
}

func (m *RateestMatch) appendMode(b []byte, pre string) []byte {
	b = appendNot(b, m.Flags&rateestInvert != 0)
	b = append(b, ' ')
	b = append(b, pre...)
	return append(b, m.Mode...)
}

func (m *RateestMatch) appendSave(b []byte) []byte {
	delta, abs := m.Flags&rateestDelta != 0, m.Flags&rateestAbs != 0
	if delta {
		b = append(b, " --rateest-delta"...)
	}
	if abs {
		b = append(b, " --rateest "...)
	} else {
		b = append(b, " --rateest1 "...)
	}
	b = append(b, m.Name1...)
	if m.Flags&rateestBPS != 0 {
		if delta {
			b = append(b, " --rateest-bps1"...)
			b = appendRateestRate(b, m.BPS1, false)
			b = m.appendMode(b, "--rateest-")
			b = append(b, " --rateest-bps2"...)
			b = appendRateestRate(b, m.BPS2, false)
		} else {
			b = m.appendMode(b, "--rateest-")
			b = append(b, " --rateest-bps"...)
			if abs {
				b = appendRateestRate(b, m.BPS2, false)
			}
		}
	}
	if m.Flags&rateestPPS != 0 {
		if delta {
			b = append(b, " --rateest-pps1 "...)
			b = strconv.AppendUint(b, uint64(m.PPS1), 10)
			b = m.appendMode(b, "--rateest-")
			b = append(b, " --rateest-pps2 "...)
			b = strconv.AppendUint(b, uint64(m.PPS2), 10)
		} else {
			b = m.appendMode(b, "--rateest-")
			b = append(b, " --rateest-pps"...)
			if abs {
				b = append(b, ' ')
				b = strconv.AppendUint(b, uint64(m.PPS2), 10)
			}
		}
	}
	if !abs {
		b = append(b, " --rateest2 "...)
		b = append(b, m.Name2...)
	}
	return b
}

func (m *RateestMatch) appendList(b []byte, numeric bool) []byte {
	delta, abs := m.Flags&rateestDelta != 0, m.Flags&rateestAbs != 0
	b = append(b, " rateest match "...)
	b = append(b, m.Name1...)
	if delta {
		b = append(b, " delta"...)
	}
	if m.Flags&rateestBPS != 0 {
		b = append(b, " bps"...)
		if delta {
			b = appendRateestRate(b, m.BPS1, numeric)
		}
		if abs {
			b = appendRateestRate(b, m.BPS2, numeric)
			b = m.appendMode(b, "")
		}
	}
	if m.Flags&rateestPPS != 0 {
		b = append(b, " pps"...)
		if delta {
			b = append(b, ' ')
			b = strconv.AppendUint(b, uint64(m.PPS1), 10)
		}
		if abs {
			b = m.appendMode(b, "")
			b = append(b, ' ')
			b = strconv.AppendUint(b, uint64(m.PPS2), 10)
		}
	}
	if !abs {
		b = m.appendMode(b, "")
		b = append(b, ' ')
		b = append(b, m.Name2...)
		if m.Flags&rateestBPS != 0 {
			b = append(b, " bps"...)
			if delta {
				b = appendRateestRate(b, m.BPS2, numeric)
			}
		}
		if m.Flags&rateestPPS != 0 {
			b = append(b, " pps"...)
			if delta {
				b = append(b, ' ')
				b = strconv.AppendUint(b, uint64(m.PPS2), 10)
			}
		}
	}
	return b
}

func (m *RateestMatch) refuse() error {
	return fmt.Errorf("%w: -m rateest: estimator %q is made by the RATEEST target, which packetwalk does not model", ErrNotModelled, m.Name1)
}

func (m *RateestMatch) match(*evalCtx) bool { return false }
