package agents

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/packetwalk/packetwalk/netfilter"
)

// IPMasqAgentChain is the agent's default nat chain (--masq-chain).
const IPMasqAgentChain = "IP-MASQ-AGENT"

// Link-local ranges the agent exempts unless masqLinkLocal(IPv6) is set.
var (
	linkLocal4 = netip.MustParsePrefix("169.254.0.0/16")
	linkLocal6 = netip.MustParsePrefix("fe80::/10")
)

// IPMasqAgentConfig is the agent's ConfigMap data (the file
// /etc/config/ip-masq-agent).
type IPMasqAgentConfig struct {
	// NonMasqueradeCIDRs are destinations that keep the pod's source
	// address. The agent's default (no ConfigMap, or the key absent) is
	// RFC 1918: 10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16.
	NonMasqueradeCIDRs []netip.Prefix
	// CIDRLimit caps len(NonMasqueradeCIDRs) (default 64).
	CIDRLimit int
	// MasqLinkLocal masquerades 169.254.0.0/16 too; otherwise the chain
	// starts with a RETURN for it.
	MasqLinkLocal bool
	// MasqLinkLocalIPv6 is MasqLinkLocal for fe80::/10.
	MasqLinkLocalIPv6 bool
	// ResyncInterval is how often the agent rewrites the chain (default
	// 60s). It does not change the rules.
	ResyncInterval time.Duration
}

// DefaultIPMasqAgentConfig is the configuration the agent uses without a
// ConfigMap; keys present in a ConfigMap override it one by one.
func DefaultIPMasqAgentConfig() IPMasqAgentConfig {
	return IPMasqAgentConfig{
		NonMasqueradeCIDRs: []netip.Prefix{
			netip.MustParsePrefix("10.0.0.0/8"),
			netip.MustParsePrefix("172.16.0.0/12"),
			netip.MustParsePrefix("192.168.0.0/16"),
		},
		CIDRLimit:      64,
		ResyncInterval: 60 * time.Second,
	}
}

// IPMasqAgentLayout selects which release's rule text to write; the rules'
// comments and matches changed between releases.
type IPMasqAgentLayout int

const (
	// IPMasqAgentAKS2020 is the layout shown in "Aks Networking Iptables
	// in AKS" (AKS, 2020; docs/blog-posts.md): "local
	// traffic is not subject to MASQUERADE" RETURN rules with only -d, and
	// a plain MASQUERADE.
	IPMasqAgentAKS2020 IPMasqAgentLayout = iota
	// IPMasqAgentLegacy is the layout shown in "A Day in the Life of a
	// Packet in AKS (part 5): Virtual Node" (AKS v1.12, 2019):
	// "cluster-local traffic should not be subject to MASQUERADE", and
	// every rule also matches `-m addrtype ! --dst-type LOCAL`.
	IPMasqAgentLegacy
)

// Newer upstream releases write `-j MASQUERADE --to-ports 32768-65535
// [--random-fully]` without a protocol match, which iptables-restore 1.8.9
// refuses ("Need TCP, UDP, SCTP or DCCP with port specification"); that
// layout is not offered.

// IPMasqAgentOptions are the agent's command-line flags and release.
type IPMasqAgentOptions struct {
	Layout IPMasqAgentLayout
	// Chain is --masq-chain; "" means IP-MASQ-AGENT.
	Chain string
	// EnableIPv6 is --enable-ipv6: IPv6 CIDRs are accepted and written to
	// the IPv6 document; without it an IPv6 CIDR is an error.
	EnableIPv6 bool
}

func (o IPMasqAgentOptions) chain() string {
	if o.Chain == "" {
		return IPMasqAgentChain
	}
	return o.Chain
}

// The keys of the agent's configuration file.
var ipMasqKeys = []string{"nonMasqueradeCIDRs", "cidrLimit", "masqLinkLocal", "masqLinkLocalIPv6", "resyncInterval"}

// ParseIPMasqAgentConfig reads the agent's configuration: either the
// ConfigMap data value (YAML or JSON with nonMasqueradeCIDRs, cidrLimit,
// masqLinkLocal, masqLinkLocalIPv6, resyncInterval) or a whole ConfigMap
// object (`kubectl get configmap -o yaml`), whose data key "ip-masq-agent"
// is read. Absent keys keep [DefaultIPMasqAgentConfig]'s values, as in the
// agent. Unlike the agent (which uses encoding/json), unknown keys and keys
// in the wrong case are errors. CIDRs are validated as the agent does
// (parse, no host bits), against opts.EnableIPv6 and the cidrLimit.
func ParseIPMasqAgentConfig(data []byte, opts IPMasqAgentOptions) (IPMasqAgentConfig, error) {
	cfg := DefaultIPMasqAgentConfig()
	var top map[string]json.RawMessage
	if err := yaml.Unmarshal(data, &top); err != nil {
		return cfg, &ConfigError{Agent: "ip-masq-agent", Key: "(document)", Value: firstLine(data), Want: "a YAML or JSON mapping", Err: fmt.Errorf("%w: %v", ErrBadValue, err)}
	}
	if kind, ok := top["kind"]; ok {
		var k string
		_ = json.Unmarshal(kind, &k)
		if k != "ConfigMap" {
			return cfg, &ConfigError{Agent: "ip-masq-agent", Key: "kind", Line: keyLine(data, "kind"), Value: k, Want: "ConfigMap or the ConfigMap's data", Err: ErrBadValue}
		}
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := json.Unmarshal(mustJSON(top), &cm); err != nil {
			return cfg, &ConfigError{Agent: "ip-masq-agent", Key: "data", Line: keyLine(data, "data"), Err: fmt.Errorf("%w: %v", ErrBadValue, err)}
		}
		inner, ok := cm.Data["ip-masq-agent"]
		if !ok {
			return cfg, &ConfigError{Agent: "ip-masq-agent", Key: "data.ip-masq-agent", Line: keyLine(data, "data"), Want: "the agent's configuration under data key ip-masq-agent", Err: ErrBadValue}
		}
		base := keyLine(data, "ip-masq-agent")
		c, err := ParseIPMasqAgentConfig([]byte(inner), opts)
		if ce, ok := err.(*ConfigError); ok && ce.Line > 0 && base > 0 {
			ce.Line += base
		}
		return c, err
	}
	keys := make([]string, 0, len(top))
	for k := range top {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if !slices.Contains(ipMasqKeys, k) {
			return cfg, &ConfigError{Agent: "ip-masq-agent", Key: k, Line: keyLine(data, k), Value: k, Want: "one of " + strings.Join(ipMasqKeys, ", "), Err: ErrUnknownKey}
		}
	}
	bad := func(key, want string, raw json.RawMessage) error {
		return &ConfigError{Agent: "ip-masq-agent", Key: key, Line: keyLine(data, key), Value: string(raw), Want: want, Err: ErrBadValue}
	}
	if raw, ok := top["nonMasqueradeCIDRs"]; ok {
		var ss []string
		if err := json.Unmarshal(raw, &ss); err != nil {
			return cfg, bad("nonMasqueradeCIDRs", "a list of CIDR strings", raw)
		}
		cfg.NonMasqueradeCIDRs = cfg.NonMasqueradeCIDRs[:0:0]
		for i, s := range ss {
			p, err := parseCIDR(s)
			if err != nil {
				return cfg, &ConfigError{Agent: "ip-masq-agent", Key: fmt.Sprintf("nonMasqueradeCIDRs[%d]", i), Line: valueLine(data, s), Value: s, Want: err.Error(), Err: ErrBadCIDR}
			}
			cfg.NonMasqueradeCIDRs = append(cfg.NonMasqueradeCIDRs, p)
		}
	}
	if raw, ok := top["cidrLimit"]; ok {
		if err := json.Unmarshal(raw, &cfg.CIDRLimit); err != nil {
			return cfg, bad("cidrLimit", "an integer", raw)
		}
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{{"masqLinkLocal", &cfg.MasqLinkLocal}, {"masqLinkLocalIPv6", &cfg.MasqLinkLocalIPv6}} {
		if raw, ok := top[b.key]; ok {
			if err := json.Unmarshal(raw, b.dst); err != nil {
				return cfg, bad(b.key, "true or false", raw)
			}
		}
	}
	if raw, ok := top["resyncInterval"]; ok {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return cfg, bad("resyncInterval", `a duration string such as "60s"`, raw)
		}
		d, err := time.ParseDuration(s)
		if err != nil {
			return cfg, bad("resyncInterval", `a duration string such as "60s"`, raw)
		}
		cfg.ResyncInterval = d
	}
	if err := cfg.validate(opts); err != nil {
		if ce, ok := err.(*ConfigError); ok {
			if i := strings.IndexByte(ce.Key, '['); i > 0 {
				ce.Line = valueLine(data, ce.Value)
			} else {
				ce.Line = keyLine(data, ce.Key)
			}
		}
		return cfg, err
	}
	return cfg, nil
}

// parseCIDR accepts what the agent's validateCIDR accepts: a CIDR whose
// address is the network address.
func parseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return p, fmt.Errorf("a CIDR such as 10.0.0.0/8")
	}
	if p.Masked() != p {
		return p, fmt.Errorf("a CIDR aligned to its block (%s)", p.Masked())
	}
	return p, nil
}

// validate applies the agent's checks: the CIDR limit, aligned CIDRs, and
// IPv6 CIDRs only with --enable-ipv6.
func (c IPMasqAgentConfig) validate(opts IPMasqAgentOptions) error {
	if n := len(c.NonMasqueradeCIDRs); n > c.CIDRLimit {
		return &ConfigError{Agent: "ip-masq-agent", Key: "nonMasqueradeCIDRs", Value: strconv.Itoa(n), Want: fmt.Sprintf("at most cidrLimit (%d) CIDRs", c.CIDRLimit), Err: ErrTooManyCIDRs}
	}
	for i, p := range c.NonMasqueradeCIDRs {
		key := fmt.Sprintf("nonMasqueradeCIDRs[%d]", i)
		if !p.IsValid() || p.Masked() != p {
			return &ConfigError{Agent: "ip-masq-agent", Key: key, Value: p.String(), Want: "a CIDR aligned to its block", Err: ErrBadCIDR}
		}
		if p.Addr().Is6() && !p.Addr().Is4In6() && !opts.EnableIPv6 {
			return &ConfigError{Agent: "ip-masq-agent", Key: key, Value: p.String(), Want: "an IPv4 CIDR (IPv6 needs --enable-ipv6)", Err: ErrFamily}
		}
		if p.Addr().Is4In6() {
			return &ConfigError{Agent: "ip-masq-agent", Key: key, Value: p.String(), Want: "a plain IPv4 or IPv6 CIDR", Err: ErrFamily}
		}
	}
	return nil
}

// Rule text of the layouts.
const (
	masqJumpComment  = "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom %s chain"
	nonMasqComment   = "ip-masq-agent: local traffic is not subject to MASQUERADE"
	masqComment      = "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)"
	nonMasqComment19 = "ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE"
	masqComment19    = "ip-masq-agent: outbound traffic should be subject to MASQUERADE (this match must come after cluster-local CIDR matches)"
	notLocal         = "-m addrtype ! --dst-type LOCAL"
)

// IPMasqAgentJump is the rule the agent ensures in nat POSTROUTING (with
// `iptables -C`, then `-A` when missing), without "-A POSTROUTING".
func IPMasqAgentJump(opts IPMasqAgentOptions) string {
	return fmt.Sprintf(`-m comment --comment "`+masqJumpComment+`" `+notLocal+` -j %s`, opts.chain(), opts.chain())
}

// IPMasqAgentPayload returns the iptables-restore text the agent feeds to
// `iptables-restore --noflush` (f IPv4) or ip6tables-restore (f IPv6) on
// every resync: the chain line (which flushes the chain), the link-local
// RETURN unless masqLinkLocal, one RETURN per CIDR of the family in
// ConfigMap order, and the final MASQUERADE. The arguments are in the
// agent's order (comment first); iptables-save prints -d first.
func IPMasqAgentPayload(cfg IPMasqAgentConfig, opts IPMasqAgentOptions, f netfilter.Family) ([]byte, error) {
	if err := cfg.validate(opts); err != nil {
		return nil, err
	}
	if f == netfilter.IPv6 && !opts.EnableIPv6 {
		return nil, &ConfigError{Agent: "ip-masq-agent", Key: "--enable-ipv6", Value: "false", Want: "true to write IPv6 rules", Err: ErrFamily}
	}
	if opts.Layout != IPMasqAgentAKS2020 && opts.Layout != IPMasqAgentLegacy {
		return nil, &ConfigError{Agent: "ip-masq-agent", Key: "layout", Value: strconv.Itoa(int(opts.Layout)), Want: "IPMasqAgentAKS2020 or IPMasqAgentLegacy", Err: ErrNotModelled}
	}
	chain := opts.chain()
	var b strings.Builder
	fmt.Fprintf(&b, "*nat\n:%s - [0:0]\n", chain)
	nonMasq := func(p netip.Prefix) {
		if opts.Layout == IPMasqAgentLegacy {
			fmt.Fprintf(&b, "-A %s -m comment --comment %q %s -d %s -j RETURN\n", chain, nonMasqComment19, notLocal, p)
			return
		}
		fmt.Fprintf(&b, "-A %s -m comment --comment %q -d %s -j RETURN\n", chain, nonMasqComment, p)
	}
	ll, masqLL := linkLocal4, cfg.MasqLinkLocal
	if f == netfilter.IPv6 {
		ll, masqLL = linkLocal6, cfg.MasqLinkLocalIPv6
	}
	if !masqLL {
		nonMasq(ll)
	}
	for _, p := range cfg.NonMasqueradeCIDRs {
		if p.Addr().Is6() == (f == netfilter.IPv6) {
			nonMasq(p)
		}
	}
	switch opts.Layout {
	case IPMasqAgentLegacy:
		fmt.Fprintf(&b, "-A %s -m comment --comment %q %s -j MASQUERADE\n", chain, masqComment19, notLocal)
	default:
		fmt.Fprintf(&b, "-A %s -m comment --comment %q -j MASQUERADE\n", chain, masqComment)
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String()), nil
}

// IPMasqAgentRules returns what the agent leaves on a node whose nat table
// does not yet have its jump: the payload with the POSTROUTING jump
// appended to it, for `iptables-restore --noflush` (or
// [netfilter.Host.Restore] with NoFlush). Loading it twice appends the
// jump twice; [InstallIPMasqAgent] resyncs like the agent.
func IPMasqAgentRules(cfg IPMasqAgentConfig, opts IPMasqAgentOptions, f netfilter.Family) ([]byte, error) {
	p, err := IPMasqAgentPayload(cfg, opts, f)
	if err != nil {
		return nil, err
	}
	head := fmt.Sprintf("*nat\n:%s - [0:0]\n", opts.chain())
	jump := "-A POSTROUTING " + IPMasqAgentJump(opts) + "\n"
	return []byte(head + jump + string(p[len(head):])), nil
}

// InstallIPMasqAgent does one resync of the agent on h: it appends the
// POSTROUTING jump unless an identical rule is already there, then
// restores the payload with NoFlush, rewriting the chain.
func InstallIPMasqAgent(h *netfilter.Host, cfg IPMasqAgentConfig, opts IPMasqAgentOptions, f netfilter.Family) error {
	p, err := IPMasqAgentPayload(cfg, opts, f)
	if err != nil {
		return err
	}
	want, err := IPMasqAgentRules(cfg, opts, f)
	if err != nil {
		return err
	}
	// The jump as iptables-save prints it, to compare with the node's.
	probe, err := netfilter.ParseRestore(f, want)
	if err != nil {
		return err
	}
	jump := saveLines(probe.AppendSave(nil, netfilter.SaveOptions{}), "-A POSTROUTING ")
	have := saveLines(h.Ruleset(f).AppendSave(nil, netfilter.SaveOptions{}), "-A POSTROUTING ")
	if len(jump) == 1 && !slices.Contains(have, jump[0]) {
		if err := h.Restore(f, []byte("*nat\n:"+opts.chain()+" - [0:0]\n"+jump[0]+"\nCOMMIT\n"), netfilter.RestoreOptions{NoFlush: true}); err != nil {
			return err
		}
	}
	return h.Restore(f, p, netfilter.RestoreOptions{NoFlush: true})
}

func saveLines(save []byte, prefix string) []string {
	var out []string
	for _, l := range strings.Split(string(save), "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}

func mustJSON(v any) []byte {
	b, _ := json.Marshal(v)
	return b
}

func firstLine(b []byte) string {
	s, _, _ := strings.Cut(string(b), "\n")
	return s
}

// keyLine finds the 1-based line where key is defined (0 if not found),
// since the YAML-to-JSON conversion drops positions.
func keyLine(data []byte, key string) int {
	re := regexp.MustCompile(`^\s*"?` + regexp.QuoteMeta(key) + `"?\s*:`)
	for i, l := range strings.Split(string(data), "\n") {
		if re.MatchString(l) {
			return i + 1
		}
	}
	return 0
}

// valueLine finds the first line holding value as a list item or quoted
// token.
func valueLine(data []byte, value string) int {
	for i, l := range strings.Split(string(data), "\n") {
		t := strings.TrimSpace(l)
		t = strings.TrimPrefix(t, "- ")
		t = strings.Trim(strings.TrimSpace(strings.TrimSuffix(t, ",")), `"'`)
		if t == value || strings.Contains(l, `"`+value+`"`) {
			return i + 1
		}
	}
	return 0
}
