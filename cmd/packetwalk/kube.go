package main

import (
	"flag"
	"fmt"
	"net/netip"
	"strings"

	"github.com/packetwalk/packetwalk/kubeproxy"
	corev1 "k8s.io/api/core/v1"
)

var kubeCmd = command{
	usage: "packetwalk kube -f CLUSTER.yaml [--layout current|legacy] [--node-name N] [--node-ip IP]... [flags]",
	about: `
Prints the iptables-save text kube-proxy (iptables mode) would leave on a
node for the Services, EndpointSlices and Nodes in CLUSTER.yaml, as
'kubectl get svc,endpointslices,nodes -A -o yaml' prints them (a v1 List,
multi-document YAML or JSON; '-' = stdin). The output is a complete,
loadable dump of the filter and nat tables (and mangle, where kube-proxy
and kubelet write it) with the built-in chains and the jump rules
kube-proxy installs, ready for 'packetwalk trace --rules'.

The IP family follows the first --node-ip (or --cluster-cidr); IPv4 when
neither is given. --node-ip is repeatable, primary address first; all of
them (and 127.0.0.1, which is always local) are node addresses for
NodePorts and --nodeport-addresses. When no --node-ip is given they come
from the Node object named --node-name.

--layout legacy is the v1.18-era layout of 2019–2020 nodes: KUBE-XLB,
KUBE-FW ending in KUBE-MARK-DROP, masquerade rules in KUBE-SERVICES and
unnamed ports hashed as "ns/name:"; add --legacy-probability for the %0.5f
probabilities of releases before v1.17.
`,
	examples: `  kubectl get svc,endpointslices,nodes -A -o yaml > cluster.yaml
  packetwalk kube -f cluster.yaml --node-name node-a --node-ip 192.168.10.1 \
      --cluster-cidr 10.244.0.0/16 > iptables-save
  packetwalk trace --rules iptables-save --addr eth0=192.168.10.1/24 \
      --route 10.244.0.0/16=eth0 'in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80'
  packetwalk kube -f cluster.yaml --layout legacy --detect-local none
`,
}

// ipList is the repeatable --node-ip flag.
type ipList []netip.Addr

func (l *ipList) String() string { return "" }

func (l *ipList) Set(s string) error {
	a, err := netip.ParseAddr(s)
	if err != nil {
		return fmt.Errorf("bad address %q: expected an IPv4 or IPv6 address", s)
	}
	*l = append(*l, a)
	return nil
}

// prefixList is --nodeport-addresses CIDR,CIDR...
type prefixList []netip.Prefix

func (l *prefixList) String() string { return "" }

func (l *prefixList) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		p, err := netip.ParsePrefix(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("bad CIDR %q: expected e.g. 192.168.0.0/16", f)
		}
		*l = append(*l, p.Masked())
	}
	return nil
}

func runKube(c *cmdEnv, args []string) error {
	fs := flag.NewFlagSet("kube", flag.ContinueOnError)
	file := fs.String("f", "", "cluster objects `FILE` (YAML or JSON; '-' = stdin)")
	layout := fs.String("layout", "current", "kube-proxy `LAYOUT`: current (v1.28+) or legacy (v1.18-era)")
	nodeName := fs.String("node-name", "", "the node kube-proxy runs on (`NAME`): its endpoints are local")
	var nodeIPs ipList
	fs.Var(&nodeIPs, "node-ip", "node `IP` address, primary first (repeatable)")
	clusterCIDR := fs.String("cluster-cidr", "", "pod network `CIDR` (--detect-local cluster-cidr uses it)")
	detect := fs.String("detect-local", "", "local traffic detector `MODE`: cluster-cidr, node-cidr, bridge, interface-prefix or none (default cluster-cidr with --cluster-cidr, else none)")
	bridge := fs.String("pod-bridge-interface", "", "bridge `NAME` for --detect-local bridge")
	prefix := fs.String("pod-interface-name-prefix", "", "interface name `PREFIX` for --detect-local interface-prefix")
	masqAll := fs.Bool("masquerade-all", false, "masquerade all service traffic")
	randomFully := fs.Bool("random-fully", false, "add --random-fully to the MASQUERADE rule")
	localhostNP := fs.Bool("localhost-nodeports", true, "accept NodePorts on 127.0.0.1 (IPv4 only)")
	masqBit := fs.Int("masquerade-bit", 14, "the fwmark `BIT` (0..31) that marks packets to masquerade")
	var npAddrs prefixList
	fs.Var(&npAddrs, "nodeport-addresses", "only node addresses in these `CIDR,...` serve NodePorts")
	legacyProb := fs.Bool("legacy-probability", false, "write probabilities with %0.5f (kube-proxy before v1.17; legacy layout only)")
	pos, err := c.parseFlags(fs, kubeCmd, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usagef("unexpected argument %q", pos[0])
	}
	if *file == "" {
		return usagef("no cluster objects: give -f FILE (kubectl get svc,endpointslices,nodes -A -o yaml)")
	}
	cfg := kubeproxy.DefaultConfig(*nodeName)
	cfg.NodeIPs = nodeIPs
	cfg.MasqueradeAll, cfg.RandomFully, cfg.LocalhostNodePorts = *masqAll, *randomFully, *localhostNP
	cfg.MasqueradeBit = *masqBit
	cfg.NodePortAddresses = npAddrs
	switch *layout {
	case "current":
	case "legacy":
		cfg.Layout, cfg.LegacyPortNames = kubeproxy.LayoutLegacy, true
	default:
		return usagef("unknown layout %q: expected current or legacy", *layout)
	}
	if *legacyProb && cfg.Layout != kubeproxy.LayoutLegacy {
		return usagef("--legacy-probability needs --layout legacy")
	}
	cfg.LegacyProbability = *legacyProb
	var cidr netip.Prefix
	if *clusterCIDR != "" {
		cidr, err = netip.ParsePrefix(*clusterCIDR)
		if err != nil {
			return usagef("bad --cluster-cidr %q: expected e.g. 10.244.0.0/16", *clusterCIDR)
		}
		cidr = cidr.Masked()
	}
	switch {
	case len(nodeIPs) > 0 && nodeIPs[0].Unmap().Is6(), len(nodeIPs) == 0 && cidr.IsValid() && cidr.Addr().Is6():
		cfg.Family = corev1.IPv6Protocol
	}
	mode := *detect
	if mode == "" {
		mode = "none"
		if cidr.IsValid() {
			mode = "cluster-cidr"
		}
	}
	switch mode {
	case "none":
	case "cluster-cidr":
		if !cidr.IsValid() {
			return usagef("--detect-local cluster-cidr needs --cluster-cidr")
		}
		cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectClusterCIDR, CIDR: cidr}
	case "node-cidr":
		cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectNodeCIDR}
	case "bridge":
		if *bridge == "" {
			return usagef("--detect-local bridge needs --pod-bridge-interface")
		}
		cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectBridgeInterface, Interface: *bridge}
	case "interface-prefix":
		if *prefix == "" {
			return usagef("--detect-local interface-prefix needs --pod-interface-name-prefix")
		}
		cfg.Detector = kubeproxy.LocalDetector{Mode: kubeproxy.DetectInterfaceNamePrefix, Interface: *prefix}
	default:
		return usagef("unknown --detect-local %q: expected cluster-cidr, node-cidr, bridge, interface-prefix or none", mode)
	}
	var ni nodeInput
	data, err := ni.readInput(c.stdin, *file)
	if err != nil {
		return err
	}
	doc, err := kubeproxy.GenerateFromYAML(cfg, data)
	if err != nil {
		return &inputError{file: displayName(*file), err: err}
	}
	c.out.Write(doc)
	return nil
}
