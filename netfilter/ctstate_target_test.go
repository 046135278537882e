package netfilter

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// ctTargetRules counts, in raw PREROUTING and OUTPUT, the conntrack state
// the rules after a CT target see (the "notrack" variant untracks the
// packet, "template" attaches CT --zone's template), then in mangle what
// CONNMARK and MARK leave for the next rule. filter INPUT drops the UDP
// packet so that the node's stack does not answer it.
func ctTargetRules(variant string, f Family) string {
	any := "0.0.0.0/0"
	if f == IPv6 {
		any = "::/0"
	}
	var b strings.Builder
	b.WriteString("*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, ch := range []string{"PREROUTING", "OUTPUT"} {
		var lines []string
		if variant == "notrack" {
			target := "CT --notrack"
			if ch == "OUTPUT" {
				target = "NOTRACK"
			}
			lines = []string{
				"-m conntrack --ctstate INVALID", "-m conntrack --ctstate UNTRACKED",
				"-j " + target,
				"-m conntrack --ctstate UNTRACKED", "-m state --state UNTRACKED", "-m conntrack --ctstate INVALID",
				"-j CT --zone 4", "-m conntrack --ctstate UNTRACKED", "-m conntrack --ctstate NEW",
				"-j CONNMARK --set-xmark 0x5/0xffffffff", "-m connmark --mark 0x5",
			}
		} else {
			lines = []string{
				"-m conntrack --ctstate INVALID",
				"-j CT --zone 3",
				"-m conntrack --ctstate NEW", "-m state --state NEW", "-m conntrack --ctstate INVALID",
				"-m conntrack --ctstatus CONFIRMED", "-m conntrack --ctstatus NONE",
				"-m conntrack --ctdir ORIGINAL", "-m conntrack --ctdir REPLY",
				"-m conntrack --ctorigsrc " + any, "-m conntrack --ctproto 17",
				"-m conntrack --ctorigdstport 0", "-m conntrack --ctexpire 0",
				"-m connmark --mark 0x0", "-j CONNMARK --set-xmark 0x5/0xffffffff", "-m connmark --mark 0x5",
				"-j CT --notrack", "-m conntrack --ctstate UNTRACKED", "-m conntrack --ctstate NEW",
			}
		}
		for _, l := range lines {
			fmt.Fprintf(&b, "-A %s -p udp %s\n", ch, l)
		}
	}
	b.WriteString("COMMIT\n*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	for _, ch := range []string{"PREROUTING", "OUTPUT"} {
		for _, l := range []string{
			"-m connmark --mark 0x5", "-m connmark --mark 0x0",
			"-j CONNMARK --set-xmark 0x6/0xffffffff", "-m connmark --mark 0x6",
			"-j MARK --set-xmark 0x7/0xffffffff", "-m mark --mark 0x7",
			"-m conntrack --ctstate UNTRACKED", "-m conntrack --ctstate NEW",
		} {
			fmt.Fprintf(&b, "-A %s -p udp %s\n", ch, l)
		}
	}
	b.WriteString("COMMIT\n*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -p udp -j DROP\nCOMMIT\n")
	return b.String()
}

// ruleHits lists the packet counters of chain's rules in table.
func ruleHits(t *testing.T, h *Host, f Family, table TableID, chain string) []uint64 {
	t.Helper()
	ch := h.Ruleset(f).Table(table).Chain(chain)
	require.NotNil(t, ch, "%s %s", table, chain)
	var out []uint64
	for _, r := range ch.Rules {
		out = append(out, r.Counters.Packets)
	}
	return out
}

// TestCTTargetStateSeenByNextRule pins what TestKernelCTTargetState
// recorded from the kernel: NOTRACK and CT --notrack make the very next
// rule see UNTRACKED, a CT template makes it see a NEW connection with
// zero tuples, status CONFIRMED and a settable connmark, and a packet that
// already has a conntrack (untracked, a template, or the connection a
// looped-back packet carries) ignores later CT targets.
func TestCTTargetStateSeenByNextRule(t *testing.T) {
	for _, tc := range []struct {
		variant, chain string
		local          bool
		raw, mangle    []uint64
	}{
		// INVALID, UNTRACKED, CT --notrack, UNTRACKED, state UNTRACKED,
		// INVALID, CT --zone 4 (ignored), UNTRACKED, NEW, CONNMARK (no
		// conntrack: nothing), connmark 0x5.
		{"notrack", "PREROUTING", false, []uint64{1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 0}, []uint64{0, 0, 1, 0, 1, 1, 1, 0}},
		{"notrack", "OUTPUT", true, []uint64{1, 0, 1, 1, 1, 0, 1, 1, 0, 1, 0}, []uint64{0, 0, 1, 0, 1, 1, 1, 0}},
		// The looped-back untracked packet stays untracked in PREROUTING.
		{"notrack", "PREROUTING", true, []uint64{0, 1, 1, 1, 1, 0, 1, 1, 0, 1, 0}, []uint64{0, 0, 1, 0, 1, 1, 1, 0}},
		// INVALID, CT --zone 3, NEW, state NEW, INVALID, CONFIRMED, NONE,
		// ORIGINAL, REPLY, ctorigsrc any, ctproto 17,
		// ctorigdstport 0, ctexpire 0, connmark 0, CONNMARK, connmark 5,
		// CT --notrack (ignored), UNTRACKED, NEW. The template's mark is
		// not the connection's: mangle sees connmark 0.
		{"template", "PREROUTING", false, []uint64{1, 1, 1, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1}, []uint64{0, 1, 1, 1, 1, 1, 0, 1}},
		{"template", "OUTPUT", true, []uint64{1, 1, 1, 1, 0, 1, 0, 1, 0, 1, 0, 1, 1, 1, 1, 1, 1, 0, 1}, []uint64{0, 1, 1, 1, 1, 1, 0, 1}},
	} {
		for _, f := range []Family{IPv4, IPv6} {
			t.Run(fmt.Sprintf("%s/%s/%s/local=%v", tc.variant, f, tc.chain, tc.local), func(t *testing.T) {
				h := NewHost(HostConfig{})
				require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), netip.MustParsePrefix("fd00:10::1/64")))
				require.NoError(t, h.Restore(f, []byte(ctTargetRules(tc.variant, f)), RestoreOptions{}))
				src, dst := netip.MustParseAddr("192.168.10.2"), netip.MustParseAddr("192.168.10.1")
				if f == IPv6 {
					src, dst = netip.MustParseAddr("fd00:10::2"), netip.MustParseAddr("fd00:10::1")
				}
				if tc.local {
					src = netip.MustParseAddr("127.0.0.1")
					if f == IPv6 {
						src = netip.IPv6Loopback()
					}
					dst = src
				}
				p := Packet{Proto: inet.UDP, Src: src, Dst: dst, SrcPort: 40000, DstPort: 9, TTL: 64, Length: 60}
				var res Result
				if tc.local {
					res = h.Send(p)
				} else {
					res = h.Receive("eth0", p)
				}
				assert.Equal(t, Dropped, res.Disposition)
				assert.Equal(t, tc.raw, ruleHits(t, h, f, Raw, tc.chain), "raw %s", tc.chain)
				mangleChain := "PREROUTING"
				if tc.chain == "OUTPUT" {
					mangleChain = "OUTPUT"
				}
				assert.Equal(t, tc.mangle, ruleHits(t, h, f, Mangle, mangleChain), "mangle %s", mangleChain)
			})
		}
	}
}
