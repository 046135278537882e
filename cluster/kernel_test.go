package cluster_test

import (
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
)

// twoNodeServices is a UDP ClusterIP Service whose only endpoint is pod B
// on node2, so that the path pod A → node1 → node2 → pod B is the only
// one and the kernel takes it on the first try, and a UDP NodePort
// Service with externalTrafficPolicy Local and the same endpoint.
var twoNodeServices = fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: dns, namespace: default}
spec:
  type: ClusterIP
  clusterIP: %s
  ports:
  - {name: dns, protocol: UDP, port: 53, targetPort: 5353}
  - {name: web, protocol: TCP, port: 80, targetPort: 8080}
  - {name: rej, protocol: UDP, port: 54, targetPort: 5454}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: dns-1
  namespace: default
  labels: {kubernetes.io/service-name: dns}
addressType: IPv4
ports:
- {name: dns, protocol: UDP, port: 5353}
- {name: web, protocol: TCP, port: 8080}
- {name: rej, protocol: UDP, port: 5454}
endpoints:
- addresses: [%[2]s]
  nodeName: node2
  conditions: {ready: true}
---
apiVersion: v1
kind: Service
metadata: {name: local, namespace: default}
spec:
  type: NodePort
  clusterIP: 10.0.0.30
  externalTrafficPolicy: Local
  ports:
  - {protocol: UDP, port: 53, targetPort: 5353, nodePort: %[3]d}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: local-1
  namespace: default
  labels: {kubernetes.io/service-name: local}
addressType: IPv4
ports:
- {name: "", protocol: UDP, port: 5353}
endpoints:
- addresses: [%[2]s]
  nodeName: node2
  conditions: {ready: true}
`, clusterIP, podB, localNodePort)

// localNodePort is the eTP Local NodePort; outsider is a client outside
// the cluster on the nodes' segment.
const (
	localNodePort = 30053
	outsider      = "10.240.0.100"
)

// vxlanRules count the outer packets of the overlay on each node, and
// the inner ones on the VXLAN device.
var vxlanRules = []string{
	`-A OUTPUT -o eth0 -p udp --dport 4789 -m comment --comment "vxlan out"`,
	`-A INPUT -i eth0 -p udp --dport 4789 -m comment --comment "vxlan in"`,
	`-A FORWARD -o vx1 -m comment --comment "into the overlay"`,
	`-A FORWARD -i vx1 -m comment --comment "out of the overlay"`,
}

// vxlanSrcPort is the one outer source port (srcport 40000 40001), so
// that conntrack's entries of the outer flow are the same in both.
const vxlanSrcPort = 40000

// bridgedRule counts on node1 the frames its bridge forwards between two
// of its ports (kubenet's pods on one node).
const bridgedRule = `-A FORWARD -m physdev --physdev-is-bridged -m comment --comment "bridged between pods"`

// podRules are the pods' own rules: pod B rejects TCP port 8080 with a
// reset and UDP port 5454 with an ICMP port unreachable; pod A counts the
// RELATED packets it receives, as each node counts those it forwards
// (relatedRule, first in FORWARD, before kube-proxy's ACCEPT of them).
var podRules = map[string][]string{
	"pod-a": {"-A INPUT " + relatedRule},
	"pod-b": {
		"-A INPUT -p tcp --dport 8080 -j REJECT --reject-with tcp-reset",
		"-A INPUT -p udp --dport 5454 -j REJECT",
	},
}

// twoNodeModel is the kernel test's network: pod A and pod C on node1's
// cbr0, pod B on node2's, the nodes' eth0 linked directly, each routing
// the other's pod CIDR through the other's address.
//
// With vxlan the nodes reach each other's pod CIDR through a VXLAN device
// vx1, as Flannel does: a route via the other node's vx1 address, onlink.
func twoNodeModel(t *testing.T, vxlan bool) (*cluster.Network, map[string]string) {
	t.Helper()
	n := cluster.New(cluster.Config{})
	docs := map[string]string{}
	for _, nd := range []struct{ name, ip, bridgeIP, other, otherCIDR, vtep, otherVtep string }{
		{"node1", node1IP, "10.244.0.1", node2IP, "10.244.1.0/24", "10.244.0.0", "10.244.1.0"},
		{"node2", node2IP, "10.244.1.1", node1IP, "10.244.0.0/24", "10.244.1.0", "10.244.0.0"},
	} {
		h := netfilter.NewHost(netfilter.HostConfig{})
		h.Tracing = true
		require.NoError(t, h.AddInterface("eth0", mp(nd.ip+"/24")))
		require.NoError(t, h.AddInterface("cbr0", netip.PrefixFrom(ma(nd.bridgeIP), 24)))
		if vxlan {
			require.NoError(t, h.AddInterface("vx1", netip.PrefixFrom(ma(nd.vtep), 32)))
			require.NoError(t, h.AddRoute(netfilter.Route{Dst: mp(nd.otherCIDR), Iface: "vx1", Gateway: ma(nd.otherVtep)}))
		} else {
			require.NoError(t, h.AddRoute(netfilter.Route{Dst: mp(nd.otherCIDR), Iface: "eth0", Gateway: ma(nd.other)}))
		}
		doc, err := kubeproxy.GenerateFromYAML(proxyConfig(nd.name), []byte(twoNodeServices))
		require.NoError(t, err)
		require.NoError(t, kubeproxy.Install(h, doc))
		require.NoError(t, h.Exec(bridgedRule))
		require.NoError(t, h.Exec("-I FORWARD "+relatedRule))
		for _, r := range vxlanRules {
			require.NoError(t, h.Exec(r))
		}
		var save strings.Builder
		require.NoError(t, h.Ruleset(netfilter.IPv4).Save(&save, netfilter.SaveOptions{}))
		docs[nd.name] = save.String()
		require.NoError(t, n.AddHost(nd.name, h))
		require.NoError(t, n.AddBridge(nd.name, "cbr0"))
		if vxlan {
			require.NoError(t, n.AddTunnel(nd.name, "vx1", cluster.Tunnel{Kind: cluster.VXLAN, Local: ma(nd.ip),
				Remotes: map[netip.Addr]netip.Addr{ma(nd.otherVtep): ma(nd.other)}, SrcPortMin: vxlanSrcPort, SrcPortMax: vxlanSrcPort + 1}))
		}
	}
	// The nodes and an outside client share a switch (a bridge in the
	// lab, whose frames cross no iptables: its namespace has no rules).
	sw, err := n.AddRouter("switch")
	require.NoError(t, err)
	c := netfilter.NewHost(netfilter.HostConfig{})
	c.Tracing = true
	require.NoError(t, c.AddInterface("eth0", mp(outsider+"/24")))
	require.NoError(t, n.AddHost("client", c))
	for _, m := range []struct{ name, ip string }{{"node1", node1IP}, {"node2", node2IP}, {"client", outsider}} {
		require.NoError(t, sw.AddPort(m.name, mp(m.ip+"/32")))
		require.NoError(t, n.Link(cluster.Port{Device: m.name, Iface: "eth0"}, cluster.Port{Device: "switch", Iface: m.name}))
	}
	for _, p := range []struct{ name, node, port, addr, gw string }{
		{"pod-a", "node1", "veth-a", podA, "10.244.0.1"},
		{"pod-c", "node1", "veth-c", podC, "10.244.0.1"},
		{"pod-b", "node2", "veth-b", podB, "10.244.1.1"},
	} {
		h, err := n.AddPod(p.name, cluster.Pod{Addr: netip.PrefixFrom(ma(p.addr), 24), Gateway: ma(p.gw)})
		require.NoError(t, err)
		for _, r := range podRules[p.name] {
			require.NoError(t, h.Exec(r))
		}
		if len(podRules[p.name]) > 0 {
			var save strings.Builder
			require.NoError(t, h.Ruleset(netfilter.IPv4).Save(&save, netfilter.SaveOptions{}))
			docs[p.name] = save.String()
		}
		require.NoError(t, n.AddBridgePort(p.node, "cbr0", p.port))
		require.NoError(t, n.Link(cluster.Port{Device: p.node, Iface: p.port}, cluster.Port{Device: p.name, Iface: "eth0"}))
	}
	return n, docs
}

// lab is the same network in namespaces.
type lab struct {
	ns map[string]*kerneltest.NS
}

func ipBatch(t *testing.T, ns *kerneltest.NS, lines ...string) {
	t.Helper()
	_, stderr, err := ns.Exec(strings.Join(lines, "\n")+"\n", "ip", "-batch", "-")
	require.NoError(t, err, stderr)
}

func newLab(t *testing.T, docs map[string]string, vxlan bool) *lab {
	t.Helper()
	l := &lab{ns: map[string]*kerneltest.NS{}}
	for _, name := range []string{"node1", "node2", "pod-a", "pod-b", "pod-c", "client", "switch"} {
		l.ns[name] = kerneltest.NewNS(t, "pw-i17-"+name+"-")
	}
	n1, n2 := l.ns["node1"], l.ns["node2"]
	ipBatch(t, l.ns["switch"], "link set lo up", "link add br0 type bridge mcast_snooping 0", "link set br0 up",
		"link add p1 type veth peer name eth0 netns "+n1.Name(),
		"link add p2 type veth peer name eth0 netns "+n2.Name(),
		"link add p3 type veth peer name eth0 netns "+l.ns["client"].Name(),
		"link set p1 master br0", "link set p2 master br0", "link set p3 master br0",
		"link set p1 up", "link set p2 up", "link set p3 up")
	ipBatch(t, l.ns["client"], "link set lo up", "address add "+outsider+"/24 dev eth0", "link set eth0 up")
	ipBatch(t, n1,
		"link set lo up",
		"link add cbr0 type bridge mcast_snooping 0",
		"link add veth-a type veth peer name eth0 netns "+l.ns["pod-a"].Name(),
		"link add veth-c type veth peer name eth0 netns "+l.ns["pod-c"].Name(),
		"link set veth-a master cbr0", "link set veth-c master cbr0",
		"address add "+node1IP+"/24 dev eth0", "address add 10.244.0.1/24 dev cbr0",
		"link set eth0 up", "link set cbr0 up", "link set veth-a up", "link set veth-c up",
	)
	ipBatch(t, n2,
		"link set lo up",
		"link add cbr0 type bridge mcast_snooping 0",
		"link add veth-b type veth peer name eth0 netns "+l.ns["pod-b"].Name(),
		"link set veth-b master cbr0",
		"address add "+node2IP+"/24 dev eth0", "address add 10.244.1.1/24 dev cbr0",
		"link set eth0 up", "link set cbr0 up", "link set veth-b up",
	)
	if vxlan {
		// Flannel's layout: vx1 with the node's VTEP address, a route to
		// the other pod CIDR via the other VTEP, onlink, whose neighbour
		// entry names the other vx1's MAC and the FDB the other node.
		for i, ns := range []*kerneltest.NS{n1, n2} {
			me, other := []string{node1IP, node2IP}[i], []string{node2IP, node1IP}[i]
			vtep, otherVtep := []string{"10.244.0.0", "10.244.1.0"}[i], []string{"10.244.1.0", "10.244.0.0"}[i]
			cidr := []string{"10.244.1.0/24", "10.244.0.0/24"}[i]
			mac, otherMAC := []string{"02:00:00:00:00:01", "02:00:00:00:00:02"}[i], []string{"02:00:00:00:00:02", "02:00:00:00:00:01"}[i]
			ipBatch(t, ns,
				fmt.Sprintf("link add vx1 address %s type vxlan id 1 local %s dstport 4789 srcport %d %d nolearning", mac, me, vxlanSrcPort, vxlanSrcPort+1),
				"address add "+vtep+"/32 dev vx1", "link set vx1 up",
				"route add "+cidr+" via "+otherVtep+" dev vx1 onlink",
				"neigh add "+otherVtep+" lladdr "+otherMAC+" dev vx1 nud permanent")
			_, stderr, err := ns.Exec("", "bridge", "fdb", "append", otherMAC, "dev", "vx1", "dst", other)
			require.NoError(t, err, stderr)
		}
	} else {
		ipBatch(t, n1, "route add 10.244.1.0/24 via "+node2IP+" dev eth0")
		ipBatch(t, n2, "route add 10.244.0.0/24 via "+node1IP+" dev eth0")
	}
	for _, p := range []struct{ name, addr, gw string }{{"pod-a", podA, "10.244.0.1"}, {"pod-b", podB, "10.244.1.1"}, {"pod-c", podC, "10.244.0.1"}} {
		ipBatch(t, l.ns[p.name], "link set lo up", "address add "+p.addr+"/24 dev eth0", "link set eth0 up", "route add default via "+p.gw)
	}
	for _, name := range []string{"node1", "node2", "pod-a", "pod-b", "pod-c", "client", "switch"} {
		require.NoError(t, l.ns[name].Sysctl("net.ipv6.conf.all.disable_ipv6", "1"))
	}
	for _, name := range []string{"node1", "node2"} {
		ns := l.ns[name]
		require.NoError(t, ns.Sysctl("net.ipv4.ip_forward", "1"))
		require.NoError(t, ns.Sysctl("net.bridge.bridge-nf-call-iptables", "1"))
	}
	for name, doc := range docs {
		require.NoError(t, l.ns[name].Restore(doc))
	}
	// Let the links settle, then count from zero.
	time.Sleep(500 * time.Millisecond)
	for name := range docs {
		tables := []string{"filter", "nat", "mangle"}
		if !strings.HasPrefix(name, "node") {
			tables = tables[:1]
		}
		for _, table := range tables {
			_, err := l.ns[name].IPTables("-t", table, "-Z")
			require.NoError(t, err)
		}
	}
	return l
}

// python runs a small UDP program in ns: serve receives one datagram on
// port and answers it; send sends one and waits for the answer. Each
// prints the peer's address, port and the received TTL.
const pyProgram = `
import socket, sys, time
mode, addr, port, n, wait, sport = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.setsockopt(socket.IPPROTO_IP, 12, 1)  # IP_RECVTTL
s.settimeout(wait)
if mode == "serve":
    s.bind((addr, port))
else:
    s.bind(("0.0.0.0", sport))
    time.sleep(0.7)
    s.sendto(b"x" * n, (addr, port))
try:
    data, anc, _, peer = s.recvmsg(2048, 64)
except socket.timeout:
    print("timeout")
    sys.exit(0)
ttl = [int.from_bytes(d[:4], sys.byteorder) for (l, ty, d) in anc if ty == 2]  # IP_TTL
print(peer[0], peer[1], ttl[0] if ttl else -1)
if mode == "serve":
    s.sendto(data, peer)
`

// exchange runs a server in the namespace of to and a client in that of
// from; it returns what each printed.
func (l *lab) exchange(t *testing.T, from, to string, sport int, dst string, dport int, sAddr string, sPort, payload int) (server, client string) {
	t.Helper()
	var wg sync.WaitGroup
	var serr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		server, _, serr = l.ns[to].Exec(pyProgram, "python3", "-", "serve", sAddr, fmt.Sprint(sPort), "0", "5", "0")
	}()
	client, stderr, err := l.ns[from].Exec(pyProgram, "python3", "-", "send", dst, fmt.Sprint(dport), fmt.Sprint(payload), "5", fmt.Sprint(sport))
	wg.Wait()
	require.NoError(t, serr)
	require.NoError(t, err, stderr)
	return strings.TrimSpace(server), strings.TrimSpace(client)
}

// send sends one datagram from the namespace of from and waits a second
// for an answer that should not come; it returns what the client printed.
func (l *lab) send(t *testing.T, from string, sport int, dst string, dport, payload int) string {
	t.Helper()
	out, stderr, err := l.ns[from].Exec(pyProgram, "python3", "-", "send", dst, fmt.Sprint(dport), fmt.Sprint(payload), "1", fmt.Sprint(sport))
	require.NoError(t, err, stderr)
	return strings.TrimSpace(out)
}

var ctTimeout = regexp.MustCompile(`^(\S+\s+\d+\s+)\d+ `)

func conntrackLines(text string) []string {
	var out []string
	for line := range strings.Lines(text) {
		if line = strings.TrimSpace(line); line != "" {
			out = append(out, ctTimeout.ReplaceAllString(line, "${1}T "))
		}
	}
	slices.Sort(out)
	return out
}

// TestKernelTwoNodes sends, in namespaces and in the model, a UDP
// datagram from pod A to a ClusterIP whose endpoint is pod B on the other
// node (pod → bridge → node1 → route → node2 → bridge → pod) and pod B's
// answer, then one from pod A to pod C on the same bridge (bridged
// through node1's iptables), and compares at every hop: the addresses and
// TTL each pod receives, each node's conntrack entries, and every rule's
// and policy's counters of each node. Then it sends datagrams from a
// client outside the cluster to an externalTrafficPolicy Local NodePort
// of each node: node1, without an endpoint, drops it; node2 keeps the
// client's address. The vxlan case routes between the
// nodes through a VXLAN overlay instead (IP-in-IP is not in this
// kernel), whose outer packets cross both nodes' iptables.
func TestKernelTwoNodes(t *testing.T) {
	kerneltest.Require(t)
	t.Run("routed", func(t *testing.T) { kernelTwoNodes(t, false) })
	t.Run("vxlan", func(t *testing.T) { kernelTwoNodes(t, true) })
}

func kernelTwoNodes(t *testing.T, vxlan bool) {
	n, docs := twoNodeModel(t, vxlan)
	l := newLab(t, docs, vxlan)
	const payload = 20
	udp := func(src, dst string) netfilter.Packet {
		p := netfilter.UDP(netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst))
		p.Length += payload
		return p
	}

	// Model: the walk there and back.
	w, err := n.Send("pod-a", udp(podA+":40000", clusterIP+":53"))
	require.NoError(t, err)
	require.Equal(t, cluster.Delivered, w.Fate, route(w))
	var devs []string
	for _, h := range w.Hops {
		devs = append(devs, fmt.Sprintf("%s[%s>%s] %s:%d→%s:%d ttl %d", h.Device, h.In, h.Out, h.Packet.Src, h.Packet.SrcPort, h.Packet.Dst, h.Packet.DstPort, h.Packet.TTL))
	}
	want := []string{
		"pod-a[>eth0] 10.244.0.5:40000→10.0.0.10:53 ttl 64",
		"node1[veth-a>eth0] 10.244.0.5:40000→10.0.0.10:53 ttl 64",
		"switch[node1>node2] 10.244.0.5:40000→10.244.1.6:5353 ttl 63",
		"node2[eth0>veth-b] 10.244.0.5:40000→10.244.1.6:5353 ttl 63",
		"pod-b[eth0>] 10.244.0.5:40000→10.244.1.6:5353 ttl 62",
	}
	if vxlan {
		want = []string{
			"pod-a[>eth0] 10.244.0.5:40000→10.0.0.10:53 ttl 64",
			"node1[veth-a>vx1] 10.244.0.5:40000→10.0.0.10:53 ttl 64",
			"node1[>eth0] 10.240.0.4:40000→10.240.0.5:4789 ttl 64",
			"switch[node1>node2] 10.240.0.4:40000→10.240.0.5:4789 ttl 64",
			"node2[eth0>] 10.240.0.4:40000→10.240.0.5:4789 ttl 64",
			"node2[vx1>veth-b] 10.244.0.5:40000→10.244.1.6:5353 ttl 63",
			"pod-b[eth0>] 10.244.0.5:40000→10.244.1.6:5353 ttl 62",
		}
	}
	assert.Equal(t, want, devs)
	back, err := n.Reply(w, 0)
	require.NoError(t, err)
	require.Equal(t, cluster.Delivered, back.Fate, route(back))
	bridged, err := n.Send("pod-a", udp(podA+":40000", podC+":7000"))
	require.NoError(t, err)
	require.Equal(t, cluster.Delivered, bridged.Fate, route(bridged))
	bback, err := n.Reply(bridged, 0)
	require.NoError(t, err)
	require.Equal(t, "pod-a", bback.Last().Device)

	// Kernel: the same datagrams.
	srv, cli := l.exchange(t, "pod-a", "pod-b", 40000, clusterIP, 53, podB, 5353, payload)
	at := w.Last().Packet
	assert.Equal(t, fmt.Sprintf("%s %d %d", at.Src, at.SrcPort, at.TTL), srv, "what pod B received")
	rb := back.Last().Packet
	assert.Equal(t, fmt.Sprintf("%s %d %d", rb.Src, rb.SrcPort, rb.TTL), cli, "what pod A received back")
	srv, cli = l.exchange(t, "pod-a", "pod-c", 40000, podC, 7000, podC, 7000, payload)
	at = bridged.Last().Packet
	assert.Equal(t, fmt.Sprintf("%s %d %d", at.Src, at.SrcPort, at.TTL), srv, "what pod C received")
	rb = bback.Last().Packet
	assert.Equal(t, fmt.Sprintf("%s %d %d", rb.Src, rb.SrcPort, rb.TTL), cli, "what pod A received back from pod C")

	// externalTrafficPolicy Local from outside: node1, without an
	// endpoint, drops the datagram; node2 delivers it to pod B with the
	// client's address, and the answer goes back from the NodePort.
	dropped, err := n.Send("client", udp(outsider+":41000", fmt.Sprintf("%s:%d", node1IP, localNodePort)))
	require.NoError(t, err)
	require.Equal(t, cluster.Dropped, dropped.Fate, route(dropped))
	assert.Equal(t, "node1", dropped.Last().Device, "the node without a local endpoint drops")
	assert.Equal(t, "DROP dropped on node1 (INPUT filter KUBE-EXTERNAL-SERVICES #1)", dropped.Reason)
	local, err := n.Send("client", udp(outsider+":41001", fmt.Sprintf("%s:%d", node2IP, localNodePort)))
	require.NoError(t, err)
	require.Equal(t, cluster.Delivered, local.Fate, route(local))
	assert.Equal(t, outsider, local.Last().Packet.Src.String(), "the client's address is kept")
	lback, err := n.Reply(local, 0)
	require.NoError(t, err)
	require.Equal(t, "client", lback.Last().Device, route(lback))

	// Kernel: the same datagrams.
	assert.Equal(t, "timeout", l.send(t, "client", 41000, node1IP, localNodePort, payload), "node1 drops")
	srv, cli = l.exchange(t, "client", "pod-b", 41001, node2IP, localNodePort, podB, 5353, payload)
	at = local.Last().Packet
	assert.Equal(t, fmt.Sprintf("%s %d %d", at.Src, at.SrcPort, at.TTL), srv, "what pod B received from outside")
	rb = lback.Last().Packet
	assert.Equal(t, fmt.Sprintf("%s %d %d", rb.Src, rb.SrcPort, rb.TTL), cli, "what the client received back")

	for _, node := range []string{"node1", "node2"} {
		h := n.Host(node)
		ns := l.ns[node]
		kct, _, err := ns.Exec("", "conntrack", "-L")
		require.NoError(t, err)
		var sim strings.Builder
		for _, e := range h.Conntrack().Entries() {
			sim.Write(e.AppendText(nil, h.Clock().Now(), conntrack.Format{}))
			sim.WriteString("\n")
		}
		assert.Equal(t, conntrackLines(kct), conntrackLines(sim.String()), "%s: conntrack -L", node)
		for _, table := range []string{"filter", "nat"} {
			ks, err := ns.Save("-c", "-t", table)
			require.NoError(t, err)
			tid := netfilter.Filter
			if table == "nat" {
				tid = netfilter.NAT
			}
			ms := h.Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{Counters: true})
			assert.Equal(t, ks, tableSave(string(ms), tid), "%s: iptables-save -c -t %s", node, table)
		}
		t.Logf("%s conntrack:\n%s", node, kct)
	}
	// The counters compared above are not all zero: node1's bridge
	// forwarded the datagram to pod C, and node1 DNATed
	// the datagram to the ClusterIP (48 bytes: 28 of headers, 20 of data).
	save := string(n.Host("node1").Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{Counters: true}))
	assert.Contains(t, save, "[1:48] "+bridgedRule, "the answer is accepted before, by KUBE-FORWARD")
	if vxlan {
		// The datagram and its answer crossed the overlay: 48 bytes
		// inside, 98 outside (IP, UDP, VXLAN and Ethernet headers);
		// the answer out of it was accepted by KUBE-FORWARD first.
		for _, r := range []string{
			`[1:98] -A OUTPUT -o eth0 -p udp -m udp --dport 4789 -m comment --comment "vxlan out"`,
			`[1:98] -A INPUT -i eth0 -p udp -m udp --dport 4789 -m comment --comment "vxlan in"`,
			`[1:48] -A FORWARD -o vx1 -m comment --comment "into the overlay"`,
			`[0:0] -A FORWARD -i vx1 -m comment --comment "out of the overlay"`,
		} {
			assert.Contains(t, save, r)
		}
	}
}

// tableSave cuts one table's part out of an iptables-save text.
func tableSave(save string, table netfilter.TableID) string {
	start := strings.Index(save, "*"+table.String()+"\n")
	if start < 0 {
		return ""
	}
	end := strings.Index(save[start:], "COMMIT\n")
	return save[start : start+end+len("COMMIT\n")]
}

// rejectedProgram runs in pod A: it connects to the ClusterIP's TCP port
// 80 from port 40001 and sends a datagram to its UDP port 54 from port
// 40002 (pod B rejects both), expects each to be refused, and prints the
// IPv4 packets eth0 received meanwhile: for TCP the addresses, ports,
// flags and TTL; for ICMP the addresses, type, code, TTL and the header
// it quotes.
const rejectedProgram = `
import socket, struct, sys
ip = sys.argv[1]
cap = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
cap.bind(("eth0", 0x0800))
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
t.bind(("0.0.0.0", 40001))
t.settimeout(3)
try:
    t.connect((ip, 80)); print("tcp connected")
except ConnectionRefusedError:
    pass
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
u.bind(("0.0.0.0", 40002))
u.settimeout(3)
u.connect((ip, 54))
u.send(b"")
try:
    u.recv(10); print("udp answered")
except ConnectionRefusedError:
    pass
cap.setblocking(False)
def addr(b): return socket.inet_ntoa(b)
while True:
    try:
        pkt, a = cap.recvfrom(2048)
    except BlockingIOError:
        break
    if a[2] == 4:  # PACKET_OUTGOING
        continue
    hl = (pkt[0] & 15) * 4
    ttl, proto, src, dst = pkt[8], pkt[9], addr(pkt[12:16]), addr(pkt[16:20])
    l4 = pkt[hl:]
    if proto == 6:
        sp, dp = struct.unpack("!HH", l4[:4])
        fl = l4[13]
        print("tcp %s:%d→%s:%d flags %#x ttl %d len %d" % (src, sp, dst, dp, fl, ttl, len(pkt)))
    elif proto == 1:
        q = l4[8:]
        qhl = (q[0] & 15) * 4
        qsp, qdp = struct.unpack("!HH", q[qhl:qhl+4])
        print("icmp %s→%s %d/%d ttl %d len %d [%d %s:%d→%s:%d]" % (src, dst, l4[0], l4[1], ttl, len(pkt), q[9], addr(q[12:16]), qsp, addr(q[16:20]), qdp))
`

// received is what rejectedProgram prints of packet p.
func received(p netfilter.Packet) string {
	if p.Proto == inet.TCP {
		return fmt.Sprintf("tcp %s:%d→%s:%d flags %#x ttl %d len %d", p.Src, p.SrcPort, p.Dst, p.DstPort, uint8(p.TCPFlags), p.TTL, p.Length)
	}
	in := p.Inner
	return fmt.Sprintf("icmp %s→%s %d/%d ttl %d len %d [%d %s:%d→%s:%d]", p.Src, p.Dst, p.ICMPType, p.ICMPCode, p.TTL, p.Length, in.Proto, in.Src, in.SrcPort, in.Dst, in.DstPort)
}

// TestKernelEmitted follows, in namespaces and in the model, what pod B on
// node2 answers when it rejects pod A's connections through a ClusterIP
// (pod A on node1): a TCP reset, and an ICMP port unreachable for a
// datagram. Each walks back pod B → node2 → node1 → pod A; node1's
// conntrack turns the reset's source back into the ClusterIP, and relates
// the ICMP error to the datagram's connection (as node2 and pod A do),
// translating its source and the quoted destination. Compared: what pod
// A receives (addresses, ports, flags, TTL, length, the quoted header),
// each node's conntrack entries, and the rules' counters of the nodes
// and the pods.
func TestKernelEmitted(t *testing.T) {
	kerneltest.Require(t)
	n, docs := twoNodeModel(t, false)
	l := newLab(t, docs, false)

	syn := netfilter.TCP(netip.MustParseAddrPort(podA+":40001"), netip.MustParseAddrPort(clusterIP+":80"), inet.SYN)
	syn.Length, syn.TCPHeaderLen = 60, 40 // Linux's SYN options: MSS, SACK, timestamps, window scale
	udp := netfilter.UDP(netip.MustParseAddrPort(podA+":40002"), netip.MustParseAddrPort(clusterIP+":54"))
	var want []string
	for _, p := range []netfilter.Packet{syn, udp} {
		w, err := n.Send("pod-a", p)
		require.NoError(t, err)
		require.Equal(t, cluster.Dropped, w.Fate, route(w))
		require.Equal(t, "pod-b", w.Last().Device, route(w))
		require.Len(t, w.Emitted, 1)
		e := w.Emitted[0]
		require.Equal(t, cluster.Delivered, e.Fate, route(e))
		require.Equal(t, []string{"pod-b", "node2", "switch", "node1", "pod-a"}, devices(e))
		want = append(want, received(e.Last().Packet))
	}
	// What the model says pod A receives, written out: the reset from
	// the ClusterIP, the error from it quoting the datagram as pod A
	// sent it.
	assert.Equal(t, []string{
		"tcp 10.0.0.10:80→10.244.0.5:40001 flags 0x14 ttl 62 len 40",
		"icmp 10.0.0.10→10.244.0.5 3/3 ttl 62 len 56 [17 10.244.0.5:40002→10.0.0.10:54]",
	}, want)

	out, stderr, err := l.ns["pod-a"].Exec(rejectedProgram, "python3", "-", clusterIP)
	require.NoError(t, err, stderr)
	assert.Equal(t, want, strings.Split(strings.TrimSpace(out), "\n"), "what pod A received")

	for _, name := range []string{"node1", "node2", "pod-a", "pod-b"} {
		h := n.Host(name)
		ns := l.ns[name]
		if strings.HasPrefix(name, "node") {
			kct, _, err := ns.Exec("", "conntrack", "-L")
			require.NoError(t, err)
			var sim strings.Builder
			for _, e := range h.Conntrack().Entries() {
				sim.Write(e.AppendText(nil, h.Clock().Now(), conntrack.Format{}))
				sim.WriteString("\n")
			}
			assert.Equal(t, conntrackLines(kct), conntrackLines(sim.String()), "%s: conntrack -L", name)
			t.Logf("%s conntrack:\n%s", name, kct)
		}
		tables := map[string]netfilter.TableID{"filter": netfilter.Filter, "nat": netfilter.NAT}
		if !strings.HasPrefix(name, "node") {
			delete(tables, "nat")
		}
		for table, tid := range tables {
			ks, err := ns.Save("-c", "-t", table)
			require.NoError(t, err)
			ms := h.Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{Counters: true})
			assert.Equal(t, ks, tableSave(string(ms), tid), "%s: iptables-save -c -t %s", name, table)
		}
	}
	// The counters compared are not zero: node1 and node2 forwarded the
	// ICMP error (56 bytes) as RELATED, and pod A received it so.
	for _, name := range []string{"node1", "node2", "pod-a"} {
		save := string(n.Host(name).Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{Counters: true}))
		assert.Contains(t, save, "[1:56] -A ", name)
		assert.Regexp(t, `\[1:56\] -A (FORWARD|INPUT) -m conntrack --ctstate RELATED -m comment --comment related`, save, name)
	}
}
