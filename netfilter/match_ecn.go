package netfilter

import (
	"fmt"
	"strconv"

	"github.com/packetwalk/packetwalk/inet"
)

// ECNMatch is "-m ecn [!] --ecn-tcp-ece [!] --ecn-tcp-cwr
// [!] --ecn-ip-ect N": the TCP ECE and CWR flags (which need "-p tcp",
// as the kernel's checkentry requires) and the ECN field of the IP
// header, the low two bits of Packet.TOS (0-3). Each test may be
// inverted on its own; at least one is given.
type ECNMatch struct {
	ECE, CWR, ECT          bool
	InvECE, InvCWR, InvECT bool
	ECTValue               uint8
}

func init() {
	registerMatch(&module{name: "ecn",
		opts: []option{
			{name: "ecn-tcp-cwr", args: 0, invert: true},
			{name: "ecn-tcp-ece", args: 0, invert: true},
			{name: "ecn-ip-ect", args: 1, invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &ECNMatch{} }})
}

func (m *ECNMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "ecn-tcp-cwr":
		m.CWR, m.InvCWR = true, inv
	case "ecn-tcp-ece":
		m.ECE, m.InvECE = true, inv
	default:
		n, ok := parseCUint(args[0], 3)
		if !ok {
			return badValue("ecn", "--ecn-ip-ect", args[0], "a value 0-3")
		}
		m.ECT, m.InvECT, m.ECTValue = true, inv, uint8(n)
	}
	return nil
}

func (m *ECNMatch) done(c *ruleCtx) (any, error) {
	if !m.ECE && !m.CWR && !m.ECT {
		return nil, fmt.Errorf("%w: ECN match: some option required", ErrMissingArgument)
	}
	if m.ECE || m.CWR {
		if err := needProto(c, "ecn --ecn-tcp-ece/--ecn-tcp-cwr", inet.TCP); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// Module implements Match.
func (m *ECNMatch) Module() string { return "ecn" }

func (m *ECNMatch) appendSave(b []byte) []byte {
	if m.ECE {
		b = appendNot(b, m.InvECE)
		b = append(b, " --ecn-tcp-ece"...)
	}
	if m.CWR {
		b = appendNot(b, m.InvCWR)
		b = append(b, " --ecn-tcp-cwr"...)
	}
	if m.ECT {
		b = appendNot(b, m.InvECT)
		b = append(b, " --ecn-ip-ect "...)
		b = strconv.AppendUint(b, uint64(m.ECTValue), 10)
	}
	return b
}

func (m *ECNMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " ECN match"...)
	item := func(inv bool, s string) {
		b = append(b, ' ')
		if inv {
			b = append(b, '!')
		}
		b = append(b, s...)
	}
	if m.ECE {
		item(m.InvECE, "ECE")
	}
	if m.CWR {
		item(m.InvCWR, "CWR")
	}
	if m.ECT {
		item(m.InvECT, "ECT=")
		b = strconv.AppendUint(b, uint64(m.ECTValue), 10)
	}
	return b
}

func (m *ECNMatch) match(c *evalCtx) bool {
	p := c.pkt
	if m.ECT && (p.TOS&3 == m.ECTValue) == m.InvECT {
		return false
	}
	if m.ECE || m.CWR {
		if p.Proto != inet.TCP {
			return false
		}
		if m.ECE && (p.TCPFlags&inet.ECE != 0) == m.InvECE {
			return false
		}
		if m.CWR && (p.TCPFlags&inet.CWR != 0) == m.InvCWR {
			return false
		}
	}
	return true
}
