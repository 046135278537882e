package kubeproxy

import "slices"

// jumpRule is one rule kube-proxy (or kubelet) inserts into a built-in chain
// with `iptables -I`, outside its iptables-restore payload.
type jumpRule struct {
	table, chain string
	args         []string // matches before the comment
	comment      string
	target       string
}

// currentJumps lists the built-in chain rules in the order they stand on a
// node where kubelet created its KUBE-FIREWALL jumps first and kube-proxy
// then prepended its own (iptablesJumpChains, each inserted at position 1,
// so the list order is reversed per chain).
var currentJumps = []jumpRule{
	{"filter", "INPUT", ctNew, "kubernetes load balancer firewall", chainProxyFirewall},
	{"filter", "INPUT", nil, "kubernetes health check service ports", chainNodePorts},
	{"filter", "INPUT", ctNew, "kubernetes externally-visible service portals", chainExternalServices},
	{"filter", "INPUT", nil, "", chainKubeletFirewall},
	{"filter", "FORWARD", ctNew, "kubernetes load balancer firewall", chainProxyFirewall},
	{"filter", "FORWARD", nil, "kubernetes forwarding rules", chainForward},
	{"filter", "FORWARD", ctNew, "kubernetes service portals", chainServices},
	{"filter", "FORWARD", ctNew, "kubernetes externally-visible service portals", chainExternalServices},
	{"filter", "OUTPUT", ctNew, "kubernetes load balancer firewall", chainProxyFirewall},
	{"filter", "OUTPUT", ctNew, "kubernetes service portals", chainServices},
	{"filter", "OUTPUT", nil, "", chainKubeletFirewall},
	{"nat", "PREROUTING", nil, "kubernetes service portals", chainServices},
	{"nat", "OUTPUT", nil, "kubernetes service portals", chainServices},
	{"nat", "POSTROUTING", nil, "kubernetes postrouting rules", chainPostrouting},
}

var ctNew = []string{"-m", "conntrack", "--ctstate", "NEW"}

var builtinChains = map[string][]string{
	"mangle": {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"},
	"filter": {"INPUT", "FORWARD", "OUTPUT"},
	"nat":    {"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"},
}

// Canary chains: empty chains kube-proxy and kubelet create so that they
// notice when someone flushes the tables.
const (
	canaryProxy   = "KUBE-PROXY-CANARY"
	canaryKubelet = "KUBE-KUBELET-CANARY"
	iptablesHint  = "KUBE-IPTABLES-HINT"
)

// assemble writes g.out from the four buffers, adding the node context
// unless PayloadOnly.
func (g *Generator) assemble() {
	// A fresh, right-sized slice: the caller owns the result.
	g.out = make([]byte, 0, len(g.filterChains.b)+len(g.filterRules.b)+len(g.natChains.b)+len(g.natRules.b)+4096)
	full := !g.cfg.PayloadOnly
	jumps := currentJumps
	if g.cfg.Layout == LayoutLegacy {
		jumps = legacyJumps
	}
	if full {
		g.out = append(g.out, "*mangle\n"...)
		g.builtinLines("mangle")
		for _, ch := range []string{iptablesHint, canaryKubelet, canaryProxy} {
			g.out = append(g.out, ":"+ch+" - [0:0]\n"...)
		}
		g.out = append(g.out, "COMMIT\n"...)
	}
	g.table("filter", &g.filterChains, &g.filterRules, jumps, full)
	g.table("nat", &g.natChains, &g.natRules, jumps, full)
}

func (g *Generator) builtinLines(table string) {
	for _, ch := range builtinChains[table] {
		g.out = append(g.out, ':')
		g.out = append(g.out, ch...)
		g.out = append(g.out, " ACCEPT [0:0]\n"...)
	}
}

func (g *Generator) table(name string, chains, rules *lineBuffer, jumps []jumpRule, full bool) {
	g.out = append(g.out, '*')
	g.out = append(g.out, name...)
	g.out = append(g.out, '\n')
	if full {
		g.builtinLines(name)
	}
	g.out = append(g.out, chains.b...)
	if full {
		var extra, extraRules lineBuffer
		declared := map[string]bool{}
		if g.cfg.Layout == LayoutLegacy {
			g.legacyKubeletRules(name, &extra, &extraRules)
			declared[chainKubeletFirewall] = name == "filter"
		}
		for _, j := range jumps {
			if j.table == name && !declared[j.target] && !g.payloadDeclares(name, j.target) {
				extra.chain(j.target)
				declared[j.target] = true
			}
		}
		extra.chain(canaryKubelet)
		extra.chain(canaryProxy)
		g.out = append(g.out, extra.b...)
		var l lineBuffer
		for _, j := range jumps {
			if j.table != name {
				continue
			}
			l.w("-A", j.chain).w(j.args...)
			if j.comment != "" {
				l.w("-m", "comment", "--comment").q(j.comment)
			}
			l.line("-j", j.target)
		}
		g.out = append(g.out, l.b...)
		g.out = append(g.out, extraRules.b...)
	}
	g.out = append(g.out, rules.b...)
	g.out = append(g.out, "COMMIT\n"...)
}

// payloadDeclares says whether the payload itself declares a fixed chain.
func (g *Generator) payloadDeclares(table, chain string) bool {
	var fixed []string
	switch {
	case g.cfg.Layout == LayoutLegacy && table == "filter":
		fixed = []string{chainServices, chainExternalServices, chainForward}
	case table == "filter":
		fixed = []string{chainServices, chainExternalServices, chainForward, chainNodePorts, chainProxyFirewall}
		if !g.cfg.isIPv6() && g.cfg.LocalhostNodePorts {
			fixed = append(fixed, chainKubeletFirewall)
		}
	case table == "nat":
		fixed = []string{chainServices, chainNodePorts, chainPostrouting, chainMarkMasq}
	}
	return slices.Contains(fixed, chain)
}
