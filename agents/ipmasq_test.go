package agents

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// seed000ConfigMap is azure-ip-masq-agent-config as kubectl prints it in
// "Aks Networking Iptables in AKS" (https://blog.stevegriffith.nyc/posts/aks-networking-iptables).
const seed000ConfigMap = `apiVersion: v1
data:
  ip-masq-agent: |-
    nonMasqueradeCIDRs:
      - 10.220.0.0/16
      - 10.220.2.0/24
      - 10.200.0.0/16
    masqLinkLocal: true
    resyncInterval: 60s
kind: ConfigMap
`

// seed003Data is the ConfigMap data shown in "A Day in the Life of a
// Packet in AKS (part 5): Virtual Node" (https://blog.cloudtrooper.net/2019/04/05/a-day-in-the-life-of-a-packet-in-aks-part-5-virtual-node/).
const seed003Data = `nonMasqueradeCIDRs:
  - 10.13.0.0/16
  - 168.63.129.16/32
masqLinkLocal: true
resyncInterval: 60s
`

// savedLines returns the lines of iptables-save's output for rules that
// start with one of prefixes (such as "-A "), after loading rules into an
// empty ruleset.
func savedLines(t *testing.T, rules []byte, prefixes ...string) []string {
	t.Helper()
	rs, err := netfilter.ParseRestore(netfilter.IPv4, rules)
	require.NoError(t, err)
	var out []string
	for _, l := range strings.Split(string(rs.AppendSave(nil, netfilter.SaveOptions{})), "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(l, p) {
				out = append(out, l)
				break
			}
		}
	}
	return out
}

func TestIPMasqAgentSeed000(t *testing.T) {
	cfg, err := ParseIPMasqAgentConfig([]byte(seed000ConfigMap), IPMasqAgentOptions{})
	require.NoError(t, err)
	assert.True(t, cfg.MasqLinkLocal)
	assert.Equal(t, 60*time.Second, cfg.ResyncInterval)
	rules, err := IPMasqAgentRules(cfg, IPMasqAgentOptions{Layout: IPMasqAgentAKS2020}, netfilter.IPv4)
	require.NoError(t, err)
	// The seed's `iptables -t nat -nvL POSTROUTING` / `-nvL IP-MASQ-AGENT`
	// listings, in -S form.
	assert.Equal(t, []string{
		`-A POSTROUTING -m comment --comment "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom IP-MASQ-AGENT chain" -m addrtype ! --dst-type LOCAL -j IP-MASQ-AGENT`,
		`-A IP-MASQ-AGENT -d 10.220.0.0/16 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN`,
		`-A IP-MASQ-AGENT -d 10.220.2.0/24 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN`,
		`-A IP-MASQ-AGENT -d 10.200.0.0/16 -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -j RETURN`,
		`-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE`,
	}, savedLines(t, rules, "-A "))

	// The listing itself, rule for rule (counters aside). iptables 1.8.9
	// prints protocol "0" where the post's older iptables printed "all".
	rs, err := netfilter.ParseRestore(netfilter.IPv4, rules)
	require.NoError(t, err)
	list, err := rs.AppendList(nil, netfilter.NAT, "IP-MASQ-AGENT", netfilter.ListOptions{Numeric: true, Verbose: true})
	require.NoError(t, err)
	assert.Equal(t, `Chain IP-MASQ-AGENT (1 references)
 pkts bytes target     prot opt in     out     source               destination         
    0     0 RETURN     0    --  *      *       0.0.0.0/0            10.220.0.0/16        /* ip-masq-agent: local traffic is not subject to MASQUERADE */
    0     0 RETURN     0    --  *      *       0.0.0.0/0            10.220.2.0/24        /* ip-masq-agent: local traffic is not subject to MASQUERADE */
    0     0 RETURN     0    --  *      *       0.0.0.0/0            10.200.0.0/16        /* ip-masq-agent: local traffic is not subject to MASQUERADE */
    0     0 MASQUERADE  0    --  *      *       0.0.0.0/0            0.0.0.0/0            /* ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain) */
`, string(list))
}

func TestIPMasqAgentSeed003(t *testing.T) {
	cfg, err := ParseIPMasqAgentConfig([]byte(seed003Data), IPMasqAgentOptions{})
	require.NoError(t, err)
	rules, err := IPMasqAgentRules(cfg, IPMasqAgentOptions{Layout: IPMasqAgentLegacy}, netfilter.IPv4)
	require.NoError(t, err)
	// The seed's `iptables -t nat --list-rule POSTROUTING|IP-MASQ-AGENT`.
	assert.Equal(t, []string{
		`-A POSTROUTING -m comment --comment "ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination traffic to our custom IP-MASQ-AGENT chain" -m addrtype ! --dst-type LOCAL -j IP-MASQ-AGENT`,
		`-A IP-MASQ-AGENT -d 10.13.0.0/16 -m comment --comment "ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE" -m addrtype ! --dst-type LOCAL -j RETURN`,
		`-A IP-MASQ-AGENT -d 168.63.129.16/32 -m comment --comment "ip-masq-agent: cluster-local traffic should not be subject to MASQUERADE" -m addrtype ! --dst-type LOCAL -j RETURN`,
		`-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic should be subject to MASQUERADE (this match must come after cluster-local CIDR matches)" -m addrtype ! --dst-type LOCAL -j MASQUERADE`,
	}, savedLines(t, rules, "-A "))
}

func TestIPMasqAgentPayloadText(t *testing.T) {
	cfg := DefaultIPMasqAgentConfig()
	cfg.NonMasqueradeCIDRs = append(cfg.NonMasqueradeCIDRs, netip.MustParsePrefix("fd00::/8"))
	opts := IPMasqAgentOptions{EnableIPv6: true}
	p4, err := IPMasqAgentPayload(cfg, opts, netfilter.IPv4)
	require.NoError(t, err)
	assert.Equal(t, `*nat
:IP-MASQ-AGENT - [0:0]
-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -d 169.254.0.0/16 -j RETURN
-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -d 10.0.0.0/8 -j RETURN
-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -d 172.16.0.0/12 -j RETURN
-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -d 192.168.0.0/16 -j RETURN
-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE
COMMIT
`, string(p4))
	p6, err := IPMasqAgentPayload(cfg, opts, netfilter.IPv6)
	require.NoError(t, err)
	assert.Equal(t, `*nat
:IP-MASQ-AGENT - [0:0]
-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -d fe80::/10 -j RETURN
-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -d fd00::/8 -j RETURN
-A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE
COMMIT
`, string(p6))
	_, err = netfilter.ParseRestore(netfilter.IPv6, p6)
	require.NoError(t, err)
}

func TestParseIPMasqAgentConfigErrors(t *testing.T) {
	tests := []struct {
		name, in string
		opts     IPMasqAgentOptions
		sentinel error
		key      string
		line     int
		msg      string
	}{
		{"unknown key", "nonMasqueradeCIDRs: [10.0.0.0/8]\nmasqLinkLocl: true\n", IPMasqAgentOptions{}, ErrUnknownKey, "masqLinkLocl", 2, `ip-masq-agent: masqLinkLocl (line 2): unknown key "masqLinkLocl", want one of nonMasqueradeCIDRs, cidrLimit, masqLinkLocal, masqLinkLocalIPv6, resyncInterval`},
		{"bad cidr", "nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - 10.300.0.0/16\n", IPMasqAgentOptions{}, ErrBadCIDR, "nonMasqueradeCIDRs[1]", 3, ""},
		{"unaligned cidr", "nonMasqueradeCIDRs: [\"10.1.2.3/16\"]\n", IPMasqAgentOptions{}, ErrBadCIDR, "nonMasqueradeCIDRs[0]", 1, `ip-masq-agent: nonMasqueradeCIDRs[0] (line 1): bad CIDR "10.1.2.3/16", want a CIDR aligned to its block (10.1.0.0/16)`},
		{"ipv6 without flag", "nonMasqueradeCIDRs:\n  - fd00::/8\n", IPMasqAgentOptions{}, ErrFamily, "nonMasqueradeCIDRs[0]", 2, ""},
		{"bool", "masqLinkLocal: yes please\n", IPMasqAgentOptions{}, ErrBadValue, "masqLinkLocal", 1, ""},
		{"duration", "resyncInterval: 60\n", IPMasqAgentOptions{}, ErrBadValue, "resyncInterval", 1, ""},
		{"duration syntax", "resyncInterval: 1 minute\n", IPMasqAgentOptions{}, ErrBadValue, "resyncInterval", 1, ""},
		{"limit", "cidrLimit: 1\nnonMasqueradeCIDRs: [10.0.0.0/8, 11.0.0.0/8]\n", IPMasqAgentOptions{}, ErrTooManyCIDRs, "nonMasqueradeCIDRs", 2, ""},
		{"not a mapping", "- a\n- b\n", IPMasqAgentOptions{}, ErrBadValue, "(document)", 0, ""},
		{"configmap key in data", "kind: ConfigMap\ndata:\n  ip-masq-agent: |-\n    nonMasqueradeCIDRs: [10.0.0.0/8]\n    bogus: 1\n", IPMasqAgentOptions{}, ErrUnknownKey, "bogus", 5, ""},
		{"configmap without data key", "kind: ConfigMap\ndata:\n  other: x\n", IPMasqAgentOptions{}, ErrBadValue, "data.ip-masq-agent", 2, ""},
		{"other kind", "kind: Secret\n", IPMasqAgentOptions{}, ErrBadValue, "kind", 1, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ParseIPMasqAgentConfig([]byte(tt.in), tt.opts)
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.sentinel)
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.key, ce.Key)
			assert.Equal(t, tt.line, ce.Line)
			if tt.msg != "" {
				assert.Equal(t, tt.msg, err.Error())
			}
		})
	}
}

func TestParseIPMasqAgentConfigDefaults(t *testing.T) {
	cfg, err := ParseIPMasqAgentConfig([]byte(`{"masqLinkLocal": true}`), IPMasqAgentOptions{})
	require.NoError(t, err)
	want := DefaultIPMasqAgentConfig()
	want.MasqLinkLocal = true
	assert.Equal(t, want, cfg)
	_, err = IPMasqAgentPayload(cfg, IPMasqAgentOptions{Layout: IPMasqAgentLayout(7)}, netfilter.IPv4)
	assert.ErrorIs(t, err, ErrNotModelled)
	_, err = IPMasqAgentPayload(cfg, IPMasqAgentOptions{}, netfilter.IPv6)
	assert.ErrorIs(t, err, ErrFamily)
}

// azureCNINode is the Azure CNI node of "Aks Networking Iptables in AKS":
// pods share the node's subnet
// on azure0.
func azureCNINode(t *testing.T) *netfilter.Host {
	t.Helper()
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1, Clock: netfilter.NewManualClock(time.Date(2020, 11, 6, 0, 0, 0, 0, time.UTC))})
	require.NoError(t, h.AddInterface("azure0", netip.MustParsePrefix("10.220.2.4/24")))
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "azure0", Gateway: netip.MustParseAddr("10.220.2.1")}))
	return h
}

func tcpSYN(src, dst string) netfilter.Packet {
	s, d := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst)
	return netfilter.Packet{Family: netfilter.IPv4, Proto: inet.TCP, Src: s.Addr(), Dst: d.Addr(),
		SrcPort: s.Port(), DstPort: d.Port(), TCPFlags: inet.SYN, TTL: 64, Length: 60}
}

func TestIPMasqAgentPackets(t *testing.T) {
	h := azureCNINode(t)
	cfg, err := ParseIPMasqAgentConfig([]byte(seed000ConfigMap), IPMasqAgentOptions{})
	require.NoError(t, err)
	require.NoError(t, InstallIPMasqAgent(h, cfg, IPMasqAgentOptions{}, netfilter.IPv4))
	tests := []struct {
		dst, wantSrc string
	}{
		{"10.220.0.10:443", "10.220.2.28"}, // VNet: keeps the pod IP
		{"10.200.5.5:443", "10.220.2.28"},  // service CIDR
		{"10.1.0.4:443", "10.220.2.4"},     // outside: the node's IP
		{"8.8.8.8:53", "10.220.2.4"},       // the Internet
		{"169.254.169.254:80", "10.220.2.4"},
	}
	for i, tt := range tests {
		r := h.Receive("azure0", tcpSYN("10.220.2.28:"+strconv.Itoa(41000+i), tt.dst))
		require.Equal(t, netfilter.Forwarded, r.Disposition, tt.dst)
		assert.Equal(t, tt.wantSrc, r.Packet.Src.String(), tt.dst)
	}
	// A resync with 10.1.0.0/16 added rewrites the chain and keeps one jump.
	cfg.NonMasqueradeCIDRs = append(cfg.NonMasqueradeCIDRs, netip.MustParsePrefix("10.1.0.0/16"))
	require.NoError(t, InstallIPMasqAgent(h, cfg, IPMasqAgentOptions{}, netfilter.IPv4))
	r := h.Receive("azure0", tcpSYN("10.220.2.28:42000", "10.1.0.4:443"))
	assert.Equal(t, "10.220.2.28", r.Packet.Src.String())
	save := string(h.Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{}))
	assert.Equal(t, 1, strings.Count(save, "-j IP-MASQ-AGENT"))
	assert.Equal(t, 5, strings.Count(save, "-A IP-MASQ-AGENT "))

	// Without masqLinkLocal the metadata address keeps the pod IP.
	cfg.MasqLinkLocal = false
	require.NoError(t, InstallIPMasqAgent(h, cfg, IPMasqAgentOptions{}, netfilter.IPv4))
	r = h.Receive("azure0", tcpSYN("10.220.2.28:42001", "169.254.169.254:80"))
	assert.Equal(t, "10.220.2.28", r.Packet.Src.String())
}

func TestIPMasqAgentLegacyPackets(t *testing.T) {
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1, Clock: netfilter.NewManualClock(time.Date(2019, 3, 1, 0, 0, 0, 0, time.UTC))})
	require.NoError(t, h.AddInterface("azure0", netip.MustParsePrefix("10.13.76.4/24")))
	require.NoError(t, h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "azure0", Gateway: netip.MustParseAddr("10.13.76.1")}))
	cfg, err := ParseIPMasqAgentConfig([]byte(seed003Data), IPMasqAgentOptions{})
	require.NoError(t, err)
	require.NoError(t, InstallIPMasqAgent(h, cfg, IPMasqAgentOptions{Layout: IPMasqAgentLegacy}, netfilter.IPv4))
	// The virtual node's subnet is inside 10.13.0.0/16: ip-masq-agent
	// leaves it alone (the Virtual Node post's point: Calico is the one
	// masquerading).
	r := h.Receive("azure0", tcpSYN("10.13.76.17:59850", "10.13.100.6:8080"))
	assert.Equal(t, "10.13.76.17", r.Packet.Src.String())
	r = h.Receive("azure0", tcpSYN("10.13.76.17:59851", "168.63.129.16:80"))
	assert.Equal(t, "10.13.76.17", r.Packet.Src.String())
	r = h.Receive("azure0", tcpSYN("10.13.76.17:59852", "52.1.2.3:443"))
	assert.Equal(t, "10.13.76.4", r.Packet.Src.String())
}

// FuzzParseIPMasqAgentConfig: any input either parses into a configuration
// whose payload loads, or fails with a *ConfigError.
func FuzzParseIPMasqAgentConfig(f *testing.F) {
	for _, s := range []string{seed000ConfigMap, seed003Data, "{}", "nonMasqueradeCIDRs: [10.0.0.0/8, fd00::/8]\nmasqLinkLocalIPv6: true\n", "cidrLimit: -1\n", "kind: ConfigMap\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseIPMasqAgentConfig(data, IPMasqAgentOptions{EnableIPv6: true})
		if err != nil {
			var ce *ConfigError
			require.ErrorAs(t, err, &ce)
			return
		}
		for _, fam := range []netfilter.Family{netfilter.IPv4, netfilter.IPv6} {
			p, err := IPMasqAgentPayload(cfg, IPMasqAgentOptions{EnableIPv6: true}, fam)
			require.NoError(t, err)
			_, err = netfilter.ParseRestore(fam, p)
			require.NoError(t, err)
		}
	})
}
