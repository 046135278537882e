// Package story prints the views the example programs share: a packet's
// walk through a host under the host's name, `iptables -t nat -nvL CHAIN`,
// `conntrack -L` and `ipset list` with their command lines, and section
// titles; Net is a cluster.Network that prints every walk across it. It uses only packetwalk's public API, so the
// examples read as what a user of the library would write; what is not
// specific to the examples' printing (hosts on a manual clock, replies,
// traces, Matched) is in package netfiltertest.
package story

import (
	"bytes"
	"fmt"
	"io"
	"net/netip"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// TCP returns a TCP segment from src to dst ("addr:port") with flags, as
// a client's kernel sends a SYN: netfilter.TCP's headers plus 20 bytes of
// TCP options (MSS, SACK, timestamps, window scale, which packetwalk
// counts as payload) and Linux's initial window.
func TCP(src, dst string, flags inet.TCPFlags) netfilter.Packet {
	p := netfilter.TCP(netip.MustParseAddrPort(src), netip.MustParseAddrPort(dst), flags)
	p.Length += 20
	p.Window = 64240
	return p
}

// Title prints a section heading.
func Title(w io.Writer, format string, args ...any) {
	s := fmt.Sprintf(format, args...)
	fmt.Fprintf(w, "\n## %s\n\n", s)
}

// Receive sends p into host on iface and prints its walk under the label
// "host": the rules that matched, how the packet changed and where it went.
func Receive(w io.Writer, host string, h *netfilter.Host, iface string, p netfilter.Packet) netfilter.Result {
	fmt.Fprintf(w, "%s: %s [%s] in on %s\n", host, netfiltertest.Addrs(p), p.TCPFlags, iface)
	r := h.Receive(iface, p)
	_ = netfiltertest.WriteTrace(w, p, r)
	return r
}

// Send lets a local process of host send p and prints its walk.
func Send(w io.Writer, host string, h *netfilter.Host, p netfilter.Packet) netfilter.Result {
	fmt.Fprintf(w, "%s: %s [%s] sent by a local process\n", host, netfiltertest.Addrs(p), p.TCPFlags)
	r := h.Send(p)
	_ = netfiltertest.WriteTrace(w, p, r)
	return r
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
