package story

import (
	"fmt"
	"io"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

// Net is a cluster.Network that prints every walk: each host's part as
// Receive and Send print it, and one line for each other device (a
// router, the load balancer, a gateway).
type Net struct {
	*cluster.Network
	// OnHop, when set, is called with every hop of every walk, in order:
	// the kernel-backed tests use it to replay what crossed a node.
	OnHop func(Hop)
	w     io.Writer
}

// Hop is one device's part of a packet's journey.
type Hop struct {
	cluster.Hop
	// Host is the device's name.
	Host string
	// Iface is the interface the host received the packet on, as its
	// rules see it (-i: the bridge for a frame from a bridge port), ""
	// for a packet a local process sent.
	Iface string
	// In is the packet as it arrived.
	In netfilter.Packet
}

// NewNet returns an empty network printing walks to w.
func NewNet(w io.Writer, cfg cluster.Config) *Net {
	return &Net{Network: cluster.New(cfg), w: w}
}

// Send lets a process on host from send p, follows the packet across the
// network and prints each hop.
func (n *Net) Send(from string, p netfilter.Packet) ([]Hop, cluster.Walk, error) {
	wk, err := n.Network.Send(from, p)
	return n.print(wk, err)
}

// Receive follows p arriving from outside the model at port at.
func (n *Net) Receive(at cluster.Port, p netfilter.Packet) ([]Hop, cluster.Walk, error) {
	wk, err := n.Network.Receive(at, p)
	return n.print(wk, err)
}

// Reply sends the answer to the packet wk delivered, with flags.
func (n *Net) Reply(wk cluster.Walk, flags inet.TCPFlags) ([]Hop, cluster.Walk, error) {
	r, err := n.Network.Reply(wk, flags)
	return n.print(r, err)
}

func (n *Net) print(wk cluster.Walk, err error) ([]Hop, cluster.Walk, error) {
	hops := make([]Hop, 0, len(wk.Hops))
	for _, h := range wk.Hops {
		hop := Hop{Hop: h, Host: h.Device, In: h.Packet}
		if h.In != "" && h.Kind == cluster.KindHost {
			hop.Iface = h.In
			if h.Result.Packet.PhysIn != "" {
				hop.Iface = h.Result.Packet.In
			}
		}
		n.printHop(hop)
		if n.OnHop != nil {
			n.OnHop(hop)
		}
		hops = append(hops, hop)
	}
	if err != nil {
		return hops, wk, err
	}
	if wk.Fate != cluster.Delivered && wk.Reason != "" {
		fmt.Fprintf(n.w, "  (%s)\n", wk.Reason)
	}
	return hops, wk, nil
}

func (n *Net) printHop(h Hop) {
	p := h.In
	if h.Kind != cluster.KindHost {
		out := h.Result.Packet
		fmt.Fprintf(n.w, "%s: %s [%s] %s, %s → %s", h.Host, netfiltertest.Addrs(p), p.TCPFlags, h.Kind, h.Hop.In, h.Out)
		if netfiltertest.Addrs(out) != netfiltertest.Addrs(p) && out.Dst.IsValid() {
			fmt.Fprintf(n.w, " as %s", netfiltertest.Addrs(out))
		}
		if h.Note != "" {
			fmt.Fprintf(n.w, " (%s)", h.Note)
		}
		fmt.Fprintln(n.w)
		return
	}
	if h.Note != "" {
		fmt.Fprintf(n.w, "%s: %s\n", h.Host, h.Note)
	}
	switch {
	case h.Iface == "":
		fmt.Fprintf(n.w, "%s: %s [%s] sent by a local process\n", h.Host, netfiltertest.Addrs(p), p.TCPFlags)
	case h.Iface != h.Hop.In:
		fmt.Fprintf(n.w, "%s: %s [%s] in on %s (bridge port %s)\n", h.Host, netfiltertest.Addrs(p), p.TCPFlags, h.Iface, h.Hop.In)
	default:
		fmt.Fprintf(n.w, "%s: %s [%s] in on %s\n", h.Host, netfiltertest.Addrs(p), p.TCPFlags, h.Iface)
	}
	_ = netfiltertest.WriteTrace(n.w, p, h.Result)
}

// Last returns the final hop.
func Last(hops []Hop) Hop { return hops[len(hops)-1] }
