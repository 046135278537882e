package kubeproxy

import "net/netip"

// This file writes the layout of kube-proxy up to v1.18/v1.20 (the
// pre-#92035 KUBE-POSTROUTING, masquerade rules in KUBE-SERVICES and
// KUBE-NODEPORTS, a KUBE-FW chain per load-balancer IP ending in
// KUBE-MARK-DROP, KUBE-XLB for externalTrafficPolicy Local with "Balancing
// rule N" comments), as read from kube-proxy v1.18 proxier.go.

// legacyDropBit is kubelet's --iptables-drop-bit default; kubelet, not
// kube-proxy, created KUBE-MARK-DROP and the KUBE-FIREWALL rule using it.
const legacyDropBit = 15

// legacyJumps are the built-in chain rules of a v1.18 node: kube-proxy
// prepends its list (so each chain shows it reversed) after kubelet created
// KUBE-FIREWALL and KUBE-POSTROUTING jumps.
var legacyJumps = []jumpRule{
	{"filter", "INPUT", ctNew, "kubernetes service portals", chainServices},
	{"filter", "INPUT", ctNew, "kubernetes externally-visible service portals", chainExternalServices},
	{"filter", "INPUT", nil, "", chainKubeletFirewall},
	{"filter", "FORWARD", nil, "kubernetes forwarding rules", chainForward},
	{"filter", "FORWARD", ctNew, "kubernetes service portals", chainServices},
	{"filter", "OUTPUT", ctNew, "kubernetes service portals", chainServices},
	{"filter", "OUTPUT", nil, "", chainKubeletFirewall},
	{"nat", "PREROUTING", nil, "kubernetes service portals", chainServices},
	{"nat", "OUTPUT", nil, "kubernetes service portals", chainServices},
	{"nat", "POSTROUTING", nil, "kubernetes postrouting rules", chainPostrouting},
}

func (g *Generator) legacyMark(bit int) string {
	m := markString(bit)
	return m + "/" + m
}

func (g *Generator) writeLegacy() {
	mm := g.legacyMark(g.cfg.MasqueradeBit)
	for _, ch := range []string{chainServices, chainExternalServices, chainForward} {
		g.filterChains.chain(ch)
	}
	for _, ch := range []string{chainServices, chainNodePorts, chainPostrouting, chainMarkMasq} {
		g.natChains.chain(ch)
	}
	l := &g.natRules
	l.w("-A", chainPostrouting, "-m", "comment", "--comment").q(masqueradeSNATComment)
	l.w("-m", "mark", "--mark", mm, "-j", "MASQUERADE")
	if g.cfg.RandomFully {
		l.w("--random-fully")
	}
	l.end()
	l.line("-A", chainMarkMasq, "-j", "MARK", "--set-xmark", mm)

	// v1.18 counted only ready endpoints (its EndpointSlice cache dropped the
	// others), for both the comment threshold and the rules.
	total := 0
	for _, sp := range g.c.ports {
		for _, ep := range g.c.endpoints[sp.key] {
			if ep.ready {
				total++
			}
		}
	}
	g.largeCluster = total > largeClusterEndpointsThreshold
	for _, sp := range g.c.ports {
		g.writeServicePortLegacy(sp)
	}
	g.writeNodePortsTailLegacy()
	g.writeForwardLegacy(mm)
}

// legacyCIDR is utilproxy.ToCIDR: a host prefix for a single address.
func legacyCIDR(a netip.Addr) string {
	return netip.PrefixFrom(a, a.BitLen()).String()
}

func (g *Generator) writeServicePortLegacy(sp *servicePort) {
	var eps []endpoint
	for _, ep := range g.c.endpoints[sp.key] {
		if ep.ready {
			eps = append(eps, ep)
		}
	}
	withEndpointChains(sp, eps)
	has := len(eps) > 0
	onlyLocal := sp.extLocal && sp.svcType != "ClusterIP"
	svc, xlb, fw := servicePrefix+sp.hash, xlbPrefix+sp.hash, firewallPrefix+sp.hash
	if has {
		g.natChains.chain(svc)
	}
	if onlyLocal {
		g.natChains.chain(xlb)
	}
	g.writeClusterIPLegacy(sp, has, svc)
	g.writeExternalIPsLegacy(sp, has, svc)
	g.writeLoadBalancerLegacy(sp, has, onlyLocal, svc, xlb, fw)
	g.writeNodePortLegacy(sp, has, onlyLocal, svc, xlb)
	if !has {
		return
	}
	g.writeEndpointsLegacy(sp, svc, eps)
	if onlyLocal {
		g.writeXLBLegacy(sp, svc, xlb, eps)
	}
}

func (g *Generator) legacyDst(l *lineBuffer, chain, comment string, sp *servicePort, ip netip.Addr) {
	l.w("-A", chain, "-m", "comment", "--comment").q(sp.portName, comment)
	l.w("-m", sp.proto, "-p", sp.proto, "-d", legacyCIDR(ip), "--dport", sp.port)
}

func (g *Generator) legacyReject(table *lineBuffer, chain string, sp *servicePort, ip netip.Addr) {
	g.legacyDst(table, chain, " has no endpoints", sp, ip)
	table.line("-j", "REJECT")
}

func (g *Generator) writeClusterIPLegacy(sp *servicePort, has bool, svc string) {
	if !has {
		g.legacyReject(&g.filterRules, chainServices, sp, sp.clusterIP)
		return
	}
	l := &g.natRules
	if g.cfg.MasqueradeAll {
		g.legacyDst(l, chainServices, " cluster IP", sp, sp.clusterIP)
		l.line("-j", chainMarkMasq)
	} else if g.ifNotLocal != nil {
		g.legacyDst(l, chainServices, " cluster IP", sp, sp.clusterIP)
		l.w(g.ifNotLocal...)
		l.line("-j", chainMarkMasq)
	}
	g.legacyDst(l, chainServices, " cluster IP", sp, sp.clusterIP)
	l.line("-j", svc)
}

func (g *Generator) writeExternalIPsLegacy(sp *servicePort, has bool, svc string) {
	for _, ip := range sp.externalIPs {
		if !has {
			g.legacyReject(&g.filterRules, chainExternalServices, sp, ip)
			continue
		}
		l := &g.natRules
		g.legacyDst(l, chainServices, " external IP", sp, ip)
		l.line("-j", chainMarkMasq)
		// Off-machine traffic: not from a bridge port, not from a local address.
		g.legacyDst(l, chainServices, " external IP", sp, ip)
		l.line("-m", "physdev", "!", "--physdev-is-in", "-m", "addrtype", "!", "--src-type", "LOCAL", "-j", svc)
		g.legacyDst(l, chainServices, " external IP", sp, ip)
		l.line("-m", "addrtype", "--dst-type", "LOCAL", "-j", svc)
	}
}

func (g *Generator) writeLoadBalancerLegacy(sp *servicePort, has, onlyLocal bool, svc, xlb, fw string) {
	for _, ip := range sp.lbIPs {
		if !has {
			g.legacyReject(&g.filterRules, chainServices, sp, ip)
			continue
		}
		// Declared once per ingress IP, as v1.18 did.
		g.natChains.chain(fw)
		l := &g.natRules
		g.legacyDst(l, chainServices, " loadbalancer IP", sp, ip)
		l.line("-j", fw)
		chosen := xlb
		if !onlyLocal {
			l.w("-A", fw, "-m", "comment", "--comment").q(sp.portName, " loadbalancer IP")
			l.line("-j", chainMarkMasq)
			chosen = svc
		}
		if len(sp.sourceRanges) == 0 {
			l.w("-A", fw, "-m", "comment", "--comment").q(sp.portName, " loadbalancer IP")
			l.line("-j", chosen)
		} else {
			allowFromNode := false
			primary := g.primaryNodeIP()
			for _, src := range sp.sourceRanges {
				l.w("-A", fw, "-m", "comment", "--comment").q(sp.portName, " loadbalancer IP")
				l.line("-s", src.String(), "-j", chosen)
				if primary.IsValid() && src.Contains(primary) {
					allowFromNode = true
				}
			}
			if allowFromNode {
				l.w("-A", fw, "-m", "comment", "--comment").q(sp.portName, " loadbalancer IP")
				l.line("-s", legacyCIDR(ip), "-j", chosen)
			}
		}
		// Whatever reaches the end of the chain was not DNATed: drop it.
		l.w("-A", fw, "-m", "comment", "--comment").q(sp.portName, " loadbalancer IP")
		l.line("-j", chainMarkDrop)
	}
}

func (g *Generator) writeNodePortLegacy(sp *servicePort, has, onlyLocal bool, svc, xlb string) {
	if sp.nodePort == 0 {
		return
	}
	np := itoa(sp.nodePort)
	if !has {
		l := &g.filterRules
		l.w("-A", chainExternalServices, "-m", "comment", "--comment").q(sp.portName, " has no endpoints")
		l.line("-m", "addrtype", "--dst-type", "LOCAL", "-m", sp.proto, "-p", sp.proto, "--dport", np, "-j", "REJECT")
		return
	}
	l := &g.natRules
	head := func() {
		l.w("-A", chainNodePorts, "-m", "comment", "--comment", sp.portName, "-m", sp.proto, "-p", sp.proto, "--dport", np)
	}
	if !onlyLocal {
		head()
		l.line("-j", chainMarkMasq)
		head()
		l.line("-j", svc)
		return
	}
	loopback := "127.0.0.0/8"
	if g.cfg.isIPv6() {
		loopback = "::1/128"
	}
	head()
	l.line("-s", loopback, "-j", chainMarkMasq)
	head()
	l.line("-j", xlb)
}

func (g *Generator) writeEndpointsLegacy(sp *servicePort, svc string, eps []endpoint) {
	for i := range eps {
		g.natChains.chain(eps[i].chain)
	}
	l := &g.natRules
	if sp.affinity {
		for i := range eps {
			l.w("-A", svc)
			g.serviceComment(l, false, sp.portName)
			l.line("-m", "recent", "--name", eps[i].chain, "--rcheck", "--seconds", sp.stickySecs, "--reap", "-j", eps[i].chain)
		}
	}
	n := len(eps)
	for i := range eps {
		ep := &eps[i]
		l.w("-A", svc)
		g.serviceComment(l, false, sp.portName)
		if i < n-1 {
			l.w("-m", "statistic", "--mode", "random", "--probability", g.probability(n-i))
		}
		l.line("-j", ep.chain)

		l.w("-A", ep.chain)
		g.serviceComment(l, false, sp.portName)
		l.line("-s", legacyCIDR(ep.ip), "-j", chainMarkMasq)
		l.w("-A", ep.chain)
		g.serviceComment(l, false, sp.portName)
		if sp.affinity {
			l.w("-m", "recent", "--name", ep.chain, "--set")
		}
		l.line("-m", sp.proto, "-p", sp.proto, "-j", "DNAT", "--to-destination", ep.str)
	}
}

func (g *Generator) writeXLBLegacy(sp *servicePort, svc, xlb string, eps []endpoint) {
	l := &g.natRules
	if g.ifLocal != nil {
		l.w("-A", xlb, "-m", "comment", "--comment").q("Redirect pods trying to reach external loadbalancer VIP to clusterIP")
		l.w(g.ifLocal...)
		l.line("-j", svc)
	}
	l.w("-A", xlb, "-m", "comment", "--comment").q("masquerade LOCAL traffic for ", sp.portName, " LB IP")
	l.line("-m", "addrtype", "--src-type", "LOCAL", "-j", chainMarkMasq)
	l.w("-A", xlb, "-m", "comment", "--comment").q("route LOCAL traffic for ", sp.portName, " LB IP to service chain")
	l.line("-m", "addrtype", "--src-type", "LOCAL", "-j", svc)
	var local []endpoint
	for _, ep := range eps {
		if ep.local {
			local = append(local, ep)
		}
	}
	if len(local) == 0 {
		l.w("-A", xlb, "-m", "comment", "--comment").q(sp.portName, " has no local endpoints")
		l.line("-j", chainMarkDrop)
		return
	}
	if sp.affinity {
		for i := range local {
			l.line("-A", xlb, "-m", "comment", "--comment", sp.portName, "-m", "recent", "--name", local[i].chain,
				"--rcheck", "--seconds", sp.stickySecs, "--reap", "-j", local[i].chain)
		}
	}
	n := len(local)
	for i := range local {
		l.w("-A", xlb, "-m", "comment", "--comment").q("Balancing rule ", itoa(i), " for ", sp.portName)
		if i < n-1 {
			l.w("-m", "statistic", "--mode", "random", "--probability", g.probability(n-i))
		}
		l.line("-j", local[i].chain)
	}
}

func (g *Generator) writeNodePortsTailLegacy() {
	l := &g.natRules
	if len(g.cfg.NodePortAddresses) == 0 {
		l.w("-A", chainServices, "-m", "comment", "--comment").q(nodePortsTailComment)
		l.line("-m", "addrtype", "--dst-type", "LOCAL", "-j", chainNodePorts)
		return
	}
	for _, ip := range g.nodePortIPs() {
		l.w("-A", chainServices, "-m", "comment", "--comment").q(nodePortsTailComment)
		l.line("-d", ip.String(), "-j", chainNodePorts)
	}
}

func (g *Generator) writeForwardLegacy(mm string) {
	l := &g.filterRules
	l.line("-A", chainForward, "-m", "conntrack", "--ctstate", "INVALID", "-j", "DROP")
	l.w("-A", chainForward, "-m", "comment", "--comment").q("kubernetes forwarding rules")
	l.line("-m", "mark", "--mark", mm, "-j", "ACCEPT")
	d := g.cfg.Detector.Mode
	if d != DetectClusterCIDR && d != DetectNodeCIDR {
		return // v1.18 wrote these only with --cluster-cidr
	}
	cidr := g.c.podCIDR.String()
	l.w("-A", chainForward, "-s", cidr, "-m", "comment", "--comment").q("kubernetes forwarding conntrack pod source rule")
	l.line("-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
	l.w("-A", chainForward, "-m", "comment", "--comment").q("kubernetes forwarding conntrack pod destination rule")
	l.line("-d", cidr, "-m", "conntrack", "--ctstate", "RELATED,ESTABLISHED", "-j", "ACCEPT")
}

// legacyKubeletRules are the rules kubelet ≤ v1.24 owned and a legacy node
// therefore shows: KUBE-MARK-DROP and the KUBE-FIREWALL drop of marked
// packets.
func (g *Generator) legacyKubeletRules(table string, chains, rules *lineBuffer) {
	dm := g.legacyMark(legacyDropBit)
	switch table {
	case "nat":
		chains.chain(chainMarkDrop)
		rules.line("-A", chainMarkDrop, "-j", "MARK", "--set-xmark", dm)
	case "filter":
		chains.chain(chainKubeletFirewall)
		rules.w("-A", chainKubeletFirewall, "-m", "comment", "--comment").q("kubernetes firewall for dropping marked packets")
		rules.line("-m", "mark", "--mark", dm, "-j", "DROP")
	}
}
