package netfilter

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// ttlRules counts UDP and ICMP time exceeded packets (all, and RELATED
// ones) in every chain of every table.
func ttlRules(f Family) string {
	icmp := "-p icmp -m icmp --icmp-type 11"
	if f == IPv6 {
		icmp = "-p ipv6-icmp -m icmp6 --icmpv6-type 3"
	}
	var b strings.Builder
	for _, t := range []struct {
		table string
		names []string
	}{
		{"raw", []string{"PREROUTING", "OUTPUT"}},
		{"mangle", []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"}},
		{"nat", []string{"PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"}},
		{"filter", []string{"INPUT", "FORWARD", "OUTPUT"}},
	} {
		fmt.Fprintf(&b, "*%s\n", t.table)
		for _, ch := range t.names {
			fmt.Fprintf(&b, ":%s ACCEPT [0:0]\n", ch)
		}
		for _, ch := range t.names {
			fmt.Fprintf(&b, "-A %s -p udp\n-A %s %s\n-A %s %s -m conntrack --ctstate RELATED\n", ch, ch, icmp, ch, icmp)
		}
		b.WriteString("COMMIT\n")
	}
	return b.String()
}

// TestKernelTTLExceeded sends three UDP packets in a row from the client
// with TTL (hop limit) 1 to the server, routed via the node, and compares
// the frames the client gets back (ICMP time exceeded, one per packet: the
// kernel's per-destination rate limit lets a short burst through) and every
// counter: the errors cross OUTPUT and POSTROUTING, RELATED to the UDP
// connection.
func TestKernelTTLExceeded(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-ttl"})
	cfg := lab.Config()
	for _, fam := range []Family{IPv4, IPv6} {
		t.Run(fam.String(), func(t *testing.T) {
			client, server := cfg.Client.Addr(), cfg.Server[0].Addr()
			if fam == IPv6 {
				client, server = cfg.Client6.Addr(), cfg.Server6[0].Addr()
			}
			rules := ttlRules(fam)
			rs := kerneltest.Ruleset{IPv4: rules}
			if fam == IPv6 {
				rs = kerneltest.Ruleset{IPv6: rules}
			}
			require.NoError(t, lab.ResetRuleset(rs))

			h := labHost(t, cfg, HostConfig{}, fam, rules)
			fh := NewFrameHost(h)

			var frames [][]byte
			var ours [][]byte
			for i := range 3 {
				f, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: client, Dst: server, SrcPort: 40000, DstPort: 53, ID: uint16(0x100 + i), TTL: 1, PayloadLen: 10 + i})
				require.NoError(t, err)
				frames = append(frames, f)
				res, err := fh.ReceiveFrame("eth0", f)
				require.NoError(t, err)
				assert.Equal(t, Dropped, res.Disposition)
				assert.Equal(t, ReasonTTLExceeded, res.Reason)
				require.Len(t, res.Emitted, 1)
				for _, e := range res.Emitted { // FrameHost reuses their storage
					ours = append(ours, append([]byte(nil), e...))
				}
			}
			obs, err := lab.Exchange(frames...)
			require.NoError(t, err)
			kc, err := lab.Counters()
			if fam == IPv6 {
				kc, err = lab.Counters6()
			}
			require.NoError(t, err)
			t.Logf("kernel: counters %s\nframes:\n%s", strings.Join(kc.NonZero(), ", "), obs)
			assert.Empty(t, obs.Server, "nothing is forwarded")
			require.Len(t, obs.Client, len(ours), "ICMP errors the client gets")
			for i, c := range obs.Client {
				k, o := c.Frame, ours[i]
				if fam == IPv4 {
					assert.True(t, ipv4HeaderChecksumOK(ipFrame(t, k)[14:]), "#%d: kernel IP header checksum", i+1)
					k, o = maskGenerated(ipFrame(t, k)), maskGenerated(ipFrame(t, o))
				} else {
					// The kernel gives its ICMPv6 error a flow label hashed
					// from the flow with a per-boot secret (ip6_make_flowlabel,
					// net.ipv6.auto_flowlabels); FrameHost writes 0.
					k = append([]byte(nil), k...)
					assert.NotZero(t, k[14+1]&0x0f|k[14+2]|k[14+3], "#%d: kernel flow label", i+1)
					k[14+1] &^= 0x0f
					clear(k[14+2 : 14+4])
				}
				assert.Equal(t, fmt.Sprintf("% x", k), fmt.Sprintf("% x", o), "#%d: kernel (want) vs FrameHost (got)", i+1)
			}
			assertSameCounters(t, h, fam, kc)
		})
	}
}

// TestTTLExceededReply: a forwarded packet whose TTL would reach 0 is
// dropped and answered with an ICMP time exceeded from the address of the
// route back to its sender, quoting it, sent through OUTPUT and
// POSTROUTING RELATED to its connection; none answers an ICMP error.
func TestTTLExceededReply(t *testing.T) {
	rules := ttlRules(IPv4)
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24")))
	require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
	src, dst := netip.MustParseAddr("192.168.10.2"), netip.MustParseAddr("10.244.1.5")
	res := h.Receive("eth0", Packet{Proto: 17, Src: src, Dst: dst, SrcPort: 40000, DstPort: 53, TTL: 1, TOS: 0x10, Length: 38})
	assert.Equal(t, Dropped, res.Disposition)
	assert.Equal(t, VerdictDrop, res.Verdict)
	assert.Equal(t, ReasonTTLExceeded, res.Reason)
	require.Len(t, res.Emitted, 1)
	e := res.Emitted[0]
	assert.Equal(t, Packet{Family: IPv4, Proto: 1, Src: netip.MustParseAddr("192.168.10.1"), Dst: src, TTL: 64, TOS: 0xd0,
		ICMPType: 11, ICMPCode: 0, Length: 20 + 8 + 38, Out: "eth0",
		Inner: InnerHeader{Proto: 17, Src: src, Dst: dst, SrcPort: 40000, DstPort: 53}}, e)
	for _, c := range []struct {
		table, chain string
		want         []uint64 // udp, time exceeded, RELATED time exceeded
	}{
		{"raw", "PREROUTING", []uint64{1, 0, 0}},
		{"raw", "OUTPUT", []uint64{0, 1, 1}},
		{"mangle", "PREROUTING", []uint64{1, 0, 0}},
		{"mangle", "FORWARD", []uint64{0, 0, 0}},
		{"mangle", "OUTPUT", []uint64{0, 1, 1}},
		{"mangle", "POSTROUTING", []uint64{0, 1, 1}},
		{"nat", "PREROUTING", []uint64{1, 0, 0}},
		{"nat", "OUTPUT", []uint64{0, 0, 0}},
		{"nat", "POSTROUTING", []uint64{0, 0, 0}},
		{"filter", "FORWARD", []uint64{0, 0, 0}},
		{"filter", "OUTPUT", []uint64{0, 1, 1}},
	} {
		var got []uint64
		for _, tbl := range h.Ruleset(IPv4).Tables() {
			if tbl.ID().String() != c.table {
				continue
			}
			for _, ch := range tbl.Chains() {
				if ch.Name == c.chain {
					for _, r := range ch.Rules {
						got = append(got, r.Counters.Packets)
					}
				}
			}
		}
		assert.Equal(t, c.want, got, "%s %s", c.table, c.chain)
	}

	// An ICMP error with TTL 1 is dropped without an answer.
	res = h.Receive("eth0", Packet{Proto: 1, Src: src, Dst: dst, TTL: 1, ICMPType: 3, ICMPCode: 3, Length: 56,
		Inner: InnerHeader{Proto: 17, Src: dst, Dst: src, SrcPort: 53, DstPort: 40000}})
	assert.Equal(t, ReasonTTLExceeded, res.Reason)
	assert.Empty(t, res.Emitted)
}
