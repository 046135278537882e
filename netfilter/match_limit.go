package netfilter

import (
	"strconv"
	"strings"
)

// limitScale is XT_LIMIT_SCALE: --limit is stored as the mean interval
// between packets in 1/10000 s.
const limitScale = 10000

// defaultLimitBurst is the --limit-burst iptables uses when none (or 0) is
// given, and the one iptables-save leaves out.
const defaultLimitBurst = 5

// LimitMatch is "-m limit --limit RATE --limit-burst N": a token bucket
// that lets Burst packets through at once and then one every Avg/10000
// seconds.
//
// iptables-nft 1.8.9 turns the rule into the native nf_tables "limit rate
// R/UNIT burst N packets" expression, so with the NFTables backend the
// bucket counts nanoseconds as nft_limit does: a packet costs UNIT/R and
// the bucket holds Burst packets. With the Legacy backend it follows
// xt_limit, whose credits advance per jiffy (HZ=1000 is assumed).
type LimitMatch struct {
	// Avg is the mean interval between packets in 1/10000 s, as iptables
	// stores --limit: 5/sec is 2000, the default 3/hour is 12000000.
	Avg uint32
	// Burst is the bucket size in packets.
	Burst uint32
}

var limitUnits = []struct {
	name string
	secs uint32
}{{"day", 86400}, {"hour", 3600}, {"min", 60}, {"sec", 1}}

func init() {
	registerMatch(&module{name: "limit",
		opts: []option{
			{name: "limit", args: 1},
			{name: "limit-burst", args: 1},
		},
		newBuilder: func(*ruleCtx) builder {
			return &LimitMatch{Avg: limitScale * 3600 / 3, Burst: defaultLimitBurst}
		}})
}

// parseLimitRate parses "N", "N/second", "N/minute", "N/hour" or "N/day"
// (any prefix of the unit) into the stored interval.
func parseLimitRate(s string) (uint32, error) {
	num, unit, hasUnit := strings.Cut(s, "/")
	mult := uint64(1)
	if hasUnit {
		switch {
		case unit == "":
			return 0, badValue("limit", "--limit", s, "a rate N/sec, N/minute, N/hour or N/day")
		case strings.HasPrefix("second", strings.ToLower(unit)):
			mult = 1
		case strings.HasPrefix("minute", strings.ToLower(unit)):
			mult = 60
		case strings.HasPrefix("hour", strings.ToLower(unit)):
			mult = 3600
		case strings.HasPrefix("day", strings.ToLower(unit)):
			mult = 86400
		default:
			return 0, badValue("limit", "--limit", s, "a rate N/sec, N/minute, N/hour or N/day")
		}
	}
	// iptables reads the number with atoi: leading digits, the rest ignored.
	end := 0
	for end < len(num) && num[end] >= '0' && num[end] <= '9' {
		end++
	}
	r, err := strconv.ParseUint(num[:end], 10, 32)
	if err != nil || r == 0 {
		return 0, badValue("limit", "--limit", s, "a positive rate N/sec, N/minute, N/hour or N/day")
	}
	avg := limitScale * mult / r
	if avg == 0 {
		return 0, badValue("limit", "--limit", s, "a rate of at most 10000/sec")
	}
	return uint32(avg), nil
}

func (m *LimitMatch) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	if opt == "limit" {
		avg, err := parseLimitRate(args[0])
		if err != nil {
			return err
		}
		m.Avg = avg
		return nil
	}
	n, ok := parseCUint(args[0], 10000)
	if !ok {
		return badValue("limit", "--limit-burst", args[0], "a burst in the range 0-10000")
	}
	if n == 0 {
		n = defaultLimitBurst // nf_tables replaces a zero burst by its default
	}
	m.Burst = uint32(n)
	return nil
}

func (m *LimitMatch) done(*ruleCtx) (any, error) { return m, nil }

// Module implements Match.
func (m *LimitMatch) Module() string { return "limit" }

// rate returns the rate as iptables prints it (and iptables-nft hands it
// to nf_tables): N per unit, with the largest unit that states Avg
// without losing more than the rounding of one packet.
func (m *LimitMatch) rate() (n uint32, unit string, secs uint32) {
	if m.Avg == 0 {
		return 0, "sec", 1
	}
	i := 1
	for ; i < len(limitUnits); i++ {
		mult := limitUnits[i].secs * limitScale
		if m.Avg > mult || mult/m.Avg < mult%m.Avg {
			break
		}
	}
	u := limitUnits[i-1]
	return u.secs * limitScale / m.Avg, u.name, u.secs
}

func (m *LimitMatch) appendRate(b []byte) []byte {
	n, unit, _ := m.rate()
	b = strconv.AppendUint(b, uint64(n), 10)
	b = append(b, '/')
	return append(b, unit...)
}

func (m *LimitMatch) appendSave(b []byte) []byte {
	b = append(b, " --limit "...)
	b = m.appendRate(b)
	if m.Burst != defaultLimitBurst {
		b = append(b, " --limit-burst "...)
		b = strconv.AppendUint(b, uint64(m.Burst), 10)
	}
	return b
}

func (m *LimitMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " limit: avg "...)
	b = m.appendRate(b)
	b = append(b, " burst "...)
	return strconv.AppendUint(b, uint64(m.Burst), 10)
}

// limitState is one rule's token bucket.
type limitState struct {
	started bool
	last    int64  // nanoseconds (nft) or jiffies (legacy)
	tokens  uint64 // nanoseconds (nft) or credits (legacy)
}

func (m *LimitMatch) newState() any { return &limitState{} }

const (
	limitHZ         = 1000
	creditsPerJiffy = 32 // POW2_BELOW32(0xFFFFFFFF / (HZ*60*60*24)) for HZ=1000
)

// userToCredits is xt_limit's user2credits.
// It takes 64 bits so that a large Avg·Burst does not wrap, where the
// kernel would refuse the rule.
func userToCredits(user uint64) uint64 {
	if user > 0xFFFFFFFF/(limitHZ*creditsPerJiffy) {
		return (user / limitScale) * limitHZ * creditsPerJiffy
	}
	return user * limitHZ * creditsPerJiffy / limitScale
}

func (m *LimitMatch) match(c *evalCtx) bool {
	st, _ := c.rule.extra.ext[c.matchIdx].(*limitState)
	if st == nil {
		return false // compile gives every limit match its state
	}
	now := c.host.clock.Now().UnixNano()
	if c.host.explaining {
		// Explain reads the bucket without spending from it.
		cp := *st
		st = &cp
	}
	if c.host.cfg.Backend == Legacy {
		return m.matchLegacy(st, now/(1e9/limitHZ))
	}
	n, _, secs := m.rate()
	if n == 0 {
		return false
	}
	cost := uint64(secs) * 1e9 / uint64(n)
	max := cost * uint64(m.Burst)
	if !st.started {
		st.started, st.last, st.tokens = true, now, max
	}
	tokens := st.tokens
	if now > st.last {
		tokens += uint64(now - st.last)
	}
	if tokens > max {
		tokens = max
	}
	st.last = now
	if tokens >= cost {
		st.tokens = tokens - cost
		return true
	}
	st.tokens = tokens
	return false
}

// matchLegacy is xt_limit's limit_mt, with time in jiffies.
func (m *LimitMatch) matchLegacy(st *limitState, jiffies int64) bool {
	cost := userToCredits(uint64(m.Avg))
	capacity := userToCredits(uint64(m.Avg) * uint64(m.Burst))
	if !st.started {
		st.started, st.last, st.tokens = true, jiffies, capacity
	}
	credit := st.tokens
	if jiffies > st.last {
		credit += uint64(jiffies-st.last) * creditsPerJiffy
	}
	st.last = jiffies
	if credit > capacity {
		credit = capacity
	}
	if credit >= cost {
		st.tokens = credit - cost
		return true
	}
	st.tokens = credit
	return false
}
