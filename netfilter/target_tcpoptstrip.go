package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"strconv"
	"strings"
)

// TCPOptstripTarget is "-j TCPOPTSTRIP [--strip-options K,K...]" (mangle
// table, "-p tcp"): every TCP option of the listed kinds (2-255, or the
// names mss, wscale, sack-permitted, sack, timestamp, md5) is overwritten
// with NOPs, as the kernel does, and the rule continues. With no option it
// strips nothing.
type TCPOptstripTarget struct {
	// Strip has bit k set for option kind k.
	Strip [4]uint64
}

var tcpOptNames = []struct {
	name string
	kind uint8
}{{"wscale", 3}, {"mss", 2}, {"sack-permitted", 4}, {"sack", 5}, {"timestamp", 8}, {"md5", 19}}

func init() {
	registerTarget(&module{name: "TCPOPTSTRIP", tables: mangle,
		opts:       []option{{name: "strip-options", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &TCPOptstripTarget{} }})
}

func (t *TCPOptstripTarget) has(k uint8) bool { return t.Strip[k/64]&(1<<(k%64)) != 0 }

func (t *TCPOptstripTarget) set(_ *ruleCtx, _ string, _ bool, args []string) error {
	for _, s := range strings.Split(args[0], ",") {
		k := -1
		for _, n := range tcpOptNames {
			if n.name == s {
				k = int(n.kind)
			}
		}
		if k < 0 {
			v, ok := parseCUint(s, 255)
			if !ok {
				return badValue("TCPOPTSTRIP", "--strip-options", s, "TCP option kinds 2-255 or mss, wscale, sack-permitted, sack, timestamp, md5")
			}
			k = int(v)
		}
		if k < 2 {
			return badValue("TCPOPTSTRIP", "--strip-options", s, "an option kind other than 0 or 1")
		}
		if t.has(uint8(k)) {
			return fmt.Errorf("%w: TCPOPTSTRIP: option %q already specified", ErrMultipleFlags, s)
		}
		t.Strip[k/64] |= 1 << (k % 64)
	}
	return nil
}

func (t *TCPOptstripTarget) done(c *ruleCtx) (any, error) {
	if c.ip.Proto != inet.TCP || c.ip.InvProto {
		return nil, fmt.Errorf("%w: TCPOPTSTRIP needs \"-p tcp\"", ErrNotAllowed)
	}
	return t, nil
}

// Name implements Target.
func (t *TCPOptstripTarget) Name() string { return "TCPOPTSTRIP" }

func (t *TCPOptstripTarget) appendKinds(b []byte, names bool) []byte {
	first := true
	for k := 2; k < 256; k++ {
		if !t.has(uint8(k)) {
			continue
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		name := ""
		if names {
			for _, n := range tcpOptNames {
				if int(n.kind) == k {
					name = n.name
				}
			}
		}
		if name != "" {
			b = append(b, name...)
		} else {
			b = strconv.AppendUint(b, uint64(k), 10)
		}
	}
	return b
}

func (t *TCPOptstripTarget) empty() bool { return t.Strip == [4]uint64{} }

func (t *TCPOptstripTarget) appendSave(b []byte) []byte {
	if t.empty() {
		return b
	}
	return t.appendKinds(append(b, " --strip-options "...), false)
}

func (t *TCPOptstripTarget) appendList(b []byte, numeric bool) []byte {
	if t.empty() {
		return b
	}
	return t.appendKinds(append(b, " TCPOPTSTRIP options "...), !numeric)
}

func (t *TCPOptstripTarget) apply(c *evalCtx) verdict {
	p := c.pkt
	if p.Proto != inet.TCP || p.FragOffset != 0 {
		return vContinue
	}
	stripped := false
	for i := range p.TCPOptions {
		if p.TCPOptions[i]&t.Strip[i] != 0 {
			p.TCPOptions[i] &^= t.Strip[i]
			stripped = true
		}
	}
	if stripped {
		p.SetTCPOption(1) // the NOPs written in their place
	}
	return vContinue
}
