package kubeproxy

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// defaultStickySeconds is the API default of
// sessionAffinityConfig.clientIP.timeoutSeconds.
const defaultStickySeconds = 10800

func svcErr(s *corev1.Service, port *corev1.ServicePort, format string, args ...any) error {
	e := &ObjectError{Kind: "service", Namespace: s.Namespace, Name: s.Name, Msg: fmt.Sprintf(format, args...), Err: ErrInvalidObject}
	if port != nil {
		e.Port, e.HasPort = port.Name, true
	}
	return e
}

func protocolOf(p corev1.Protocol) (corev1.Protocol, bool) {
	switch p {
	case "":
		return corev1.ProtocolTCP, true // API default
	case corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP:
		return p, true
	}
	return p, false
}

// clusterIPOf returns the service's cluster IP of the family, as
// GetClusterIPByFamily does; skip is true for services kube-proxy ignores
// (headless, ExternalName, single-stack of the other family).
func clusterIPOf(cfg *Config, s *corev1.Service) (ip netip.Addr, skip bool, err error) {
	if s.Spec.Type == corev1.ServiceTypeExternalName {
		return ip, true, nil
	}
	if s.Spec.ClusterIP == corev1.ClusterIPNone {
		return ip, true, nil
	}
	ips := s.Spec.ClusterIPs
	if len(ips) == 0 && s.Spec.ClusterIP != "" {
		ips = []string{s.Spec.ClusterIP}
	}
	if len(ips) == 0 {
		return ip, false, svcErr(s, nil, `no cluster IP: want spec.clusterIP set to an IP or "None" (the API server allocates one for type %s)`, typeOf(s))
	}
	for _, str := range ips {
		a, ok := parseIPSloppy(str)
		if !ok {
			return ip, false, svcErr(s, nil, "cluster IP %q is not an IP address", str)
		}
		if cfg.familyOK(a) {
			return a, false, nil
		}
	}
	return ip, true, nil
}

func typeOf(s *corev1.Service) corev1.ServiceType {
	if s.Spec.Type == "" {
		return corev1.ServiceTypeClusterIP
	}
	return s.Spec.Type
}

// servicePorts converts one Service into its ports (none when kube-proxy
// skips the service).
func servicePorts(cfg *Config, s *corev1.Service) ([]*servicePort, error) {
	if s.Namespace == "" || s.Name == "" {
		return nil, svcErr(s, nil, "metadata.namespace and metadata.name must be set")
	}
	cip, skip, err := clusterIPOf(cfg, s)
	if err != nil || skip {
		return nil, err
	}
	typ := typeOf(s)
	switch typ {
	case corev1.ServiceTypeClusterIP, corev1.ServiceTypeNodePort, corev1.ServiceTypeLoadBalancer:
	default:
		return nil, svcErr(s, nil, "unknown type %q: want ClusterIP, NodePort, LoadBalancer or ExternalName", typ)
	}
	var shared servicePort
	shared.svcType = typ
	shared.clusterIP = cip
	shared.clusterIPStr = cip.String()

	switch s.Spec.ExternalTrafficPolicy {
	case "", corev1.ServiceExternalTrafficPolicyCluster:
	case corev1.ServiceExternalTrafficPolicyLocal:
		// apiservice.ExternalPolicyLocal: only for externally accessible types.
		shared.extLocal = typ != corev1.ServiceTypeClusterIP || len(s.Spec.ExternalIPs) > 0
	default:
		return nil, svcErr(s, nil, "unknown externalTrafficPolicy %q: want Cluster or Local", s.Spec.ExternalTrafficPolicy)
	}
	if p := s.Spec.InternalTrafficPolicy; p != nil {
		switch *p {
		case corev1.ServiceInternalTrafficPolicyCluster:
		case corev1.ServiceInternalTrafficPolicyLocal:
			shared.intLocal = true
		default:
			return nil, svcErr(s, nil, "unknown internalTrafficPolicy %q: want Cluster or Local", *p)
		}
	}
	switch s.Spec.SessionAffinity {
	case "", corev1.ServiceAffinityNone:
	case corev1.ServiceAffinityClientIP:
		secs := int32(defaultStickySeconds)
		if c := s.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			secs = *c.ClientIP.TimeoutSeconds
		}
		if secs <= 0 || secs > 86400 {
			return nil, svcErr(s, nil, "sessionAffinityConfig.clientIP.timeoutSeconds %d: want 1..86400", secs)
		}
		shared.affinity = true
		shared.stickySecs = strconv.Itoa(int(secs))
	default:
		return nil, svcErr(s, nil, "unknown sessionAffinity %q: want None or ClientIP", s.Spec.SessionAffinity)
	}
	for _, str := range s.Spec.ExternalIPs {
		a, ok := parseIPSloppy(str)
		if !ok {
			return nil, svcErr(s, nil, "external IP %q is not an IP address", str)
		}
		if cfg.familyOK(a) {
			shared.externalIPs = append(shared.externalIPs, a)
		}
	}
	for _, ing := range s.Status.LoadBalancer.Ingress {
		if ing.IP == "" || (ing.IPMode != nil && *ing.IPMode == corev1.LoadBalancerIPModeProxy) {
			continue // hostname-only or proxy-mode ingress: no VIP rules
		}
		a, ok := parseIPSloppy(ing.IP)
		if !ok {
			return nil, svcErr(s, nil, "load-balancer ingress IP %q is not an IP address", ing.IP)
		}
		if cfg.familyOK(a) {
			shared.lbIPs = append(shared.lbIPs, a)
		}
	}
	for _, str := range s.Spec.LoadBalancerSourceRanges {
		// API validation tolerates whitespace padding; kube-proxy trims it.
		p, ok := parseCIDRSloppy(strings.TrimSpace(str))
		if !ok {
			return nil, svcErr(s, nil, "loadBalancerSourceRange %q is not a CIDR", str)
		}
		if cfg.familyOK(p.Addr()) {
			shared.sourceRanges = append(shared.sourceRanges, p)
		}
	}
	needsHC := typ == corev1.ServiceTypeLoadBalancer && shared.extLocal
	if hc := s.Spec.HealthCheckNodePort; needsHC && hc != 0 {
		if hc < 0 || hc > 65535 {
			return nil, svcErr(s, nil, "healthCheckNodePort %d: want 1..65535", hc)
		}
		shared.hcNodePort = int(hc)
	}

	out := make([]*servicePort, 0, len(s.Spec.Ports))
	seen := make(map[svcPortKey]bool, len(s.Spec.Ports))
	for i := range s.Spec.Ports {
		p := &s.Spec.Ports[i]
		proto, ok := protocolOf(p.Protocol)
		if !ok {
			return nil, svcErr(s, p, "unknown protocol %q: want TCP, UDP or SCTP", p.Protocol)
		}
		if p.Port < 1 || p.Port > 65535 {
			return nil, svcErr(s, p, "port %d: want 1..65535", p.Port)
		}
		if p.NodePort < 0 || p.NodePort > 65535 {
			return nil, svcErr(s, p, "nodePort %d: want 0..65535", p.NodePort)
		}
		key := svcPortKey{namespace: s.Namespace, name: s.Name, port: p.Name, protocol: proto}
		if seen[key] {
			return nil, svcErr(s, p, "duplicate port name for protocol %s", proto)
		}
		seen[key] = true
		sp := shared
		sp.key = key
		if cfg.LegacyPortNames {
			sp.portName = LegacyPortName(s.Namespace, s.Name, p.Name)
		} else {
			sp.portName = PortName(s.Namespace, s.Name, p.Name)
		}
		sp.proto = lowerProtocol(proto)
		sp.hash = hash16(sp.portName, sp.proto, "")
		sp.port = strconv.Itoa(int(p.Port))
		sp.nodePort = int(p.NodePort)
		out = append(out, &sp)
	}
	return out, nil
}

func sliceErr(es *discoveryv1.EndpointSlice, format string, args ...any) error {
	return &ObjectError{Kind: "endpointslice", Namespace: es.Namespace, Name: es.Name, Msg: fmt.Sprintf(format, args...), Err: ErrInvalidObject}
}

// addSlices folds EndpointSlices into per-service-port endpoint lists the way
// kube-proxy's EndpointSliceCache does: ports without a name or number are
// ignored, endpoints without addresses or of the other family are ignored,
// only the first address counts, and duplicates ("ip:port") are merged,
// preferring a local copy.
func addSlices(cfg *Config, slicesIn []discoveryv1.EndpointSlice, into map[svcPortKey][]endpoint) error {
	order := make([]int, len(slicesIn))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		return cmp.Or(strings.Compare(slicesIn[a].Namespace, slicesIn[b].Namespace), strings.Compare(slicesIn[a].Name, slicesIn[b].Name))
	})
	want := discoveryv1.AddressTypeIPv4
	if cfg.isIPv6() {
		want = discoveryv1.AddressTypeIPv6
	}
	for _, i := range order {
		es := &slicesIn[i]
		svcName := es.Labels[discoveryv1.LabelServiceName]
		if svcName == "" || es.Namespace == "" {
			return sliceErr(es, "no %s label or no namespace: kube-proxy cannot tell which service it belongs to", discoveryv1.LabelServiceName)
		}
		switch es.AddressType {
		case discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6, discoveryv1.AddressTypeFQDN:
		default:
			return sliceErr(es, "unknown addressType %q: want IPv4, IPv6 or FQDN", es.AddressType)
		}
		if es.AddressType != want {
			continue
		}
		for _, port := range es.Ports {
			if port.Name == nil || port.Port == nil || *port.Port == 0 {
				continue // kube-proxy logs and ignores such ports
			}
			if *port.Port < 0 || *port.Port > 65535 {
				return sliceErr(es, "port %q: number %d: want 1..65535", *port.Name, *port.Port)
			}
			proto := corev1.ProtocolTCP
			if port.Protocol != nil {
				var ok bool
				if proto, ok = protocolOf(*port.Protocol); !ok {
					return sliceErr(es, "port %q: unknown protocol %q: want TCP, UDP or SCTP", *port.Name, *port.Protocol)
				}
			}
			key := svcPortKey{namespace: es.Namespace, name: svcName, port: *port.Name, protocol: proto}
			list := into[key]
			portStr := strconv.Itoa(int(*port.Port))
			for j := range es.Endpoints {
				e := &es.Endpoints[j]
				if len(e.Addresses) == 0 {
					continue
				}
				ip, ok := parseIPSloppy(e.Addresses[0])
				if !ok {
					return sliceErr(es, "endpoint %d: address %q is not an IP address", j, e.Addresses[0])
				}
				if !cfg.familyOK(ip) {
					continue
				}
				ipStr := ip.String()
				ep := endpoint{
					ip:          ip,
					ipStr:       ipStr,
					str:         joinHostPort(ipStr, ip.Is6(), portStr),
					local:       e.NodeName != nil && cfg.NodeName != "" && *e.NodeName == cfg.NodeName,
					ready:       e.Conditions.Ready == nil || *e.Conditions.Ready,
					serving:     e.Conditions.Serving == nil || *e.Conditions.Serving,
					terminating: e.Conditions.Terminating != nil && *e.Conditions.Terminating,
					hinted:      e.Hints != nil && (len(e.Hints.ForZones) > 0 || len(e.Hints.ForNodes) > 0),
				}
				list = append(list, ep)
			}
			into[key] = list
		}
	}
	for k, eps := range into {
		into[k] = sortDedupEndpoints(eps)
	}
	return nil
}

// sortDedupEndpoints sorts by "ip:port" (kube-proxy's byEndpoint order) and
// merges duplicates as kube-proxy's addEndpoints does: the first copy wins
// unless a later one is local, in which case the last local copy wins.
func sortDedupEndpoints(eps []endpoint) []endpoint {
	slices.SortStableFunc(eps, func(a, b endpoint) int { return strings.Compare(a.str, b.str) })
	out := eps[:0]
	for i := 0; i < len(eps); {
		j, keep := i+1, eps[i]
		for ; j < len(eps) && eps[j].str == eps[i].str; j++ {
			if eps[j].local {
				keep = eps[j]
			}
		}
		out = append(out, keep)
		i = j
	}
	return out
}

// nodeFacts takes the node IPs and pod CIDR of the node named cfg.NodeName.
func nodeFacts(cfg *Config, nodes []corev1.Node) (ips []netip.Addr, podCIDR netip.Prefix, err error) {
	for i := range nodes {
		n := &nodes[i]
		if n.Name != cfg.NodeName || cfg.NodeName == "" {
			continue
		}
		for _, kind := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
			for _, a := range n.Status.Addresses {
				if a.Type != kind {
					continue
				}
				ip, ok := parseIPSloppy(a.Address)
				if !ok {
					return nil, podCIDR, &ObjectError{Kind: "node", Name: n.Name, Msg: fmt.Sprintf("address %q is not an IP address", a.Address), Err: ErrInvalidObject}
				}
				if cfg.familyOK(ip) {
					ips = append(ips, ip)
				}
			}
		}
		cidrs := n.Spec.PodCIDRs
		if len(cidrs) == 0 && n.Spec.PodCIDR != "" {
			cidrs = []string{n.Spec.PodCIDR}
		}
		for _, c := range cidrs {
			p, ok := parseCIDRSloppy(c)
			if !ok {
				return nil, podCIDR, &ObjectError{Kind: "node", Name: n.Name, Msg: fmt.Sprintf("podCIDR %q is not a CIDR", c), Err: ErrInvalidObject}
			}
			if cfg.familyOK(p.Addr()) && !podCIDR.IsValid() {
				podCIDR = p
			}
		}
	}
	return ips, podCIDR, nil
}

// buildCluster validates and normalises the objects.
func buildCluster(cfg *Config, services []corev1.Service, eps []discoveryv1.EndpointSlice, nodes []corev1.Node) (*cluster, error) {
	c := &cluster{endpoints: make(map[svcPortKey][]endpoint)}
	for i := range services {
		ports, err := servicePorts(cfg, &services[i])
		if err != nil {
			return nil, err
		}
		c.ports = append(c.ports, ports...)
	}
	sortServicePorts(c.ports)
	if err := addSlices(cfg, eps, c.endpoints); err != nil {
		return nil, err
	}
	if err := refuseTopology(services, c.endpoints); err != nil {
		return nil, err
	}
	ips, podCIDR, err := nodeFacts(cfg, nodes)
	if err != nil {
		return nil, err
	}
	c.nodeIPs = ips
	if len(cfg.NodeIPs) > 0 {
		c.nodeIPs = nil
		for _, a := range cfg.NodeIPs {
			if cfg.familyOK(a) {
				c.nodeIPs = append(c.nodeIPs, a.Unmap())
			}
		}
	}
	c.podCIDR = cfg.Detector.CIDR
	if cfg.Detector.Mode == DetectNodeCIDR && !c.podCIDR.IsValid() {
		if !podCIDR.IsValid() {
			return nil, fmt.Errorf("%w: detector NodeCIDR: node %q has no %s spec.podCIDRs entry (kube-proxy waits for one)", ErrInvalidConfig, cfg.NodeName, cfg.Family)
		}
		c.podCIDR = podCIDR
	}
	return c, nil
}

// Annotations that ask kube-proxy for topology-aware routing.
const (
	annotationTopologyMode  = "service.kubernetes.io/topology-mode"
	annotationTopologyHints = "service.kubernetes.io/topology-aware-hints"
)

// refuseTopology refuses services for which kube-proxy would filter
// endpoints by zone or node hints: that filtering is not modelled, and
// ignoring it would produce rules kube-proxy does not write.
func refuseTopology(services []corev1.Service, eps map[svcPortKey][]endpoint) error {
	for i := range services {
		s := &services[i]
		mode := s.Annotations[annotationTopologyMode]
		if mode == "" {
			mode = s.Annotations[annotationTopologyHints]
		}
		wants := s.Spec.TrafficDistribution != nil || (mode != "" && !strings.EqualFold(mode, "disabled"))
		if !wants {
			continue
		}
		for key, list := range eps {
			if key.namespace != s.Namespace || key.name != s.Name {
				continue
			}
			for _, ep := range list {
				if ep.hinted {
					return &ObjectError{Kind: "service", Namespace: s.Namespace, Name: s.Name,
						Msg: "topology-aware routing (endpoint hints with topology-mode or trafficDistribution) is not modelled", Err: ErrNotModelled}
				}
			}
		}
	}
	return nil
}
