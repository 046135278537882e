package difftest

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// genNAT6Rules draws an ip6tables nat table for forwarded flows: DNAT to
// [addr]:port and REDIRECT in PREROUTING, SNAT to address ranges (the
// kernel hashes all four words of the address) and MASQUERADE in
// POSTROUTING.
func genNAT6Rules(t *rapid.T) (string, *portRule) {
	var b strings.Builder
	b.WriteString(natHead)
	var pr *portRule
	for range rapid.IntRange(0, 3).Draw(t, "nat6-pre-n") {
		parts := []string{"-A", "PREROUTING", "-d", rapid.SampledFrom([]string{"fd00:96::10/128", "fd00:96::/64", "fd00:10::1/128"}).Draw(t, "nat6-pre-dst")}
		kind := rapid.SampledFrom([]string{"DNAT", "DNAT", "REDIRECT", "RETURN"}).Draw(t, "nat6-pre-kind")
		proto := rapid.SampledFrom([]string{"", "tcp", "udp", "ipv6-icmp"}).Draw(t, "nat6-pre-proto")
		to := rapid.SampledFrom([]string{"fd00:244::5", "fd00:244::6"}).Draw(t, "nat6-dnat-addr")
		if kind == "REDIRECT" || (kind == "DNAT" && rapid.Bool().Draw(t, "nat6-dnat-ports")) {
			proto = rapid.SampledFrom([]string{"tcp", "udp"}).Draw(t, "nat6-port-proto")
			to = "[" + to + "]:" + rapid.SampledFrom([]string{"8080", "5353", "8080-8081"}).Draw(t, "nat6-dnat-port")
		}
		if proto != "" {
			parts = append(parts, "-p", proto)
		}
		switch kind {
		case "DNAT":
			parts = append(parts, "-j", "DNAT", "--to-destination", to)
		case "REDIRECT":
			parts = append(parts, "-j", "REDIRECT")
			if rapid.Bool().Draw(t, "nat6-redir-ports") {
				parts = append(parts, "--to-ports", "8080")
			}
		default:
			parts = append(parts, "-j", kind)
		}
		b.WriteString(strings.Join(parts, " ") + "\n")
	}
	switch rapid.IntRange(0, 3).Draw(t, "nat6-post") {
	case 1:
		b.WriteString("-A POSTROUTING -o " + rapid.SampledFrom([]string{"eth0", "eth1"}).Draw(t, "nat6-masq-o") + " -j MASQUERADE\n")
		pr = &portRule{Masq: true}
	case 2, 3:
		to := rapid.SampledFrom([]string{"fd00:244::100-fd00:244::103", "fd00:244::1", "fd00:244::1:0-fd00:244::2:ffff"}).Draw(t, "nat6-snat-to")
		lo, hi, ok := strings.Cut(to, "-")
		if !ok {
			hi = lo
		}
		pr = &portRule{MinAddr: netip.MustParseAddr(lo), MaxAddr: netip.MustParseAddr(hi)}
		flags := rapid.SampledFrom([]string{"", "", " --persistent", " --random"}).Draw(t, "nat6-snat-flags")
		pr.Random = flags == " --random"
		b.WriteString("-A POSTROUTING -o eth1 -j SNAT --to-source " + to + flags + "\n")
	}
	b.WriteString("COMMIT\n")
	return b.String(), pr
}

// genNAT6Flow draws a forwarded IPv6 flow between two clients and the
// servers, or to the service address.
func genNAT6Flow(t *rapid.T) xflow {
	g := genOneFlow(t, rapid.SampledFrom([]uint16{40000, 40000, 40001, 700}).Draw(t, "nat6-sport"))
	f := xflow{Proto: g.Proto, Name: g.Name, Steps: g.Steps, SPort: g.SPort, DPort: g.DPort}
	type where struct {
		from     Origin
		src, dst netip.Addr
	}
	w := rapid.SampledFrom([]where{
		{FromClient, client6, service6}, {FromClient, client6b, service6}, {FromClient, client6, server6},
		{FromClient, client6b, server6}, {FromClient, client6, node6Eth0}, {FromServer, server6, client6},
	}).Draw(t, "nat6-where")
	f.From, f.Src, f.Dst = w.from, w.src, w.dst
	return f
}

func genNAT6Case(t *rapid.T) xCase {
	if rapid.IntRange(0, 3).Draw(t, "nat6-local") == 0 {
		return genOutputCase(true)(t)
	}
	rules, pr := genNAT6Rules(t)
	return xCase{V6: true, Rules: rules, Rule: pr, Flows: distinctFlows(t, 1, 4, genNAT6Flow)}
}

// TestGeneratedNAT6CasesLoad keeps the generator within what packetwalk
// loads.
func TestGeneratedNAT6CasesLoad(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genNAT6Case(t)
		if err := newXSimHost(zeroTimeouts).Restore(netfilter.IPv6, []byte(c.Rules), netfilter.RestoreOptions{}); err != nil {
			t.Fatalf("%v\n%s", err, c)
		}
	})
}

// TestKernelNAT6Differential: ip6tables nat (DNAT to [addr]:port,
// REDIRECT, SNAT to address ranges with and without --persistent,
// MASQUERADE) for forwarded and locally generated IPv6 flows, ICMPv6 echo
// and errors included. PACKETWALK_NAT6_CASES (default 150).
func TestKernelNAT6Differential(t *testing.T) {
	runXDifferential(t, "IPv6 NAT", envInt("PACKETWALK_NAT6_CASES", 150), genNAT6Case)
}

// TestKernelNAT6ServiceRoundTrip: a client reaches an IPv6 service through
// DNAT to [addr]:port and SNAT to an address range; the address is the
// kernel's hash of the client's address and the destination.
func TestKernelNAT6ServiceRoundTrip(t *testing.T) {
	lab := newXLabRequired(t)
	rules := natHead + "-A PREROUTING -d fd00:96::10/128 -p tcp --dport 80 -j DNAT --to-destination [fd00:244::5]:8080\n" +
		"-A POSTROUTING -o eth1 -j SNAT --to-source fd00:244::100-fd00:244::103\nCOMMIT\n"
	f := xflow{From: FromClient, Src: client6, Dst: service6, Proto: "tcp", SPort: 40000, DPort: 80, Name: "hs",
		Steps: []flowStep{iStep("SYN", 0), rStep("SYN,ACK", 0), iStep("ACK", 0)}}
	r, err := runXCase(lab, xCase{V6: true, Rules: rules, Flows: []xflow{f}})
	require.NoError(t, err)
	require.Empty(t, r.res.Diffs, "%s", r.res.Transcript)
	require.Len(t, r.res.KernelFrames[0][0], 1)
	assert.Regexp(t, `^server: tcp \[fd00:244::10[0-3]\]:40000 > \[fd00:244::5\]:8080 \[SYN\] ttl=63 len=60$`, r.res.KernelFrames[0][0][0])
	assert.Equal(t, []string{"client: tcp [fd00:96::10]:80 > [fd00:10::2]:40000 [SYN,ACK] ttl=63 len=60"}, r.res.KernelFrames[1][0])
}
