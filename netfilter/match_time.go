package netfilter

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// TimeMatch is "-m time": the packet's arrival time (the host's clock)
// must lie between DateStart and DateStop (Unix seconds), within the daily
// window DaytimeStart..DaytimeStop (seconds after midnight; a window that
// crosses midnight when start > stop), on one of Weekdays and Monthdays.
//
// Times are UTC unless KernelTZ (--kerneltz) is set, in which case the
// kernel's timezone applies: HostConfig.KernelTZMinutesWest, which is UTC
// (0) unless set, as on a host whose boot scripts did not set it.
type TimeMatch struct {
	DateStart, DateStop       uint32
	DaytimeStart, DaytimeStop uint32
	// Weekdays has bit d set for day d, Monday 1 to Sunday 7.
	Weekdays uint8
	// Monthdays has bit d set for day d of the month, 1 to 31.
	Monthdays  uint32
	KernelTZ   bool
	Contiguous bool
}

const (
	timeAllWeekdays  = 0xfe
	timeAllMonthdays = 0xfffffffe
	timeMaxDaytime   = 86399
	timeDefaultStop  = 1<<31 - 1 // INT_MAX: 2038-01-19T03:14:07
)

var weekdayNames = []string{"", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"}

func init() {
	registerMatch(&module{name: "time",
		opts: []option{
			{name: "datestart", args: 1}, {name: "datestop", args: 1},
			{name: "timestart", args: 1}, {name: "timestop", args: 1},
			{name: "weekdays", args: 1, invert: true}, {name: "monthdays", args: 1, invert: true},
			{name: "localtz"}, {name: "kerneltz"}, {name: "utc"}, {name: "contiguous"},
		},
		newBuilder: func(*ruleCtx) builder {
			return &TimeMatch{DateStop: timeDefaultStop, DaytimeStop: timeMaxDaytime, Weekdays: timeAllWeekdays, Monthdays: timeAllMonthdays}
		}})
}

// parseTimeDate reads YYYY[-MM[-DD[Thh[:mm[:ss]]]]] as UTC.
func parseTimeDate(opt, s string) (uint32, error) {
	bad := fmt.Errorf("%w: time: invalid date %q for --%s (want YYYY[-MM[-DD[Thh[:mm[:ss]]]]], years 1970-2038)", ErrBadValue, s, opt)
	datePart, clock, hasClock := strings.Cut(s, "T")
	f := strings.Split(datePart, "-")
	if len(f) > 3 {
		return 0, bad
	}
	v := []int{0, 1, 1, 0, 0, 0}
	// iptables takes years 1970 to 2038 ("Invalid date" beyond;
	// docs/kernel-notes.md).
	lim := [][2]int{{1970, 2038}, {1, 12}, {1, 31}, {0, 23}, {0, 59}, {0, 59}}
	parts := f
	if hasClock {
		if len(f) != 3 {
			return 0, bad
		}
		parts = append(parts, strings.Split(clock, ":")...)
	}
	if len(parts) > 6 {
		return 0, bad
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || p[0] == '+' || p[0] == '-' || n < lim[i][0] || n > lim[i][1] {
			return 0, bad
		}
		v[i] = n
	}
	t := time.Date(v[0], time.Month(v[1]), v[2], v[3], v[4], v[5], 0, time.UTC)
	if t.Unix() > 0xffffffff {
		return 0, bad
	}
	return uint32(t.Unix()), nil
}

// parseDaytime reads hh:mm[:ss].
func parseDaytime(opt, s string) (uint32, error) {
	f := strings.Split(s, ":")
	if len(f) < 2 || len(f) > 3 {
		return 0, badValue("time", "--"+opt, s, "a time hh:mm[:ss]")
	}
	lim := []int{23, 59, 59}
	var v [3]int
	for i, p := range f {
		n, err := strconv.Atoi(p)
		if err != nil || p == "" || p[0] == '+' || p[0] == '-' || n > lim[i] {
			return 0, badValue("time", "--"+opt, s, "a time hh:mm[:ss]")
		}
		v[i] = n
	}
	return uint32(v[0]*3600 + v[1]*60 + v[2]), nil
}

func (m *TimeMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	s := ""
	if len(args) > 0 {
		s = args[0]
	}
	var err error
	switch opt {
	case "datestart":
		m.DateStart, err = parseTimeDate(opt, s)
	case "datestop":
		m.DateStop, err = parseTimeDate(opt, s)
	case "timestart":
		m.DaytimeStart, err = parseDaytime(opt, s)
	case "timestop":
		m.DaytimeStop, err = parseDaytime(opt, s)
	case "weekdays":
		var days uint8
		for _, t := range strings.Split(s, ",") {
			d := 0
			if n, e := strconv.ParseUint(t, 10, 32); e == nil && n >= 1 {
				// iptables shifts 1 by the number on a 32-bit int
				// (x86 takes the count modulo 32) and keeps 8 bits:
				// 8 sets nothing, 100 is Thu (docs/kernel-notes.md).
				days |= uint8(uint32(1) << (n % 32))
				continue
			} else if t != "" {
				for i := 1; i <= 7; i++ {
					if strings.HasPrefix(weekdayNames[i], t) {
						d = i
						break
					}
				}
			}
			if d == 0 {
				return badValue("time", "--weekdays", s, "a list of days Mon..Sun or 1..7")
			}
			days |= 1 << d
		}
		if inv {
			days = ^days & timeAllWeekdays
		}
		m.Weekdays = days
	case "monthdays":
		var days uint32
		for _, t := range strings.Split(s, ",") {
			n, e := strconv.Atoi(t)
			// Day 0 is taken (a bit no day matches, never printed).
			if e != nil || n < 0 || n > 31 {
				return badValue("time", "--monthdays", s, "a list of days of the month 1..31")
			}
			days |= 1 << n
		}
		if inv {
			// iptables flips days 1-31 and keeps day 0's bit: "!
			// --monthdays 0" prints all 31 days.
			days ^= timeAllMonthdays
		}
		m.Monthdays = days
	case "localtz", "kerneltz":
		m.KernelTZ = true
	case "utc":
		m.KernelTZ = false
	case "contiguous":
		m.Contiguous = true
	}
	return err
}

func (m *TimeMatch) done(*ruleCtx) (any, error) {
	if m.Contiguous && m.DaytimeStart < m.DaytimeStop {
		return nil, fmt.Errorf("%w: time: --contiguous only makes sense when --timestop is before --timestart", ErrIncompatibleOpts)
	}
	return m, nil
}

// Module implements Match.
func (m *TimeMatch) Module() string { return "time" }

func appendDaytime(b []byte, secs uint32) []byte {
	for i, v := range []uint32{secs / 3600, secs / 60 % 60, secs % 60} {
		if i > 0 {
			b = append(b, ':')
		}
		b = append(b, byte('0'+v/10), byte('0'+v%10))
	}
	return b
}

func (m *TimeMatch) defaultDaytime() bool {
	return m.DaytimeStart == 0 && m.DaytimeStop == timeMaxDaytime
}

func (m *TimeMatch) appendWeekdays(b []byte) []byte {
	first := true
	for d := 1; d <= 7; d++ {
		if m.Weekdays&(1<<d) != 0 {
			if !first {
				b = append(b, ',')
			}
			b = append(b, weekdayNames[d]...)
			first = false
		}
	}
	return b
}

func (m *TimeMatch) appendMonthdays(b []byte, ordinal bool) []byte {
	first := true
	for d := 1; d <= 31; d++ {
		if m.Monthdays&(1<<d) == 0 {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = strconv.AppendInt(b, int64(d), 10)
		if ordinal {
			// iptables picks the suffix from the last digit alone:
			// "11st", "12nd", "13rd".
			switch d % 10 {
			case 1:
				b = append(b, "st"...)
			case 2:
				b = append(b, "nd"...)
			case 3:
				b = append(b, "rd"...)
			default:
				b = append(b, "th"...)
			}
		}
	}
	return b
}

func appendDate(b []byte, secs uint32, sep byte) []byte {
	t := time.Unix(int64(secs), 0).UTC()
	b = t.AppendFormat(b, "2006-01-02")
	b = append(b, sep)
	return t.AppendFormat(b, "15:04:05")
}

func (m *TimeMatch) appendSave(b []byte) []byte {
	if !m.defaultDaytime() {
		b = append(b, " --timestart "...)
		b = appendDaytime(b, m.DaytimeStart)
		b = append(b, " --timestop "...)
		b = appendDaytime(b, m.DaytimeStop)
	}
	if m.Monthdays != timeAllMonthdays {
		b = append(b, " --monthdays "...)
		b = m.appendMonthdays(b, false)
	}
	if m.Weekdays != timeAllWeekdays {
		b = append(b, " --weekdays "...)
		b = m.appendWeekdays(b)
	}
	if m.DateStart != 0 {
		b = append(b, " --datestart "...)
		b = appendDate(b, m.DateStart, 'T')
	}
	// iptables 1.8.9 prints --datestop even at its default.
	b = append(b, " --datestop "...)
	b = appendDate(b, m.DateStop, 'T')
	if m.KernelTZ {
		b = append(b, " --kerneltz"...)
	}
	if m.Contiguous {
		b = append(b, " --contiguous"...)
	}
	return b
}

func (m *TimeMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " TIME"...)
	if !m.defaultDaytime() {
		b = append(b, " from "...)
		b = appendDaytime(b, m.DaytimeStart)
		b = append(b, " to "...)
		b = appendDaytime(b, m.DaytimeStop)
	}
	if m.Weekdays != timeAllWeekdays {
		b = append(b, " on "...)
		b = m.appendWeekdays(b)
	}
	if m.Monthdays != timeAllMonthdays {
		b = append(b, " on "...)
		b = m.appendMonthdays(b, true)
	}
	if m.DateStart != 0 {
		b = append(b, " starting from "...)
		b = appendDate(b, m.DateStart, ' ')
	}
	if m.DateStop != timeDefaultStop {
		b = append(b, " until date "...)
		b = appendDate(b, m.DateStop, ' ')
	}
	if !m.KernelTZ {
		b = append(b, " UTC"...)
	}
	if m.Contiguous {
		b = append(b, " contiguous"...)
	}
	return b
}

// match follows xt_time's time_mt, reading the host's clock.
func (m *TimeMatch) match(c *evalCtx) bool {
	stamp := c.host.clock.Now().Unix()
	if m.KernelTZ {
		stamp -= 60 * int64(c.host.cfg.KernelTZMinutesWest)
	}
	if stamp < int64(m.DateStart) || stamp > int64(m.DateStop) {
		return false
	}
	day := uint32(((stamp % 86400) + 86400) % 86400)
	if m.DaytimeStart < m.DaytimeStop {
		if day < m.DaytimeStart || day > m.DaytimeStop {
			return false
		}
	} else {
		if day < m.DaytimeStart && day > m.DaytimeStop {
			return false
		}
		// With --contiguous, the early-morning part of a window that
		// crosses midnight belongs to the day it started on.
		if m.Contiguous && day <= m.DaytimeStop {
			stamp -= 86400
		}
	}
	t := time.Unix(stamp, 0).UTC()
	wd := int(t.Weekday())
	if wd == 0 {
		wd = 7
	}
	if m.Weekdays&(1<<wd) == 0 {
		return false
	}
	return m.Monthdays == timeAllMonthdays || m.Monthdays&(1<<t.Day()) != 0
}
