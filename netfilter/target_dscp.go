package netfilter

import (
	"fmt"
)

// DSCPTarget is "-j DSCP --set-dscp N" or "--set-dscp-class CLASS" (mangle
// table only, both families): it sets the six DSCP bits of the IPv4 TOS
// byte or the IPv6 traffic class to DSCP, keeping the two ECN bits, and
// continues with the next rule. iptables-save prints a class as its number.
type DSCPTarget struct {
	DSCP uint8 // 0-63
}

func init() {
	registerTarget(&module{name: "DSCP", tables: mangle,
		opts:       []option{{name: "set-dscp", args: 1}, {name: "set-dscp-class", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &dscpTargetBuilder{} }})
}

// mangle is the table list of the header-rewriting targets, which the
// kernel registers for the mangle table only (xt_DSCP.c, xt_HL.c, ipt_ECN.c).
var mangle = []TableID{Mangle}

type dscpTargetBuilder struct {
	t   DSCPTarget
	opt string
}

func (b *dscpTargetBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	if b.opt != "" {
		return fmt.Errorf("%w: DSCP: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, b.opt, opt)
	}
	b.opt = opt
	if opt == "set-dscp-class" {
		v, ok := dscpClass(args[0])
		if !ok {
			return badValue("DSCP", "--set-dscp-class", args[0], "EF, BE, CS0-CS7 or AF11-AF43")
		}
		b.t.DSCP = v
		return nil
	}
	n, ok := parseCUint(args[0], 63)
	if !ok {
		return badValue("DSCP", "--set-dscp", args[0], "a number 0-63")
	}
	b.t.DSCP = uint8(n)
	return nil
}

func (b *dscpTargetBuilder) done(*ruleCtx) (any, error) {
	if b.opt == "" {
		return nil, fmt.Errorf("%w: DSCP target: Parameter --set-dscp is required", ErrMissingArgument)
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *DSCPTarget) Name() string { return "DSCP" }

func (t *DSCPTarget) appendSave(b []byte) []byte {
	b = append(b, " --set-dscp "...)
	return appendHex02(b, t.DSCP)
}

func (t *DSCPTarget) appendList(b []byte, _ bool) []byte {
	b = append(b, " DSCP set "...)
	return appendHex02(b, t.DSCP)
}

// appendHex02 appends v as C's "0x%02x".
func appendHex02(b []byte, v uint8) []byte {
	const digits = "0123456789abcdef"
	return append(b, '0', 'x', digits[v>>4], digits[v&15])
}

func (t *DSCPTarget) apply(c *evalCtx) verdict {
	// The ECN bits (the low two) are kept.
	c.pkt.TOS = c.pkt.TOS&0x03 | t.DSCP<<2
	return vContinue
}
