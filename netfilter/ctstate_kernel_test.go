package netfilter

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// assertSameCounters compares the packet counter of every rule and policy
// of h's ruleset for f with the kernel's.
func assertSameCounters(t *testing.T, h *Host, f Family, kc kerneltest.Counters) {
	t.Helper()
	assertSameRuleCounters(t, h, f, kc, false)
	for _, tbl := range h.Ruleset(f).Tables() {
		for _, ch := range tbl.Chains() {
			if ch.Builtin() {
				want, ok := kc.Policy(tbl.ID().String(), ch.Name)
				require.True(t, ok, "%s %s policy", tbl.ID(), ch.Name)
				assert.Equal(t, want.Packets, ch.Counters.Packets, "%s %s policy: kernel (want) vs packetwalk packets", tbl.ID(), ch.Name)
			}
		}
	}
}

// assertSameRuleCounters compares the packet counter (and with bytes the
// byte counter) of every rule of h's ruleset for f with the kernel's.
func assertSameRuleCounters(t *testing.T, h *Host, f Family, kc kerneltest.Counters, bytes bool) {
	t.Helper()
	for _, tbl := range h.Ruleset(f).Tables() {
		for _, ch := range tbl.Chains() {
			for n, r := range ch.Rules {
				want, ok := kc.Rule(tbl.ID().String(), ch.Name, n+1)
				require.True(t, ok, "%s %s rule %d", tbl.ID(), ch.Name, n+1)
				const what = "%s %s rule %d (%s): kernel (want) vs packetwalk %s"
				text := strings.TrimSpace(r.String())
				assert.Equal(t, want.Packets, r.Counters.Packets, what, tbl.ID(), ch.Name, n+1, text, "packets")
				if bytes {
					assert.Equal(t, want.Bytes, r.Counters.Bytes, what, tbl.ID(), ch.Name, n+1, text, "bytes")
				}
			}
		}
	}
}

// TestKernelCTTargetState sends a UDP packet received on eth0 and one sent
// by the node to itself (through lo) through the kernel and through a
// Host, with the ctstate rules of ctTargetRules, and compares every
// counter: what CT, NOTRACK and CONNMARK do is seen by the next rule.
func TestKernelCTTargetState(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-ctst"})
	cfg := lab.Config()
	for _, v6 := range []bool{false, true} {
		for _, variant := range []string{"notrack", "template"} {
			for _, local := range []bool{false, true} {
				name := variant + map[bool]string{false: "/ipv4", true: "/ipv6"}[v6] + map[bool]string{false: "/received", true: "/local"}[local]
				t.Run(name, func(t *testing.T) {
					fam, src, dst := IPv4, cfg.Client.Addr(), cfg.NodeEth0.Addr()
					if v6 {
						fam, src, dst = IPv6, cfg.Client6.Addr(), cfg.NodeEth0v6.Addr()
					}
					if local {
						src = netip.MustParseAddr("127.0.0.1")
						if v6 {
							src = netip.IPv6Loopback()
						}
						dst = src
					}
					rules := ctTargetRules(variant, fam)
					rs := kerneltest.Ruleset{IPv4: rules}
					if v6 {
						rs = kerneltest.Ruleset{IPv6: rules}
					}
					require.NoError(t, lab.ResetRuleset(rs))
					spec := kerneltest.FrameSpec{Proto: "udp", Src: src, Dst: dst, SrcPort: 40000, DstPort: 9, PayloadLen: 4}
					if local {
						pkt, err := kerneltest.BuildPacket(spec)
						require.NoError(t, err)
						require.NoError(t, lab.SendFromNode(pkt))
						_, err = lab.Settle()
						require.NoError(t, err)
					} else {
						f, err := lab.Frame(spec)
						require.NoError(t, err)
						_, err = lab.Exchange(f)
						require.NoError(t, err)
					}
					kc, err := lab.Counters()
					if v6 {
						kc, err = lab.Counters6()
					}
					require.NoError(t, err)
					t.Logf("kernel: %s", strings.Join(kc.NonZero(), ", "))

					h := labHost(t, cfg, HostConfig{}, fam, rules)
					p := Packet{Proto: inet.UDP, Src: src, Dst: dst, SrcPort: 40000, DstPort: 9, TTL: 64, Length: 20 + 8 + 4}
					if v6 {
						p.Length = 40 + 8 + 4
					}
					var res Result
					if local {
						res = h.Send(p)
					} else {
						res = h.Receive("eth0", p)
					}
					t.Logf("packetwalk: %s %s", res.Disposition, res.Verdict)
					assertSameCounters(t, h, fam, kc)
				})
			}
		}
	}
}

// labHost is the lab's node in packetwalk: a host made with hc, eth0 and
// eth1 with the lab's addresses of both families, and rules of family f.
func labHost(t *testing.T, cfg kerneltest.LabConfig, hc HostConfig, f Family, rules string) *Host {
	t.Helper()
	h := NewHost(hc)
	require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0, cfg.NodeEth0v6))
	require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1, cfg.NodeEth1v6))
	require.NoError(t, h.Restore(f, []byte(rules), RestoreOptions{}))
	return h
}
