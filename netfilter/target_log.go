package netfilter

import (
	"fmt"
	"strconv"
)

// LogFlags are the --log-* switches of the LOG target (XT_LOG_* bits).
type LogFlags uint8

// LOG flags.
const (
	LogTCPSequence LogFlags = 0x01
	LogTCPOptions  LogFlags = 0x02
	LogIPOptions   LogFlags = 0x04
	LogUID         LogFlags = 0x08
	LogMACDecode   LogFlags = 0x20
)

var logFlagNames = []struct {
	f    LogFlags
	name string
}{{LogTCPSequence, "tcp-sequence"}, {LogTCPOptions, "tcp-options"}, {LogIPOptions, "ip-options"}, {LogUID, "uid"}, {LogMACDecode, "macdecode"}}

// maxLogPrefix is the longest LOG prefix; iptables cuts longer ones.
const maxLogPrefix = 29

// logLevelNames are the syslog levels as iptables -L names them.
var logLevelNames = [8]string{"emerg", "alert", "crit", "err", "warn", "notice", "info", "debug"}

// logLevelInput are the names --log-level accepts (syslog's prioritynames
// as iptables reads them).
var logLevelInput = map[string]uint8{"emerg": 0, "panic": 0, "alert": 1, "crit": 2, "error": 3,
	"warning": 4, "notice": 5, "info": 6, "debug": 7}

// LogTarget is "-j LOG": the kernel writes a line about the packet to its
// log and the packet continues with the next rule. packetwalk records no
// log; the target only counts.
type LogTarget struct {
	Level  uint8 // syslog level 0-7; 4 (warning) by default
	Prefix string
	Flags  LogFlags
}

func init() {
	opts := []option{{name: "log-level", args: 1}, {name: "log-prefix", args: 1}}
	for _, f := range logFlagNames {
		opts = append(opts, option{name: "log-" + f.name})
	}
	registerTarget(&module{name: "LOG", opts: opts,
		newBuilder: func(*ruleCtx) builder { return &LogTarget{Level: 4} }})
}

func (t *LogTarget) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	switch opt {
	case "log-level":
		if l, ok := logLevelInput[args[0]]; ok {
			t.Level = l
			return nil
		}
		n, err := strconv.ParseUint(args[0], 10, 8)
		if err != nil || n > 7 {
			return badValue("LOG", "--log-level", args[0], "a level 0-7 or emerg, alert, crit, error, warning, notice, info, debug")
		}
		t.Level = uint8(n)
	case "log-prefix":
		if args[0] == "" {
			return badValue("LOG", "--log-prefix", args[0], "a prefix of at least 1 character")
		}
		p := args[0]
		if len(p) > maxLogPrefix {
			p = p[:maxLogPrefix]
		}
		t.Prefix = p
	default:
		for _, f := range logFlagNames {
			if opt == "log-"+f.name {
				t.Flags |= f.f
			}
		}
	}
	return nil
}

func (t *LogTarget) done(*ruleCtx) (any, error) {
	if t.Level > 7 {
		return nil, fmt.Errorf("%w: LOG level %d", ErrBadValue, t.Level)
	}
	return t, nil
}

// Name implements Target.
func (t *LogTarget) Name() string { return "LOG" }

func (t *LogTarget) appendSave(b []byte) []byte {
	if t.Prefix != "" {
		b = append(b, " --log-prefix "...)
		b = appendQuoted(b, t.Prefix)
	}
	if t.Level != 4 {
		b = append(b, " --log-level "...)
		b = strconv.AppendUint(b, uint64(t.Level), 10)
	}
	for _, f := range logFlagNames {
		if t.Flags&f.f != 0 {
			b = append(b, " --log-"...)
			b = append(b, f.name...)
		}
	}
	return b
}

func (t *LogTarget) appendList(b []byte, numeric bool) []byte {
	if numeric {
		b = append(b, " LOG flags "...)
		b = strconv.AppendUint(b, uint64(t.Flags), 10)
		b = append(b, " level "...)
		b = strconv.AppendUint(b, uint64(t.Level), 10)
	} else {
		b = append(b, " LOG level "...)
		if t.Level < 8 {
			b = append(b, logLevelNames[t.Level]...)
		} else {
			b = strconv.AppendUint(b, uint64(t.Level), 10)
		}
		for _, f := range logFlagNames {
			if t.Flags&f.f != 0 {
				b = append(b, ' ')
				b = append(b, f.name...)
			}
		}
	}
	if t.Prefix != "" {
		b = append(b, " prefix \""...)
		b = append(b, t.Prefix...)
		b = append(b, '"')
	}
	return b
}

func (t *LogTarget) apply(*evalCtx) verdict { return vContinue }
