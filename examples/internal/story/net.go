package story

import (
	"fmt"
	"io"
	"net/netip"

	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// Net connects hosts: each host's links say which neighbour (and which of
// its interfaces) receives what the host sends towards a prefix. It stands
// for the cables, bridges and the cloud network between the hosts.
type Net struct {
	// OnHop, when set, is called with every hop of every Send, in order:
	// the kernel-backed tests use it to replay what crossed a node.
	OnHop func(Hop)
	w     io.Writer
	hosts map[string]*netfilter.Host
	links map[string][]link
}

type link struct {
	dst       netip.Prefix
	to, iface string
}

// Hop is one host's part of a packet's journey.
type Hop struct {
	Host   string
	Iface  string // receiving interface, "" for the sender
	In     netfilter.Packet
	Result netfilter.Result
}

// NewNet returns an empty network printing walks to w.
func NewNet(w io.Writer) *Net {
	return &Net{w: w, hosts: map[string]*netfilter.Host{}, links: map[string][]link{}}
}

// Add names a host.
func (n *Net) Add(name string, h *netfilter.Host) { n.hosts[name] = h }

// Host returns the host called name.
func (n *Net) Host(name string) *netfilter.Host { return n.hosts[name] }

// Link says that what host from sends towards dst arrives at host to on
// iface. The longest matching prefix wins.
func (n *Net) Link(from, dst, to, iface string) {
	n.links[from] = append(n.links[from], link{netip.MustParsePrefix(dst), to, iface})
}

// Send lets a process on host from send p and follows the packet from host
// to host until it is delivered, dropped or has nowhere to go, printing
// each host's walk.
func (n *Net) Send(from string, p netfilter.Packet) []Hop {
	r := Send(n.w, from, n.hosts[from], p)
	hops := []Hop{{Host: from, In: p, Result: r}}
	n.hop(hops[0])
	for len(hops) < 8 {
		last := hops[len(hops)-1]
		if last.Result.Disposition != netfilter.Forwarded && last.Result.Disposition != netfilter.Sent {
			break
		}
		to, iface, ok := n.next(last.Host, last.Result.Packet.Dst)
		if !ok {
			fmt.Fprintf(n.w, "  (%s has no neighbour towards %s)\n", last.Host, last.Result.Packet.Dst)
			break
		}
		in := netfiltertest.Wire(last.Result.Packet)
		r := Receive(n.w, to, n.hosts[to], iface, in)
		hops = append(hops, Hop{Host: to, Iface: iface, In: in, Result: r})
		n.hop(hops[len(hops)-1])
	}
	return hops
}

func (n *Net) hop(h Hop) {
	if n.OnHop != nil {
		n.OnHop(h)
	}
}

func (n *Net) next(from string, dst netip.Addr) (string, string, bool) {
	best := -1
	var to, iface string
	for _, l := range n.links[from] {
		if l.dst.Contains(dst) && l.dst.Bits() > best {
			best, to, iface = l.dst.Bits(), l.to, l.iface
		}
	}
	return to, iface, best >= 0
}

// Last returns the final hop.
func Last(hops []Hop) Hop { return hops[len(hops)-1] }
