package kubeproxy

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Fixed chain names.
const (
	chainServices         = "KUBE-SERVICES"
	chainExternalServices = "KUBE-EXTERNAL-SERVICES"
	chainNodePorts        = "KUBE-NODEPORTS"
	chainPostrouting      = "KUBE-POSTROUTING"
	chainMarkMasq         = "KUBE-MARK-MASQ"
	chainMarkDrop         = "KUBE-MARK-DROP"
	chainForward          = "KUBE-FORWARD"
	chainProxyFirewall    = "KUBE-PROXY-FIREWALL"
	chainKubeletFirewall  = "KUBE-FIREWALL"
)

// largeClusterEndpointsThreshold is kube-proxy's limit above which it stops
// writing comments on KUBE-SVC/KUBE-SVL → KUBE-SEP and KUBE-SEP rules.
const largeClusterEndpointsThreshold = 1000

// nfacct counter names (kube-proxy metrics package).
const (
	nfacctInvalidDropped  = "ct_state_invalid_dropped_pkts"
	nfacctLocalhostNPs    = "localhost_nps_accepted_pkts"
	nodePortsTailComment  = "kubernetes service nodeports; NOTE: this must be the last rule in this chain"
	localnetBlockComment  = "block incoming localnet connections"
	masqueradeSNATComment = "kubernetes service traffic requiring SNAT"
)

// Generator writes kube-proxy rulesets, reusing its buffers and probability
// cache between calls. A Generator is not safe for concurrent use.
type Generator struct {
	cfg  Config
	c    *cluster
	mark string // "0x00004000"
	mm   string // "0x00004000/0x00004000"

	filterChains, filterRules lineBuffer
	natChains, natRules       lineBuffer
	out                       []byte

	ifLocal, ifNotLocal []string // detector fragments; nil when not implemented
	largeCluster        bool

	scratchCluster, scratchLocal []endpoint // reused by categorize

	probs       []string // probability strings by n, built on demand
	probsLegacy bool     // the format probs was built with
}

// Generate returns the iptables-restore document kube-proxy would produce
// for these objects on the node cfg.NodeName. See [Generator.Generate].
func Generate(cfg Config, services []corev1.Service, slices []discoveryv1.EndpointSlice, nodes []corev1.Node) ([]byte, error) {
	var g Generator
	return g.Generate(cfg, services, slices, nodes)
}

// Generate returns the iptables-restore document kube-proxy would produce.
// With cfg.PayloadOnly it is exactly the input of kube-proxy's
// `iptables-restore --noflush` (a *filter and a *nat section); otherwise it
// is a complete document for a flushing iptables-restore that reproduces a
// node's tables: built-in chains, the jump rules kube-proxy and kubelet
// insert into them, and the canary chains. Services are written in order of
// their port name string (kube-proxy's own order is random). The returned
// slice is owned by the caller.
func (g *Generator) Generate(cfg Config, services []corev1.Service, slices []discoveryv1.EndpointSlice, nodes []corev1.Node) ([]byte, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c, err := buildCluster(&cfg, services, slices, nodes)
	if err != nil {
		return nil, err
	}
	g.prepare(cfg, c)
	if cfg.Layout == LayoutLegacy {
		g.writeLegacy()
	} else {
		g.writeCurrent()
	}
	g.assemble()
	out := g.out
	g.out = nil
	return out, nil
}

func (g *Generator) prepare(cfg Config, c *cluster) {
	g.cfg, g.c = cfg, c
	g.mark = markString(cfg.MasqueradeBit)
	g.mm = g.mark + "/" + g.mark
	g.filterChains.reset()
	g.filterRules.reset()
	g.natChains.reset()
	g.natRules.reset()
	g.ifLocal, g.ifNotLocal = nil, nil
	switch d := cfg.Detector; d.Mode {
	case DetectClusterCIDR, DetectNodeCIDR:
		s := c.podCIDR.String()
		g.ifLocal, g.ifNotLocal = []string{"-s", s}, []string{"!", "-s", s}
	case DetectBridgeInterface:
		g.ifLocal, g.ifNotLocal = []string{"-i", d.Interface}, []string{"!", "-i", d.Interface}
	case DetectInterfaceNamePrefix:
		g.ifLocal, g.ifNotLocal = []string{"-i", d.Interface + "+"}, []string{"!", "-i", d.Interface + "+"}
	}
	total := 0
	for _, sp := range c.ports {
		total += len(c.endpoints[sp.key])
	}
	g.largeCluster = total > largeClusterEndpointsThreshold
	if g.probsLegacy != cfg.LegacyProbability {
		g.probs, g.probsLegacy = nil, cfg.LegacyProbability
	}
}

// probability returns kube-proxy's probability string for 1/n, cached.
func (g *Generator) probability(n int) string {
	for len(g.probs) <= n {
		i := len(g.probs)
		switch {
		case i == 0:
			g.probs = append(g.probs, "<bad value>")
		case g.probsLegacy:
			g.probs = append(g.probs, fmt.Sprintf("%0.5f", 1.0/float64(i)))
		default:
			g.probs = append(g.probs, fmt.Sprintf("%0.10f", 1.0/float64(i)))
		}
	}
	return g.probs[n]
}

// serviceComment appends `-m comment --comment C` unless in large-cluster
// mode (kube-proxy's appendServiceCommentLocked). C is written as given:
// unquoted for a bare port name, quoted when quote is set.
func (g *Generator) serviceComment(l *lineBuffer, quote bool, parts ...string) {
	if g.largeCluster {
		return
	}
	l.w("-m", "comment", "--comment")
	if quote {
		l.q(parts...)
	} else {
		l.w(parts...)
	}
}

// withEndpointChains fills in the KUBE-SEP chain name of each endpoint.
func withEndpointChains(sp *servicePort, eps []endpoint) {
	for i := range eps {
		eps[i].chain = endpointChainFromString(sp.portName, sp.proto, eps[i].str)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
