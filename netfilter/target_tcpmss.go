package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"strconv"
)

// TCPMSSTarget is "-j TCPMSS" (needs "-p tcp"): --set-mss N (0-65515 for
// IPv4, 0-65495 for IPv6) or --clamp-mss-to-pmtu (Clamp), the MSS being
// then the path MTU less the IP and TCP headers (40 bytes for IPv4, 60
// for IPv6). The last of the two options given wins, as in iptables.
// Clamping is allowed only in FORWARD, OUTPUT and POSTROUTING.
//
// The kernel's tcpmss_tg4/tcpmss_tg6 (net/netfilter/xt_TCPMSS.c): the
// path MTU is the smaller of the route's MTU and the MTU of the route back
// to the source, and a packet whose path MTU is not above the headers is
// dropped. A segment carrying the MSS option gets it lowered, never
// raised; a segment without it and without payload (and with room in the
// TCP header) gets the option added, with the MSS capped at 536 (IPv4) or
// 1220 (IPv6). With the nf_tables backend the kernel does not insist on a
// SYN match in the rule (xt_TCPMSS skips that check for nft_compat), so
// such rules load and act on every segment they match. The rule then
// continues.
type TCPMSSTarget struct {
	MSS   uint16
	Clamp bool
}

func init() {
	registerTarget(&module{name: "TCPMSS",
		opts:       []option{{name: "set-mss", args: 1}, {name: "clamp-mss-to-pmtu"}},
		newBuilder: func(*ruleCtx) builder { return &tcpmssTargetBuilder{} }})
}

type tcpmssTargetBuilder struct {
	t   TCPMSSTarget
	any bool
}

func (b *tcpmssTargetBuilder) set(c *ruleCtx, opt string, _ bool, args []string) error {
	b.any = true
	if opt == "clamp-mss-to-pmtu" {
		b.t = TCPMSSTarget{Clamp: true}
		return nil
	}
	max := uint64(65535 - 20)
	if c.family == IPv6 {
		max = 65535 - 40
	}
	n, ok := parseCUint(args[0], max)
	if !ok {
		return badValue("TCPMSS", "--set-mss", args[0], "a number 0-"+strconv.FormatUint(max, 10))
	}
	b.t = TCPMSSTarget{MSS: uint16(n)}
	return nil
}

func (b *tcpmssTargetBuilder) done(c *ruleCtx) (any, error) {
	if !b.any {
		return nil, fmt.Errorf("%w: TCPMSS target: At least one parameter is required", ErrMissingArgument)
	}
	// The kernel registers TCPMSS for TCP only.
	if c.ip.Proto != inet.TCP || c.ip.InvProto {
		return nil, fmt.Errorf("%w: TCPMSS needs \"-p tcp\"", ErrNotAllowed)
	}
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *TCPMSSTarget) Name() string { return "TCPMSS" }

func (t *TCPMSSTarget) checkHooks(mask uint8) error {
	const ok = 1<<Forward | 1<<Output | 1<<Postrouting
	if t.Clamp && mask&^ok != 0 {
		return fmt.Errorf("%w: TCPMSS --clamp-mss-to-pmtu is only valid in FORWARD, OUTPUT and POSTROUTING", ErrNotAllowed)
	}
	return nil
}

func (t *TCPMSSTarget) appendSave(b []byte) []byte {
	if t.Clamp {
		return append(b, " --clamp-mss-to-pmtu"...)
	}
	b = append(b, " --set-mss "...)
	return strconv.AppendUint(b, uint64(t.MSS), 10)
}

func (t *TCPMSSTarget) appendList(b []byte, _ bool) []byte {
	if t.Clamp {
		return append(b, " TCPMSS clamp to PMTU"...)
	}
	b = append(b, " TCPMSS set "...)
	return strconv.AppendUint(b, uint64(t.MSS), 10)
}

func (t *TCPMSSTarget) apply(c *evalCtx) verdict {
	p := c.pkt
	if p.Proto != inet.TCP || p.FragOffset != 0 {
		return vContinue
	}
	hdrs, dflt := 40, uint16(536)
	if p.Family == IPv6 {
		hdrs, dflt = 60, 1220
	}
	mss := t.MSS
	if t.Clamp {
		mtu := c.host.routeMTU(p.Dst)
		if back := c.host.routeMTU(p.Src); back < mtu {
			mtu = back
		}
		if mtu <= hdrs {
			return vDrop // "unknown or invalid path-MTU"
		}
		mss = uint16(min(mtu-hdrs, 0xffff))
	}
	if p.hasTCPOption(2) {
		if p.MSS > mss {
			p.MSS = mss
		}
		return vContinue
	}
	tcpLen := int(p.TCPHeaderLen)
	if tcpLen == 0 {
		tcpLen = 20
	}
	if tcpSegmentLen(p) > 0 || tcpLen >= 60 {
		return vContinue // no room without moving payload
	}
	p.SetTCPOption(2)
	p.MSS = min(mss, dflt)
	p.TCPHeaderLen = uint8(tcpLen + 4)
	p.Length += 4
	return vContinue
}

// checkTCPMSSLegacy is the check the kernel skips only for iptables-nft:
// with iptables-legacy, a TCPMSS rule must itself match SYN segments (a
// tcp match whose --tcp-flags mask and comparison both hold SYN, not
// inverted), else "Only works on TCP SYN packets" and the rule fails.
func checkTCPMSSLegacy(rs *Ruleset) error {
	for _, t := range rs.Tables() {
		for _, c := range t.chainList() {
			for _, r := range c.Rules {
				if _, ok := r.Target.(*TCPMSSTarget); !ok {
					continue
				}
				syn := false
				for _, m := range r.Matches {
					if tm, ok := m.(*TCPMatch); ok && tm.FlagsMask&inet.SYN != 0 && tm.FlagsCmp&inet.SYN != 0 && !tm.InvFlags {
						syn = true
					}
				}
				if !syn {
					return &ruleError{r, fmt.Errorf("%w: TCPMSS with iptables-legacy needs a SYN match in the rule (\"--tcp-flags SYN,RST SYN\"): the kernel says \"Only works on TCP SYN packets\"", ErrNotAllowed)}
				}
			}
		}
	}
	return nil
}
