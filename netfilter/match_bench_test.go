package netfilter

import (
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/require"
)

// matchBenchHost is a host whose INPUT chain runs every match of this file
// set on each packet before accepting it.
func matchBenchHost(tb testing.TB) *Host {
	h := NewHost(HostConfig{Clock: NewManualClock(time.Unix(1, 0))})
	require.NoError(tb, h.AddInterface("eth0", p4("10.1.0.2/24")))
	rs := NewRuleset(IPv4).MustExec(
		"-A INPUT -m comment --comment bench -m mark ! --mark 0x4000/0x4000 -p udp -m multiport --dports 1:6,7,8",
		"-A INPUT -m iprange --src-range 10.1.0.1-10.1.0.100 -m addrtype --dst-type LOCAL --limit-iface-in -m length --length 20:1500 -m pkttype --pkt-type unicast",
		"-A INPUT -m statistic --mode nth --every 2 --packet 0 -m statistic --mode random --probability 0.5 -m limit --limit 10000/sec --limit-burst 10000",
		"-A INPUT -m mac ! --mac-source 00:11:22:33:44:55 -m physdev ! --physdev-is-bridged -m helper ! --helper ftp",
	)
	require.NoError(tb, h.Load(rs))
	return h
}

// benchPacket is a UDP packet from a known Ethernet source.
func benchPacket(h *Host) Result {
	return h.Receive("eth0", Packet{Src: a4("10.1.0.9"), Dst: a4("10.1.0.2"), Proto: inet.UDP, SrcPort: 1000, DstPort: 7,
		TTL: 64, Length: 29, HasMAC: true, SrcMAC: [6]byte{2, 0, 0, 0, 0, 1}})
}

func BenchmarkMatches(b *testing.B) {
	h := matchBenchHost(b)
	b.ReportAllocs()
	for b.Loop() {
		benchPacket(h)
	}
}

// TestMatchesDoNotAllocate runs the same walk and checks the matches add no
// allocation per packet to what an empty ruleset costs.
func TestMatchesDoNotAllocate(t *testing.T) {
	h := matchBenchHost(t)
	empty := NewHost(HostConfig{})
	require.NoError(t, empty.AddInterface("eth0", p4("10.1.0.2/24")))
	require.NoError(t, empty.Load(NewRuleset(IPv4).MustExec("-A INPUT -j RETURN")))
	base := testing.AllocsPerRun(200, func() { benchPacket(empty) })
	got := testing.AllocsPerRun(200, func() { benchPacket(h) })
	require.Equal(t, base, got)
}

// TestMatchBenchRulesAllRun guards the benchmark: every rule must match,
// so that every match really runs.
func TestMatchBenchRulesAllRun(t *testing.T) {
	h := matchBenchHost(t)
	for range 4 {
		benchPacket(h)
	}
	for i, r := range h.Ruleset(IPv4).Table(Filter).Chain("INPUT").Rules {
		if i == 2 {
			continue // nth and random let some packets through only
		}
		require.Equal(t, uint64(4), r.Counters.Packets, "rule %d", i+1)
	}
}
