package netfilter

import (
	"net/netip"
)

// TEETarget is "-j TEE --gateway ADDR [--oif NAME]": the kernel sends a
// copy of the packet to the gateway and the original continues.
// packetwalk reads and prints it but does not model the copy: a host
// refuses to load it.
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
	return t, nil
}

// Name implements Target.
func (t *TEETarget) Name() string { return "TEE" }

func (t *TEETarget) unmodelled() string { return "the copy sent to the gateway is not modelled" }

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
