package netfilter

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// grammarMatchSpecs are rule specs whose matching the grammar work changed:
// non-contiguous masks, IPv4-mapped IPv6 addresses, udp's reversed port
// ranges and strtoul-style port numbers.
var grammarMatchSpecs = map[Family][]string{
	IPv4: {
		"-s 10.0.0.0/255.0.255.0",
		"! -s 10.0.0.0/255.0.255.0",
		"-d 192.168.0.9/255.255.0.255",
		"-s 10.1.0.0/255.0.255.0",
		"-s 10.0.0.0/128.0.0.1",
		"-p udp -m udp --dport 100:50",
		"-p udp -m udp ! --dport 100:50",
		"-p udp -m udp --dport 010",
		"-p udp -m udp --sport 01000",
		"-p udp -m multiport --dports 010,9",
		"-p udp -m udp ! --dport 0:65535",
		"-p udp -m udp ! --sport 0:65535 --dport 9",
		"-p udp -m udp --sport 0:65535 --dport 9",
	},
	IPv6: {
		"-d ::ffff:10.1.2.3",
		"-d ::ffff:10.0.0.0/104",
		"! -d ::ffff:10.0.0.0/104",
		"-s 2001:db8::/ffff:ffff::ffff",
		"! -s 2001:db8::/ffff:ffff::ffff",
		"-d 2001:db8::1/ffff:0:ffff::",
		"-d ::1.2.3.4/::ffff:ffff",
		"-p udp -m udp --dport 100:50",
		"-s ::ffff:10.1.2.0/120",
	},
}

// grammarMatchRules writes the specs as counting rules in raw PREROUTING,
// then drops the packet so that nothing else happens.
func grammarMatchRules(specs []string) string {
	var b strings.Builder
	b.WriteString("*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, s := range specs {
		fmt.Fprintf(&b, "-A PREROUTING -i eth0 %s\n", s)
	}
	b.WriteString("-A PREROUTING -i eth0 -j DROP\nCOMMIT\n")
	return b.String()
}

// grammarMatches reports, for each spec, whether packetwalk matches p
// with it.
func grammarMatches(t *testing.T, f Family, specs []string, p Packet) []bool {
	t.Helper()
	out := make([]bool, len(specs))
	for i, s := range specs {
		h := NewHost(HostConfig{})
		require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), netip.MustParsePrefix("fd00:10::1/64")))
		rules := fmt.Sprintf("*raw\n-A PREROUTING -i eth0 %s -j DROP\nCOMMIT\n", s)
		require.NoError(t, h.Restore(f, []byte(rules), RestoreOptions{}), "spec %q", s)
		res := h.Receive("eth0", p)
		out[i] = res.Verdict == VerdictDrop && res.Where.Table == Raw && res.Where.Rule == 1
	}
	return out
}

// grammarMatchPackets are the packets both tests send, with the specs
// (by index in grammarMatchSpecs) the kernel matched, as
// TestKernelGrammarMatch recorded it.
var grammarMatchPackets = map[Family][]struct {
	src, dst     string
	sport, dport uint16
	want         []int
}{
	IPv4: {
		{"10.7.0.3", "192.168.10.1", 40000, 9, []int{0, 3, 6, 9, 10, 11, 12}},
		{"10.7.0.0", "192.168.7.9", 1000, 8, []int{0, 2, 3, 4, 6, 8, 9, 10}},
		{"10.1.5.0", "192.168.10.1", 1000, 75, []int{1, 4, 6, 8, 10}},
		{"138.0.0.0", "192.168.10.1", 1000, 100, []int{1, 6, 8, 10}},
		{"11.0.0.1", "192.168.10.1", 1000, 50, []int{1, 6, 8, 10}},
	},
	IPv6: {
		{"fd00:10::2", "::ffff:10.1.2.3", 1000, 9, []int{0, 1, 4}},
		{"fd00:10::2", "::ffff:10.7.7.7", 1000, 9, []int{1, 4}},
		{"2001:db8:5::7", "2001:99:1::1", 1000, 9, []int{2, 4}},
		{"2001:db8::ffff", "::1.2.3.4", 1000, 100, []int{2, 4, 6}},
		{"2001:db9::", "::5:1.2.3.4", 1000, 60, []int{2, 4, 6}},
		// The kernel passes an IPv4-mapped source to PREROUTING.
		{"::ffff:10.1.2.3", "fd00:10::1", 1000, 9, []int{2, 4, 8}},
	},
}

func grammarPacket(f Family, src, dst string, sport, dport uint16) Packet {
	// Family is explicit: packetwalk infers IPv4 for an IPv4-mapped
	// destination.
	return Packet{Family: f, Proto: inet.UDP, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst),
		SrcPort: sport, DstPort: dport, TTL: 64, Length: 60}
}

func TestGrammarMatchUnit(t *testing.T) {
	for _, f := range []Family{IPv4, IPv6} {
		for _, c := range grammarMatchPackets[f] {
			got := grammarMatches(t, f, grammarMatchSpecs[f], grammarPacket(f, c.src, c.dst, c.sport, c.dport))
			var idx []int
			for i, ok := range got {
				if ok {
					idx = append(idx, i)
				}
			}
			assert.Equal(t, c.want, idx, "%s > %s:%d", c.src, c.dst, c.dport)
		}
	}
}

// TestKernelGrammarMatch sends packets through the specs in a real
// namespace and compares which rules the kernel counted with packetwalk.
func TestKernelGrammarMatch(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-gm"})
	for _, f := range []Family{IPv4, IPv6} {
		specs := grammarMatchSpecs[f]
		for _, c := range grammarMatchPackets[f] {
			t.Run(fmt.Sprintf("%s>%s:%d", c.src, c.dst, c.dport), func(t *testing.T) {
				rs := kerneltest.Ruleset{IPv4: grammarMatchRules(specs)}
				if f == IPv6 {
					rs = kerneltest.Ruleset{IPv6: grammarMatchRules(specs)}
				}
				require.NoError(t, lab.ResetRuleset(rs))
				frame, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: netip.MustParseAddr(c.src),
					Dst: netip.MustParseAddr(c.dst), SrcPort: c.sport, DstPort: c.dport})
				require.NoError(t, err)
				_, err = lab.Exchange(frame)
				require.NoError(t, err)
				cnt, err := lab.Counters()
				if f == IPv6 {
					cnt, err = lab.Counters6()
				}
				require.NoError(t, err)
				// The trailing DROP proves the packet reached the rules.
				last, ok := cnt.Rule("raw", "PREROUTING", len(specs)+1)
				require.True(t, ok)
				require.Equal(t, uint64(1), last.Packets, "the packet did not reach raw PREROUTING")
				got := make([]bool, len(specs))
				for i := range specs {
					c, ok := cnt.Rule("raw", "PREROUTING", i+1)
					require.True(t, ok)
					got[i] = c.Packets > 0
				}
				want := grammarMatches(t, f, specs, grammarPacket(f, c.src, c.dst, c.sport, c.dport))
				for i, s := range specs {
					assert.Equal(t, got[i], want[i], "spec %q: kernel matched %v, packetwalk %v", s, got[i], want[i])
				}
			})
		}
	}
}
