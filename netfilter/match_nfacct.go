package netfilter

import "fmt"

// maxNFAcctNameLen is the longest accounting object name the match stores
// (NFACCT_NAME_MAX 32 less the NUL); iptables cuts longer names, as it
// does for helper names.
const maxNFAcctNameLen = 31

// NFAcctMatch is "-m nfacct --nfacct-name NAME" (kube-proxy ≥ v1.30 uses it
// to count dropped and accepted packets): it always matches, adding the
// packet to the named extended accounting object of the host. As in the
// kernel, a host refuses to load a rule naming an object that was not
// created first (Host.AddNFAcct, the `nfacct add` of a real node).
type NFAcctMatch struct {
	Name string
}

func init() {
	registerMatch(&module{name: "nfacct",
		opts:       []option{{name: "nfacct-name", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &nfacctBuilder{} }})
}

type nfacctBuilder struct {
	m     NFAcctMatch
	given bool
}

func (b *nfacctBuilder) set(_ *ruleCtx, _ string, _ bool, args []string) error {
	s := args[0]
	if s == "" { // iptables: "Argument must have a minimum length of 1 characters"
		return badValue("nfacct", "--nfacct-name", s, "a name of at least 1 character")
	}
	if len(s) > maxNFAcctNameLen {
		s = s[:maxNFAcctNameLen]
	}
	b.m, b.given = NFAcctMatch{Name: s}, true
	return nil
}

func (b *nfacctBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("nfacct", "--nfacct-name")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *NFAcctMatch) Module() string { return "nfacct" }

// iptables 1.8.9 prints two spaces before the name in both forms.
func (m *NFAcctMatch) appendSave(b []byte) []byte {
	b = append(b, " --nfacct-name  "...)
	return appendQuoted(b, m.Name)
}

func (m *NFAcctMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " nfacct-name  "...)
	return append(b, m.Name...)
}

func (m *NFAcctMatch) match(c *evalCtx) bool {
	if o := c.host.nfacct[m.Name]; o != nil && !c.host.explaining {
		o.Packets++
		o.Bytes += uint64(c.pkt.Length)
	}
	return true
}

// SetNFAcct sets the counters of the existing accounting object name, so
// that a node snapshot's `nfacct list` values carry over.
func (h *Host) SetNFAcct(name string, c Counters) error {
	o := h.nfacct[name]
	if o == nil {
		return fmt.Errorf("%w: nfacct object %q (create it with AddNFAcct first)", ErrNoSuchNFAcct, name)
	}
	*o = c
	return nil
}
