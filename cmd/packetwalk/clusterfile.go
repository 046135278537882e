package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"unicode/utf8"

	yaml "go.yaml.in/yaml/v3"
)

// The cluster description file of `packetwalk cluster`: YAML (or JSON,
// which is YAML) naming the nodes, pods, routers, load balancers,
// gateways and links of a network. Every error names the file's line and
// the field ("cluster.yaml:12: nodes[1].routes[0]: ...").

type clusterFile struct {
	Seed          uint64      `yaml:"seed"`
	Nodes         []cfNode    `yaml:"nodes"`
	Pods          []cfPod     `yaml:"pods"`
	Routers       []cfRouter  `yaml:"routers"`
	LoadBalancers []cfLB      `yaml:"loadBalancers"`
	Gateways      []cfGateway `yaml:"gateways"`
	Links         []cfLink    `yaml:"links"`
	Packets       []string    `yaml:"packets"`
	Description   string      `yaml:"description"`
}

// cfNode is a node: its snapshot and flags as `packetwalk trace` takes
// them, and optionally the rules kube-proxy writes for it.
type cfNode struct {
	Name          string   `yaml:"name"`
	Snapshot      string   `yaml:"snapshot"` // --node DIR
	Rules         string   `yaml:"rules"`    // --rules FILE
	Rules6        string   `yaml:"rules6"`
	Ipsets        string   `yaml:"ipsets"`
	Fragment      bool     `yaml:"fragment"`
	Listing       bool     `yaml:"listing"`
	FragmentTable string   `yaml:"fragmentTable"`
	Addrs         []string `yaml:"addrs"` // IFACE=CIDR, as --addr
	Ifaces        []string `yaml:"ifaces"`
	Routes        []string `yaml:"routes"`  // CIDR=IFACE[@GATEWAY], as --route
	Sysctls       []string `yaml:"sysctls"` // KEY=VALUE, as --sysctl
	Backend       string   `yaml:"backend"`
	Kube          *cfKube  `yaml:"kube"`
	Commands      []string `yaml:"commands"` // iptables command lines run after the rules

	Bridges []cfBridge `yaml:"bridges"`
	Tunnels []cfTunnel `yaml:"tunnels"`
}

// cfKube generates the node's kube-proxy rules from cluster objects, as
// `packetwalk kube` does.
type cfKube struct {
	Objects       string   `yaml:"objects"` // kubectl get svc,endpointslices,nodes -A -o yaml
	NodeName      string   `yaml:"nodeName"`
	NodeIPs       []cfAddr `yaml:"nodeIPs"`
	ClusterCIDR   cfPrefix `yaml:"clusterCIDR"`
	Layout        string   `yaml:"layout"`
	MasqueradeAll bool     `yaml:"masqueradeAll"`
}

type cfBridge struct {
	Name  string   `yaml:"name"`
	Ports []string `yaml:"ports"`
}

type cfTunnel struct {
	Iface   string            `yaml:"iface"`
	Kind    string            `yaml:"kind"` // ipip or vxlan
	Local   cfAddr            `yaml:"local"`
	Port    uint16            `yaml:"port"`
	Remotes map[string]string `yaml:"remotes"` // next hop -> remote node address
}

type cfPod struct {
	Name    string   `yaml:"name"`
	Iface   string   `yaml:"iface"`
	Addr    cfPrefix `yaml:"addr"`
	Gateway cfAddr   `yaml:"gateway"`
	Link    cfPort   `yaml:"link"` // the node's port the pod's interface is linked to
}

type cfRouter struct {
	Name   string          `yaml:"name"`
	Addrs  []cfAddr        `yaml:"addrs"`
	Ports  []cfRouterPort  `yaml:"ports"`
	Routes []cfRouterRoute `yaml:"routes"`
}

type cfRouterPort struct {
	Name  string     `yaml:"name"`
	Reach []cfPrefix `yaml:"reach"`
	Link  cfPort     `yaml:"link"`
}

type cfRouterRoute struct {
	Dst     cfPrefix `yaml:"dst"`
	NextHop cfAddr   `yaml:"nextHop"`
	Port    string   `yaml:"port"`
}

type cfLB struct {
	Name         string     `yaml:"name"`
	FrontendLink cfPort     `yaml:"frontendLink"`
	BackendLink  cfPort     `yaml:"backendLink"`
	Rules        []cfLBRule `yaml:"rules"`
}

type cfLBRule struct {
	Frontend    cfAddrPort  `yaml:"frontend"`
	Proto       string      `yaml:"proto"`
	BackendPort uint16      `yaml:"backendPort"`
	FloatingIP  bool        `yaml:"floatingIP"`
	ProbePort   int         `yaml:"probePort"`
	Backends    []cfBackend `yaml:"backends"`
}

// cfBackend is a backend node; its health probe is kube-proxy's
// health-check server for Service (namespace/name) on that node, or a
// fixed answer (healthy: false is a 503).
type cfBackend struct {
	Node    string `yaml:"node"`
	Addr    cfAddr `yaml:"addr"`
	Service string `yaml:"service"`
	Healthy *bool  `yaml:"healthy"`
}

type cfGateway struct {
	Name        string     `yaml:"name"`
	Public      cfAddr     `yaml:"public"`
	Inside      []cfPrefix `yaml:"inside"`
	InsideLink  cfPort     `yaml:"insideLink"`
	OutsideLink cfPort     `yaml:"outsideLink"`
}

// cfLink is a link between two ports: [DEVICE/PORT, DEVICE/PORT].
type cfLink [2]cfPort

// Scalars that check themselves where they are read, naming the line.

type cfAddr struct{ netip.Addr }

func (a *cfAddr) UnmarshalYAML(n *yaml.Node) error {
	v, err := netip.ParseAddr(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return lineErr(n, "bad address %q: expected an IP address", n.Value)
	}
	a.Addr = v
	return nil
}

type cfPrefix struct{ netip.Prefix }

func (p *cfPrefix) UnmarshalYAML(n *yaml.Node) error {
	v, err := parseAddrPrefix(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return lineErr(n, "bad prefix %q: expected ADDRESS/LENGTH", n.Value)
	}
	p.Prefix = v
	return nil
}

type cfAddrPort struct{ netip.AddrPort }

func (a *cfAddrPort) UnmarshalYAML(n *yaml.Node) error {
	v, err := netip.ParseAddrPort(n.Value)
	if err != nil || n.Kind != yaml.ScalarNode {
		return lineErr(n, "bad address and port %q: expected IP:PORT", n.Value)
	}
	a.AddrPort = v
	return nil
}

// cfPort is "DEVICE/PORT".
type cfPort struct {
	Device, Port string
	line         int
}

func (p *cfPort) UnmarshalYAML(n *yaml.Node) error {
	d, port, ok := strings.Cut(n.Value, "/")
	if n.Kind != yaml.ScalarNode || !ok || d == "" || port == "" {
		return lineErr(n, "bad port %q: expected DEVICE/PORT, e.g. node1/eth0", n.Value)
	}
	p.Device, p.Port, p.line = d, port, n.Line
	return nil
}

func (p cfPort) set() bool { return p.Device != "" }

func (p cfPort) String() string { return p.Device + "/" + p.Port }

// cfError is an error at a line of the file.
type cfError struct {
	line int
	msg  string
}

func (e *cfError) Error() string { return "line " + strconv.Itoa(e.line) + ": " + e.msg }

func lineErr(n *yaml.Node, format string, a ...any) error {
	return &cfError{line: n.Line, msg: fmt.Sprintf(format, a...)}
}

// parseClusterFile decodes the file; unknown fields, wrong types and bad
// scalars are refused with their line.
func parseClusterFile(data []byte) (*clusterFile, *yaml.Node, error) {
	if !utf8.Valid(data) {
		for i, line := range bytes.SplitAfter(data, []byte("\n")) {
			if !utf8.Valid(line) {
				return nil, nil, &cfError{line: i + 1, msg: "invalid UTF-8: expected YAML or JSON text"}
			}
		}
	}
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return nil, nil, placeErr(data, yamlErr(err))
	}
	if root.Kind == 0 {
		return nil, nil, &cfError{line: 1, msg: "empty cluster file: expected nodes, pods, routers, ..."}
	}
	var f clusterFile
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return nil, nil, placeErr(data, yamlErr(err))
	}
	return &f, &root, nil
}

// yamlTypeName is the Go type in the YAML library's messages.
var yamlTypeName = regexp.MustCompile(`field (\S+) not found in type \S+`)

// yamlErr turns the YAML library's errors into "line N: ...".
func yamlErr(err error) error {
	var ce *cfError
	if errors.As(err, &ce) {
		return ce
	}
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg := yamlTypeName.ReplaceAllString(te.Errors[0], "unknown field \"$1\"")
		if rest, ok := strings.CutPrefix(msg, "line "); ok {
			if num, text, ok := strings.Cut(rest, ": "); ok {
				if n, err := strconv.Atoi(num); err == nil {
					return &cfError{line: n, msg: text}
				}
			}
		}
		return errors.New(msg)
	}
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if num, text, ok := strings.Cut(rest, ": "); ok {
			if n, err := strconv.Atoi(num); err == nil {
				return &cfError{line: n, msg: text}
			}
		}
	}
	return errors.New(msg)
}

// placeErr gives a line to the YAML library's errors that name none: the
// first line with a control character for those, the last line for an
// input that ends too early, else the first line.
func placeErr(data []byte, err error) error {
	var ce *cfError
	if errors.As(err, &ce) {
		return err
	}
	lines := bytes.SplitAfter(data, []byte("\n"))
	line := 1
	switch msg := err.Error(); {
	case strings.Contains(msg, "end of stream"):
		line = max(len(lines), 1)
		if len(lines) > 1 && len(lines[len(lines)-1]) == 0 {
			line--
		}
	case strings.Contains(msg, "control characters"):
		for i, l := range lines {
			if bytes.ContainsFunc(l, func(r rune) bool { return r < 0x20 && r != '\t' && r != '\n' && r != '\r' || r == 0x7f }) {
				line = i + 1
				break
			}
		}
	}
	return &cfError{line: line, msg: err.Error()}
}

// lineOf finds the line of a field of the file: keys name mapping
// fields, ints sequence items ("nodes", 1, "routes", 0).
func lineOf(root *yaml.Node, path ...any) int {
	n := root
	if n != nil && n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 1
	if n != nil {
		line = n.Line
	}
	for _, p := range path {
		if n == nil {
			break
		}
		switch k := p.(type) {
		case string:
			var next *yaml.Node
			if n.Kind == yaml.MappingNode {
				for i := 0; i+1 < len(n.Content); i += 2 {
					if n.Content[i].Value == k {
						next = n.Content[i+1]
						line = n.Content[i].Line
					}
				}
			}
			n = next
		case int:
			if n.Kind != yaml.SequenceNode || k >= len(n.Content) {
				return line
			}
			n = n.Content[k]
			line = n.Line
		}
	}
	return line
}

// pathText prints a field path as "nodes[1].routes[0]".
func pathText(path ...any) string {
	var b strings.Builder
	for _, p := range path {
		switch k := p.(type) {
		case string:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(k)
		case int:
			fmt.Fprintf(&b, "[%d]", k)
		}
	}
	return b.String()
}

// fieldErr is an error about a field, at its line.
func fieldErr(root *yaml.Node, err error, path ...any) error {
	return &cfError{line: lineOf(root, path...), msg: pathText(path...) + ": " + err.Error()}
}

// relPath resolves a file named in the cluster file against its directory.
func relPath(dir, p string) string {
	if p == "" || p == "-" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}
