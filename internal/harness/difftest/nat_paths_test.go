package difftest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const natHead = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"

// kubeNAT is a kube-proxy style service: mark for masquerade in nat, DNAT
// to the endpoint, MASQUERADE marked packets in POSTROUTING.
const kubeNAT = natHead + ":SVC - [0:0]\n:MARK-MASQ - [0:0]\n" +
	"-A PREROUTING -d 10.96.0.10/32 -p tcp --dport 80 -j SVC\n" +
	"-A PREROUTING -d 10.96.0.10/32 -p udp --dport 53 -j SVC\n" +
	"-A POSTROUTING -m mark --mark 0x4000/0x4000 -j MASQUERADE\n" +
	"-A SVC -j MARK-MASQ\n-A SVC -p tcp -j DNAT --to-destination 10.244.1.5:8080\n-A SVC -p udp -j DNAT --to-destination 10.244.1.5:5353\n" +
	"-A MARK-MASQ -j MARK --set-xmark 0x4000/0x4000\nCOMMIT\n"

// runNamedNAT runs c and requires no divergence; it returns the result.
func runNamedNAT(t *testing.T, c natCase) flowResult {
	t.Helper()
	kerneltest.Require(t)
	lab := newNATLab(t)
	res, err := runNATCase(lab, c)
	require.NoError(t, err)
	require.False(t, res.Skipped)
	require.Empty(t, res.Diffs, "%s\n%s", c, res.Transcript)
	return res
}

func iStep(flags string, n int) flowStep { return flowStep{Flags: flags, PayloadLen: n} }
func rStep(flags string, n int) flowStep { return flowStep{Resp: true, Flags: flags, PayloadLen: n} }

func finFlow(from Origin, dst string, dport uint16) genFlow {
	return genFlow{From: from, Proto: "tcp", Dst: netip.MustParseAddr(dst), SPort: 40000, DPort: dport, Name: "fin",
		Steps: []flowStep{iStep("SYN", 0), rStep("SYN,ACK", 0), iStep("ACK", 0), iStep("PSH,ACK", 17), rStep("ACK", 0),
			iStep("FIN,ACK", 0), rStep("FIN,ACK", 0), iStep("ACK", 0)}}
}

// TestKernelNATServiceRoundTrip: a client reaches a service through DNAT
// and MASQUERADE, kube-proxy style; only the SYN crosses nat.
func TestKernelNATServiceRoundTrip(t *testing.T) {
	res := runNamedNAT(t, natCase{Rules: kubeNAT, Flows: []genFlow{finFlow(FromClient, "10.96.0.10", 80)}})
	assert.Equal(t, []string{"server: tcp 10.244.1.1:40000 > 10.244.1.5:8080 [SYN] ttl=63 len=40"}, res.KernelFrames[0][0])
	assert.Equal(t, []string{"client: tcp 10.96.0.10:80 > 192.168.10.2:40000 [SYN,ACK] ttl=63 len=40"}, res.KernelFrames[0][1])
	assert.Equal(t, []string{"tcp 6 TIME_WAIT src=192.168.10.2 dst=10.96.0.10 sport=40000 dport=80 src=10.244.1.5 dst=10.244.1.1 sport=8080 dport=40000 [ASSURED] mark=0 use=1"}, res.Kernel[0])
}

// TestKernelNATRedirect: REDIRECT to a local port; the node's stack
// answers the redirected SYN with a reset that is un-NATed on the way out.
func TestKernelNATRedirect(t *testing.T) {
	rules := natHead + "-A PREROUTING -d 192.168.10.1/32 -p tcp --dport 80 -j REDIRECT --to-ports 8080\nCOMMIT\n"
	f := genFlow{From: FromClient, Proto: "tcp", Dst: nodeEth0, SPort: 40000, DPort: 80, Name: "syn", Steps: []flowStep{iStep("SYN", 0)}}
	res := runNamedNAT(t, natCase{Rules: rules, Flows: []genFlow{f}})
	assert.Equal(t, []string{"client: tcp 192.168.10.1:80 > 192.168.10.2:40000 [RST,ACK] ttl=64 len=40"}, res.KernelFrames[0][0])
	assert.Empty(t, res.Kernel[0], "a SYN answered by RST leaves no entry")
}

// TestKernelNATSNATRange: SNAT to an address range picks the address the
// kernel's jhash2 picks (find_best_ips_proto).
func TestKernelNATSNATRange(t *testing.T) {
	rules := natHead + "-A POSTROUTING -o eth1 -j SNAT --to-source 10.244.1.100-10.244.1.103\n" +
		"-A POSTROUTING -o eth0 -j SNAT --to-source 172.16.0.1-172.16.0.255\nCOMMIT\n"
	flows := []genFlow{
		{From: FromClient, Proto: "udp", Dst: serverIP, SPort: 40000, DPort: 53, Name: "udp", Steps: []flowStep{iStep("", 10), rStep("", 40)}},
		{From: FromServer, Proto: "udp", Dst: clientIP, SPort: 40001, DPort: 53, Name: "udp", Steps: []flowStep{iStep("", 10), rStep("", 40)}},
	}
	res := runNamedNAT(t, natCase{Rules: rules, Flows: flows})
	require.Len(t, res.Kernel, 2)
	assert.Len(t, res.Kernel[1], 2, "runNATCase compared the lines, addresses included")
	for _, l := range res.Kernel[1] {
		assert.NotContains(t, l, "dport=*", "no port had to change")
	}
}

// TestKernelNATHairpin: the server reaches itself through the service
// address; MASQUERADE makes the reply come back through the node.
func TestKernelNATHairpin(t *testing.T) {
	res := runNamedNAT(t, natCase{Rules: kubeNAT, Flows: []genFlow{finFlow(FromServer, "10.96.0.10", 80)}})
	assert.Equal(t, []string{"server: tcp 10.244.1.1:40000 > 10.244.1.5:8080 [SYN] ttl=63 len=40"}, res.KernelFrames[0][0])
	assert.Equal(t, []string{"server: tcp 10.96.0.10:80 > 10.244.1.5:40000 [SYN,ACK] ttl=63 len=40"}, res.KernelFrames[0][1])
}

// TestKernelNATICMPErrorUnNAT: the endpoint's port unreachable about a
// DNATed, masqueraded datagram reaches the client from the service
// address, quoting the datagram as the client sent it.
func TestKernelNATICMPErrorUnNAT(t *testing.T) {
	f := genFlow{From: FromClient, Proto: "udp", Dst: serviceIP, SPort: 40000, DPort: 53, Name: "icmp-error",
		Steps: []flowStep{iStep("", 10), {Resp: true, ICMPError: true, ICMPType: 3, ICMPCode: 3}}}
	res := runNamedNAT(t, natCase{Rules: kubeNAT, Flows: []genFlow{f}})
	assert.Equal(t, []string{"client: proto1 10.96.0.10 > 192.168.10.2 type=3 code=3 ttl=63 len=56 quoting {proto17 192.168.10.2:40000 > 10.96.0.10:53}"}, res.KernelFrames[0][1])
}

// TestKernelNATStaleUDPEntry: after the service moves to another port, the
// existing UDP entry still pins the flow to the old one until it is
// deleted (conntrack -D; kube-proxy's stale-entry cleanup).
func TestKernelNATStaleUDPEntry(t *testing.T) {
	kerneltest.Require(t)
	lab := newNATLab(t)
	h := newNATSimHost()
	oldRules := natHead + "-A PREROUTING -d 10.96.0.10/32 -p udp --dport 53 -j DNAT --to-destination 10.244.1.5:53\nCOMMIT\n"
	newRules := natHead + "-A PREROUTING -d 10.96.0.10/32 -p udp --dport 53 -j DNAT --to-destination 10.244.1.5:5353\nCOMMIT\n"
	require.NoError(t, lab.Reset(oldRules))
	require.NoError(t, h.Restore(netfilter.IPv4, []byte(oldRules), netfilter.RestoreOptions{}))
	f := genFlow{From: FromClient, Proto: "udp", Dst: serviceIP, SPort: 40000, DPort: 53, Name: "req", Steps: []flowStep{iStep("", 10)}}
	var res flowResult
	var tr strings.Builder
	send := func() []string {
		kf, _, err := runFlow(lab, h, f, 0, &res, &tr)
		require.NoError(t, err)
		return kf[0]
	}
	assert.Equal(t, []string{"server: udp 192.168.10.2:40000 > 10.244.1.5:53 ttl=63 len=38"}, send())
	require.NoError(t, lab.Node().Restore(newRules))
	require.NoError(t, h.Restore(netfilter.IPv4, []byte(newRules), netfilter.RestoreOptions{}))
	assert.Equal(t, []string{"server: udp 192.168.10.2:40000 > 10.244.1.5:53 ttl=63 len=38"}, send(), "the entry pins the old endpoint")
	_, _, err := lab.Node().Exec("", "conntrack", "-D", "-p", "udp", "--orig-dst", "10.96.0.10")
	require.NoError(t, err)
	assert.Equal(t, 1, h.Conntrack().Delete(conntrack.Filter{Proto: inet.UDP, OrigDst: serviceIP}))
	assert.Equal(t, []string{"server: udp 192.168.10.2:40000 > 10.244.1.5:5353 ttl=63 len=38"}, send(), "deleted: the new rule applies")
	require.Empty(t, res.Diffs, "%s", tr.String())
}

// TestKernelNATRejectReply: the kernel attaches REJECT's reset to the
// rejected packet's unconfirmed connection (nf_ct_attach, RELATED reply)
// and sends it through OUTPUT and POSTROUTING; it un-NATs it only at nat
// POSTROUTING, so filter OUTPUT sees the pre-NAT source, and since that
// connection has no SNAT binding yet, the reset also traverses the nat
// POSTROUTING chain. packetwalk does the same.
func TestKernelNATRejectReply(t *testing.T) {
	kerneltest.Require(t)
	lab := newNATLab(t)
	rules := filterHead + "-A INPUT -p tcp -j REJECT --reject-with tcp-reset\n-A OUTPUT -s 192.168.10.1/32 -j ACCEPT\nCOMMIT\n" +
		natHead + "-A PREROUTING -d 10.96.0.10/32 -p tcp -j REDIRECT --to-ports 8080\nCOMMIT\n"
	f := genFlow{From: FromClient, Proto: "tcp", Dst: serviceIP, SPort: 40000, DPort: 80, Name: "syn", Steps: []flowStep{iStep("SYN", 0)}}
	res, err := runNATCase(lab, natCase{Rules: rules, Flows: []genFlow{f}})
	require.NoError(t, err)
	assert.Equal(t, []string{"client: tcp 10.96.0.10:80 > 192.168.10.2:40000 [RST,ACK] ttl=64 len=40"}, res.KernelFrames[0][0])
	assert.Equal(t, res.KernelFrames, res.SimFrames)
	assert.Empty(t, res.Diffs)
}

// TestKernelRejectInvalidResetTracked: an INVALID packet has no conntrack
// to attach REJECT's reset to (nf_conntrack_in cleared it), so the reset
// is looked up in OUTPUT like any local packet. Without NAT it is the
// connection's reply and, in window, closes it; with MASQUERADE its tuple
// (to the client's own address) is not the reply tuple, and nothing changes.
func TestKernelRejectInvalidResetTracked(t *testing.T) {
	kerneltest.Require(t)
	lab := newNATLab(t)
	filter := filterHead + "-A FORWARD -p tcp -m conntrack --ctstate INVALID -j REJECT --reject-with tcp-reset\nCOMMIT\n"
	ahead := flowStep{Flags: "ACK", SeqDelta: 1 << 30}
	f := genFlow{From: FromClient, Proto: "tcp", Dst: serverIP, SPort: 40000, DPort: 80, Name: "ahead",
		Steps: []flowStep{iStep("SYN", 0), rStep("SYN,ACK", 0), ahead}}
	for _, tc := range []struct{ rules, state string }{
		{filter, "CLOSE"},
		{filter + natHead + "-A POSTROUTING -o eth1 -j MASQUERADE\nCOMMIT\n", "SYN_RECV"},
	} {
		res, err := runNATCase(lab, natCase{Rules: tc.rules, Flows: []genFlow{f}})
		require.NoError(t, err)
		assert.Empty(t, res.Diffs, "%s", res.Transcript)
		assert.Equal(t, []string{"client: tcp 10.244.1.5:80 > 192.168.10.2:40000 [RST] ttl=64 len=40"}, res.KernelFrames[0][2])
		require.Len(t, res.Kernel[0], 1)
		assert.Equal(t, tc.state, strings.Fields(res.Kernel[0][0])[2], tc.rules)
	}
}
