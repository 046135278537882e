package kubeproxy

import (
	"cmp"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// svcPortKey identifies a service port the way kube-proxy's ServicePortName
// does: namespace, service name, port name and protocol.
type svcPortKey struct {
	namespace, name, port string
	protocol              corev1.Protocol
}

// servicePort is one port of one Service, reduced to what shapes the rules.
type servicePort struct {
	key          svcPortKey
	portName     string // the hashed and commented name string, e.g. "ns/svc:p80"
	proto        string // "tcp", "udp", "sctp"
	hash         string // 16-character chain hash shared by SVC/SVL/EXT/FW/XLB
	clusterIP    netip.Addr
	clusterIPStr string
	port         string // decimal
	nodePort     int
	hcNodePort   int
	externalIPs  []netip.Addr
	lbIPs        []netip.Addr
	sourceRanges []netip.Prefix
	affinity     bool
	stickySecs   string // decimal timeout for ClientIP affinity
	extLocal     bool   // externalTrafficPolicy Local (on an externally reachable type)
	intLocal     bool   // internalTrafficPolicy Local
	svcType      corev1.ServiceType
}

func (sp *servicePort) externallyAccessible() bool {
	return sp.nodePort != 0 || len(sp.lbIPs) != 0 || len(sp.externalIPs) != 0
}

func (sp *servicePort) usesClusterEndpoints() bool {
	return !sp.intLocal || sp.externallyAccessible()
}

func (sp *servicePort) usesLocalEndpoints() bool {
	return sp.intLocal || (sp.extLocal && sp.externallyAccessible())
}

// endpoint is one address:port of a service port, with its conditions.
type endpoint struct {
	ip          netip.Addr
	ipStr       string
	str         string // "ip:port" / "[ip6]:port", kube-proxy's Endpoint.String()
	chain       string // KUBE-SEP-…, filled per service port
	local       bool
	ready       bool
	serving     bool
	terminating bool
	hinted      bool // carries topology hints (zones or nodes)
}

// cluster is the normalised input of one generation.
type cluster struct {
	ports     []*servicePort
	endpoints map[svcPortKey][]endpoint // sorted by endpoint string
	nodeIPs   []netip.Addr
	podCIDR   netip.Prefix // NodeCIDR detector CIDR, from the Node if not configured
}

func sortServicePorts(ports []*servicePort) {
	// kube-proxy iterates a Go map, so its inter-service order is random;
	// sorting by the name string makes the output reproducible.
	slices.SortFunc(ports, func(a, b *servicePort) int {
		return cmp.Or(strings.Compare(a.portName, b.portName), strings.Compare(a.proto, b.proto))
	})
}

// categorize mirrors kube-proxy's CategorizeEndpoints (pkg/proxy/topology.go)
// without topology hints: Ready endpoints are preferred, and
// Serving+Terminating ones are the fallback, independently for the cluster
// and the local sets.
// The returned slices reuse the capacity of the scratch slices given.
func categorize(sp *servicePort, eps []endpoint, clusterEps, localEps []endpoint) (_, _, reachable []endpoint, hasAny bool) {
	clusterEps, localEps = clusterEps[:0], localEps[:0]
	if sp.usesClusterEndpoints() {
		for _, ep := range eps {
			if ep.ready {
				clusterEps = append(clusterEps, ep)
			}
		}
		if len(clusterEps) == 0 {
			for _, ep := range eps {
				if ep.serving && ep.terminating {
					clusterEps = append(clusterEps, ep)
				}
			}
		}
		hasAny = len(clusterEps) > 0
	}
	if !sp.usesLocalEndpoints() {
		return clusterEps, localEps, clusterEps, hasAny
	}
	var localReady, localServingTerm bool
	for _, ep := range eps {
		if ep.ready {
			hasAny = true
			localReady = localReady || ep.local
		} else if ep.serving && ep.terminating {
			hasAny = true
			localServingTerm = localServingTerm || ep.local
		}
	}
	switch {
	case localReady:
		for _, ep := range eps {
			if ep.local && ep.ready {
				localEps = append(localEps, ep)
			}
		}
	case localServingTerm:
		for _, ep := range eps {
			if ep.local && ep.serving && ep.terminating {
				localEps = append(localEps, ep)
			}
		}
	}
	if !sp.usesClusterEndpoints() {
		return clusterEps, localEps, localEps, hasAny
	}
	// Union of both lists. kube-proxy builds it through a map (random
	// order); endpoint-string order keeps the output reproducible.
	reachable = mergeEndpoints(clusterEps, localEps)
	return clusterEps, localEps, reachable, hasAny
}

// mergeEndpoints unions two lists that are each sorted by endpoint string.
func mergeEndpoints(a, b []endpoint) []endpoint {
	if len(b) == 0 {
		return a
	}
	if len(a) == 0 {
		return b
	}
	out := make([]endpoint, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case j == len(b) || (i < len(a) && a[i].str < b[j].str):
			out = append(out, a[i])
			i++
		case i == len(a) || b[j].str < a[i].str:
			out = append(out, b[j])
			j++
		default:
			out = append(out, a[i])
			i++
			j++
		}
	}
	return out
}

// parseIPSloppy parses an IP as kube-proxy's netutils.ParseIPSloppy does:
// IPv4 octets with leading zeros are read as decimal ("172.30.0.041" is
// 172.30.0.41). IPv4-mapped IPv6 addresses count as IPv4.
func parseIPSloppy(s string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Zone() != "" {
			return netip.Addr{}, false
		}
		return a.Unmap(), true
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return netip.Addr{}, false
	}
	var b [4]byte
	for i, p := range parts {
		if p == "" || len(p) > 3 {
			return netip.Addr{}, false
		}
		n, err := strconv.Atoi(p)
		if err != nil || n > 255 || p[0] == '+' || p[0] == '-' {
			return netip.Addr{}, false
		}
		b[i] = byte(n)
	}
	return netip.AddrFrom4(b), true
}

// parseCIDRSloppy parses a CIDR with parseIPSloppy's leniency and returns it
// masked, as net.ParseCIDR's IPNet prints.
func parseCIDRSloppy(s string) (netip.Prefix, bool) {
	addr, bits, ok := strings.Cut(s, "/")
	if !ok {
		return netip.Prefix{}, false
	}
	a, ok := parseIPSloppy(addr)
	if !ok {
		return netip.Prefix{}, false
	}
	n, err := strconv.Atoi(bits)
	if err != nil || n < 0 || n > a.BitLen() || bits[0] == '+' {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, n).Masked(), true
}
