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

// genRangeCase draws one SNAT or MASQUERADE rule with address and port
// ranges and --random, --random-fully or --persistent (or, one case in
// four, a DNAT rule: genDNATRangeCase), and 2-5 flows from three clients
// and two servers whose source ports repeat, so that translated tuples
// clash and the kernel must move ports.
func genRangeCase(t *rapid.T) xCase {
	if rapid.IntRange(0, 3).Draw(t, "range-dnat") == 0 {
		return genDNATRangeCase(t)
	}
	var b strings.Builder
	b.WriteString(natHead)
	pr := &portRule{}
	parts := []string{"-A", "POSTROUTING"}
	if rapid.IntRange(0, 3).Draw(t, "range-icmp-return") == 0 {
		b.WriteString("-A POSTROUTING -p icmp -j RETURN\n")
	}
	out := rapid.SampledFrom([]string{"", "eth1", "eth1", "eth0"}).Draw(t, "range-out")
	if out != "" {
		parts = append(parts, "-o", out)
	}
	proto := rapid.SampledFrom([]string{"", "tcp", "udp", "icmp"}).Draw(t, "range-proto")
	masq := rapid.IntRange(0, 2).Draw(t, "range-masq") == 0
	ports := ""
	if proto == "tcp" || proto == "udp" {
		ports = rapid.SampledFrom([]string{"", "40000-40001", "1024-65535", "2000-2003", "5000", "600-700"}).Draw(t, "range-ports")
	}
	if proto != "" {
		parts = append(parts, "-p", proto)
	}
	if ports != "" {
		lo, hi, _ := strings.Cut(ports, "-")
		if hi == "" {
			hi = lo
		}
		pr.MinPort, pr.MaxPort = mustPort(lo), mustPort(hi)
	}
	if masq {
		pr.Masq = true
		parts = append(parts, "-j", "MASQUERADE")
		if ports != "" {
			parts = append(parts, "--to-ports", ports)
		}
		switch rapid.IntRange(0, 3).Draw(t, "masq-flags") {
		case 1:
			parts, pr.Random = append(parts, "--random"), true
		case 2:
			parts, pr.Random = append(parts, "--random-fully"), true
		}
	} else {
		addrs := rapid.SampledFrom([]string{"10.244.1.1", "10.244.1.100-10.244.1.103", "10.244.1.100-10.244.1.101", "172.16.0.1-172.16.0.255"}).Draw(t, "range-to")
		lo, hi, _ := strings.Cut(addrs, "-")
		if hi == "" {
			hi = lo
		}
		pr.MinAddr, pr.MaxAddr = netip.MustParseAddr(lo), netip.MustParseAddr(hi)
		to := addrs
		if ports != "" {
			to += ":" + ports
		}
		parts = append(parts, "-j", "SNAT", "--to-source", to)
		flags := rapid.SampledFrom([][]string{nil, nil, {"--random"}, {"--random-fully"}, {"--persistent"}, {"--persistent"}, {"--random", "--persistent"}}).Draw(t, "snat-flags")
		for _, f := range flags {
			parts = append(parts, f)
			pr.Random = pr.Random || f != "--persistent"
		}
	}
	b.WriteString(strings.Join(parts, " ") + "\nCOMMIT\n")
	return xCase{Rules: b.String(), Flows: distinctFlows(t, 2, 5, genRangeFlow), Rule: pr}
}

// genDNATRangeCase draws one DNAT rule for the clients' traffic to an
// address range (the lab's two servers) and maybe a port range, with
// --random and --persistent: the kernel hashes the address as for SNAT
// and, with --random, draws the port in the range, which is checked and
// then taken over like an SNAT port.
func genDNATRangeCase(t *rapid.T) xCase {
	pr := &portRule{DNAT: true}
	proto := rapid.SampledFrom([]string{"tcp", "udp"}).Draw(t, "dnat-proto")
	to := rapid.SampledFrom([]string{"10.244.1.5-10.244.1.6", "10.244.1.5", "10.244.1.6"}).Draw(t, "dnat-to")
	lo, hi, _ := strings.Cut(to, "-")
	if hi == "" {
		hi = lo
	}
	pr.MinAddr, pr.MaxAddr = netip.MustParseAddr(lo), netip.MustParseAddr(hi)
	if ports := rapid.SampledFrom([]string{"", "8000-8003", "8000-8001", "80-81", "9000"}).Draw(t, "dnat-ports"); ports != "" {
		to += ":" + ports
		plo, phi, _ := strings.Cut(ports, "-")
		if phi == "" {
			phi = plo
		}
		pr.MinPort, pr.MaxPort = mustPort(plo), mustPort(phi)
	}
	parts := []string{"-A", "PREROUTING", "-i", "eth0", "-p", proto, "-j", "DNAT", "--to-destination", to}
	flags := rapid.SampledFrom([][]string{nil, {"--random"}, {"--random"}, {"--persistent"}, {"--random", "--persistent"}}).Draw(t, "dnat-flags")
	for _, f := range flags {
		parts = append(parts, f)
		pr.Random = pr.Random || f == "--random"
	}
	rules := natHead + strings.Join(parts, " ") + "\nCOMMIT\n"
	return xCase{Rules: rules, Flows: distinctFlows(t, 2, 5, genRangeFlow), Rule: pr}
}

// distinctFlows draws min to max flows with gen. A flow that happens to
// repeat an earlier one's tuple is kept, and about one flow in four
// deliberately takes an earlier flow's tuple (steps of its own when gen
// drew the same protocol), with its initial sequence numbers above, below
// or at the earlier one's: a TCP connection reopened in TIME_WAIT or
// CLOSE, after a reset, or over one still open.
func distinctFlows(t *rapid.T, lo, hi int, gen func(*rapid.T) xflow) []xflow {
	n := rapid.IntRange(lo, hi).Draw(t, "nflows")
	var flows []xflow
	for range n {
		f := gen(t)
		if len(flows) > 0 && rapid.IntRange(0, 3).Draw(t, "reuse") == 0 {
			p := flows[rapid.IntRange(0, len(flows)-1).Draw(t, "reuse-of")]
			if p.Proto != f.Proto {
				f.Steps = p.Steps
			}
			f.From, f.Src, f.Dst, f.Proto, f.SPort, f.DPort = p.From, p.Src, p.Dst, p.Proto, p.SPort, p.DPort
			f.Name = "reuse-" + f.Name
			if f.Proto == "tcp" {
				f.ISN = rapid.SampledFrom([]uint32{0, 0, 100000, 1<<32 - 100000, 7}).Draw(t, "reuse-isn")
			}
		}
		flows = append(flows, f)
	}
	return flows
}

func mustPort(s string) uint16 {
	var v uint16
	for _, c := range s {
		v = v*10 + uint16(c-'0')
	}
	return v
}

// genRangeFlow draws a flow whose tuple likely repeats another's but for
// the client address: the same source port to the same server port.
func genRangeFlow(t *rapid.T) xflow {
	g := genOneFlow(t, 40000)
	f := xflow{Proto: g.Proto, Name: g.Name, Steps: g.Steps}
	if rapid.IntRange(0, 4).Draw(t, "range-from-server") == 0 {
		f.From, f.Src, f.Dst = FromServer, rapid.SampledFrom([]netip.Addr{serverIP, server2}).Draw(t, "range-src"), clientIP
	} else {
		f.From = FromClient
		f.Src = rapid.SampledFrom([]netip.Addr{clientIP, client2, client3}).Draw(t, "range-src")
		f.Dst = rapid.SampledFrom([]netip.Addr{serverIP, serverIP, server2}).Draw(t, "range-dst")
	}
	switch f.Proto {
	case "tcp":
		f.SPort = rapid.SampledFrom([]uint16{40000, 40000, 40001, 5000, 700, 100}).Draw(t, "range-sport")
		f.DPort = rapid.SampledFrom([]uint16{80, 80, 443}).Draw(t, "range-dport")
	case "udp":
		f.SPort = rapid.SampledFrom([]uint16{40000, 40000, 40001, 5000, 700, 100}).Draw(t, "range-sport")
		f.DPort = 53
	case "icmp":
		f.SPort = rapid.SampledFrom([]uint16{7, 7, 8}).Draw(t, "range-echo-id")
	}
	return f
}

// TestGeneratedRangeCasesLoad keeps the generator within what packetwalk
// loads.
func TestGeneratedRangeCasesLoad(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		c := genRangeCase(t)
		h := newXSimHost(zeroTimeouts)
		if err := h.Restore(netfilter.IPv4, []byte(c.Rules), netfilter.RestoreOptions{}); err != nil {
			t.Fatalf("%v\n%s", err, c)
		}
	})
}

// TestKernelNATPortOffset: PORT-PORT/BASE maps the port by its offset from
// BASE (in 16 bits: port 70 with base 80 is offset 65526), then upwards
// while taken, even when the original port is in the range. SNAT keeps
// only the flag, with base 0 (saved as "/0"); a second source port keeps
// its existing mapping (find_appropriate_src).
func TestKernelNATPortOffset(t *testing.T) {
	lab := newXLabRequired(t)
	syn := []flowStep{iStep("SYN", 0)}
	flows := []xflow{
		{From: FromClient, Src: clientIP, Dst: serverIP, Proto: "tcp", SPort: 41234, DPort: 85, Name: "a", Steps: syn},
		{From: FromClient, Src: client2, Dst: serverIP, Proto: "tcp", SPort: 41234, DPort: 85, Name: "b", Steps: syn},
		{From: FromClient, Src: client2, Dst: serverIP, Proto: "tcp", SPort: 41234, DPort: 70, Name: "c", Steps: syn},
	}
	for _, tc := range []struct {
		rule string
		want []string
	}{
		{"-A POSTROUTING -o eth1 -p tcp -j SNAT --to-source 10.244.1.1:1000-1998/40000", []string{
			"server: tcp 10.244.1.1:1275 > 10.244.1.5:85 [SYN] ttl=63 len=40", // 1000 + 41234 mod 999
			"server: tcp 10.244.1.1:1276 > 10.244.1.5:85 [SYN] ttl=63 len=40",
			"server: tcp 10.244.1.1:1276 > 10.244.1.5:70 [SYN] ttl=63 len=40"}},
		{"-A PREROUTING -p tcp -j DNAT --to-destination 10.244.1.5:8000-8010/80", []string{
			"server: tcp 192.168.10.2:41234 > 10.244.1.5:8005 [SYN] ttl=63 len=40",
			"server: tcp 192.168.10.3:41234 > 10.244.1.5:8005 [SYN] ttl=63 len=40",
			"server: tcp 192.168.10.3:41234 > 10.244.1.5:8010 [SYN] ttl=63 len=40"}},
	} {
		r, err := runXCase(lab, xCase{Rules: natHead + tc.rule + "\nCOMMIT\n", Flows: flows, Exact: true})
		require.NoError(t, err)
		require.Empty(t, r.res.Diffs, "%s", r.res.Transcript)
		var got []string
		for _, f := range r.res.KernelFrames {
			got = append(got, f[0]...)
		}
		assert.Equal(t, tc.want, got, tc.rule)
	}
}
