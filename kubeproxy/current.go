package kubeproxy

import "net/netip"

// This file writes the layout of kube-proxy v1.28+ (pkg/proxy/iptables
// proxier.go syncProxyRules), one concern per function, in the order
// kube-proxy writes the lines.

func (g *Generator) writeCurrent() {
	g.writeFixedCurrent()
	for _, sp := range g.c.ports {
		g.writeServicePortCurrent(sp)
	}
	g.writeNodePortsTail()
	g.writeForwardRules()
}

// writeFixedCurrent declares the top-level chains and writes the rules that
// do not depend on services.
func (g *Generator) writeFixedCurrent() {
	for _, ch := range []string{chainServices, chainExternalServices, chainForward, chainNodePorts, chainProxyFirewall} {
		g.filterChains.chain(ch)
	}
	for _, ch := range []string{chainServices, chainNodePorts, chainPostrouting, chainMarkMasq} {
		g.natChains.chain(ch)
	}
	g.writePostrouting()
	g.natRules.line("-A", chainMarkMasq, "-j", "MARK", "--or-mark", g.mark)
	if !g.cfg.isIPv6() && g.cfg.LocalhostNodePorts {
		// kube-proxy's copy of kubelet's route_localnet mitigation.
		g.filterChains.chain(chainKubeletFirewall)
		l := &g.filterRules
		l.w("-A", chainKubeletFirewall, "-m", "comment", "--comment").q(localnetBlockComment)
		l.line("-d", "127.0.0.0/8", "!", "-s", "127.0.0.0/8", "-m", "conntrack", "!", "--ctstate", "RELATED,ESTABLISHED,DNAT", "-j", "DROP")
	}
}

func (g *Generator) writePostrouting() {
	l := &g.natRules
	l.line("-A", chainPostrouting, "-m", "mark", "!", "--mark", g.mm, "-j", "RETURN")
	l.line("-A", chainPostrouting, "-j", "MARK", "--xor-mark", g.mark)
	l.w("-A", chainPostrouting, "-m", "comment", "--comment").q(masqueradeSNATComment).w("-j", "MASQUERADE")
	if g.cfg.RandomFully {
		l.w("--random-fully")
	}
	l.end()
}

// portPlan holds the per-service-port decisions of syncProxyRules.
type portPlan struct {
	clusterEps, localEps, reachable []endpoint
	hasEndpoints                    bool
	usesCluster, usesLocal          bool
	internalChain, externalChain    string // targets for ClusterIP and for external traffic policy
	hasInternal, hasExternal        bool
	usesExt, usesFW                 bool
	svc, svl, ext, fw               string
	lbTarget                        string
	intFilterTarget, extFilterTgt   string
	intFilterComment, extFilterCmt  string // without quotes
}

func (g *Generator) planPort(sp *servicePort) portPlan {
	eps := g.c.endpoints[sp.key]
	withEndpointChains(sp, eps)
	var p portPlan
	p.clusterEps, p.localEps, p.reachable, p.hasEndpoints = categorize(sp, eps, g.scratchCluster, g.scratchLocal)
	g.scratchCluster, g.scratchLocal = p.clusterEps, p.localEps
	p.svc, p.svl = servicePrefix+sp.hash, localPrefix+sp.hash
	p.ext, p.fw = externalPrefix+sp.hash, firewallPrefix+sp.hash
	p.usesCluster = len(p.clusterEps) > 0 && sp.usesClusterEndpoints()
	p.usesLocal = len(p.localEps) > 0 && sp.usesLocalEndpoints()

	p.internalChain, p.hasInternal = p.svc, p.hasEndpoints
	if sp.intLocal {
		p.internalChain = p.svl
		p.hasInternal = p.hasInternal && len(p.localEps) > 0
	}
	p.externalChain, p.hasExternal = p.svc, p.hasEndpoints
	if sp.extLocal {
		p.externalChain = p.svl
		p.hasExternal = p.hasExternal && len(p.localEps) > 0
	}
	p.usesExt = p.hasEndpoints && sp.externallyAccessible()
	p.usesFW = p.hasEndpoints && len(sp.lbIPs) > 0 && len(sp.sourceRanges) > 0
	p.lbTarget = p.ext
	if p.usesFW {
		p.lbTarget = p.fw
	}
	switch {
	case !p.hasEndpoints:
		p.intFilterTarget, p.intFilterComment = "REJECT", sp.portName+" has no endpoints"
		p.extFilterTgt, p.extFilterCmt = p.intFilterTarget, p.intFilterComment
	default:
		if !p.hasInternal {
			p.intFilterTarget, p.intFilterComment = "DROP", sp.portName+" has no local endpoints"
		}
		if !p.hasExternal {
			p.extFilterTgt, p.extFilterCmt = "DROP", sp.portName+" has no local endpoints"
		}
	}
	return p
}

func (g *Generator) writeServicePortCurrent(sp *servicePort) {
	p := g.planPort(sp)
	g.writeClusterIPCapture(sp, &p)
	g.writeExternalIPCapture(sp, &p)
	g.writeLoadBalancerCapture(sp, &p)
	g.writeNodePortCapture(sp, &p)
	g.writeHealthCheckAccept(sp)
	g.writeInternalMasquerade(sp, &p)
	g.writeExternalChain(sp, &p)
	g.writeFirewallChain(sp, &p)
	if p.usesCluster {
		g.natChains.chain(p.svc)
		g.writeServiceToEndpoints(sp, p.svc, p.clusterEps)
	}
	if p.usesLocal {
		g.natChains.chain(p.svl)
		g.writeServiceToEndpoints(sp, p.svl, p.localEps)
	}
	g.writeEndpointChains(sp, p.reachable)
}

// dst writes "-m proto -p proto -d ip --dport port".
func dst(l *lineBuffer, sp *servicePort, ip string) {
	l.w("-m", sp.proto, "-p", sp.proto, "-d", ip, "--dport", sp.port)
}

func (g *Generator) writeClusterIPCapture(sp *servicePort, p *portPlan) {
	if p.hasInternal {
		l := &g.natRules
		l.w("-A", chainServices, "-m", "comment", "--comment").q(sp.portName, " cluster IP")
		dst(l, sp, sp.clusterIPStr)
		l.line("-j", p.internalChain)
		return
	}
	l := &g.filterRules
	l.w("-A", chainServices, "-m", "comment", "--comment").q(p.intFilterComment)
	dst(l, sp, sp.clusterIPStr)
	l.line("-j", p.intFilterTarget)
}

func (g *Generator) writeExternalIPCapture(sp *servicePort, p *portPlan) {
	for _, ip := range sp.externalIPs {
		s := ip.String()
		if p.hasEndpoints {
			l := &g.natRules
			l.w("-A", chainServices, "-m", "comment", "--comment").q(sp.portName, " external IP")
			dst(l, sp, s)
			l.line("-j", p.ext)
		}
		if !p.hasExternal {
			g.writeExternalFilter(sp, p, s)
		}
	}
}

func (g *Generator) writeExternalFilter(sp *servicePort, p *portPlan, ip string) {
	l := &g.filterRules
	l.w("-A", chainExternalServices, "-m", "comment", "--comment").q(p.extFilterCmt)
	dst(l, sp, ip)
	l.line("-j", p.extFilterTgt)
}

func (g *Generator) writeLoadBalancerCapture(sp *servicePort, p *portPlan) {
	for _, ip := range sp.lbIPs {
		s := ip.String()
		if p.hasEndpoints {
			l := &g.natRules
			l.w("-A", chainServices, "-m", "comment", "--comment").q(sp.portName, " loadbalancer IP")
			dst(l, sp, s)
			l.line("-j", p.lbTarget)
		}
		if p.usesFW {
			l := &g.filterRules
			l.w("-A", chainProxyFirewall, "-m", "comment", "--comment").q(sp.portName, " traffic not accepted by ", p.fw)
			dst(l, sp, s)
			l.line("-j", "DROP")
		}
	}
	if !p.hasExternal {
		for _, ip := range sp.lbIPs {
			g.writeExternalFilter(sp, p, ip.String())
		}
	}
}

func (g *Generator) writeNodePortCapture(sp *servicePort, p *portPlan) {
	if sp.nodePort == 0 {
		return
	}
	np := itoa(sp.nodePort)
	if p.hasEndpoints {
		l := &g.natRules
		if g.cfg.LocalhostNodePorts && !g.cfg.isIPv6() && g.cfg.NFAcct {
			l.w("-A", chainNodePorts, "-m", "comment", "--comment", sp.portName)
			l.w("-m", sp.proto, "-p", sp.proto, "-d", "127.0.0.0/8", "--dport", np)
			l.line("-m", "nfacct", "--nfacct-name", nfacctLocalhostNPs, "-j", p.ext)
		}
		l.w("-A", chainNodePorts, "-m", "comment", "--comment", sp.portName)
		l.line("-m", sp.proto, "-p", sp.proto, "--dport", np, "-j", p.ext)
	}
	if !p.hasExternal {
		l := &g.filterRules
		l.w("-A", chainExternalServices, "-m", "comment", "--comment").q(p.extFilterCmt)
		l.w("-m", "addrtype", "--dst-type", "LOCAL")
		l.line("-m", sp.proto, "-p", sp.proto, "--dport", np, "-j", p.extFilterTgt)
	}
}

func (g *Generator) writeHealthCheckAccept(sp *servicePort) {
	if sp.hcNodePort == 0 {
		return
	}
	l := &g.filterRules
	l.w("-A", chainNodePorts, "-m", "comment", "--comment").q(sp.portName, " health check node port")
	l.line("-m", "tcp", "-p", "tcp", "--dport", itoa(sp.hcNodePort), "-j", "ACCEPT")
}

func (g *Generator) writeInternalMasquerade(sp *servicePort, p *portPlan) {
	if !p.hasInternal || (!g.cfg.MasqueradeAll && g.ifNotLocal == nil) {
		return
	}
	l := &g.natRules
	l.w("-A", p.internalChain, "-m", "comment", "--comment").q(sp.portName, " cluster IP")
	dst(l, sp, sp.clusterIPStr)
	if !g.cfg.MasqueradeAll {
		l.w(g.ifNotLocal...)
	}
	l.line("-j", chainMarkMasq)
}

func (g *Generator) writeExternalChain(sp *servicePort, p *portPlan) {
	if !p.usesExt {
		return
	}
	g.natChains.chain(p.ext)
	l := &g.natRules
	if !sp.extLocal {
		l.w("-A", p.ext, "-m", "comment", "--comment").q("masquerade traffic for ", sp.portName, " external destinations")
		l.line("-j", chainMarkMasq)
	} else {
		if g.ifLocal != nil {
			// Pod traffic to an external destination is subject to neither
			// policy: it short-circuits to the cluster chain.
			l.w("-A", p.ext, "-m", "comment", "--comment").q("pod traffic for ", sp.portName, " external destinations")
			l.w(g.ifLocal...)
			l.line("-j", p.svc)
		}
		l.w("-A", p.ext, "-m", "comment", "--comment").q("masquerade LOCAL traffic for ", sp.portName, " external destinations")
		l.line("-m", "addrtype", "--src-type", "LOCAL", "-j", chainMarkMasq)
		l.w("-A", p.ext, "-m", "comment", "--comment").q("route LOCAL traffic for ", sp.portName, " external destinations")
		l.line("-m", "addrtype", "--src-type", "LOCAL", "-j", p.svc)
	}
	if p.hasExternal {
		l.line("-A", p.ext, "-j", p.externalChain)
	}
}

func (g *Generator) writeFirewallChain(sp *servicePort, p *portPlan) {
	if !p.usesFW {
		return
	}
	g.natChains.chain(p.fw)
	l := &g.natRules
	allowFromNode := false
	primary := g.primaryNodeIP()
	for _, cidr := range sp.sourceRanges {
		l.w("-A", p.fw, "-m", "comment", "--comment").q(sp.portName, " loadbalancer IP")
		l.line("-s", cidr.String(), "-j", p.ext)
		if primary.IsValid() && cidr.Contains(primary) {
			allowFromNode = true
		}
	}
	if allowFromNode {
		// A VIP-style LB IP is often local to the node; node traffic to it
		// then arrives with the LB IP as source.
		for _, ip := range sp.lbIPs {
			l.w("-A", p.fw, "-m", "comment", "--comment").q(sp.portName, " loadbalancer IP")
			l.line("-s", ip.String(), "-j", p.ext)
		}
	}
	l.w("-A", p.fw, "-m", "comment", "--comment").q("other traffic to ", sp.portName, " will be dropped by KUBE-PROXY-FIREWALL")
	l.end()
}

// writeServiceToEndpoints writes affinity checks, then the probabilistic
// load-balancing jumps: rule i of n matches with probability 1/(n-i), the
// last one always.
func (g *Generator) writeServiceToEndpoints(sp *servicePort, chain string, eps []endpoint) {
	l := &g.natRules
	if sp.affinity {
		for i := range eps {
			l.w("-A", chain)
			g.serviceComment(l, true, sp.portName, " -> ", eps[i].str)
			l.line("-m", "recent", "--name", eps[i].chain, "--rcheck", "--seconds", sp.stickySecs, "--reap", "-j", eps[i].chain)
		}
	}
	n := len(eps)
	for i := range eps {
		l.w("-A", chain)
		g.serviceComment(l, true, sp.portName, " -> ", eps[i].str)
		if i < n-1 {
			l.w("-m", "statistic", "--mode", "random", "--probability", g.probability(n-i))
		}
		l.line("-j", eps[i].chain)
	}
}

func (g *Generator) writeEndpointChains(sp *servicePort, eps []endpoint) {
	l := &g.natRules
	for i := range eps {
		ep := &eps[i]
		g.natChains.chain(ep.chain)
		l.w("-A", ep.chain)
		g.serviceComment(l, false, sp.portName)
		l.line("-s", ep.ipStr, "-j", chainMarkMasq) // hairpin
		l.w("-A", ep.chain)
		g.serviceComment(l, false, sp.portName)
		if sp.affinity {
			l.w("-m", "recent", "--name", ep.chain, "--set")
		}
		l.line("-m", sp.proto, "-p", sp.proto, "-j", "DNAT", "--to-destination", ep.str)
	}
}

func (g *Generator) primaryNodeIP() (a netip.Addr) {
	if len(g.c.nodeIPs) > 0 {
		return g.c.nodeIPs[0]
	}
	return a
}

// writeNodePortsTail writes the last KUBE-SERVICES rule, which hands
// traffic to local addresses to KUBE-NODEPORTS.
func (g *Generator) writeNodePortsTail() {
	l := &g.natRules
	if len(g.cfg.NodePortAddresses) == 0 {
		l.w("-A", chainServices, "-m", "comment", "--comment").q(nodePortsTailComment)
		l.w("-m", "addrtype", "--dst-type", "LOCAL")
		if g.cfg.isIPv6() {
			l.w("!", "-d", "::1/128")
		} else if !g.cfg.LocalhostNodePorts {
			l.w("!", "-d", "127.0.0.0/8")
		}
		l.line("-j", chainNodePorts)
		return
	}
	for _, ip := range g.nodePortIPs() {
		if ip.IsLoopback() && (g.cfg.isIPv6() || !g.cfg.LocalhostNodePorts) {
			continue
		}
		l.w("-A", chainServices, "-m", "comment", "--comment").q(nodePortsTailComment)
		l.line("-d", ip.String(), "-j", chainNodePorts)
	}
}

// nodePortIPs returns the node IPs inside --nodeport-addresses.
func (g *Generator) nodePortIPs() []netip.Addr {
	var out []netip.Addr
	for _, ip := range g.c.nodeIPs {
		for _, p := range g.cfg.NodePortAddresses {
			if p.Contains(ip) {
				out = append(out, ip)
				break
			}
		}
	}
	return out
}

func (g *Generator) writeForwardRules() {
	l := &g.filterRules
	if !g.cfg.ConntrackTCPLiberal {
		l.w("-A", chainForward, "-m", "conntrack", "--ctstate", "INVALID")
		if g.cfg.NFAcct {
			l.w("-m", "nfacct", "--nfacct-name", nfacctInvalidDropped)
		}
		l.line("-j", "DROP")
	}
	l.w("-A", chainForward, "-m", "comment", "--comment").q("kubernetes forwarding rules")
	l.line("-m", "mark", "--mark", g.mm, "-j", "ACCEPT")
	l.w("-A", chainForward, "-m", "comment", "--comment").q("kubernetes forwarding conntrack rule")
	l.line("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
}
