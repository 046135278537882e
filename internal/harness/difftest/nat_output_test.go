package difftest

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// genOutputNAT draws a nat table for locally generated traffic: DNAT and
// REDIRECT in OUTPUT, SNAT and MASQUERADE in POSTROUTING, some rules in
// INPUT and PREROUTING that such traffic must not reach.
func genOutputNAT(t *rapid.T, v6 bool) string {
	svc, srv, srv2, local := "10.96.0.10", "10.244.1.5", "10.244.1.6", "10.244.1.1"
	snatTo, plen := "10.244.1.100-10.244.1.103", "/32"
	if v6 {
		svc, srv, srv2, local = "fd00:96::10", "[fd00:244::5]", "[fd00:244::6]", "fd00:244::1"
		snatTo, plen = "fd00:244::100-fd00:244::103", "/128"
	}
	var b strings.Builder
	b.WriteString(natHead)
	chains := []string{"OUTPUT", "OUTPUT", "OUTPUT", "POSTROUTING", "POSTROUTING", "INPUT", "PREROUTING"}
	n := rapid.IntRange(1, 6).Draw(t, "out-nrules")
	for range n {
		ch := rapid.SampledFrom(chains).Draw(t, "out-chain")
		parts := []string{"-A", ch}
		proto := rapid.SampledFrom([]string{"", "tcp", "udp", "icmp"}).Draw(t, "out-proto")
		if v6 && proto == "icmp" {
			proto = "ipv6-icmp"
		}
		switch ch {
		case "OUTPUT", "PREROUTING":
			if rapid.IntRange(0, 3).Draw(t, "out-has-dst") > 0 {
				parts = append(parts, "-d", rapid.SampledFrom([]string{svc, svc, strings.Trim(srv, "[]")}).Draw(t, "out-dst")+plen)
			}
			if ch == "OUTPUT" && rapid.IntRange(0, 3).Draw(t, "out-has-o") == 0 {
				parts = append(parts, "-o", rapid.SampledFrom([]string{"eth0", "eth1", "lo"}).Draw(t, "out-o"))
			}
			kind := rapid.SampledFrom([]string{"DNAT", "DNAT", "REDIRECT", "ACCEPT", "RETURN"}).Draw(t, "out-kind")
			if kind == "REDIRECT" || (kind == "DNAT" && rapid.Bool().Draw(t, "out-dnat-port")) {
				proto = rapid.SampledFrom([]string{"tcp", "udp"}).Draw(t, "out-port-proto")
			}
			if proto != "" {
				parts = append(parts, "-p", proto)
				if (proto == "tcp" || proto == "udp") && rapid.Bool().Draw(t, "out-has-dport") {
					parts = append(parts, "--dport", rapid.SampledFrom([]string{"80", "53", "8080"}).Draw(t, "out-dport"))
				}
			}
			switch kind {
			case "DNAT":
				to := rapid.SampledFrom([]string{srv, srv2}).Draw(t, "out-dnat-to")
				if proto == "tcp" || proto == "udp" {
					to += rapid.SampledFrom([]string{"", ":8080", ":5353", ":8080-8081"}).Draw(t, "out-dnat-port-to")
				}
				parts = append(parts, "-j", "DNAT", "--to-destination", strings.Trim(to, map[bool]string{true: "", false: "[]"}[strings.Contains(to, "]:")]))
			case "REDIRECT":
				parts = append(parts, "-j", "REDIRECT")
				if rapid.Bool().Draw(t, "out-redir-ports") {
					parts = append(parts, "--to-ports", rapid.SampledFrom([]string{"8080", "5353"}).Draw(t, "out-redir-to"))
				}
			default:
				parts = append(parts, "-j", kind)
			}
		default: // POSTROUTING, INPUT
			if rapid.Bool().Draw(t, "out-has-src") {
				parts = append(parts, "-s", rapid.SampledFrom([]string{local, strings.Trim(srv, "[]")}).Draw(t, "out-src")+plen)
			}
			kind := rapid.SampledFrom([]string{"SNAT", "MASQUERADE", "ACCEPT"}).Draw(t, "out-snat-kind")
			if ch == "INPUT" && kind == "MASQUERADE" {
				kind = "SNAT"
			}
			// SNAT on lo (or on any interface) also meets packets
			// REDIRECTed to 127.0.0.1: the stack's answer then has a
			// loopback source and a remote destination, which routing
			// refuses under route_localnet=0 (the entry stays UNREPLIED).
			if ch == "POSTROUTING" && rapid.Bool().Draw(t, "out-has-oif") {
				parts = append(parts, "-o", rapid.SampledFrom([]string{"eth0", "eth1", "lo"}).Draw(t, "out-oif"))
			}
			if proto != "" {
				parts = append(parts, "-p", proto)
			}
			switch kind {
			case "SNAT":
				parts = append(parts, "-j", "SNAT", "--to-source", snatTo)
			default:
				parts = append(parts, "-j", kind)
			}
		}
		b.WriteString(strings.Join(parts, " ") + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String()
}

// genOutputFlow draws a flow the node starts (or now and then a client's
// flow to the service, so that PREROUTING's DNAT meets the node's).
func genOutputFlow(t *rapid.T, v6 bool) xflow {
	g := genOneFlow(t, rapid.SampledFrom([]uint16{40000, 40001, 33333}).Draw(t, "out-sport"))
	f := xflow{Proto: g.Proto, Name: g.Name, Steps: g.Steps, SPort: g.SPort, DPort: g.DPort}
	type where struct {
		from     Origin
		src, dst netip.Addr
	}
	ws := []where{
		{FromNode, nodeEth1a, serviceIP}, {FromNode, nodeEth1a, serviceIP}, {FromNode, nodeEth0, serviceIP},
		{FromNode, nodeEth1a, serverIP}, {FromNode, nodeEth0, server2}, {FromNode, nodeEth0, clientIP},
		{FromNode, nodeEth0, nodeEth1a}, {FromClient, clientIP, serviceIP},
	}
	if v6 {
		ws = []where{
			{FromNode, node6Eth1, service6}, {FromNode, node6Eth1, service6}, {FromNode, node6Eth0, service6},
			{FromNode, node6Eth1, server6}, {FromNode, node6Eth0, server6b}, {FromNode, node6Eth0, client6},
			{FromNode, node6Eth0, node6Eth1}, {FromClient, client6, service6},
		}
	}
	w := rapid.SampledFrom(ws).Draw(t, "out-where")
	f.From, f.Src, f.Dst = w.from, w.src, w.dst
	return f
}

// genOutputCase is a case of locally generated flows, IPv4 or IPv6.
func genOutputCase(v6 bool) func(*rapid.T) xCase {
	return func(t *rapid.T) xCase {
		rules := genOutputNAT(t, v6)
		return xCase{V6: v6, Rules: rules, Flows: distinctFlows(t, 1, 3, func(t *rapid.T) xflow { return genOutputFlow(t, v6) })}
	}
}

// TestGeneratedOutputCasesLoad keeps the generator within what packetwalk
// loads.
func TestGeneratedOutputCasesLoad(t *testing.T) {
	for _, v6 := range []bool{false, true} {
		t.Run(fmt.Sprint("v6=", v6), func(t *testing.T) {
			rapid.Check(t, func(t *rapid.T) {
				c := genOutputCase(v6)(t)
				fam := netfilter.IPv4
				if v6 {
					fam = netfilter.IPv6
				}
				if err := newXSimHost(zeroTimeouts).Restore(fam, []byte(c.Rules), netfilter.RestoreOptions{}); err != nil {
					t.Fatalf("%v\n%s", err, c)
				}
			})
		})
	}
}

// TestKernelNATOutputDifferential: locally generated flows, sent from a
// raw socket in the node so that they cross nat OUTPUT (DNAT, REDIRECT)
// and nat POSTROUTING (SNAT, MASQUERADE), and the answers to them.
// PACKETWALK_NAT_OUTPUT_CASES (default 170).
func TestKernelNATOutputDifferential(t *testing.T) {
	runXDifferential(t, "nat OUTPUT", envInt("PACKETWALK_NAT_OUTPUT_CASES", 170), genOutputCase(false))
}

// TestKernelNATOutputDNAT: the node's own connection to a service is
// DNATed in nat OUTPUT and masqueraded in POSTROUTING; the server's answer
// is un-NATed back to the node, whose stack resets it (no socket).
func TestKernelNATOutputDNAT(t *testing.T) {
	lab := newXLabRequired(t)
	rules := natHead + "-A OUTPUT -d 10.96.0.10/32 -p tcp -j DNAT --to-destination 10.244.1.5:8080\n" +
		"-A POSTROUTING -o eth1 -j MASQUERADE\nCOMMIT\n"
	f := xflow{From: FromNode, Src: nodeEth0, Dst: serviceIP, Proto: "tcp", SPort: 40000, DPort: 80, Name: "syn",
		Steps: []flowStep{iStep("SYN", 0), rStep("SYN,ACK", 0)}}
	r, err := runXCase(lab, xCase{Rules: rules, Flows: []xflow{f}})
	require.NoError(t, err)
	require.Empty(t, r.res.Diffs, "%s", r.res.Transcript)
	assert.Equal(t, []string{"server: tcp 10.244.1.1:40000 > 10.244.1.5:8080 [SYN] ttl=64 len=40"}, r.res.KernelFrames[0][0])
	assert.Equal(t, []string{"server: tcp 10.244.1.1:40000 > 10.244.1.5:8080 [RST] ttl=64 len=40"}, r.res.KernelFrames[1][0])
}

// TestKernelNATMasqueradeLoopback: MASQUERADE on lo, for the node's own
// packet to another of its addresses. IPv6 takes the destination itself
// as the new source (source selection prefers the same address); IPv4
// takes the first universe-scope address of another device (lo has only
// host-scope 127.0.0.1): eth0's.
func TestKernelNATMasqueradeLoopback(t *testing.T) {
	lab := newXLabRequired(t)
	for _, tc := range []struct {
		v6       bool
		src, dst netip.Addr
		want     string
	}{
		{false, nodeEth0, nodeEth1a, "udp 17 src=192.168.10.1 dst=10.244.1.1 sport=40000 dport=53 [UNREPLIED] src=10.244.1.1 dst=192.168.10.1 sport=53 dport=40000 mark=0 use=1"},
		{false, nodeEth1a, nodeEth0, "udp 17 src=10.244.1.1 dst=192.168.10.1 sport=40000 dport=53 [UNREPLIED] src=192.168.10.1 dst=192.168.10.1 sport=53 dport=40000 mark=0 use=1"},
		{true, node6Eth0, node6Eth1, "udp 17 src=fd00:10::1 dst=fd00:244::1 sport=40000 dport=53 [UNREPLIED] src=fd00:244::1 dst=fd00:244::1 sport=53 dport=40000 mark=0 use=1"},
	} {
		f := xflow{From: FromNode, Src: tc.src, Dst: tc.dst, Proto: "udp", SPort: 40000, DPort: 53, Name: "req", Steps: []flowStep{iStep("", 10)}}
		r, err := runXCase(lab, xCase{V6: tc.v6, Rules: natHead + "-A POSTROUTING -o lo -j MASQUERADE\nCOMMIT\n", Flows: []xflow{f}})
		require.NoError(t, err)
		require.Empty(t, r.res.Diffs, "%s", r.res.Transcript)
		assert.Equal(t, []string{tc.want}, r.res.Kernel[0], "%s", f)
	}
}

// TestKernelNATOutputRedirectSNAT: the node's SYN to a service is
// REDIRECTed to 127.0.0.1 in nat OUTPUT and SNATed to a remote address on
// lo. The stack answers with a reset from 127.0.0.1 to that address,
// which routing refuses under route_localnet=0: nothing leaves, and the
// entry stays SYN_SENT and UNREPLIED.
func TestKernelNATOutputRedirectSNAT(t *testing.T) {
	lab := newXLabRequired(t)
	rules := natHead + "-A OUTPUT -d 10.96.0.10/32 -p tcp -j REDIRECT --to-ports 8080\n" +
		"-A POSTROUTING -o lo -j SNAT --to-source 10.244.1.100\nCOMMIT\n"
	f := xflow{From: FromNode, Src: nodeEth0, Dst: serviceIP, Proto: "tcp", SPort: 40000, DPort: 80, Name: "syn",
		Steps: []flowStep{iStep("SYN", 0)}}
	r, err := runXCase(lab, xCase{Rules: rules, Flows: []xflow{f}, Exact: true})
	require.NoError(t, err)
	require.Empty(t, r.res.Diffs, "%s", r.res.Transcript)
	assert.Empty(t, r.res.KernelFrames[0][0])
	assert.Equal(t, []string{"tcp 6 SYN_SENT src=192.168.10.1 dst=10.96.0.10 sport=40000 dport=80 [UNREPLIED] src=127.0.0.1 dst=10.244.1.100 sport=8080 dport=40000 mark=0 use=1"}, r.res.Kernel[0])
}
