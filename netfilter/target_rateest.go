package netfilter

import (
	"fmt"
	"math"
	"strconv"
)

// RateestTarget is "-j RATEEST --rateest-name NAME --rateest-interval T
// --rateest-ewmalog T": it feeds the named rate estimator that -m rateest
// reads, and continues. The kernel keeps the interval as 250ms << (Interval
// + 2) (Interval -2 to 3) and the averaging time as that interval <<
// EWMALog, which is what iptables prints.
type RateestTarget struct {
	Estimator string // the estimator, at most 15 bytes
	Interval  int8
	EWMALog   uint8
}

func init() {
	registerTarget(&module{name: "RATEEST",
		opts: []option{{name: "rateest-name", args: 1}, {name: "rateest-interval", args: 1},
			{name: "rateest-ewmalog", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &rateestTargetBuilder{} }})
}

type rateestTargetBuilder struct {
	name          string
	named         bool
	interval, ewm float64 // microseconds
}

// parseTCTime reads a time as tc does: a number with an optional unit
// (s/sec/secs, ms/msec/msecs, us/usec/usecs; none means microseconds),
// returned in microseconds.
func parseTCTime(s string) (float64, bool) {
	i := 0
	for i < len(s) && (s[i] >= '0' && s[i] <= '9' || s[i] == '.') {
		i++
	}
	v, err := strconv.ParseFloat(s[:i], 64)
	if err != nil {
		return 0, false
	}
	switch s[i:] {
	case "s", "sec", "secs":
		v *= 1e6
	case "ms", "msec", "msecs":
		v *= 1e3
	case "", "us", "usec", "usecs":
	default:
		return 0, false
	}
	// iptables keeps the time in an unsigned int: a longer one wraps
	// modulo 2^32 microseconds (x86-64 converts through 64 bits), so
	// "--rateest-ewmalog 10000s" is about 1410 s (docs/kernel-notes.md).
	if v >= 1<<63 {
		return 0, true
	}
	return float64(uint32(uint64(v))), true
}

func (b *rateestTargetBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	if opt == "rateest-name" {
		n := args[0]
		if len(n) > 15 {
			n = n[:15]
		}
		b.name, b.named = n, true
		return nil
	}
	v, ok := parseTCTime(args[0])
	if !ok {
		what := "interval"
		if opt == "rateest-ewmalog" {
			what = "ewmalog"
		}
		return fmt.Errorf("%w: RATEEST: bad %s value %q", ErrBadValue, what, args[0])
	}
	if opt == "rateest-interval" {
		b.interval = v
	} else {
		b.ewm = v
	}
	return nil
}

func (b *rateestTargetBuilder) done(*ruleCtx) (any, error) {
	if !b.named {
		return nil, mustSpecify("RATEEST", "--rateest-name")
	}
	// iptables' final check: the smallest interval step covering the
	// interval, then the averaging exponent from the raw interval.
	i := 0
	for ; i <= 5; i++ {
		if b.interval <= float64(int(1)<<i)*250000 {
			break
		}
	}
	if i > 5 {
		return nil, fmt.Errorf("%w: RATEEST: interval value is too large", ErrBadValue)
	}
	l := 1
	for ; l < 32; l++ {
		w := 1.0 - 1.0/float64(uint64(1)<<l)
		if b.interval/(-math.Log(w)) > b.ewm {
			break
		}
	}
	l--
	if l == 0 || l >= 31 {
		return nil, fmt.Errorf("%w: RATEEST: ewmalog value is out of range", ErrBadValue)
	}
	return &RateestTarget{Estimator: b.name, Interval: int8(i - 2), EWMALog: uint8(l)}, nil
}

// Name implements Target.
func (t *RateestTarget) Name() string { return "RATEEST" }

// appendTCTime prints microseconds as tc does.
func appendTCTime(b []byte, us uint64) []byte {
	switch {
	case us >= 1e6:
		return append(strconv.AppendFloat(b, float64(us)/1e6, 'f', 1, 64), 's')
	case us >= 1e3:
		return append(strconv.AppendFloat(b, float64(us)/1e3, 'f', 1, 64), "ms"...)
	}
	return append(strconv.AppendUint(b, us, 10), "us"...)
}

func (t *RateestTarget) appendRateest(b []byte, prefix string) []byte {
	iv := uint64(1e6) << uint(t.Interval+2) / 4
	b = append(append(append(append(b, ' '), prefix...), "name "...), t.Estimator...)
	b = append(append(append(b, ' '), prefix...), "interval "...)
	b = appendTCTime(b, iv)
	b = append(append(append(b, ' '), prefix...), "ewmalog "...)
	// iptables computes the averaging time in 32 bits: a long one wraps
	// (interval 250ms, ewmalog 4s prints 3897.0s; docs/kernel-notes.md).
	return appendTCTime(b, uint64(uint32(iv)<<t.EWMALog))
}

func (t *RateestTarget) appendSave(b []byte) []byte { return t.appendRateest(b, "--rateest-") }

func (t *RateestTarget) appendList(b []byte, _ bool) []byte { return t.appendRateest(b, "") }

func (t *RateestTarget) apply(*evalCtx) verdict { return vContinue }
