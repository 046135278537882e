// Package story prints the views the example programs share: a packet's
// walk through a host, `iptables -t nat -nvL CHAIN`, `conntrack -L` and
// `ipset list`. It uses only packetwalk's public API, so the examples read
// as what a user of the library would write.
package story

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"
	"strings"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// Clock is the fixed time every example starts at, so conntrack timeouts
// in the golden output do not depend on the machine.
var Clock = time.Date(2020, 11, 6, 13, 56, 40, 0, time.UTC)

// NewHost returns a tracing host on a manual clock at Clock.
func NewHost(seed uint64) (*netfilter.Host, *netfilter.ManualClock) {
	clock := netfilter.NewManualClock(Clock)
	h := netfilter.NewHost(netfilter.HostConfig{Seed: seed, Clock: clock})
	h.Tracing = true
	return h, clock
}

// TCP returns a TCP packet from src to dst with flags, as a client's
// kernel would send it.
func TCP(src, dst string, flags inet.TCPFlags) netfilter.Packet {
	s, d := netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst)
	return netfilter.Packet{Family: netfilter.IPv4, Proto: inet.TCP,
		Src: s.Addr(), Dst: d.Addr(), SrcPort: s.Port(), DstPort: d.Port(),
		TCPFlags: flags, TTL: 64, Length: 60, Window: 64240}
}

// Reply returns the answer to p with flags: addresses and ports swapped.
func Reply(p netfilter.Packet, flags inet.TCPFlags) netfilter.Packet {
	r := p
	r.Src, r.Dst, r.SrcPort, r.DstPort = p.Dst, p.Src, p.DstPort, p.SrcPort
	r.TCPFlags, r.TTL, r.Mark, r.In, r.Out = flags, 64, 0, "", ""
	return r
}

// Wire is what the next host receives of a packet that left a host: the
// interfaces and the mark are local to the sender (skb fields), the
// headers travel.
func Wire(p netfilter.Packet) netfilter.Packet {
	p.In, p.Out, p.Mark = "", "", 0
	return p
}

// Addr formats a packet's addresses as "src:port → dst:port".
func Addr(p netfilter.Packet) string {
	if p.Proto == inet.TCP || p.Proto == inet.UDP {
		return fmt.Sprintf("%s:%d → %s:%d", p.Src, p.SrcPort, p.Dst, p.DstPort)
	}
	return fmt.Sprintf("%s → %s", p.Src, p.Dst)
}

// Title prints a section heading.
func Title(w io.Writer, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	fmt.Fprintf(w, "\n## %s\n\n", s)
}

// Receive sends p into host on iface and prints its walk under the label
// "host": the rules that matched, how the packet changed and where it went.
func Receive(w io.Writer, host string, h *netfilter.Host, iface string, p netfilter.Packet) netfilter.Result {
	fmt.Fprintf(w, "%s: %s [%s] in on %s\n", host, Addr(p), p.TCPFlags, iface)
	r := h.Receive(iface, p)
	Steps(w, p, r)
	return r
}

// Send lets a local process of host send p and prints its walk.
func Send(w io.Writer, host string, h *netfilter.Host, p netfilter.Packet) netfilter.Result {
	fmt.Fprintf(w, "%s: %s [%s] sent by a local process\n", host, Addr(p), p.TCPFlags)
	r := h.Send(p)
	Steps(w, p, r)
	return r
}

// Steps prints the matched rules of r.Trace, a line whenever the packet's
// addresses or mark changed, and the outcome.
func Steps(w io.Writer, in netfilter.Packet, r netfilter.Result) {
	last := in
	for _, s := range r.Trace {
		if s.Rule != 0 || s.Action.Kind == netfilter.ActionPolicyDrop {
			fmt.Fprintf(w, "  %-11s %-6s %-26s #%-2d %s\n", s.Hook, s.Table, s.Chain, s.Rule, action(s))
		}
		if s.Packet != nil && changed(last, *s.Packet) {
			fmt.Fprintf(w, "      packet is now %s mark %#x\n", Addr(*s.Packet), s.Packet.Mark)
			last = *s.Packet
		}
	}
	fmt.Fprintf(w, "  => %s %s", r.Verdict, r.Disposition)
	switch r.Disposition {
	case netfilter.Forwarded, netfilter.Sent:
		fmt.Fprintf(w, " out %s as %s mark %#x", r.Packet.Out, Addr(r.Packet), r.Packet.Mark)
	case netfilter.Delivered:
		fmt.Fprintf(w, " to a local socket as %s", Addr(r.Packet))
	}
	if r.Reason != netfilter.NoReason {
		fmt.Fprintf(w, " (%s)", r.Reason)
	}
	fmt.Fprintln(w)
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

// NAT prints `iptables -t nat -nvL chain` of host h.
func NAT(w io.Writer, h *netfilter.Host, chain string) error {
	return List(w, h, netfilter.NAT, chain)
}

// List prints `iptables -t table -nvL chain` of host h.
func List(w io.Writer, h *netfilter.Host, table netfilter.TableID, chain string) error {
	b, err := h.Ruleset(netfilter.IPv4).AppendList(nil, table, chain, netfilter.ListOptions{Numeric: true, Verbose: true})
	if err != nil {
		return err
	}
	t := ""
	if table != netfilter.Filter {
		t = "-t " + table.String() + " "
	}
	fmt.Fprintf(w, "$ iptables %s-nvL %s\n", t, chain)
	_, err = w.Write(b)
	return err
}

// Conntrack prints `conntrack -L` of host h with the filter f, and the
// summary line conntrack writes to standard error.
func Conntrack(w io.Writer, h *netfilter.Host, args string, f conntrack.Filter) {
	fmt.Fprintf(w, "$ conntrack -L %s\n", args)
	n := 0
	now := h.Clock().Now()
	for _, e := range h.Conntrack().Entries() {
		if f.Match(e) {
			w.Write(append(e.AppendText(nil, now, conntrack.Format{}), '\n'))
			n++
		}
	}
	fmt.Fprintf(w, "conntrack v1.4.7 (conntrack-tools): %d flow entries have been shown.\n", n)
}

// Ipset prints `ipset list name` of host h.
func Ipset(w io.Writer, h *netfilter.Host, name string) error {
	var b bytes.Buffer
	if err := h.Sets().List(&b, name); err != nil {
		return err
	}
	fmt.Fprintf(w, "$ ipset list %s\n", name)
	_, err := w.Write(b.Bytes())
	return err
}

// Matched reports whether r's trace holds the rule "chain #n" of table.
func Matched(r netfilter.Result, table netfilter.TableID, chain string, n int) bool {
	for _, s := range r.Trace {
		if s.Table == table && s.Chain == chain && s.Rule == n {
			return true
		}
	}
	return false
}
