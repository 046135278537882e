package netfilter

import (
	"fmt"
	"net/netip"
)

// TEETarget is "-j TEE --gateway ADDR [--oif NAME]": the kernel sends a
// copy of the packet to the gateway and the original continues (see
// apply). packetwalk runs it without --oif; with --oif a host refuses to
// load it.
type TEETarget struct {
	Gateway netip.Addr
	OIF     string
}

func init() {
	registerTarget(&module{name: "TEE",
		opts:       []option{{name: "gateway", args: 1}, {name: "oif", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &TEETarget{} }})
}

func (t *TEETarget) set(c *ruleCtx, opt string, _ bool, args []string) error {
	if opt == "oif" {
		// Any text: iptables keeps its first 15 bytes, and an empty one
		// is no --oif (docs/kernel-notes.md).
		n := args[0]
		if len(n) > 15 {
			n = n[:15]
		}
		t.OIF = n
		return nil
	}
	// inet_aton's forms ("1.2.3", "010.0.0.1") and, in iptables, IPv4-mapped
	// addresses are taken (docs/kernel-notes.md).
	a, err := parseHostAddr(c.family, args[0], false)
	if err != nil {
		return badValue("TEE", "--gateway", args[0], "an "+c.family.String()+" address (host names are not resolved)")
	}
	t.Gateway = a
	return nil
}

func (t *TEETarget) done(*ruleCtx) (any, error) {
	if !t.Gateway.IsValid() {
		return nil, mustSpecify("TEE", "--gateway")
	}
	if t.Gateway.IsUnspecified() {
		// xt_TEE's checkentry refuses the all-zero gateway
		// (iptables-restore: RULE_APPEND failed (Invalid argument)).
		return nil, fmt.Errorf("%w: TEE --gateway %s (the kernel refuses the unspecified address)", ErrBadValue, t.Gateway)
	}
	return t, nil
}

// Name implements Target.
func (t *TEETarget) Name() string { return "TEE" }

func (t *TEETarget) unmodelled() string {
	if t.OIF != "" {
		return "--oif (the copy's route bound to a device) is not modelled"
	}
	return ""
}

// apply follows nf_dup_ipv4 and nf_dup_ipv6: the copy, untracked and
// without the original's socket, its TTL (hop limit) lowered by one in
// PREROUTING and INPUT, is routed to the gateway as a local packet's
// route is looked up (mark 0, the packet's TOS; the gateway taken as the
// next hop) and sent through OUTPUT and POSTROUTING with its addresses
// unchanged; it lands in Result.Emitted when it leaves. A copy that
// finds no route is lost. The copy meets no TEE itself.
func (t *TEETarget) apply(c *evalCtx) verdict {
	w := c.walk
	if w.dup {
		return vContinue
	}
	h, p := c.host, c.pkt
	k := flow{dst: t.Gateway, iif: "lo", tos: p.TOS}
	d := h.lookup(&k)
	if d.reason != NoReason {
		return vContinue
	}
	dup := *p
	dup.In, dup.Out, dup.HasSocket, dup.UID, dup.GID, dup.NumGroups = "", "", false, 0, 0, 0
	dup.CgroupClassID, dup.CgroupPath, dup.PhysIn, dup.PhysOut, dup.Bridged = 0, "", "", "", false
	if c.hook == Prerouting || c.hook == Input {
		dup.TTL--
	}
	if out, ok := h.sendRouted(w, dup, d, true); ok {
		w.res.Emitted = append(w.res.Emitted, out)
	}
	return vContinue
}

func (t *TEETarget) appendSave(b []byte) []byte {
	b = t.Gateway.AppendTo(append(b, " --gateway "...))
	if t.OIF != "" {
		b = append(append(b, " --oif "...), t.OIF...)
	}
	return b
}

func (t *TEETarget) appendList(b []byte, _ bool) []byte {
	b = t.Gateway.AppendTo(append(b, " TEE gw:"...))
	if t.OIF != "" {
		b = append(append(b, " oif="...), t.OIF...)
	}
	return b
}
