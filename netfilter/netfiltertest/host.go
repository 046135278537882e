package netfiltertest

import (
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// Epoch returns the time the clock of [NewHost] starts at. Any fixed time
// would do: it makes conntrack timeouts and the recent match's ages the
// same on every run.
func Epoch() time.Time { return time.Date(2020, 11, 6, 13, 56, 40, 0, time.UTC) }

// NewHost returns a host configured by cfg, with tracing on (so that
// [Matched] and [WriteTrace] have steps to read) and a manual clock
// starting at [Epoch], which it also returns: time moves only when the
// test calls Advance. The clock replaces cfg.Clock.
func NewHost(cfg netfilter.HostConfig) (*netfilter.Host, *netfilter.ManualClock) {
	clock := netfilter.NewManualClock(Epoch())
	cfg.Clock = clock
	h := netfilter.NewHost(cfg)
	h.Tracing = true
	return h, clock
}

// Reply returns the packet the peer of p sends back: addresses and ports
// swapped, TCP flags set to flags, the hop limit reset to 64, an ICMP or
// ICMPv6 echo request turned into an echo reply. What belongs to the
// sender's kernel rather than to the headers is cleared, as [Wire] does,
// and so is the socket owner. Length and the TCP sequence fields are kept;
// set them when the test needs others.
func Reply(p netfilter.Packet, flags inet.TCPFlags) netfilter.Packet {
	r := Wire(p)
	r.Src, r.Dst, r.SrcPort, r.DstPort = p.Dst, p.Src, p.DstPort, p.SrcPort
	r.TCPFlags, r.TTL = flags, 64
	switch {
	case r.Proto == inet.ICMP && r.ICMPType == 8:
		r.ICMPType = 0
	case r.Proto == inet.ICMPv6 && r.ICMPType == 128:
		r.ICMPType = 129
	}
	r.UID, r.GID, r.HasSocket, r.Groups, r.NumGroups = 0, 0, false, [16]uint32{}, 0
	return r
}

// Wire returns what the next host receives of p after it left a host:
// the headers travel, while the interfaces, the mark and the bridge ports
// are the sender's (fields of its sk_buff) and are cleared.
func Wire(p netfilter.Packet) netfilter.Packet {
	p.In, p.Out, p.Mark = "", "", 0
	p.PhysIn, p.PhysOut, p.Bridged = "", "", false
	return p
}

// Matched reports whether rule n (1-based, as iptables -L --line-numbers
// counts) of chain in table matched the packet of r. It reads r.Trace, so
// the host must trace (Host.Tracing, on in hosts from [NewHost]): without
// a trace it reports false. A packet of an existing connection skips the
// nat table, so no nat rule matches it.
func Matched(r netfilter.Result, table netfilter.TableID, chain string, n int) bool {
	for _, s := range r.Trace {
		if s.Table == table && s.Chain == chain && s.Rule == n {
			return true
		}
	}
	return false
}
