package kubeproxy

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
)

// Layout selects which generation of kube-proxy's iptables layout to write.
type Layout int

const (
	// LayoutCurrent is the layout of kube-proxy v1.28 and later: KUBE-SVC,
	// KUBE-SVL, KUBE-EXT, KUBE-FW with filter KUBE-PROXY-FIREWALL, no
	// KUBE-MARK-DROP.
	LayoutCurrent Layout = iota
	// LayoutLegacy is the layout of kube-proxy v1.18 as released (before
	// the #92035 KUBE-POSTROUTING rework that was backported to later
	// v1.16–v1.18 patches): masquerade rules in KUBE-SERVICES and
	// KUBE-NODEPORTS, a KUBE-FW chain per load-balancer IP ending in
	// KUBE-MARK-DROP, KUBE-XLB with "Balancing rule N" comments for
	// externalTrafficPolicy Local, only ready endpoints, filter INPUT jumping
	// to KUBE-SERVICES. Add Config.LegacyPortNames for any release before
	// v1.19 and Config.LegacyProbability for one before v1.17; the result
	// then also matches the AKS v1.11 dump kept in testdata.
	LayoutLegacy
)

// String returns "current" or "legacy".
func (l Layout) String() string {
	switch l {
	case LayoutCurrent:
		return "current"
	case LayoutLegacy:
		return "legacy"
	}
	return fmt.Sprintf("Layout(%d)", int(l))
}

// DetectMode is kube-proxy's --detect-local-mode: how it tells traffic from
// local pods apart (used for masquerade decisions).
type DetectMode int

const (
	// DetectNone implements no detector: ClusterIP traffic is never
	// masqueraded (unless MasqueradeAll) and eTP=Local has no pod
	// short-circuit rule.
	DetectNone DetectMode = iota
	// DetectClusterCIDR matches `-s <cluster CIDR>` (LocalDetector.CIDR).
	DetectClusterCIDR
	// DetectNodeCIDR matches `-s <node pod CIDR>`: LocalDetector.CIDR, or when
	// it is unset the first spec.podCIDRs entry of the family of the Node
	// named Config.NodeName.
	DetectNodeCIDR
	// DetectBridgeInterface matches `-i <bridge>` (LocalDetector.Interface).
	DetectBridgeInterface
	// DetectInterfaceNamePrefix matches `-i <prefix>+` (LocalDetector.Interface).
	DetectInterfaceNamePrefix
)

// LocalDetector configures the local-traffic detector.
type LocalDetector struct {
	Mode      DetectMode
	CIDR      netip.Prefix // DetectClusterCIDR, DetectNodeCIDR
	Interface string       // DetectBridgeInterface (name), DetectInterfaceNamePrefix (prefix)
}

// Config is the kube-proxy configuration that shapes the rules. Start from
// [DefaultConfig]: the zero Config means masquerade bit 0 and localhost
// NodePorts disabled, which is not kube-proxy's default.
type Config struct {
	// NodeName is the node kube-proxy runs on; endpoints whose nodeName
	// equals it are local.
	NodeName string
	// NodeIPs are the node's addresses, primary first. The primary one
	// decides whether a loadBalancerSourceRange admits node traffic; all of
	// them are matched against NodePortAddresses. When empty they are taken
	// from the Node named NodeName (InternalIP, then ExternalIP addresses).
	NodeIPs []netip.Addr
	// Family is the IP family of the ruleset (iptables or ip6tables).
	Family corev1.IPFamily
	// Detector is the local-traffic detector (--detect-local-mode).
	Detector LocalDetector
	// MasqueradeAll masquerades all ClusterIP traffic (--masquerade-all).
	MasqueradeAll bool
	// MasqueradeBit is --iptables-masquerade-bit (0..31, default 14).
	MasqueradeBit int
	// RandomFully appends --random-fully to the MASQUERADE rule (kube-proxy
	// does when iptables supports it, i.e. ≥ 1.6.2).
	RandomFully bool
	// LocalhostNodePorts is --iptables-localhost-nodeports (default true).
	LocalhostNodePorts bool
	// NodePortAddresses is --nodeport-addresses; empty means all addresses.
	NodePortAddresses []netip.Prefix
	// NFAcct says the nfacct counters exist (kube-proxy ≥ v1.30 creates
	// them when the kernel supports nfnetlink_acct); it adds the nfacct
	// matches. iptables-restore fails on them unless the counters exist.
	NFAcct bool
	// ConntrackTCPLiberal says nf_conntrack_tcp_be_liberal is set, which
	// makes kube-proxy omit the INVALID drop rule.
	ConntrackTCPLiberal bool
	// Layout selects the kube-proxy generation.
	Layout Layout
	// LegacyPortNames uses the pre-v1.19 port name string ("ns/name:" for
	// unnamed ports) in comments and hashes.
	LegacyPortNames bool
	// LegacyProbability formats probabilities with %0.5f (pre-v1.17).
	LegacyProbability bool
	// PayloadOnly emits only what kube-proxy pipes to
	// `iptables-restore --noflush`, without the built-in chains, the jump
	// rules into them and the canary chains.
	PayloadOnly bool
}

// DefaultConfig returns kube-proxy's defaults for an IPv4 node: masquerade
// bit 14, localhost NodePorts on, no detector, current layout.
func DefaultConfig(nodeName string) Config {
	return Config{
		NodeName:           nodeName,
		Family:             corev1.IPv4Protocol,
		MasqueradeBit:      14,
		LocalhostNodePorts: true,
		Layout:             LayoutCurrent,
	}
}

func (c *Config) isIPv6() bool { return c.Family == corev1.IPv6Protocol }

func (c *Config) familyOK(a netip.Addr) bool {
	a = a.Unmap()
	if c.isIPv6() {
		return a.Is6()
	}
	return a.Is4()
}

// validate checks what kube-proxy checks at start-up.
func (c *Config) validate() error {
	if c.Family != corev1.IPv4Protocol && c.Family != corev1.IPv6Protocol {
		return fmt.Errorf("%w: family %q: want %q or %q", ErrInvalidConfig, c.Family, corev1.IPv4Protocol, corev1.IPv6Protocol)
	}
	if c.MasqueradeBit < 0 || c.MasqueradeBit > 31 {
		return fmt.Errorf("%w: masquerade bit %d: want 0..31", ErrInvalidConfig, c.MasqueradeBit)
	}
	if c.Layout != LayoutCurrent && c.Layout != LayoutLegacy {
		return fmt.Errorf("%w: layout %d: want LayoutCurrent or LayoutLegacy", ErrInvalidConfig, int(c.Layout))
	}
	d := c.Detector
	switch d.Mode {
	case DetectNone:
	case DetectClusterCIDR:
		if !d.CIDR.IsValid() {
			return fmt.Errorf("%w: detector ClusterCIDR needs a CIDR", ErrInvalidConfig)
		}
	case DetectNodeCIDR:
	case DetectBridgeInterface, DetectInterfaceNamePrefix:
		if d.Interface == "" {
			return fmt.Errorf("%w: detector mode %d needs an interface name", ErrInvalidConfig, int(d.Mode))
		}
	default:
		return fmt.Errorf("%w: detector mode %d unknown", ErrInvalidConfig, int(d.Mode))
	}
	if d.CIDR.IsValid() && !c.familyOK(d.CIDR.Addr()) {
		return fmt.Errorf("%w: detector CIDR %s is not %s", ErrInvalidConfig, d.CIDR, c.Family)
	}
	return nil
}

// markString formats a mark as kube-proxy does (fmt "%#08x" → "0x00004000").
func markString(bit int) string {
	return fmt.Sprintf("%#08x", uint32(1)<<uint(bit))
}
