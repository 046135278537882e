package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"strconv"
)

// ECNTarget is "-j ECN" (IPv4, mangle table only). Its options:
//
//	--ecn-tcp-remove   clear the TCP ECE and CWR flags (SetECE and SetCWR
//	                   with both values false; it replaces earlier options)
//	--ecn-tcp-ece 0|1  set the inet.ECE flag to the value
//	--ecn-tcp-cwr 0|1  set the inet.CWR flag to the value
//	--ecn-ip-ect 0-3   set the ECN field of the TOS byte
//
// The TCP operations need "-p tcp", as the kernel's checkentry says. The
// rule continues with the next one.
type ECNTarget struct {
	SetIP, SetECE, SetCWR bool
	ECT                   uint8 // the ECN codepoint, 0-3
	ECE, CWR              bool
}

func init() {
	registerTarget(&module{name: "ECN", tables: mangle, families: []Family{IPv4},
		opts: []option{{name: "ecn-tcp-remove"}, {name: "ecn-tcp-cwr", args: 1},
			{name: "ecn-tcp-ece", args: 1}, {name: "ecn-ip-ect", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &ecnTargetBuilder{} }})
}

type ecnTargetBuilder struct {
	t   ECNTarget
	any bool
}

func (b *ecnTargetBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	b.any = true
	if opt == "ecn-tcp-remove" {
		b.t = ECNTarget{SetECE: true, SetCWR: true}
		return nil
	}
	max, want := uint64(1), "0 or 1"
	if opt == "ecn-ip-ect" {
		max, want = 3, "a number 0-3"
	}
	n, ok := parseCUint(args[0], max)
	if !ok {
		return badValue("ECN", "--"+opt, args[0], want)
	}
	switch opt {
	case "ecn-tcp-cwr":
		b.t.SetCWR, b.t.CWR = true, n == 1
	case "ecn-tcp-ece":
		b.t.SetECE, b.t.ECE = true, n == 1
	default:
		b.t.SetIP, b.t.ECT = true, uint8(n)
	}
	return nil
}

func (b *ecnTargetBuilder) done(c *ruleCtx) (any, error) {
	if !b.any {
		return nil, fmt.Errorf("%w: ECN target: An operation is required", ErrMissingArgument)
	}
	if (b.t.SetECE || b.t.SetCWR) && (c.ip.Proto != inet.TCP || c.ip.InvProto) {
		return nil, fmt.Errorf("%w: ECN --ecn-tcp-* needs \"-p tcp\"", ErrNotAllowed)
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *ECNTarget) Name() string { return "ECN" }

func (t *ECNTarget) removes() bool {
	return t.SetECE && t.SetCWR && !t.SetIP && !t.ECE && !t.CWR
}

func b01(v bool) uint64 {
	if v {
		return 1
	}
	return 0
}

func (t *ECNTarget) appendSave(b []byte) []byte {
	if t.removes() {
		return append(b, " --ecn-tcp-remove"...)
	}
	if t.SetECE {
		b = strconv.AppendUint(append(b, " --ecn-tcp-ece "...), b01(t.ECE), 10)
	}
	if t.SetCWR {
		b = strconv.AppendUint(append(b, " --ecn-tcp-cwr "...), b01(t.CWR), 10)
	}
	if t.SetIP {
		b = strconv.AppendUint(append(b, " --ecn-ip-ect "...), uint64(t.ECT), 10)
	}
	return b
}

func (t *ECNTarget) appendList(b []byte, _ bool) []byte {
	if t.removes() {
		return append(b, " ECN TCP remove"...)
	}
	b = append(b, " ECN"...)
	if t.SetECE {
		b = strconv.AppendUint(append(b, " ECE="...), b01(t.ECE), 10)
	}
	if t.SetCWR {
		b = strconv.AppendUint(append(b, " CWR="...), b01(t.CWR), 10)
	}
	if t.SetIP {
		b = strconv.AppendUint(append(b, " ECT codepoint="...), uint64(t.ECT), 10)
	}
	return b
}

func (t *ECNTarget) apply(c *evalCtx) verdict {
	p := c.pkt
	if t.SetIP {
		p.TOS = p.TOS&^3 | t.ECT
	}
	if p.Proto == inet.TCP && p.FragOffset == 0 {
		if t.SetECE {
			p.TCPFlags = setFlag(p.TCPFlags, inet.ECE, t.ECE)
		}
		if t.SetCWR {
			p.TCPFlags = setFlag(p.TCPFlags, inet.CWR, t.CWR)
		}
	}
	return vContinue
}

func setFlag(f, bit inet.TCPFlags, on bool) inet.TCPFlags {
	if on {
		return f | bit
	}
	return f &^ bit
}
