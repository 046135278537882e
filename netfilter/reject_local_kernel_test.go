package netfilter

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// localRejectRules counts TCP and ICMP destination-unreachable packets in
// every chain of every table, and in filter INPUT by source address (which
// address the reply comes from), and REJECTs in filter OUTPUT the TCP
// packet the node sends to port 80. Variant "dnat" first DNATs port 81 of
// 10.244.1.99 (fd00:244::99) to the server's port 80 in nat OUTPUT;
// "notrack" untracks the offending packet in raw OUTPUT (for every
// packet in "input-notrack"); "input" and "input-notrack" REJECT in filter
// INPUT instead of OUTPUT (a packet the node sent to itself).
func localRejectRules(f Family, with, variant string) string {
	icmp := "-p icmp -m icmp --icmp-type 3"
	srcs := []string{"10.244.1.5/32", "192.168.10.1/32", "127.0.0.1/32", "10.244.1.99/32"}
	dnat := "10.244.1.5:80"
	if f == IPv6 {
		icmp = "-p ipv6-icmp -m icmp6 --icmpv6-type 1"
		srcs = []string{"fd00:244::5/128", "fd00:10::1/128", "::1/128", "fd00:244::99/128"}
		dnat = "[fd00:244::5]:80"
	}
	chains := []struct {
		table string
		names []string
	}{
		{"raw", []string{"PREROUTING", "OUTPUT"}},
		{"mangle", []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}},
		{"nat", []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}},
		{"filter", []string{"INPUT", "FORWARD", "OUTPUT"}},
	}
	var b strings.Builder
	for _, t := range chains {
		fmt.Fprintf(&b, "*%s\n", t.table)
		for _, ch := range t.names {
			fmt.Fprintf(&b, ":%s ACCEPT [0:0]\n", ch)
		}
		for _, ch := range t.names {
			fmt.Fprintf(&b, "-A %s -p tcp\n-A %s %s\n", ch, ch, icmp)
			fmt.Fprintf(&b, "-A %s -p tcp -m conntrack --ctstate RELATED\n-A %s %s -m conntrack --ctstate RELATED\n", ch, ch, icmp)
			fmt.Fprintf(&b, "-A %s -m conntrack --ctstate INVALID,UNTRACKED\n", ch)
		}
		switch {
		case t.table == "nat" && variant == "dnat":
			fmt.Fprintf(&b, "-A OUTPUT -p tcp -m tcp --dport 81 -j DNAT --to-destination %s\n", dnat)
		case t.table == "raw" && variant == "notrack":
			b.WriteString("-A OUTPUT -p tcp -m tcp --dport 80 -j CT --notrack\n")
		case t.table == "raw" && variant == "input-notrack":
			b.WriteString("-A OUTPUT -j CT --notrack\n")
		}
		if t.table == "filter" {
			for _, a := range srcs {
				fmt.Fprintf(&b, "-A INPUT -s %s\n", a)
			}
			chain := "OUTPUT"
			if strings.HasPrefix(variant, "input") {
				chain = "INPUT"
			}
			fmt.Fprintf(&b, "-A %s -p tcp -m tcp --dport 80 -j REJECT --reject-with %s\n", chain, with)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// TestKernelLocalReject REJECTs in filter OUTPUT a TCP SYN the node sends
// (to a pod and to its own loopback address) and compares every counter
// of the kernel with a Host: the reply goes out through OUTPUT and
// POSTROUTING, then comes back in through lo, crossing PREROUTING and
// INPUT.
func TestKernelLocalReject(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-lrej"})
	cfg := lab.Config()
	for _, v6 := range []bool{false, true} {
		fam, with := IPv4, []string{"tcp-reset", "icmp-port-unreachable"}
		src, dsts := cfg.NodeEth0.Addr(), []netip.Addr{cfg.Server[0].Addr(), netip.MustParseAddr("127.0.0.1"), cfg.NodeEth0.Addr()}
		if v6 {
			fam, with = IPv6, []string{"tcp-reset", "icmp6-port-unreachable"}
			src, dsts = cfg.NodeEth0v6.Addr(), []netip.Addr{cfg.Server6[0].Addr(), netip.IPv6Loopback(), cfg.NodeEth0v6.Addr()}
		}
		for _, w := range with {
			for _, dst := range dsts {
				variants := []string{"", "dnat", "notrack"}
				if dst.IsLoopback() || dst == src {
					variants = []string{"", "input", "input-notrack"}
				}
				for _, variant := range variants {
					t.Run(fmt.Sprintf("%s/%s/%s/%s", fam, w, dst, variant), func(t *testing.T) {
						src, dst, dport := src, dst, uint16(80)
						if dst.IsLoopback() {
							src = dst
						}
						if variant == "dnat" {
							dst, dport = netip.MustParseAddr("10.244.1.99"), 81
							if v6 {
								dst = netip.MustParseAddr("fd00:244::99")
							}
						}
						rules := localRejectRules(fam, w, variant)
						rs := kerneltest.Ruleset{IPv4: rules}
						if v6 {
							rs = kerneltest.Ruleset{IPv6: rules}
						}
						require.NoError(t, lab.ResetRuleset(rs))
						spec := kerneltest.FrameSpec{Proto: "tcp", Src: src, Dst: dst, SrcPort: 40000, DstPort: dport, TCPFlags: "SYN", Seq: 1}
						pkt, err := kerneltest.BuildPacket(spec)
						require.NoError(t, err)
						sendErr := lab.SendFromNode(pkt)
						obs, err := lab.Settle()
						require.NoError(t, err)
						kc, err := lab.Counters()
						if v6 {
							kc, err = lab.Counters6()
						}
						require.NoError(t, err)
						ct, err := lab.Conntrack()
						require.NoError(t, err)
						t.Logf("kernel: sendto %v, counters %s\nconntrack %q\nframes:\n%s", sendErr, strings.Join(kc.NonZero(), ", "), ct, obs)

						h := labHost(t, cfg, HostConfig{}, fam, rules)
						p := Packet{Proto: inet.TCP, Src: src, Dst: dst, SrcPort: 40000, DstPort: dport, TCPFlags: inet.SYN, Seq: 1, TTL: 64, Length: 40}
						if v6 {
							p.Length = 60
						}
						res := h.Send(p)
						t.Logf("packetwalk: %s %s, emitted %+v", res.Disposition, res.Verdict, res.Emitted)
						assert.Equal(t, Rejected, res.Disposition)
						assert.Empty(t, obs.Server, "nothing reaches the server")
						require.Len(t, res.Emitted, 1)
						assert.Equal(t, "lo", res.Emitted[0].In, "the reply comes back in through lo")
						assert.Equal(t, "", res.Emitted[0].Out)
						assertSameCounters(t, h, fam, kc)
						assert.Equal(t, len(ct), h.Conntrack().Len(), "conntrack entries")
					})
				}
			}
		}
	}
}

// TestKernelLocalRejectInvalidLooped: the node opens a TCP connection to
// itself (the SYN is dropped in raw PREROUTING once confirmed in
// POSTROUTING, so the stack does not answer it), then sends a SYN|FIN on
// the same tuple, which is INVALID and REJECTed with an ICMP error in
// filter INPUT. The error, attached to no connection, is looked up in
// OUTPUT and found RELATED to the connection.
func TestKernelLocalRejectInvalidLooped(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-lrinv"})
	cfg := lab.Config()
	for _, v6 := range []bool{false, true} {
		t.Run(map[bool]string{false: "ipv4", true: "ipv6"}[v6], func(t *testing.T) {
			fam, lo := IPv4, netip.MustParseAddr("127.0.0.1")
			if v6 {
				fam, lo = IPv6, netip.IPv6Loopback()
			}
			rules := invalidLoopRules(fam)
			rs := kerneltest.Ruleset{IPv4: rules}
			if v6 {
				rs = kerneltest.Ruleset{IPv6: rules}
			}
			require.NoError(t, lab.ResetRuleset(rs))
			h := NewHost(HostConfig{})
			require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0, cfg.NodeEth0v6))
			require.NoError(t, h.Restore(fam, []byte(rules), RestoreOptions{}))
			var last Result
			for _, flags := range []string{"SYN", "SYN,FIN"} {
				spec := kerneltest.FrameSpec{Proto: "tcp", Src: lo, Dst: lo, SrcPort: 40000, DstPort: 80, TCPFlags: flags, Seq: 1}
				pkt, err := kerneltest.BuildPacket(spec)
				require.NoError(t, err)
				_ = lab.SendFromNode(pkt) // the REJECTed one fails with EPERM
				_, err = lab.Settle()
				require.NoError(t, err)
				p := Packet{Proto: inet.TCP, Src: lo, Dst: lo, SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN, Seq: 1, TTL: 64, Length: 40}
				if flags != "SYN" {
					p.TCPFlags |= inet.FIN
				}
				if v6 {
					p.Length = 60
				}
				last = h.Send(p)
			}
			kc, err := lab.Counters()
			if v6 {
				kc, err = lab.Counters6()
			}
			require.NoError(t, err)
			ct, err := lab.Conntrack()
			require.NoError(t, err)
			t.Logf("kernel: %s\nconntrack %q", strings.Join(kc.NonZero(), ", "), ct)
			t.Logf("packetwalk: %s %s, emitted %d", last.Disposition, last.Verdict, len(last.Emitted))
			assert.Equal(t, Rejected, last.Disposition)
			assertSameCounters(t, h, fam, kc)
			assert.Equal(t, len(ct), h.Conntrack().Len(), "conntrack entries")
		})
	}
}
