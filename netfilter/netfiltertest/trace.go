package netfiltertest

import (
	"fmt"
	"io"
	"net/netip"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// Addrs formats a packet's addresses as "src:port → dst:port", or
// "src → dst" for a protocol without ports.
func Addrs(p netfilter.Packet) string {
	switch p.Proto {
	case inet.TCP, inet.UDP, inet.SCTP, inet.UDPLite:
		return fmt.Sprintf("%s → %s", netip.AddrPortFrom(p.Src, p.SrcPort), netip.AddrPortFrom(p.Dst, p.DstPort))
	}
	return fmt.Sprintf("%s → %s", p.Src, p.Dst)
}

// WriteTrace writes the walk of packet in that gave r, from r.Trace (the
// host must trace): one line per rule that matched (hook, table, chain,
// rule number and what it did: the jump, or the verdict with the target
// that gave it) and per DROP policy, a line whenever the packet's
// addresses or mark changed, and a last line with the verdict, the
// disposition and how the packet left.
func WriteTrace(w io.Writer, in netfilter.Packet, r netfilter.Result) error {
	var b strings.Builder
	last := in
	for _, s := range r.Trace {
		if s.Rule != 0 || s.Action.Kind == netfilter.ActionPolicyDrop {
			fmt.Fprintf(&b, "  %-11s %-6s %-26s #%-2d %s\n", s.Hook, s.Table, s.Chain, s.Rule, action(s))
		}
		if s.Packet != nil && changed(last, *s.Packet) {
			fmt.Fprintf(&b, "      packet is now %s mark %#x\n", Addrs(*s.Packet), s.Packet.Mark)
			last = *s.Packet
		}
	}
	fmt.Fprintf(&b, "  => %s %s", r.Verdict, r.Disposition)
	switch r.Disposition {
	case netfilter.Forwarded, netfilter.Sent:
		fmt.Fprintf(&b, " out %s as %s mark %#x", r.Packet.Out, Addrs(r.Packet), r.Packet.Mark)
	case netfilter.Delivered:
		fmt.Fprintf(&b, " to a local socket as %s", Addrs(r.Packet))
	}
	if r.Reason != netfilter.NoReason {
		fmt.Fprintf(&b, " (%s)", r.Reason)
	}
	b.WriteByte('\n')
	_, err := io.WriteString(w, b.String())
	return err
}

func changed(a, b netfilter.Packet) bool {
	return a.Src != b.Src || a.Dst != b.Dst || a.SrcPort != b.SrcPort || a.DstPort != b.DstPort || a.Mark != b.Mark
}

// action says what a step did: the jump, or the verdict with the target
// that gave it (the part of the rule after -j).
func action(s netfilter.Step) string {
	if s.Action.Kind == netfilter.ActionJump || s.Action.Kind == netfilter.ActionGoto {
		return s.Action.String()
	}
	if i := strings.LastIndex(s.Text, " -j "); i >= 0 {
		return s.Action.String() + " (" + s.Text[i+4:] + ")"
	}
	return s.Action.String()
}
