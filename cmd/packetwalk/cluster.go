package main

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math/big"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/render"
)

var clusterCmd = command{
	usage: "packetwalk cluster trace|explain [--format text|json|dot|svg] FILE PACKET... | cluster example [DIR]",
	about: `
Follows packets across a network of nodes described in FILE (YAML or JSON):
nodes (each with its snapshot directory or files, as --node and --rules
take them, its addresses and routes, and optionally the rules kube-proxy
writes for it from cluster objects), pods (an interface, an address and a
default route, linked to a node's port), Linux bridges (with
br_netfilter: bridged packets cross the node's iptables), IP-in-IP and
VXLAN tunnels, routers with route tables (a cloud VNet), load balancers
(rules to backend nodes, floating IP or not, health probes answered by
kube-proxy's health check of a Service on each node), Internet gateways
with source NAT, and the links between their ports.

'trace' walks each packet from device to device until it is delivered,
dropped or leaves the network, and prints every hop: the device, the port
it came in and left through, the packet as it arrived, and for a node or
pod the rules it crossed (as 'packetwalk trace' prints them, with what
each target did). Packets run in order through the same network, so
conntrack, load balancer flows and gateway translations carry over: a
reply walks back through all of them. --format dot (or svg, drawn by
Graphviz) draws the last packet's walk hop by hop, with what changed the
packet at each hop.

'explain' lists every walk of the last packet with its exact probability
(the load balancer's spread over its healthy backends times kube-proxy's
endpoint choice on each node), dropped walks included; earlier packets
run first, as with trace.

A PACKET is the key=value tokens of 'packetwalk trace' (proto, src, dst,
sport, dport, flags, type, mark, ttl, len) plus where it starts:
  from=HOST       sent by a local process of node or pod HOST
  at=DEVICE/PORT  arriving from outside the network at that port (a
                  router's port no link attaches to: the Internet)
  reply=N         the answer to packet N from the host that received it
                  (flags SA to a SYN, else A; flags= overrides)

The file's fields are listed in cmd/packetwalk/scenarios/cluster/README.md.
'packetwalk cluster example' prints an example (an AKS kubenet cluster);
'packetwalk cluster example DIR' writes it to DIR/kubenet.yaml with the
Services it generates kube-proxy's rules from, DIR/services.yaml.
`,
	examples: `  packetwalk cluster example ./aks
  packetwalk cluster trace aks/kubenet.yaml 'from=pod-a dst=10.0.0.10 dport=80' 'reply=1'
  packetwalk cluster trace --format json aks/kubenet.yaml 'at=internet/world src=203.0.113.7 dst=20.1.2.3 dport=80'
  packetwalk cluster explain aks/kubenet.yaml 'at=internet/world src=203.0.113.7 dst=20.1.2.3 dport=80'
`,
}

// clusterExamples are the example cluster files.
//
//go:embed scenarios/cluster
var clusterExamples embed.FS

// clusterNet is a network built from a cluster file.
type clusterNet struct {
	net     *cluster.Network
	sysctls map[string]map[string]int // per host
}

func runCluster(c *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("cluster", flag.ContinueOnError)
	format := fs.String("format", "text", "output `FORMAT`: text or json; for trace also dot or svg (the last packet's walk, hop by hop)")
	pos, err := c.parseFlags(fs, clusterCmd, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usagef("expected trace, explain or example")
	}
	verb := pos[0]
	switch verb {
	case "example":
		if len(pos) > 2 {
			return usagef("unexpected argument %q", pos[2])
		}
		if len(pos) == 2 {
			return writeClusterExample(c, pos[1])
		}
		data, err := clusterExamples.ReadFile("scenarios/cluster/kubenet.yaml")
		if err != nil {
			return err
		}
		c.out.Write(data)
		c.summary = "packetwalk cluster: the example reads services.yaml: write both with 'packetwalk cluster example DIR'\n"
		return nil
	case "trace", "explain":
	default:
		return usagef("unknown cluster command %q: expected trace, explain or example", verb)
	}
	switch *format {
	case "text", "json":
	case "dot", "svg":
		if verb != "trace" {
			return usagef("--format %s goes with trace", *format)
		}
	default:
		return usagef("unknown format %q: expected text, json, dot or svg", *format)
	}
	if len(pos) < 2 {
		return usagef("no cluster file: give FILE")
	}
	file := pos[1]
	var ni nodeInput
	data, err := ni.readInput(c.stdin, file)
	if err != nil {
		return err
	}
	dir := "."
	if file != "-" {
		dir = filepath.Dir(file)
	}
	cn, cf, err := buildClusterNet(data, dir)
	if err != nil {
		return prefixFile(displayName(file), err)
	}
	texts := append(append([]string(nil), cf.Packets...), pos[2:]...)
	if len(texts) == 0 {
		return usagef("no packets: give at least one PACKET (or packets: in the file)")
	}
	var specs []clusterSpec
	for i, t := range texts {
		s, err := parseClusterSpec(t)
		if err != nil {
			return fmt.Errorf("packet %d (%q): %w", i+1, t, err)
		}
		specs = append(specs, s)
	}
	last := len(specs)
	if verb == "explain" {
		last--
	}
	var walks []clusterWalk
	for i := 0; i < last; i++ {
		w, err := cn.run(specs[i], i+1, walks)
		if err != nil {
			return fmt.Errorf("packet %d (%q): %w", i+1, specs[i].text, err)
		}
		walks = append(walks, w)
	}
	if verb == "trace" {
		switch *format {
		case "json":
			return writeClusterJSON(&c.out, walks)
		case "dot", "svg":
			w := walks[len(walks)-1]
			dot := render.WalkDOT(w.walk, render.WalkOptions{Title: fmt.Sprintf("packet %d: %s, %s", w.n, describe(w.input), w.start)})
			if *format == "dot" {
				c.out.Write(dot)
				return nil
			}
			svg, err := render.SVG(context.Background(), dot)
			if errors.Is(err, render.ErrNoDot) {
				return fmt.Errorf("--format svg needs Graphviz's dot in PATH (install graphviz, or use --format dot)")
			}
			if err != nil {
				return err
			}
			c.out.Write(svg)
			return nil
		}
		for i, w := range walks {
			if i > 0 {
				c.out.WriteByte('\n')
			}
			cn.writeWalkText(&c.out, w)
		}
		return nil
	}
	s := specs[last]
	outs, p, err := cn.explain(s, last+1, walks)
	if err != nil {
		return fmt.Errorf("packet %d (%q): %w", last+1, s.text, err)
	}
	if *format == "json" {
		return writeClusterExplainJSON(&c.out, last+1, p, outs)
	}
	cn.writeExplainText(&c.out, last+1, s, p, outs)
	return nil
}

// writeClusterExample writes the example's files into dir, never over an
// existing file.
func writeClusterExample(c *cmdEnv, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := []string{"kubenet.yaml", "services.yaml"}
	for _, name := range names {
		if _, err := os.Stat(filepath.Join(dir, name)); err == nil {
			return fmt.Errorf("%s exists: not overwritten", filepath.Join(dir, name))
		}
	}
	for _, name := range names {
		data, err := clusterExamples.ReadFile("scenarios/cluster/" + name)
		if err != nil {
			return err
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
		fmt.Fprintf(&c.out, "wrote %s\n", p)
	}
	return nil
}

// prefixFile names the file in an error at a line of it.
func prefixFile(file string, err error) error {
	var ce *cfError
	if errors.As(err, &ce) {
		return fmt.Errorf("%s:%d: %s", file, ce.line, ce.msg)
	}
	return fmt.Errorf("%s: %w", file, err)
}

// buildClusterNet builds the network a cluster file describes; files it
// names are relative to dir.
func buildClusterNet(data []byte, dir string) (*clusterNet, *clusterFile, error) {
	cf, root, err := parseClusterFile(data)
	if err != nil {
		return nil, nil, err
	}
	n := cluster.New(cluster.Config{Seed: cf.Seed})
	cn := &clusterNet{net: n, sysctls: map[string]map[string]int{}}
	health := map[string]map[string]kubeproxy.HealthCheck{} // node -> ns/name -> server
	for i, nd := range cf.Nodes {
		at := func(err error, path ...any) error { return fieldErr(root, err, append([]any{"nodes", i}, path...)...) }
		if nd.Name == "" {
			return nil, nil, at(fmt.Errorf("a node needs a name"))
		}
		var ni nodeInput
		ni.dir = relPath(dir, nd.Snapshot)
		ni.rules, ni.rules6, ni.ipsets = relPath(dir, nd.Rules), relPath(dir, nd.Rules6), relPath(dir, nd.Ipsets)
		ni.fragment, ni.listing, ni.seed = nd.Fragment, nd.Listing, cf.Seed
		if nd.FragmentTable != "" {
			if err := ni.fragTable.Set(nd.FragmentTable); err != nil {
				return nil, nil, at(err, "fragmentTable")
			}
		}
		if nd.Backend != "" {
			if err := ni.backend.Set(nd.Backend); err != nil {
				return nil, nil, at(err, "backend")
			}
		}
		for k, v := range nd.Addrs {
			if err := ni.addrs.Set(v); err != nil {
				return nil, nil, at(err, "addrs", k)
			}
		}
		for k, v := range nd.Ifaces {
			if err := ni.ifaces.Set(v); err != nil {
				return nil, nil, at(err, "ifaces", k)
			}
		}
		for k, v := range nd.Routes {
			if err := ni.routes.Set(v); err != nil {
				return nil, nil, at(err, "routes", k)
			}
		}
		for k, v := range nd.Sysctls {
			if err := ni.sysctls.Set(v); err != nil {
				return nil, nil, at(err, "sysctls", k)
			}
		}
		built, err := ni.build(strings.NewReader(""))
		if err != nil {
			return nil, nil, at(err)
		}
		h := built.host
		h.Tracing = true
		cn.sysctls[nd.Name] = built.sysctls
		if nd.Kube != nil {
			hc, err := installKube(h, nd.Name, nd.Kube, dir)
			if err != nil {
				return nil, nil, at(err, "kube")
			}
			health[nd.Name] = hc
		}
		for k, cmd := range nd.Commands {
			if err := h.Exec(cmd); err != nil {
				return nil, nil, at(err, "commands", k)
			}
		}
		if err := n.AddHost(nd.Name, h); err != nil {
			return nil, nil, at(err, "name")
		}
		for k, b := range nd.Bridges {
			if err := n.AddBridge(nd.Name, b.Name, b.Ports...); err != nil {
				return nil, nil, at(err, "bridges", k)
			}
		}
		for k, t := range nd.Tunnels {
			tun := cluster.Tunnel{Local: t.Local.Addr, Port: t.Port}
			switch t.Kind {
			case "ipip":
				tun.Kind = cluster.IPIP
			case "vxlan":
				tun.Kind = cluster.VXLAN
			default:
				return nil, nil, at(fmt.Errorf("tunnel kind %q: expected ipip or vxlan", t.Kind), "tunnels", k, "kind")
			}
			for hop, remote := range t.Remotes {
				a, err1 := netip.ParseAddr(hop)
				b, err2 := netip.ParseAddr(remote)
				if err1 != nil || err2 != nil {
					return nil, nil, at(fmt.Errorf("remotes %s: %s: expected NEXTHOP: NODEADDRESS", hop, remote), "tunnels", k, "remotes")
				}
				if tun.Remotes == nil {
					tun.Remotes = map[netip.Addr]netip.Addr{}
				}
				tun.Remotes[a] = b
			}
			if err := n.AddTunnel(nd.Name, t.Iface, tun); err != nil {
				return nil, nil, at(err, "tunnels", k)
			}
		}
	}
	for i, p := range cf.Pods {
		at := func(err error, path ...any) error { return fieldErr(root, err, append([]any{"pods", i}, path...)...) }
		if p.Name == "" {
			return nil, nil, at(fmt.Errorf("a pod needs a name"))
		}
		if _, err := n.AddPod(p.Name, cluster.Pod{Iface: p.Iface, Addr: p.Addr.Prefix, Gateway: p.Gateway.Addr}); err != nil {
			return nil, nil, at(err)
		}
		cn.sysctls[p.Name] = sysctlDefaults
		if p.Link.set() {
			iface := p.Iface
			if iface == "" {
				iface = "eth0"
			}
			if err := n.Link(cluster.Port{Device: p.Name, Iface: iface}, cluster.Port{Device: p.Link.Device, Iface: p.Link.Port}); err != nil {
				return nil, nil, at(err, "link")
			}
		}
	}
	for i, r := range cf.Routers {
		at := func(err error, path ...any) error {
			return fieldErr(root, err, append([]any{"routers", i}, path...)...)
		}
		var addrs []netip.Addr
		for _, a := range r.Addrs {
			addrs = append(addrs, a.Addr)
		}
		rt, err := n.AddRouter(r.Name, addrs...)
		if err != nil {
			return nil, nil, at(err, "name")
		}
		for k, p := range r.Ports {
			var reach []netip.Prefix
			for _, x := range p.Reach {
				reach = append(reach, x.Prefix)
			}
			if err := rt.AddPort(p.Name, reach...); err != nil {
				return nil, nil, at(err, "ports", k)
			}
		}
		for k, rr := range r.Routes {
			if err := rt.AddRoute(cluster.RouterRoute{Dst: rr.Dst.Prefix.Masked(), NextHop: rr.NextHop.Addr, Port: rr.Port}); err != nil {
				return nil, nil, at(err, "routes", k)
			}
		}
	}
	for i, g := range cf.Gateways {
		at := func(err error, path ...any) error {
			return fieldErr(root, err, append([]any{"gateways", i}, path...)...)
		}
		var inside []netip.Prefix
		for _, x := range g.Inside {
			inside = append(inside, x.Prefix.Masked())
		}
		if _, err := n.AddGateway(g.Name, g.Public.Addr, inside...); err != nil {
			return nil, nil, at(err)
		}
	}
	for i, l := range cf.LoadBalancers {
		at := func(err error, path ...any) error {
			return fieldErr(root, err, append([]any{"loadBalancers", i}, path...)...)
		}
		lb, err := n.AddLoadBalancer(l.Name)
		if err != nil {
			return nil, nil, at(err, "name")
		}
		for k, r := range l.Rules {
			proto, ok := inet.ParseProto(r.Proto)
			if !ok || proto != inet.TCP && proto != inet.UDP {
				return nil, nil, at(fmt.Errorf("protocol %q: expected tcp or udp", r.Proto), "rules", k, "proto")
			}
			rule := cluster.LBRule{Frontend: r.Frontend.AddrPort, Proto: proto, BackendPort: r.BackendPort, FloatingIP: r.FloatingIP, ProbePort: r.ProbePort}
			for j, b := range r.Backends {
				be := cluster.Backend{Name: b.Node, Addr: b.Addr.Addr}
				switch {
				case b.Service != "" && b.Healthy != nil:
					return nil, nil, at(fmt.Errorf("service and healthy: give one"), "rules", k, "backends", j)
				case b.Service != "":
					hc, ok := health[b.Node][b.Service]
					if !ok {
						return nil, nil, at(fmt.Errorf("node %q has no health check server for service %q (a kube: section whose objects give the Service externalTrafficPolicy Local)", b.Node, b.Service), "rules", k, "backends", j, "service")
					}
					be.Probe = hc
				case b.Healthy != nil && !*b.Healthy:
					be.Probe = fixedProbe(http.StatusServiceUnavailable)
				}
				rule.Backends = append(rule.Backends, be)
			}
			if err := lb.AddRule(rule); err != nil {
				return nil, nil, at(err, "rules", k)
			}
		}
	}
	link := func(a, b cluster.Port, path ...any) error {
		if err := n.Link(a, b); err != nil {
			return fieldErr(root, err, path...)
		}
		return nil
	}
	for i, r := range cf.Routers {
		for k, p := range r.Ports {
			if p.Link.set() {
				if err := link(cluster.Port{Device: r.Name, Iface: p.Name}, cluster.Port{Device: p.Link.Device, Iface: p.Link.Port}, "routers", i, "ports", k, "link"); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	for i, l := range cf.LoadBalancers {
		for _, x := range []struct {
			port, field string
			to          cfPort
		}{{"frontend", "frontendLink", l.FrontendLink}, {"backend", "backendLink", l.BackendLink}} {
			if x.to.set() {
				if err := link(cluster.Port{Device: l.Name, Iface: x.port}, cluster.Port{Device: x.to.Device, Iface: x.to.Port}, "loadBalancers", i, x.field); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	for i, g := range cf.Gateways {
		for _, x := range []struct {
			port, field string
			to          cfPort
		}{{"inside", "insideLink", g.InsideLink}, {"outside", "outsideLink", g.OutsideLink}} {
			if x.to.set() {
				if err := link(cluster.Port{Device: g.Name, Iface: x.port}, cluster.Port{Device: x.to.Device, Iface: x.to.Port}, "gateways", i, x.field); err != nil {
					return nil, nil, err
				}
			}
		}
	}
	for i, l := range cf.Links {
		if err := link(cluster.Port{Device: l[0].Device, Iface: l[0].Port}, cluster.Port{Device: l[1].Device, Iface: l[1].Port}, "links", i); err != nil {
			return nil, nil, err
		}
	}
	return cn, cf, nil
}

// fixedProbe answers every health probe with one status.
type fixedProbe int

func (p fixedProbe) Response(bool) (int, http.Header, []byte) { return int(p), nil, nil }

// installKube loads the rules kube-proxy writes for the node from the
// cluster objects, and returns its health-check servers by Service.
func installKube(h *netfilter.Host, node string, k *cfKube, dir string) (map[string]kubeproxy.HealthCheck, error) {
	if k.Objects == "" {
		return nil, fmt.Errorf("objects: the cluster objects file is missing (kubectl get svc,endpointslices,nodes -A -o yaml)")
	}
	data, err := os.ReadFile(relPath(dir, k.Objects))
	if err != nil {
		return nil, err
	}
	objs, err := kubeproxy.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", k.Objects, err)
	}
	name := k.NodeName
	if name == "" {
		name = node
	}
	cfg := kubeproxy.DefaultConfig(name)
	for _, a := range k.NodeIPs {
		cfg.NodeIPs = append(cfg.NodeIPs, a.Addr)
	}
	cfg.MasqueradeAll = k.MasqueradeAll
	switch k.Layout {
	case "", "current":
	case "legacy":
		cfg.Layout, cfg.LegacyPortNames = kubeproxy.LayoutLegacy, true
	default:
		return nil, fmt.Errorf("layout %q: expected current or legacy", k.Layout)
	}
	if k.ClusterCIDR.IsValid() {
		cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectClusterCIDR, CIDR: k.ClusterCIDR.Prefix.Masked()}
	}
	doc, err := kubeproxy.Generate(cfg, objs.Services, objs.EndpointSlices, objs.Nodes)
	if err != nil {
		return nil, err
	}
	if err := kubeproxy.Install(h, doc); err != nil {
		return nil, err
	}
	hcs, err := kubeproxy.HealthChecks(cfg, objs.Services, objs.EndpointSlices, objs.Nodes)
	if err != nil {
		return nil, err
	}
	out := map[string]kubeproxy.HealthCheck{}
	for _, hc := range hcs {
		out[hc.Namespace+"/"+hc.Name] = hc
	}
	return out, nil
}

// clusterSpec is a cluster packet: where it starts and the packet.
type clusterSpec struct {
	text  string
	from  string
	at    cluster.Port
	reply int
	spec  packetSpec
	flags *inet.TCPFlags
}

func parseClusterSpec(text string) (clusterSpec, error) {
	s := clusterSpec{text: text}
	var rest []string
	for _, tok := range strings.Fields(text) {
		k, v, _ := strings.Cut(tok, "=")
		switch k {
		case "from":
			if v == "" {
				return s, specErr(tok, "from= needs a host name")
			}
			s.from = v
		case "at":
			d, p, ok := strings.Cut(v, "/")
			if !ok || d == "" || p == "" {
				return s, specErr(tok, "expected at=DEVICE/PORT")
			}
			s.at = cluster.Port{Device: d, Iface: p}
		case "in":
			return s, specErr(tok, "a cluster packet starts with from=HOST or at=DEVICE/PORT, not in=")
		case "reply":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return s, specErr(tok, "expected reply=N, the number of an earlier packet")
			}
			s.reply = n
		case "flags":
			f, err := parseTCPFlags(tok, v)
			if err != nil {
				return s, err
			}
			s.flags = &f
			rest = append(rest, tok)
		default:
			rest = append(rest, tok)
		}
	}
	starts := 0
	for _, b := range []bool{s.from != "", s.at.Device != "", s.reply != 0} {
		if b {
			starts++
		}
	}
	if starts != 1 {
		return s, specErr(text, "give one of from=HOST, at=DEVICE/PORT or reply=N")
	}
	if s.reply != 0 {
		for _, tok := range rest {
			if !strings.HasPrefix(tok, "flags=") {
				return s, specErr(tok, "a reply takes only flags=")
			}
		}
		return s, nil
	}
	if len(rest) == 0 {
		return s, specErr(text, "the packet needs dst=")
	}
	sp, err := parseSpec(strings.Join(rest, " "))
	if err != nil {
		return s, err
	}
	if sp.set&kDst == 0 {
		return s, specErr(text, "the packet needs dst=")
	}
	s.spec = sp
	return s, nil
}

// packet builds the packet of a spec that is not a reply.
func (s clusterSpec) packet(n int) netfilter.Packet {
	sp := s.spec
	p := netfilter.Packet{Proto: sp.proto, Src: sp.src, Dst: sp.dst, TTL: 64, Mark: sp.mark}
	if p.Proto.HasPorts() {
		p.SrcPort, p.DstPort = uint16(40000+n), 80
		if sp.set&kSport != 0 {
			p.SrcPort = sp.sport
		}
		if sp.set&kDport != 0 {
			p.DstPort = sp.dport
		}
	}
	switch {
	case p.Proto == inet.TCP:
		p.TCPFlags = inet.SYN
		if s.flags != nil {
			p.TCPFlags = *s.flags
		}
		p.Seq, p.Window = 1000, 64240
		if sp.set&kSeq != 0 {
			p.Seq = sp.seq
		}
		if sp.set&kAck != 0 {
			p.Ack = sp.ack
		}
		if sp.set&kWin != 0 {
			p.Window = sp.win
		}
	case p.Proto.IsICMP():
		p.ICMPType, p.ICMPID = 8, uint16(n)
		if p.Proto == inet.ICMPv6 {
			p.ICMPType = 128
		}
		if sp.set&kType != 0 {
			p.ICMPType = sp.icmpType
			if t, ok := icmpTypeNames[sp.typeName]; ok {
				p.ICMPType = t[0]
				if p.Proto == inet.ICMPv6 {
					p.ICMPType = t[1]
				}
			}
		}
		p.ICMPCode = sp.icmpCode
		if sp.set&kID != 0 {
			p.ICMPID = sp.id
		}
	}
	if sp.set&kTTL != 0 {
		p.TTL = sp.ttl
	}
	p.Length = headerLen(p) + sp.payload
	if p.Dst.Is6() {
		p.Family = netfilter.IPv6
	}
	return p
}

// headerLen is the length of a packet without payload.
func headerLen(p netfilter.Packet) int {
	ip := 20
	if p.Dst.Is6() {
		ip = 40
	}
	switch {
	case p.Proto == inet.TCP:
		return ip + 20
	case p.Proto == inet.UDP || p.Proto == inet.UDPLite:
		return ip + 8
	case p.Proto.IsICMP():
		return ip + 8
	}
	return ip
}

// clusterWalk is one packet's walk.
type clusterWalk struct {
	n     int
	spec  clusterSpec
	input netfilter.Packet
	start string // "from HOST", "at DEVICE/PORT", "reply to packet N from HOST"
	walk  cluster.Walk
}

func (cn *clusterNet) run(s clusterSpec, n int, prior []clusterWalk) (clusterWalk, error) {
	cw := clusterWalk{n: n, spec: s}
	var err error
	switch {
	case s.reply != 0:
		if s.reply >= n {
			return cw, specErr("reply="+strconv.Itoa(s.reply), "reply to packet %d, which does not come earlier (this is packet %d)", s.reply, n)
		}
		prev := prior[s.reply-1].walk
		if prev.Fate != cluster.Delivered {
			return cw, specErr("reply="+strconv.Itoa(s.reply), "packet %d was not delivered (%s): there is nothing to reply to", s.reply, prev.Fate)
		}
		last := prev.Last()
		flags := inet.TCPFlags(0)
		if last.Result.Packet.Proto == inet.TCP {
			flags = inet.ACK
			if last.Result.Packet.TCPFlags&(inet.SYN|inet.ACK) == inet.SYN {
				flags = inet.SYN | inet.ACK
			}
		}
		if s.flags != nil {
			flags = *s.flags
		}
		cw.input = cluster.ReplyTo(last.Result.Packet, flags)
		cw.start = fmt.Sprintf("reply to packet %d, from %s", s.reply, last.Device)
		cw.walk, err = cn.net.Reply(prev, flags)
	case s.from != "":
		cw.input = s.packet(n)
		cw.start = "from " + s.from
		cw.walk, err = cn.net.Send(s.from, cw.input)
		if !cw.input.Src.IsValid() && len(cw.walk.Hops) > 0 {
			cw.input.Src = cw.walk.Hops[0].Result.Packet.Src // chosen by the host
		}
	default:
		cw.input = s.packet(n)
		cw.start = "at " + s.at.String()
		cw.walk, err = cn.net.Receive(s.at, cw.input)
	}
	return cw, err
}

func (cn *clusterNet) explain(s clusterSpec, n int, prior []clusterWalk) ([]cluster.Outcome, netfilter.Packet, error) {
	switch {
	case s.reply != 0:
		return nil, netfilter.Packet{}, specErr("reply="+strconv.Itoa(s.reply), "explain takes from= or at=, not a reply")
	case s.from != "":
		p := s.packet(n)
		outs, err := cn.net.Explain(s.from, p)
		return outs, p, err
	default:
		p := s.packet(n)
		outs, err := cn.net.ExplainReceive(s.at, p)
		return outs, p, err
	}
}

// writeWalkText prints a walk hop by hop; a host's hop shows its rules as
// 'packetwalk trace' does.
func (cn *clusterNet) writeWalkText(b *bytes.Buffer, cw clusterWalk) {
	fmt.Fprintf(b, "packet %d: %s, %s\n", cw.n, describe(cw.input), cw.start)
	for i, h := range cw.walk.Hops {
		where := ""
		if h.In != "" {
			where += " in " + h.In
		}
		if h.Out != "" {
			where += " out " + h.Out
		}
		arrived := h.Packet
		if !arrived.Src.IsValid() {
			arrived.Src, arrived.SrcPort = h.Result.Packet.Src, h.Result.Packet.SrcPort // chosen by the host
		}
		fmt.Fprintf(b, "hop %d: %s (%s)%s: %s\n", i+1, h.Device, h.Kind, where, describe(arrived))
		if h.Note != "" {
			fmt.Fprintf(b, "  %s\n", h.Note)
		}
		if h.Kind == cluster.KindHost {
			var sub bytes.Buffer
			writeWalk(&sub, cn.sysctls[h.Device], false, outcome{n: cw.n, in: h.In, input: h.Packet, res: h.Result})
			for _, l := range strings.SplitAfter(sub.String(), "\n") {
				if l != "" {
					b.WriteString("  " + l)
				}
			}
		} else if h.Out != "" {
			fmt.Fprintf(b, "  leaves %s: %s\n", h.Out, describe(h.Result.Packet))
		}
	}
	last := cw.walk.Last()
	switch cw.walk.Fate {
	case cluster.Delivered:
		fmt.Fprintf(b, "=> delivered at %s: %s\n", last.Device, describe(last.Result.Packet))
	case cluster.Left:
		fmt.Fprintf(b, "=> left the network at %s/%s: %s\n", last.Device, last.Out, describe(last.Result.Packet))
	default:
		fmt.Fprintf(b, "=> dropped at %s: %s\n", last.Device, cw.walk.Reason)
	}
}

// writeExplainText prints every walk with its exact probability.
func (cn *clusterNet) writeExplainText(b *bytes.Buffer, n int, s clusterSpec, p netfilter.Packet, outs []cluster.Outcome) {
	start := "from " + s.from
	if s.from == "" {
		start = "at " + s.at.String()
	}
	if !p.Src.IsValid() && len(outs) > 0 && len(outs[0].Walk.Hops) > 0 {
		p.Src = outs[0].Walk.Hops[0].Result.Packet.Src // chosen by the host
	}
	fmt.Fprintf(b, "packet %d: %s, %s: %d outcomes\n", n, describe(p), start, len(outs))
	// The health probes of the load balancers the packet crosses: they
	// decide which backends it may reach.
	seen := map[string]bool{}
	for _, o := range outs {
		for _, h := range o.Walk.Hops {
			if h.Kind != cluster.KindLoadBalancer || seen[h.Device] {
				continue
			}
			seen[h.Device] = true
			front := netip.AddrPortFrom(h.Packet.Dst, h.Packet.DstPort)
			answers, err := cn.net.LoadBalancer(h.Device).Probe(h.Packet.Proto, front)
			if err != nil {
				continue // a reply crossing the load balancer: no rule of its own
			}
			var parts []string
			port := 0
			for _, a := range answers {
				parts = append(parts, fmt.Sprintf("%s %d", a.Backend, a.Status))
				port = a.Port
			}
			fmt.Fprintf(b, "health probes of %s for %s %s (port %d): %s\n", h.Device, h.Packet.Proto, front, port, strings.Join(parts, ", "))
		}
	}
	for i, o := range outs {
		f, _ := o.Probability.Float64()
		last := o.Walk.Last()
		fmt.Fprintf(b, "%d. p=%s (%.6f) %s at %s", i+1, o.Probability.RatString(), f, o.Walk.Fate, last.Device)
		if o.Walk.Fate == cluster.Delivered || o.Walk.Fate == cluster.Left {
			fmt.Fprintf(b, ": %s", describe(last.Result.Packet))
		} else if o.Walk.Reason != "" {
			fmt.Fprintf(b, ": %s", o.Walk.Reason)
		}
		b.WriteByte('\n')
		var path []string
		for _, h := range o.Walk.Hops {
			path = append(path, h.Device)
		}
		fmt.Fprintf(b, "   path: %s\n", strings.Join(path, " -> "))
		for _, h := range o.Walk.Hops {
			if h.Note != "" {
				fmt.Fprintf(b, "   %s: %s\n", h.Device, h.Note)
			}
		}
	}
}

// JSON of `cluster trace`: one object per packet per line.
type jsonHop struct {
	Host        string       `json:"host"`
	Kind        string       `json:"kind"`
	In          *string      `json:"in"`
	Out         *string      `json:"out"`
	Packet      jsonPacket   `json:"packet"`
	Leaves      *jsonPacket  `json:"leaves"`
	Note        *string      `json:"note"`
	Verdict     *string      `json:"verdict"`
	Disposition string       `json:"disposition"`
	Trace       []jsonStep   `json:"trace"`
	Emitted     []jsonPacket `json:"emitted"`
	Where       *jsonWhere   `json:"where"`
}

type jsonWalk struct {
	N      int        `json:"n"`
	Start  string     `json:"start"`
	Packet jsonPacket `json:"packet"`
	Fate   string     `json:"fate"`
	Reason *string    `json:"reason"`
	Hops   []jsonHop  `json:"hops"`
}

func walkJSON(n int, start string, input netfilter.Packet, w cluster.Walk) jsonWalk {
	j := jsonWalk{N: n, Start: start, Packet: packetJSON(input), Fate: w.Fate.String(), Reason: strPtr(w.Reason), Hops: []jsonHop{}}
	for _, h := range w.Hops {
		jh := jsonHop{Host: h.Device, Kind: h.Kind.String(), In: strPtr(h.In), Out: strPtr(h.Out), Packet: packetJSON(h.Packet),
			Note: strPtr(h.Note), Disposition: h.Result.Disposition.String(), Trace: []jsonStep{}, Emitted: []jsonPacket{}}
		if h.Out != "" {
			lp := packetJSON(h.Result.Packet)
			jh.Leaves = &lp
		}
		if h.Kind == cluster.KindHost {
			r := resultJSON(outcome{n: n, in: h.In, input: h.Packet, res: h.Result})
			v := r.Verdict
			jh.Verdict, jh.Trace, jh.Emitted, jh.Where = &v, r.Trace, r.Emitted, r.Where
		}
		j.Hops = append(j.Hops, jh)
	}
	return j
}

func writeClusterJSON(b *bytes.Buffer, walks []clusterWalk) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	for _, w := range walks {
		if err := enc.Encode(walkJSON(w.n, w.start, w.input, w.walk)); err != nil {
			return err
		}
	}
	return nil
}

type jsonClusterOutcome struct {
	Probability string   `json:"probability"`
	Float       float64  `json:"p"`
	Walk        jsonWalk `json:"walk"`
}

func writeClusterExplainJSON(b *bytes.Buffer, n int, p netfilter.Packet, outs []cluster.Outcome) error {
	var all []jsonClusterOutcome
	sum := new(big.Rat)
	for _, o := range outs {
		f, _ := o.Probability.Float64()
		all = append(all, jsonClusterOutcome{Probability: o.Probability.RatString(), Float: f, Walk: walkJSON(n, "", p, o.Walk)})
		sum.Add(sum, o.Probability)
	}
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	return enc.Encode(struct {
		N        int                  `json:"n"`
		Packet   jsonPacket           `json:"packet"`
		Sum      string               `json:"sum"`
		Outcomes []jsonClusterOutcome `json:"outcomes"`
	}{n, packetJSON(p), sum.RatString(), all})
}
