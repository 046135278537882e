package netfilter

import (
	"fmt"
	"math"
	"strconv"
)

// StatisticMode is the mode of -m statistic.
type StatisticMode uint8

// Statistic modes.
const (
	StatisticRandom StatisticMode = iota // --mode random --probability P
	StatisticNth                         // --mode nth --every N --packet P
)

// StatisticMatch is "-m statistic". In random mode it matches when a
// 31-bit random number is below Probability, the kernel's fixed-point
// probability lround(p·2^31); in nth mode it matches every Every-th
// evaluation of the rule, starting with the Packet-th (counted from 0).
// Invert ("!" before --probability or --every) inverts the result.
type StatisticMatch struct {
	Mode StatisticMode
	// Probability is the probability times 2^31, 0 to 2^31.
	Probability uint32
	// Every and Packet are N and P of nth mode, 0 <= P < N.
	Every, Packet uint32
	Invert        bool
}

// ProbabilityFromFloat returns the fixed-point probability the kernel stores
// for p (0 <= p <= 1), as iptables computes it: lround(p·2^31).
func ProbabilityFromFloat(p float64) uint32 { return uint32(math.Round(p * (1 << 31))) }

func init() {
	registerMatch(&module{name: "statistic",
		opts: []option{
			{name: "mode", args: 1},
			{name: "probability", args: 1, invert: true},
			{name: "every", args: 1, invert: true},
			{name: "packet", args: 1},
		},
		newBuilder: func(*ruleCtx) builder { return &statisticBuilder{} }})
}

type statisticBuilder struct {
	m                         StatisticMatch
	mode, prob, every, packet bool
}

func (b *statisticBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	v := args[0]
	switch opt {
	case "mode":
		switch v {
		case "random":
			b.m.Mode = StatisticRandom
		case "nth":
			b.m.Mode = StatisticNth
		default:
			return badValue("statistic", "--mode", v, "random or nth")
		}
		b.mode = true
	case "probability":
		if b.every {
			return fmt.Errorf("%w: statistic: option \"--probability\" cannot be used together with \"--every\"", ErrIncompatibleOpts)
		}
		p, err := strconv.ParseFloat(v, 64)
		if err != nil || math.IsNaN(p) || p < 0 || p > 1 {
			return badValue("statistic", "--probability", v, "a probability in the range 0-1")
		}
		b.m.Probability, b.m.Invert, b.prob = ProbabilityFromFloat(p), inv, true
	case "every":
		if b.prob {
			return fmt.Errorf("%w: statistic: option \"--every\" cannot be used together with \"--probability\"", ErrIncompatibleOpts)
		}
		n, ok := parseCUint(v, math.MaxUint32)
		if !ok || n == 0 {
			return badValue("statistic", "--every", v, "a number in the range 1-4294967295")
		}
		b.m.Every, b.m.Invert, b.every = uint32(n), inv, true
	case "packet":
		if b.prob {
			return fmt.Errorf("%w: statistic: option \"--packet\" cannot be used together with \"--probability\"", ErrIncompatibleOpts)
		}
		n, ok := parseCUint(v, math.MaxUint32)
		if !ok {
			return badValue("statistic", "--packet", v, "a number in the range 0-4294967295")
		}
		b.m.Packet, b.packet = uint32(n), true
	}
	return nil
}

func (b *statisticBuilder) done(*ruleCtx) (any, error) {
	if !b.mode {
		return nil, mustSpecify("statistic", "--mode")
	}
	if b.every && !b.packet {
		return nil, fmt.Errorf("%w: statistic: option \"--every\" also requires \"--packet\"", ErrMissingArgument)
	}
	switch b.m.Mode {
	case StatisticRandom:
		if !b.prob {
			return nil, fmt.Errorf("%w: statistic: --probability must be specified when using random mode", ErrMissingArgument)
		}
		if b.every || b.packet {
			return nil, fmt.Errorf("%w: statistic: --every and --packet need --mode nth", ErrIncompatibleOpts)
		}
	case StatisticNth:
		if b.prob {
			return nil, fmt.Errorf("%w: statistic: --probability needs --mode random", ErrIncompatibleOpts)
		}
		// iptables stores every-1 and checks packet against it, so a
		// missing --every (0) refuses every --packet.
		if !b.every || b.m.Packet > b.m.Every-1 {
			return nil, badValue("statistic", "--packet", strconv.FormatUint(uint64(b.m.Packet), 10), "0 <= p <= n-1 for --every n")
		}
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *StatisticMatch) Module() string { return "statistic" }

func (m *StatisticMatch) appendProbability(b []byte) []byte {
	return strconv.AppendFloat(b, float64(m.Probability)/(1<<31), 'f', 11, 64)
}

func (m *StatisticMatch) appendSave(b []byte) []byte {
	if m.Mode == StatisticRandom {
		b = append(b, " --mode random"...)
		b = appendNot(b, m.Invert)
		b = append(b, " --probability "...)
		return m.appendProbability(b)
	}
	b = append(b, " --mode nth"...)
	b = appendNot(b, m.Invert)
	b = append(b, " --every "...)
	b = strconv.AppendUint(b, uint64(m.Every), 10)
	b = append(b, " --packet "...)
	return strconv.AppendUint(b, uint64(m.Packet), 10)
}

// appendList renders "statistic mode random probability 0.33333333349" or
// "statistic mode nth every 3 packet 1"; a zero packet is left out.
func (m *StatisticMatch) appendList(b []byte, _ bool) []byte {
	if m.Mode == StatisticRandom {
		b = append(b, " statistic mode random"...)
		b = appendNot(b, m.Invert)
		b = append(b, " probability "...)
		return m.appendProbability(b)
	}
	b = append(b, " statistic mode nth"...)
	b = appendNot(b, m.Invert)
	b = append(b, " every "...)
	b = strconv.AppendUint(b, uint64(m.Every), 10)
	if m.Packet != 0 {
		b = append(b, " packet "...)
		b = strconv.AppendUint(b, uint64(m.Packet), 10)
	}
	return b
}

// initialState is the nth counter's start, (N-1)-P, as xt_statistic's
// checkentry sets it.
func (m *StatisticMatch) initialState() uint32 {
	if m.Mode != StatisticNth {
		return 0
	}
	return m.Every - 1 - m.Packet
}

func (m *StatisticMatch) match(c *evalCtx) bool {
	if m.Mode == StatisticRandom {
		return c.host.randomMatch(m.Probability, m.Invert)
	}
	st := &c.rule.extra.state[c.matchIdx]
	next := *st + 1
	if *st >= m.Every-1 {
		next = 0
	}
	if !c.host.explaining {
		*st = next
	}
	return (next == 0) != m.Invert
}
