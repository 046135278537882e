package netfilter

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Hashlimit mode bits, as xt_hashlimit stores them (XT_HASHLIMIT_HASH_*).
const (
	HashlimitDstIP   uint32 = 1 << 0
	HashlimitDstPort uint32 = 1 << 1
	HashlimitSrcIP   uint32 = 1 << 2
	HashlimitSrcPort uint32 = 1 << 3
	hashlimitInvert  uint32 = 1 << 4
	hashlimitBytes   uint32 = 1 << 5
	hashlimitRate    uint32 = 1 << 6
)

const (
	hashlimitScale       = 1000000 // XT_HASHLIMIT_SCALE_v2: avg in µs per packet
	hashlimitByteShift   = 4       // XT_HASHLIMIT_BYTE_SHIFT
	hashlimitBurstMax    = 1000000
	hashlimitGCInterval  = 1000 // ms, the default --hashlimit-htable-gcinterval
	hashlimitByteExpire  = 15   // s: default expiry of a byte-mode entry
	hashlimitByteExpireB = 60   // s: the same with a burst
	// kernelHZ is CONFIG_HZ of the reference kernel (6.18, HZ=250): xt_hashlimit
	// counts in jiffies.
	kernelHZ = 250
	// hashlimitCPJ is CREDITS_PER_JIFFY for HZ=250: the largest power of
	// two below 2^64/(HZ·86400).
	hashlimitCPJ = 1 << 39
	// hashlimitCPJBytes is CREDITS_PER_JIFFY_BYTES for HZ=250: the largest
	// power of two below 2^32/HZ.
	hashlimitCPJBytes = 1 << 24
	// hashlimitDefaultSize is the bucket count the kernel picks on a host
	// with more than 1 GiB of memory; the entry limit defaults to 8 times it.
	hashlimitDefaultSize = 8192
)

// HashlimitMatch is "-m hashlimit" (revision 3): a token bucket per
// group of packets, the group given by --hashlimit-mode (source and
// destination address, masked by --hashlimit-srcmask/-dstmask, and
// ports). The buckets live in a table of the host named --hashlimit-name,
// shared by every rule of the family naming it; as in the kernel, the
// table keeps the options of the rule that created it.
//
// It has no constructor: build it by parsing a rule (Ruleset.Exec,
// Restore), which fills in the defaults (burst 5, the family's full
// masks, the table's sizes and intervals) and converts the rate into Avg
// and Burst. A value built in Go is printed as an IPv4 rule would be: its
// masks are left out when they are 32.
type HashlimitMatch struct {
	// Mode holds the Hashlimit* grouping bits and the internal inversion,
	// byte-mode and rate-match flags.
	Mode uint32
	// Avg is the cost: µs per packet (×10⁻⁶ s, XT_HASHLIMIT_SCALE_v2), or
	// for byte rates 2³²−1 divided by the 16-byte chunks per second.
	Avg uint64
	// Burst is the bucket size in packets, or in rate-sized chunks for a
	// byte rate (0: none).
	Burst                 uint64
	Size, Max, GCInterval uint32
	Expire                uint32 // ms
	SrcMask, DstMask      uint8
	Interval              uint32 // --hashlimit-rate-interval, seconds
	Name                  string
	family                Family
}

func init() {
	registerMatch(&module{name: "hashlimit",
		opts: []option{
			{name: "hashlimit-upto", args: 1, invert: true},
			{name: "hashlimit-above", args: 1, invert: true},
			{name: "hashlimit", args: 1, invert: true},
			{name: "hashlimit-srcmask", args: 1},
			{name: "hashlimit-dstmask", args: 1},
			{name: "hashlimit-burst", args: 1},
			{name: "hashlimit-htable-size", args: 1},
			{name: "hashlimit-htable-max", args: 1},
			{name: "hashlimit-htable-gcinterval", args: 1},
			{name: "hashlimit-htable-expire", args: 1},
			{name: "hashlimit-mode", args: 1},
			{name: "hashlimit-name", args: 1},
			{name: "hashlimit-rate-match"},
			{name: "hashlimit-rate-interval", args: 1},
		},
		newBuilder: func(c *ruleCtx) builder {
			bits := uint8(32)
			if c.family == IPv6 {
				bits = 128
			}
			return &hashlimitBuilder{m: HashlimitMatch{GCInterval: hashlimitGCInterval, SrcMask: bits, DstMask: bits, Burst: 5, family: c.family}}
		}})
}

type hashlimitBuilder struct {
	m                                         HashlimitMatch
	mult                                      uint32 // seconds of the rate's unit (15 for bytes)
	rateGiven, burstGiven, expireGiven, rateM bool
	nameGiven, intervalGiven                  bool
}

// hashlimitCostToBytes and hashlimitBytesToCost convert between a byte
// rate and its stored cost, as libxt_hashlimit does.
func hashlimitCostToBytes(cost uint64) uint64 {
	r := uint64(0xffffffff)
	if cost != 0 {
		r = 0xffffffff / cost
	}
	return (r - 1) << hashlimitByteShift
}

func hashlimitBytesToCost(bytes uint64) uint64 {
	r := uint32(bytes >> hashlimitByteShift)
	return 0xffffffff / (uint64(r) + 1)
}

func byteFactor(c byte) uint64 {
	switch c {
	case 'm':
		return 1024 * 1024
	case 'k':
		return 1024
	}
	return 1
}

// atoll reads leading decimal digits, as C's atoll does (0 for none).
func atoll(s string) uint64 {
	i := 0
	for i < len(s) && (s[i] == ' ' || s[i] == '\t') {
		i++
	}
	if i < len(s) && s[i] == '+' {
		i++
	}
	var n uint64
	for ; i < len(s) && s[i] >= '0' && s[i] <= '9'; i++ {
		n = n*10 + uint64(s[i]-'0')
	}
	return n
}

func (b *hashlimitBuilder) parseRate(opt, s string) error {
	if k := strings.Index(s, "b/s"); k > 0 {
		r := atoll(s)
		if r == 0 {
			return badValue("hashlimit", "--"+opt, s, "a rate N/sec, N/min, N/hour, N/day or NUMb/s, NUMkb/s, NUMmb/s")
		}
		v := r * byteFactor(s[k-1])
		cost := hashlimitBytesToCost(v)
		if cost == 0 {
			return fmt.Errorf("%w: hashlimit: rate too high %q", ErrBadValue, s)
		}
		b.m.Avg, b.mult = cost, hashlimitByteExpire
		b.m.Mode |= hashlimitBytes
		return nil
	}
	b.mult = 1
	if num, unit, ok := strings.Cut(s, "/"); ok {
		_ = num
		u := strings.ToLower(unit)
		switch {
		case u == "":
			return badValue("hashlimit", "--"+opt, s, "a rate N/sec, N/min, N/hour or N/day")
		case strings.HasPrefix("second", u):
		case strings.HasPrefix("minute", u):
			b.mult = 60
		case strings.HasPrefix("hour", u):
			b.mult = 3600
		case strings.HasPrefix("day", u):
			b.mult = 86400
		default:
			return badValue("hashlimit", "--"+opt, s, "a rate N/sec, N/min, N/hour or N/day")
		}
	}
	r := atoll(s)
	if r == 0 {
		return badValue("hashlimit", "--"+opt, s, "a rate N/sec, N/min, N/hour or N/day")
	}
	avg := uint64(hashlimitScale) * uint64(b.mult) / r
	if avg == 0 {
		return fmt.Errorf("%w: hashlimit: rate too fast %q", ErrBadValue, s)
	}
	b.m.Avg = avg
	return nil
}

func (b *hashlimitBuilder) set(c *ruleCtx, opt string, inv bool, args []string) error {
	s := ""
	if len(args) > 0 {
		s = args[0]
	}
	switch opt {
	case "hashlimit-upto", "hashlimit", "hashlimit-above":
		if b.rateGiven {
			return fmt.Errorf("%w: hashlimit: --hashlimit-upto and --hashlimit-above exclude each other", ErrIncompatibleOpts)
		}
		b.rateGiven = true
		if inv != (opt == "hashlimit-above") {
			b.m.Mode |= hashlimitInvert
		}
		return b.parseRate(opt, s)
	case "hashlimit-srcmask", "hashlimit-dstmask":
		max := uint64(32)
		if c.family == IPv6 {
			max = 128
		}
		n, err := strconv.ParseUint(s, 10, 8)
		if err != nil || n > max {
			return badValue("hashlimit", "--"+opt, s, fmt.Sprintf("a prefix length 0-%d", max))
		}
		if opt == "hashlimit-srcmask" {
			b.m.SrcMask = uint8(n)
		} else {
			b.m.DstMask = uint8(n)
		}
	case "hashlimit-burst":
		// strtoumax with base 0: the leading number (decimal, 0x hex or 0
		// octal), at least 1; what follows only picks a factor (k or m).
		v, rest, ok := leadingUint(s)
		if !ok || v < 1 || rest == "" && v > hashlimitBurstMax {
			return badValue("hashlimit", "--hashlimit-burst", s, "a burst 1-1000000, or a byte size NUM[kb|mb]")
		}
		if rest != "" {
			v *= byteFactor(rest[0])
		}
		b.m.Burst, b.burstGiven = v, true
	case "hashlimit-htable-size", "hashlimit-htable-max", "hashlimit-htable-gcinterval", "hashlimit-htable-expire":
		n, ok := parseCUint(s, 0xffffffff)
		if !ok {
			return badValue("hashlimit", "--"+opt, s, "a number 0-4294967295")
		}
		switch opt {
		case "hashlimit-htable-size":
			b.m.Size = uint32(n)
		case "hashlimit-htable-max":
			b.m.Max = uint32(n)
		case "hashlimit-htable-gcinterval":
			b.m.GCInterval = uint32(n)
		default:
			b.m.Expire, b.expireGiven = uint32(n), true
		}
	case "hashlimit-mode":
		for _, t := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == '|' }) {
			switch t {
			case "dstip":
				b.m.Mode |= HashlimitDstIP
			case "srcip":
				b.m.Mode |= HashlimitSrcIP
			case "srcport":
				b.m.Mode |= HashlimitSrcPort
			case "dstport":
				b.m.Mode |= HashlimitDstPort
			default:
				return badValue("hashlimit", "--hashlimit-mode", s, "a comma-separated list of srcip, srcport, dstip, dstport")
			}
		}
	case "hashlimit-name":
		if s == "" || len(s) > 254 {
			return badValue("hashlimit", "--hashlimit-name", s, "a name of 1 to 254 characters")
		}
		b.m.Name, b.nameGiven = s, true
	case "hashlimit-rate-match":
		b.rateM = true
		b.m.Mode |= hashlimitRate
	case "hashlimit-rate-interval":
		n := atoll(s)
		if n == 0 || n > 0x7fffffff {
			return badValue("hashlimit", "--hashlimit-rate-interval", s, "a positive number of seconds")
		}
		b.m.Interval, b.intervalGiven = uint32(n), true
	}
	return nil
}

func (b *hashlimitBuilder) done(*ruleCtx) (any, error) {
	m := b.m
	if !b.rateGiven {
		return nil, fmt.Errorf("%w: hashlimit: you have to specify --hashlimit", ErrMissingArgument)
	}
	if !b.nameGiven {
		return nil, mustSpecify("hashlimit", "--hashlimit-name")
	}
	if !b.expireGiven {
		m.Expire = b.mult * 1000
	}
	if m.Mode&hashlimitBytes != 0 {
		var burst uint64
		if b.burstGiven {
			unit := hashlimitCostToBytes(m.Avg)
			if m.Burst < unit {
				return nil, fmt.Errorf("%w: hashlimit: burst cannot be smaller than %db", ErrBadValue, unit)
			}
			burst = (m.Burst + unit - 1) / unit
			if !b.expireGiven {
				m.Expire = hashlimitByteExpireB * 1000
			}
		}
		m.Burst = burst
	} else if m.Burst > hashlimitBurstMax {
		return nil, badValue("hashlimit", "--hashlimit-burst", strconv.FormatUint(m.Burst, 10), "a burst 1-1000000")
	}
	if b.rateM {
		if m.Mode&hashlimitBytes == 0 {
			m.Avg /= uint64(b.mult)
		}
		if m.Interval == 0 {
			m.Interval = b.mult
			if m.Mode&hashlimitBytes != 0 {
				m.Interval = 1
			}
		}
	}
	// What the kernel's checkentry refuses (EINVAL).
	switch {
	case m.GCInterval == 0 || m.Expire == 0:
		return nil, fmt.Errorf("%w: hashlimit: --hashlimit-htable-gcinterval and --hashlimit-htable-expire must not be 0 (the kernel refuses the rule)", ErrBadValue)
	case m.Mode&hashlimitBytes != 0 && (m.Avg == 0 || m.Avg > 0xffffffff):
		return nil, fmt.Errorf("%w: hashlimit: byte rate out of range (the kernel refuses the rule)", ErrBadValue)
	case m.Mode&hashlimitBytes == 0 && m.Mode&hashlimitRate == 0 && hashlimitCredits(m.Avg*m.Burst) < hashlimitCredits(m.Avg):
		return nil, fmt.Errorf("%w: hashlimit: rate %d with burst %d overflows the kernel's credits", ErrBadValue, m.Avg, m.Burst)
	}
	return &m, nil
}

// hashlimitCredits is user2credits for revision 3 at HZ=250: the kernel
// multiplies by the constant HZ·CREDITS_PER_JIFFY/10⁶ (wrapping on
// overflow).
func hashlimitCredits(user uint64) uint64 {
	return user * (kernelHZ * hashlimitCPJ / hashlimitScale)
}

// Module implements Match.
func (m *HashlimitMatch) Module() string { return "hashlimit" }

var hashlimitRates = []struct {
	name string
	mult uint64
}{{"day", hashlimitScale * 86400}, {"hour", hashlimitScale * 3600}, {"min", hashlimitScale * 60}, {"sec", hashlimitScale}}

// appendRate prints a packet rate as libxt_hashlimit does and returns the
// expiry (ms) that goes without saying for it.
func appendHashlimitRate(b []byte, period uint64) ([]byte, uint32) {
	if period == 0 {
		return append(b, " inf"...), 0
	}
	i := 1
	for ; i < len(hashlimitRates); i++ {
		r := hashlimitRates[i].mult
		if period > r || r/period < r%period {
			break
		}
	}
	u := hashlimitRates[i-1]
	b = append(b, ' ')
	b = strconv.AppendUint(b, u.mult/period, 10)
	b = append(b, '/')
	b = append(b, u.name...)
	return b, uint32(u.mult / hashlimitScale * 1000)
}

var byteUnits = []struct {
	name   string
	thresh uint64
}{{"m", 1024 * 1024}, {"k", 1024}, {"", 1}}

func appendHashlimitBytes(b []byte, avg, burst uint64, prefix string) ([]byte, uint32) {
	r := hashlimitCostToBytes(avg)
	i := 0
	for ; i < len(byteUnits)-1; i++ {
		if r >= byteUnits[i].thresh && hashlimitBytesToCost(r&^(byteUnits[i].thresh-1)) == avg {
			break
		}
	}
	b = append(b, ' ')
	b = strconv.AppendUint(b, r/byteUnits[i].thresh, 10)
	b = append(b, byteUnits[i].name...)
	b = append(b, "b/s"...)
	if burst == 0 {
		return b, hashlimitByteExpire * 1000
	}
	r *= burst
	b = append(b, ' ')
	b = append(b, prefix...)
	for i = 0; i < len(byteUnits)-1; i++ {
		if r >= byteUnits[i].thresh {
			break
		}
	}
	b = append(b, "burst "...)
	b = strconv.AppendUint(b, r/byteUnits[i].thresh, 10)
	b = append(b, byteUnits[i].name...)
	b = append(b, 'b')
	return b, hashlimitByteExpireB * 1000
}

func (m *HashlimitMatch) appendMode(b []byte, sep byte) []byte {
	b = append(b, ' ')
	first := true
	for _, x := range []struct {
		bit  uint32
		name string
	}{{HashlimitSrcIP, "srcip"}, {HashlimitSrcPort, "srcport"}, {HashlimitDstIP, "dstip"}, {HashlimitDstPort, "dstport"}} {
		if m.Mode&x.bit != 0 {
			if !first {
				b = append(b, sep)
			}
			b = append(b, x.name...)
			first = false
		}
	}
	return b
}

func (m *HashlimitMatch) defaultMask() uint8 {
	if m.family == IPv6 {
		return 128
	}
	return 32
}

// appendOpts prints what follows the rate; pre is "--hashlimit-" for
// iptables-save and "" for -L.
func (m *HashlimitMatch) appendTail(b []byte, pre string, quantum uint32, sep byte, save bool) []byte {
	if m.Mode&(HashlimitSrcIP|HashlimitSrcPort|HashlimitDstIP|HashlimitDstPort) != 0 {
		b = append(b, ' ')
		b = append(b, pre...)
		b = append(b, "mode"...)
		b = m.appendMode(b, sep)
	}
	if save {
		b = append(b, " --hashlimit-name "...)
		b = append(b, m.Name...)
	}
	num := func(b []byte, name string, v uint64) []byte {
		b = append(b, ' ')
		b = append(b, pre...)
		b = append(b, name...)
		b = append(b, ' ')
		return strconv.AppendUint(b, v, 10)
	}
	if m.Size != 0 {
		b = num(b, "htable-size", uint64(m.Size))
	}
	if m.Max != 0 {
		b = num(b, "htable-max", uint64(m.Max))
	}
	if m.GCInterval != hashlimitGCInterval {
		b = num(b, "htable-gcinterval", uint64(m.GCInterval))
	}
	if m.Expire != quantum {
		b = num(b, "htable-expire", uint64(m.Expire))
	}
	if d := m.defaultMask(); m.SrcMask != d {
		b = num(b, "srcmask", uint64(m.SrcMask))
	}
	if d := m.defaultMask(); m.DstMask != d {
		b = num(b, "dstmask", uint64(m.DstMask))
	}
	if m.Mode&hashlimitRate != 0 {
		b = append(b, ' ')
		b = append(b, pre...)
		b = append(b, "rate-match"...)
		if m.Interval != 1 {
			b = num(b, "rate-interval", uint64(m.Interval))
		}
	}
	return b
}

func (m *HashlimitMatch) appendSave(b []byte) []byte {
	if m.Mode&hashlimitInvert != 0 {
		b = append(b, " --hashlimit-above"...)
	} else {
		b = append(b, " --hashlimit-upto"...)
	}
	var q uint32
	if m.Mode&hashlimitBytes != 0 {
		b, q = appendHashlimitBytes(b, m.Avg, m.Burst, "--hashlimit-")
	} else {
		// iptables-save prints the stored cost, which --hashlimit-rate-match
		// has divided by the unit: "5/min" comes back as "5/sec".
		b, q = appendHashlimitRate(b, m.Avg)
		b = append(b, " --hashlimit-burst "...)
		b = strconv.AppendUint(b, m.Burst, 10)
	}
	return m.appendTail(b, "--hashlimit-", q, ',', true)
}

func (m *HashlimitMatch) appendList(b []byte, _ bool) []byte {
	if m.Mode&hashlimitInvert != 0 {
		b = append(b, " limit: above"...)
	} else {
		b = append(b, " limit: up to"...)
	}
	var q uint32
	if m.Mode&hashlimitBytes != 0 {
		b, q = appendHashlimitBytes(b, m.Avg, m.Burst, "")
	} else {
		period := m.Avg
		if m.Interval != 0 {
			period *= uint64(m.Interval)
		}
		b, q = appendHashlimitRate(b, period)
		b = append(b, " burst "...)
		b = strconv.AppendUint(b, m.Burst, 10)
	}
	return m.appendTail(b, "", q, '-', false)
}

// hashlimitKey names a host's hashlimit table (/proc/net/ipt_hashlimit/NAME).
type hashlimitKey struct {
	family Family
	name   string
}

// hashlimitDst is what a packet is grouped by (struct dsthash_dst).
type hashlimitDst struct {
	src, dst         netip.Addr
	srcPort, dstPort uint16
}

// hashlimitTable is one named table: the options of the rule that
// created it and one bucket per group.
type hashlimitTable struct {
	cfg     HashlimitMatch
	max     int
	entries map[hashlimitDst]*hashlimitEntry
	refs    int
}

type hashlimitEntry struct {
	expires                 int64 // jiffies
	prev                    int64 // jiffies
	credit, creditCap, cost uint64
	// rate-match mode
	currentRate, rate, burst uint64
	interval                 uint64
	prevWindow               bool
}

// hashlimitRef is a rule's handle on its table, bound when the host
// loads the rule.
type hashlimitRef struct{ t *hashlimitTable }

func (m *HashlimitMatch) newState() any { return &hashlimitRef{} }

// bindHashlimit attaches every hashlimit rule of p to its host table,
// creating the table with the rule's options if no loaded rule has it,
// and drops tables no rule of the family names any more.
func (h *Host) bindHashlimit(p *program) {
	if h.hashlimit == nil {
		h.hashlimit = map[hashlimitKey]*hashlimitTable{}
	}
	for _, t := range h.hashlimit {
		if t.cfg.family == p.family {
			t.refs = 0
		}
	}
	for _, b := range p.hashlimits {
		k := hashlimitKey{p.family, b.m.Name}
		t := h.hashlimit[k]
		if t == nil {
			t = &hashlimitTable{cfg: *b.m, entries: map[hashlimitDst]*hashlimitEntry{}}
			t.cfg.family = p.family // the program's, whoever built the match
			size := int(t.cfg.Size)
			if size == 0 {
				size = hashlimitDefaultSize
			}
			t.max = int(t.cfg.Max)
			if t.max == 0 {
				t.max = 8 * size
			}
			if t.max < size {
				t.max = size
			}
			h.hashlimit[k] = t
		}
		t.refs++
		b.ref.t = t
	}
	for k, t := range h.hashlimit {
		if k.family == p.family && t.refs == 0 {
			delete(h.hashlimit, k)
		}
	}
}

func (h *Host) jiffies() int64 {
	return h.clock.Now().UnixNano() / (1e9 / kernelHZ)
}

func (m *HashlimitMatch) dst(p *Packet, cfg *HashlimitMatch) hashlimitDst {
	var d hashlimitDst
	if cfg.Mode&HashlimitDstIP != 0 {
		d.dst = netip.PrefixFrom(p.Dst, int(cfg.DstMask)).Masked().Addr()
	}
	if cfg.Mode&HashlimitSrcIP != 0 {
		d.src = netip.PrefixFrom(p.Src, int(cfg.SrcMask)).Masked().Addr()
	}
	if (p.Proto).HasPorts() {
		if cfg.Mode&HashlimitSrcPort != 0 {
			d.srcPort = p.SrcPort
		}
		if cfg.Mode&HashlimitDstPort != 0 {
			d.dstPort = p.DstPort
		}
	}
	return d
}

func (e *hashlimitEntry) init(cfg *HashlimitMatch, now int64) {
	e.prev = now
	switch {
	case cfg.Mode&hashlimitRate != 0:
		e.prevWindow, e.currentRate = false, 0
		if cfg.Mode&hashlimitBytes != 0 {
			r := uint64(0xffffffff)
			if uint32(cfg.Avg) != 0 {
				r = 0xffffffff / uint64(uint32(cfg.Avg))
			}
			e.rate = (r - 1) << hashlimitByteShift
			e.burst = e.rate
			if cfg.Burst != 0 {
				e.burst = cfg.Burst * e.rate
			}
		} else {
			e.rate = 0
			if cfg.Avg != 0 {
				e.rate = hashlimitScale / cfg.Avg
			}
			e.burst = cfg.Burst + e.rate
		}
		e.interval = uint64(cfg.Interval)
	case cfg.Mode&hashlimitBytes != 0:
		e.credit = hashlimitCPJBytes * kernelHZ
		e.cost = (cfg.Avg * kernelHZ * hashlimitCPJBytes) >> 32
		e.creditCap = cfg.Burst
	default:
		e.credit = hashlimitCredits(cfg.Avg * cfg.Burst)
		e.cost = hashlimitCredits(cfg.Avg)
		e.creditCap = e.credit
	}
}

// recalc is rateinfo_recalc: credit for the jiffies since the last packet.
func (e *hashlimitEntry) recalc(cfg *HashlimitMatch, now int64) {
	delta := uint64(now - e.prev)
	if now <= e.prev {
		return
	}
	if cfg.Mode&hashlimitRate != 0 {
		interval := e.interval * kernelHZ
		if delta < interval {
			return
		}
		e.prev = now
		e.prevWindow = e.currentRate*interval > delta*e.rate
		e.currentRate = 0
		return
	}
	e.prev = now
	var capacity uint64
	if cfg.Mode&hashlimitBytes != 0 {
		old := e.credit
		e.credit += hashlimitCPJBytes * delta
		capacity = hashlimitCPJBytes * kernelHZ
		if old >= e.credit {
			e.credit = capacity
			return
		}
	} else {
		e.credit += delta * hashlimitCPJ
		capacity = e.creditCap
	}
	if e.credit > capacity {
		e.credit = capacity
	}
}

// match follows xt_hashlimit's hashlimit_mt_common.
func (m *HashlimitMatch) match(c *evalCtx) bool {
	ref, _ := c.rule.extra.ext[c.matchIdx].(*hashlimitRef)
	if ref == nil || ref.t == nil {
		return false // the host binds every loaded rule
	}
	t := ref.t
	cfg := &t.cfg
	p := c.pkt
	now := c.host.jiffies()
	d := m.dst(p, cfg)
	e := t.entries[d]
	if e != nil && now >= e.expires {
		// The kernel's garbage collection drops idle entries every
		// gcinterval; packetwalk drops one as soon as it expired.
		if !c.host.explaining {
			delete(t.entries, d)
		}
		e = nil
	}
	expires := now + int64(cfg.Expire)*kernelHZ/1000
	// Explain reads a copy: scratch lives in the evaluation context, so
	// that taking its address does not allocate.
	scratch := &c.host.hlScratch
	if c.host.explaining && e != nil {
		*scratch = *e
		e = scratch
	}
	if e == nil {
		if len(t.entries) >= t.max && !c.host.explaining {
			for k, x := range t.entries {
				if now >= x.expires {
					delete(t.entries, k)
				}
			}
		}
		if len(t.entries) >= t.max {
			c.hotdrop = true // "max count reached": the kernel drops the packet
			return false
		}
		if c.host.explaining {
			*scratch = hashlimitEntry{}
			e = scratch
		} else {
			e = &hashlimitEntry{}
			t.entries[d] = e
		}
		e.init(cfg, now)
	} else {
		e.recalc(cfg, now)
	}
	e.expires = expires
	// As in the kernel, the bucket follows the table's options but the
	// rule's own mode bits decide how it is spent and read.
	inv := m.Mode&hashlimitInvert != 0
	if m.Mode&hashlimitRate != 0 {
		cost := uint64(1)
		if m.Mode&hashlimitBytes != 0 {
			cost = uint64(p.Length)
		}
		e.currentRate += cost
		return (!e.prevWindow && e.currentRate <= e.burst) != inv
	}
	cost := e.cost
	if m.Mode&hashlimitBytes != 0 {
		cost = (uint64(p.Length)>>hashlimitByteShift + 1) * e.cost
		if cost > hashlimitCPJBytes*kernelHZ {
			cost = hashlimitCPJBytes * kernelHZ
		}
		if e.credit < cost && e.creditCap != 0 {
			e.creditCap--
			e.credit = hashlimitCPJBytes * kernelHZ
		}
	}
	if e.credit >= cost {
		e.credit -= cost
		return !inv
	}
	return inv
}

// leadingUint reads the number at the start of s as strtoumax does with
// base 0, returning the rest of s.
func leadingUint(s string) (uint64, string, bool) {
	base, i := 10, 0
	switch {
	case len(s) > 2 && (s[:2] == "0x" || s[:2] == "0X") && strings.ContainsRune("0123456789abcdefABCDEF", rune(s[2])):
		base, i = 16, 2
	case len(s) > 1 && s[0] == '0':
		base, i = 8, 1
	}
	j := i
	for j < len(s) && strings.ContainsRune("0123456789abcdefABCDEF"[:base+max(0, base-10)], rune(s[j])) {
		j++
	}
	if j == 0 || j == i && base != 8 {
		return 0, s, false
	}
	if j == i { // a lone "0"
		return 0, s[j:], true
	}
	v, err := strconv.ParseUint(s[i:j], base, 64)
	if err != nil {
		return 0, s, false
	}
	return v, s[j:], true
}
