package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"strconv"
)

// SynproxyTarget is "-j SYNPROXY" (filter table, INPUT and FORWARD, "-p
// tcp"): the kernel answers SYNs with syncookies and opens the connection
// to the server itself once the client has completed the handshake. The
// options are those it advertises: --sack-perm, --timestamp, --wscale N,
// --mss N (iptables keeps the low 16 bits), --ecn. packetwalk reads and
// prints it but does not model the proxied handshake: a host refuses to
// load it.
type SynproxyTarget struct {
	SACKPerm, Timestamp, ECN bool
	WScale                   uint8
	HasWScale                bool
	MSS                      uint16
	HasMSS                   bool
}

func init() {
	// xt_SYNPROXY names hooks only, no table: mangle FORWARD takes it
	// (docs/kernel-notes.md).
	registerTarget(&module{name: "SYNPROXY", hooks: []Hook{Input, Forward},
		opts: []option{{name: "sack-perm"}, {name: "timestamp"}, {name: "wscale", args: 1},
			{name: "mss", args: 1}, {name: "ecn"}},
		newBuilder: func(*ruleCtx) builder { return &SynproxyTarget{} }})
}

func (t *SynproxyTarget) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	switch opt {
	case "sack-perm":
		t.SACKPerm = true
	case "timestamp":
		t.Timestamp = true
	case "ecn":
		t.ECN = true
	case "wscale":
		n, ok := parseCUint(args[0], 255)
		if !ok {
			return badValue("SYNPROXY", "--wscale", args[0], "a number 0-255")
		}
		t.WScale, t.HasWScale = uint8(n), true
	default:
		n, ok := parseCUint(args[0], 0xffffffff)
		if !ok {
			return badValue("SYNPROXY", "--mss", args[0], "a number")
		}
		t.MSS, t.HasMSS = uint16(n), true
	}
	return nil
}

func (t *SynproxyTarget) done(c *ruleCtx) (any, error) {
	if c.ip.Proto != inet.TCP || c.ip.InvProto {
		return nil, fmt.Errorf("%w: SYNPROXY needs \"-p tcp\"", ErrNotAllowed)
	}
	return t, nil
}

// Name implements Target.
func (t *SynproxyTarget) Name() string { return "SYNPROXY" }

func (t *SynproxyTarget) unmodelled() string {
	return "the syncookie handshake proxy is not modelled"
}

func (t *SynproxyTarget) appendSave(b []byte) []byte {
	if t.SACKPerm {
		b = append(b, " --sack-perm"...)
	}
	if t.Timestamp {
		b = append(b, " --timestamp"...)
	}
	if t.HasWScale {
		b = strconv.AppendUint(append(b, " --wscale "...), uint64(t.WScale), 10)
	}
	if t.HasMSS {
		b = strconv.AppendUint(append(b, " --mss "...), uint64(t.MSS), 10)
	}
	if t.ECN {
		b = append(b, " --ecn"...)
	}
	return b
}

// appendList prints as iptables does, each word followed by a space.
func (t *SynproxyTarget) appendList(b []byte, _ bool) []byte {
	b = append(b, " SYNPROXY "...)
	if t.SACKPerm {
		b = append(b, "sack-perm "...)
	}
	if t.Timestamp {
		b = append(b, "timestamp "...)
	}
	if t.HasWScale {
		b = append(strconv.AppendUint(append(b, "wscale "...), uint64(t.WScale), 10), ' ')
	}
	if t.HasMSS {
		b = append(strconv.AppendUint(append(b, "mss "...), uint64(t.MSS), 10), ' ')
	}
	if t.ECN {
		b = append(b, "ecn "...)
	}
	return b
}
