package cluster_test

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
)

// tracerouteProgram runs in the client: it sends an empty datagram with
// TTL 1 from port 33434 and one with TTL 2 from port 33435 to the server,
// and prints the ICMP messages eth0 received (as rejectedProgram does).
const tracerouteProgram = `
import socket, struct, sys, time
cap = socket.socket(socket.AF_PACKET, socket.SOCK_DGRAM, socket.htons(0x0800))
cap.bind(("eth0", 0x0800))
for ttl in (1, 2):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    u.bind(("0.0.0.0", 33433 + ttl))
    u.setsockopt(socket.IPPROTO_IP, socket.IP_TTL, ttl)
    u.sendto(b"", (sys.argv[1], 33434))
    time.sleep(0.3)
cap.setblocking(False)
def addr(b): return socket.inet_ntoa(b)
while True:
    try:
        pkt, a = cap.recvfrom(2048)
    except BlockingIOError:
        break
    if a[2] == 4 or pkt[9] != 1:
        continue
    hl = (pkt[0] & 15) * 4
    l4 = pkt[hl:]
    q = l4[8:]
    qhl = (q[0] & 15) * 4
    qsp, qdp = struct.unpack("!HH", q[qhl:qhl+4])
    print("icmp %s→%s %d/%d ttl %d len %d [%d %s:%d→%s:%d]" % (addr(pkt[12:16]), addr(pkt[16:20]), l4[0], l4[1], pkt[8], len(pkt), q[9], addr(q[12:16]), qsp, addr(q[16:20]), qdp))
`

// TestKernelLinuxRouters sends traceroute's first two datagrams through
// the chain client — r1 — r2 — server in namespaces and in the model:
// r1 (TTL 1) and r2 (TTL 2, after r1's MASQUERADE) answer with ICMP time
// exceeded, r1 relating the second to its masqueraded datagram. Compared:
// what the client receives (sources, quoted headers, TTL, length), r1's
// conntrack and every rule's counters of r1 and the client.
func TestKernelLinuxRouters(t *testing.T) {
	kerneltest.Require(t)
	n, err := routerChain()
	require.NoError(t, err)
	require.NoError(t, n.Host("r1").Exec("-I FORWARD "+relatedRule))
	require.NoError(t, n.Host("client").Exec("-I INPUT "+relatedRule))

	ns := map[string]*kerneltest.NS{}
	for _, name := range []string{"client", "r1", "r2", "server"} {
		ns[name] = kerneltest.NewNS(t, "pw-i17-"+name+"-")
	}
	ipBatch(t, ns["client"], "link add eth0 type veth peer name eth0 netns "+ns["r1"].Name())
	ipBatch(t, ns["r1"], "link add eth1 type veth peer name eth0 netns "+ns["r2"].Name())
	ipBatch(t, ns["r2"], "link add eth1 type veth peer name eth0 netns "+ns["server"].Name())
	ipBatch(t, ns["client"], "link set lo up", "address add 10.1.0.2/24 dev eth0", "link set eth0 up", "route add default via 10.1.0.1")
	ipBatch(t, ns["r1"], "link set lo up", "address add 10.1.0.1/24 dev eth0", "address add 10.2.0.1/24 dev eth1",
		"link set eth0 up", "link set eth1 up", "route add 10.3.0.0/24 via 10.2.0.2 dev eth1")
	ipBatch(t, ns["r2"], "link set lo up", "address add 10.2.0.2/24 dev eth0", "address add 10.3.0.1/24 dev eth1", "link set eth0 up", "link set eth1 up")
	ipBatch(t, ns["server"], "link set lo up", "address add 10.3.0.2/24 dev eth0", "link set eth0 up", "route add default via 10.3.0.1")
	for name, h := range ns {
		require.NoError(t, h.Sysctl("net.ipv6.conf.all.disable_ipv6", "1"))
		if name == "r1" || name == "r2" {
			require.NoError(t, h.Sysctl("net.ipv4.ip_forward", "1"))
		}
	}
	for _, name := range []string{"client", "r1"} {
		var save strings.Builder
		require.NoError(t, n.Host(name).Ruleset(netfilter.IPv4).Save(&save, netfilter.SaveOptions{}))
		require.NoError(t, ns[name].Restore(save.String()))
	}
	time.Sleep(500 * time.Millisecond)
	// The client has a filter table only (-t nat -Z would make one).
	tables := map[string][]string{"client": {"filter"}, "r1": {"filter", "nat"}}
	for name, ts := range tables {
		for _, table := range ts {
			_, err := ns[name].IPTables("-t", table, "-Z")
			require.NoError(t, err)
		}
	}

	var want []string
	for ttl := uint8(1); ttl <= 2; ttl++ {
		p := netfilter.UDP(netip.MustParseAddrPort(fmt.Sprintf("10.1.0.2:%d", 33433+int(ttl))), netip.MustParseAddrPort("10.3.0.2:33434"))
		p.TTL = ttl
		w, err := n.Send("client", p)
		require.NoError(t, err)
		require.Len(t, w.Emitted, 1, route(w))
		want = append(want, received(w.Emitted[0].Last().Packet))
	}
	assert.Equal(t, []string{
		"icmp 10.1.0.1→10.1.0.2 11/0 ttl 64 len 56 [17 10.1.0.2:33434→10.3.0.2:33434]",
		"icmp 10.2.0.2→10.1.0.2 11/0 ttl 63 len 56 [17 10.1.0.2:33435→10.3.0.2:33434]",
	}, want)
	out, stderr, err := ns["client"].Exec(tracerouteProgram, "python3", "-", "10.3.0.2")
	require.NoError(t, err, stderr)
	assert.Equal(t, want, strings.Split(strings.TrimSpace(out), "\n"), "what the client received")

	h := n.Host("r1")
	kct, _, err := ns["r1"].Exec("", "conntrack", "-L")
	require.NoError(t, err)
	var sim strings.Builder
	for _, e := range h.Conntrack().Entries() {
		sim.Write(e.AppendText(nil, h.Clock().Now(), conntrack.Format{}))
		sim.WriteString("\n")
	}
	assert.Equal(t, conntrackLines(kct), conntrackLines(sim.String()), "r1: conntrack -L")
	t.Logf("r1 conntrack:\n%s", kct)
	for name, ts := range tables {
		for _, table := range ts {
			tid := map[string]netfilter.TableID{"filter": netfilter.Filter, "nat": netfilter.NAT}[table]
			ks, err := ns[name].Save("-c", "-t", table)
			require.NoError(t, err)
			ms := n.Host(name).Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{Counters: true})
			assert.Equal(t, ks, tableSave(string(ms), tid), "%s: iptables-save -c -t %s", name, table)
		}
	}
	save := string(h.Ruleset(netfilter.IPv4).AppendSave(nil, netfilter.SaveOptions{Counters: true}))
	assert.Contains(t, save, "[1:56] -A FORWARD -m conntrack --ctstate RELATED", "r1 forwarded r2's error as RELATED")
	assert.Contains(t, save, "[1:28] -A POSTROUTING -o eth1 -j MASQUERADE", "r1 masqueraded the datagram that reached r2")
}
