package cluster

import (
	"fmt"
	"hash/fnv"
	"maps"
	"math/big"
	"net/netip"
	"slices"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// Fate is how a walk ended.
type Fate uint8

// Fates.
const (
	// Delivered: a host delivered the packet to a local socket.
	Delivered Fate = iota + 1
	// Dropped: a host dropped or rejected it (its Result says where), or
	// a device could not forward it (Walk.Reason says why).
	Dropped
	// Left: it left the model through a router or gateway port no link
	// attaches to (the Internet beyond the model).
	Left
)

var fateNames = [...]string{Delivered: "delivered", Dropped: "dropped", Left: "left"}

func (f Fate) String() string {
	if int(f) < len(fateNames) && fateNames[f] != "" {
		return fateNames[f]
	}
	return fmt.Sprintf("Fate(%d)", f)
}

// MarshalText makes a Fate its name in JSON ("delivered").
func (f Fate) MarshalText() ([]byte, error) { return []byte(f.String()), nil }

// Hop is one device's part of a walk.
type Hop struct {
	// Device names the device, Kind says what it is.
	Device string
	Kind   Kind
	// In is the interface or port the packet arrived on ("" for a packet
	// a local process of the host sent); for a frame entering a bridge,
	// the bridge port. Out is the interface or port it left through
	// ("" when it did not leave).
	In, Out string
	// Packet is the packet as it arrived (as sent, for a local process).
	Packet netfilter.Packet
	// Result is, for a host, what its netfilter did (its Trace lists the
	// rules the packet crossed); for another device, Disposition
	// Forwarded or Dropped and the Packet as it left.
	Result netfilter.Result
	// Note says what a device did (a load balancer's choice, a gateway's
	// translation, an encapsulation), empty when it only forwarded.
	Note string
}

// Walk is a packet's way through the network.
type Walk struct {
	Hops []Hop
	Fate Fate
	// Reason says why the walk ended when it did not end delivered: the
	// deciding rule of the host that dropped it, or what a device could
	// not do.
	Reason string
	// Emitted are the walks of the packets hosts generated while this
	// walk crossed them (a REJECT's TCP reset or ICMP port unreachable,
	// an ICMP time exceeded, the ICMP error of an unreachable route), in
	// the order of the hops' Result.Emitted. Each starts at the host that
	// sent it, with the packet as it left (its OUTPUT and POSTROUTING
	// already crossed), and crosses every device's connection state on
	// its way: each host's conntrack relates an ICMP error to the
	// connection it quotes and translates the quoted header, as the load
	// balancers and gateways do. A walk walked by Explain leaves them
	// nil (the hops' Result.Emitted still hold the packets).
	Emitted []Walk
}

// Last returns the walk's last hop (the zero Hop for an empty walk).
func (w Walk) Last() Hop {
	if len(w.Hops) == 0 {
		return Hop{}
	}
	return w.Hops[len(w.Hops)-1]
}

// transit is a packet between two devices, or about to be sent.
type transit struct {
	at Port
	// next is the neighbour the frame is addressed to at the link layer;
	// invalid means the receiving device routes it by its destination.
	next  netip.Addr
	pkt   netfilter.Packet
	local bool // sent by a local process of at.Device
	// inner is the encapsulated packet while pkt is a tunnel's outer one.
	inner *netfilter.Packet
	note  string
}

// branch is one way a device handled a transit: its hop and what follows.
type branch struct {
	p    *big.Rat // nil means 1
	hop  Hop
	next *transit // nil when the walk ends here
	fate Fate
	why  string
}

// Send lets a local process of the host called host send p, and follows
// the packet from device to device until it is delivered, dropped or
// leaves the model. A load balancer's choice comes from the network's
// random source; connection state (conntrack, load balancer flows,
// gateway translations) is kept for the replies.
func (n *Network) Send(host string, p netfilter.Packet) (Walk, error) {
	if _, err := n.host(host); err != nil {
		return Walk{}, err
	}
	return n.walk(transit{at: Port{Device: host}, pkt: p, local: true})
}

// Receive follows p arriving from outside the model at port at (a router's
// unlinked port, a host's interface) as Send does.
func (n *Network) Receive(at Port, p netfilter.Packet) (Walk, error) {
	d, ok := n.devices[at.Device]
	if !ok {
		return Walk{}, fmt.Errorf("%w: no device %q", ErrTopology, at.Device)
	}
	if !d.hasPort(at.Iface) {
		return Walk{}, fmt.Errorf("%w: %s %q has no port %q", ErrTopology, d.kind(), at.Device, at.Iface)
	}
	return n.walk(transit{at: at, pkt: p})
}

// Reply sends the answer to the packet w delivered, from the host that
// received it: addresses and ports swapped, with the TCP flags given (0
// for UDP or ICMP; an echo request is answered by an echo reply). It walks
// back through every device's connection state.
func (n *Network) Reply(w Walk, flags inet.TCPFlags) (Walk, error) {
	if w.Fate != Delivered {
		return Walk{}, fmt.Errorf("%w: the walk ended %s (%s)", ErrNotDelivered, w.Fate, w.Reason)
	}
	last := w.Last()
	return n.Send(last.Device, ReplyTo(last.Result.Packet, flags))
}

// ReplyTo returns the answer to p as its receiver's kernel sends it:
// addresses and ports swapped, TTL 64, flags as given, an ICMP echo
// request turned into an echo reply, and what belongs to the receiver's
// sk_buff (interfaces, mark, bridge ports, socket owner) cleared.
func ReplyTo(p netfilter.Packet, flags inet.TCPFlags) netfilter.Packet {
	r := wire(p)
	r.Src, r.Dst, r.SrcPort, r.DstPort = p.Dst, p.Src, p.DstPort, p.SrcPort
	r.TCPFlags, r.TTL = flags, 64
	switch {
	case r.Proto == inet.ICMP && r.ICMPType == 8:
		r.ICMPType = 0
	case r.Proto == inet.ICMPv6 && r.ICMPType == 128:
		r.ICMPType = 129
	}
	return r
}

// wire is what the next device receives of a packet that left a host:
// the headers; not the sender's sk_buff fields.
func wire(p netfilter.Packet) netfilter.Packet {
	p.In, p.Out, p.Mark, p.Priority = "", "", 0, 0
	p.PhysIn, p.PhysOut, p.Bridged = "", "", false
	p.UID, p.GID, p.HasSocket, p.Groups, p.NumGroups = 0, 0, false, [16]uint32{}, 0
	p.CgroupClassID, p.CgroupPath, p.Raw, p.Realm = 0, "", "", 0
	return p
}

// maxEmitDepth bounds the generations of emitted packets a walk follows:
// the kernel answers no ICMP error with another and no reset with a
// reset, so a reset answered by a time exceeded is the deepest there is.
const maxEmitDepth = 4

// walk follows t until the walk ends, taking one branch at each device,
// then the packets the hosts emitted on the way.
func (n *Network) walk(t transit) (Walk, error) {
	w, err := n.follow(t)
	if err != nil {
		return w, err
	}
	return w, n.followEmitted(&w, 0)
}

// followEmitted walks the packets w's hosts emitted, and theirs.
func (n *Network) followEmitted(w *Walk, depth int) error {
	for _, h := range w.Hops {
		if h.Kind != KindHost || len(h.Result.Emitted) == 0 {
			continue
		}
		if depth >= maxEmitDepth {
			return fmt.Errorf("%w: packets emitted in answer to emitted packets, %d deep (at %s)", ErrLoop, depth, h.Device)
		}
		d := n.devices[h.Device].(*hostDev)
		for _, e := range h.Result.Emitted {
			ew, err := n.emitted(d, e)
			if err == nil {
				err = n.followEmitted(&ew, depth+1)
			}
			w.Emitted = append(w.Emitted, ew)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// emitted follows packet e that host d generated (Result.Emitted): from
// the host, as it left there, or delivered back to the host through lo.
func (n *Network) emitted(d *hostDev, e netfilter.Packet) (Walk, error) {
	note := "emitted: " + describeEmitted(e)
	hop := Hop{Device: d.name, Kind: KindHost, Packet: e, Note: note,
		Result: netfilter.Result{Verdict: netfilter.VerdictAccept, Disposition: netfilter.Sent, Packet: e}}
	if e.In == "lo" {
		hop.In = "lo"
		hop.Result.Disposition = netfilter.Delivered
		return Walk{Hops: []Hop{hop}, Fate: Delivered}, nil
	}
	// The host routed the packet without telling the way: look it up
	// again as the kernel routes its own replies, with their source and
	// mark 0 (ip rules from a pod's address apply), from the header as
	// it left.
	e.Mark = 0
	if rt, ok := d.h.LookupLocal(e); ok {
		hop.Result.Via = rt.Gateway
	}
	t := transit{at: Port{Device: d.name}, pkt: e, local: true, note: note}
	b, err := n.afterHost(d, t, hop.Result)
	if err != nil {
		return Walk{Hops: []Hop{hop}}, err
	}
	w := Walk{Hops: []Hop{b.hop}}
	if b.next == nil {
		w.Fate, w.Reason = b.fate, b.why
		return w, nil
	}
	rest, err := n.follow(*b.next)
	w.Hops = append(w.Hops, rest.Hops...)
	w.Fate, w.Reason = rest.Fate, rest.Reason
	return w, err
}

// describeEmitted names a generated packet: a reset, or an ICMP error and
// the packet it quotes.
func describeEmitted(e netfilter.Packet) string {
	if e.Proto == inet.TCP {
		return "TCP reset " + addrs(e)
	}
	s := fmt.Sprintf("%s type %d code %d %s → %s", e.Proto, e.ICMPType, e.ICMPCode, e.Src, e.Dst)
	if e.Inner.Proto != 0 {
		in := netfilter.Packet{Proto: e.Inner.Proto, Src: e.Inner.Src, Dst: e.Inner.Dst, SrcPort: e.Inner.SrcPort, DstPort: e.Inner.DstPort}
		s += " quoting " + addrs(in)
	}
	return s
}

// follow follows t until the walk ends, taking one branch at each device.
func (n *Network) follow(t transit) (Walk, error) {
	var w Walk
	for {
		if len(w.Hops) >= n.cfg.MaxHops {
			return w, fmt.Errorf("%w: more than %d hops (last at %s)", ErrLoop, n.cfg.MaxHops, t.at)
		}
		bs, err := n.step(t, false)
		if err != nil {
			return w, err
		}
		b := bs[0]
		w.Hops = append(w.Hops, b.hop)
		if b.next == nil {
			w.Fate, w.Reason = b.fate, b.why
			return w, nil
		}
		t = *b.next
	}
}

// step is what the device at t.at does with t: one branch in a walk, every
// possible one, weighted, when explaining.
func (n *Network) step(t transit, explain bool) ([]branch, error) {
	d, ok := n.devices[t.at.Device]
	if !ok {
		return nil, fmt.Errorf("%w: no device %q", ErrTopology, t.at.Device)
	}
	switch d := d.(type) {
	case *hostDev:
		return n.hostStep(d, t, explain)
	case *Router:
		return n.routerStep(d, t)
	case *LoadBalancer:
		return n.lbStep(d, t, explain)
	case *Gateway:
		return n.gatewayStep(d, t, explain)
	}
	return nil, fmt.Errorf("%w: device %q of unknown kind", ErrTopology, t.at.Device)
}

// hostStep walks t through a host's netfilter.
func (n *Network) hostStep(d *hostDev, t transit, explain bool) ([]branch, error) {
	type weighted struct {
		p *big.Rat
		r netfilter.Result
	}
	var rs []weighted
	bridge, bridged := d.portOf[t.at.Iface]
	in := netfilter.BridgeIn{Bridge: bridge, Port: t.at.Iface, Next: t.next, PortOf: n.fdb(d, bridge)}
	if explain {
		var outs []netfilter.Outcome
		var err error
		switch {
		case t.local:
			outs, err = d.h.Explain("", t.pkt)
		case bridged:
			outs, err = d.h.ExplainBridged(in, t.pkt)
		default:
			outs, err = d.h.Explain(t.at.Iface, t.pkt)
		}
		if err != nil {
			return nil, fmt.Errorf("host %s: %w", d.name, err)
		}
		for _, o := range outs {
			rs = append(rs, weighted{o.Probability.Rat(), *o.Result})
		}
	} else {
		var r netfilter.Result
		switch {
		case t.local:
			r = d.h.Send(t.pkt)
		case bridged:
			r = d.h.ReceiveBridged(in, t.pkt)
		default:
			r = d.h.Receive(t.at.Iface, t.pkt)
		}
		if r.Err != nil {
			return nil, fmt.Errorf("host %s: %w", d.name, r.Err)
		}
		rs = append(rs, weighted{nil, r})
	}
	out := make([]branch, 0, len(rs))
	for _, w := range rs {
		b, err := n.afterHost(d, t, w.r)
		if err != nil {
			return nil, err
		}
		b.p = w.p
		out = append(out, b)
	}
	return out, nil
}

// afterHost says where a packet goes after host d gave r.
func (n *Network) afterHost(d *hostDev, t transit, r netfilter.Result) (branch, error) {
	hop := Hop{Device: d.name, Kind: KindHost, In: t.at.Iface, Out: r.Packet.Out, Packet: t.pkt, Result: r, Note: t.note}
	if t.local {
		hop.In = ""
	}
	if r.Packet.PhysOut != "" {
		hop.Out = r.Packet.PhysOut
	}
	b := branch{hop: hop}
	p := r.Packet
	switch r.Disposition {
	case netfilter.Delivered:
		if t.inner != nil {
			for _, iface := range slices.Sorted(maps.Keys(d.tunnels)) {
				if tun := d.tunnels[iface]; tun.Local == p.Dst && decapsulates(tun, p) {
					b.next = &transit{at: Port{d.name, iface}, pkt: *t.inner, note: fmt.Sprintf("decapsulated from %s %s → %s", tun.Kind, p.Src, p.Dst)}
					return b, nil
				}
			}
		}
		b.fate = Delivered
		return b, nil
	case netfilter.Forwarded, netfilter.Sent:
	default:
		b.fate, b.why = Dropped, fmt.Sprintf("%s %s on %s", r.Verdict, r.Disposition, d.name)
		if r.Where.Chain != "" {
			b.why += fmt.Sprintf(" (%s %s %s", r.Where.Hook, r.Where.Table, r.Where.Chain)
			if r.Where.Rule > 0 {
				b.why += fmt.Sprintf(" #%d", r.Where.Rule)
			}
			b.why += ")"
		}
		if r.Reason != netfilter.NoReason {
			b.why += ": " + r.Reason.String()
		}
		return b, nil
	}
	next := t.next
	if r.Packet.PhysOut == "" || p.Dst != t.pkt.Dst {
		// The neighbour the host's routing decision chose (its ip rules
		// included): the route's gateway, or the destination on link.
		next = p.Dst
		if r.Via.IsValid() {
			next = r.Via
		}
	}
	if tun, ok := d.tunnels[p.Out]; ok {
		remote := next
		if r, ok := tun.Remotes[next]; ok {
			remote = r
		}
		inner := wire(p)
		outer := encapsulate(tun, inner, remote)
		b.next = &transit{at: Port{Device: d.name}, pkt: outer, local: true, inner: &inner,
			note: fmt.Sprintf("encapsulates %s → %s in %s %s → %s", inner.Src, inner.Dst, tun.Kind, outer.Src, outer.Dst)}
		return b, nil
	}
	port := p.Out
	if _, isBridge := d.bridges[p.Out]; isBridge {
		port = p.PhysOut
		if port == "" {
			var ok bool
			if port, ok = n.fdb(d, p.Out)(next); !ok {
				b.fate, b.why = Dropped, fmt.Sprintf("%s: no port of bridge %s leads to %s", d.name, p.Out, next)
				return b, nil
			}
			b.hop.Out = port
		}
	}
	peer, ok := n.links[Port{d.name, port}]
	if !ok {
		return b, fmt.Errorf("%w: host %s sent %s out %s, which is linked to nothing", ErrTopology, d.name, addrs(p), port)
	}
	b.next = &transit{at: peer, next: next, pkt: wire(p), inner: t.inner}
	return b, nil
}

// fdb is the forwarding database of bridge br of host d: the port behind
// which a neighbour lives.
func (n *Network) fdb(d *hostDev, br string) func(netip.Addr) (string, bool) {
	if br == "" {
		return nil
	}
	return func(a netip.Addr) (string, bool) {
		// The neighbour itself first, then an uplink to a cloud network,
		// which answers for every address it routes elsewhere (Azure's
		// VNet answers every ARP request).
		for pass := 0; pass < 2; pass++ {
			for _, port := range d.bridges[br] {
				peer, ok := n.links[Port{d.name, port}]
				if !ok {
					continue
				}
				pd, ok := n.devices[peer.Device]
				if !ok {
					continue
				}
				if pass == 0 && pd.owns(peer.Iface, a) {
					return port, true
				}
				if r, ok := pd.(*Router); ok && pass == 1 {
					if out, _, err := r.lookup(a); err == nil && out != peer.Iface {
						return port, true
					}
				}
			}
		}
		return "", false
	}
}

func decapsulates(t *Tunnel, p netfilter.Packet) bool {
	switch t.Kind {
	case IPIP:
		return p.Proto == ipipProto
	case VXLAN:
		return p.Proto == inet.UDP && p.DstPort == t.Port
	}
	return false
}

// encapsulate builds the outer packet of inner sent through t to remote.
func encapsulate(t *Tunnel, inner netfilter.Packet, remote netip.Addr) netfilter.Packet {
	if t.Kind == IPIP {
		return netfilter.Packet{Family: netfilter.IPv4, Proto: ipipProto, Src: t.Local, Dst: remote, Length: inner.Length + ipipOverhead, TTL: 64}
	}
	// The kernel picks the UDP source port from a hash of the inner flow
	// in the range (udp_flow_src_port); any stable hash shows the same:
	// one port per inner flow.
	h := fnv.New32a()
	fmt.Fprintf(h, "%s %s %d %d %d", inner.Src, inner.Dst, inner.Proto, inner.SrcPort, inner.DstPort)
	sport := t.SrcPortMin + uint16(h.Sum32()%uint32(t.SrcPortMax-t.SrcPortMin))
	o := netfilter.UDP(netip.AddrPortFrom(t.Local, sport), netip.AddrPortFrom(remote, t.Port))
	o.Length, o.TTL = inner.Length+vxlanOverhead, 64
	return o
}

func addrs(p netfilter.Packet) string {
	var b strings.Builder
	b.WriteString(p.Proto.String() + " ")
	if p.Proto.HasPorts() {
		fmt.Fprintf(&b, "%s → %s", netip.AddrPortFrom(p.Src, p.SrcPort), netip.AddrPortFrom(p.Dst, p.DstPort))
	} else {
		fmt.Fprintf(&b, "%s → %s", p.Src, p.Dst)
	}
	return b.String()
}

// forwardTo is the branch of a device forwarding pkt out port out to next
// (invalid: routed by destination there), or leaving the model when
// allowLeave and nothing is linked to the port.
func (n *Network) forwardTo(hop Hop, dev, out string, next netip.Addr, pkt netfilter.Packet, inner *netfilter.Packet, allowLeave bool) (branch, error) {
	hop.Out = out
	pkt.In, pkt.Out = hop.In, out
	hop.Result = netfilter.Result{Verdict: netfilter.VerdictAccept, Disposition: netfilter.Forwarded, Packet: pkt}
	peer, ok := n.links[Port{dev, out}]
	if !ok {
		if allowLeave {
			return branch{hop: hop, fate: Left, why: fmt.Sprintf("left the model through %s/%s", dev, out)}, nil
		}
		return branch{}, fmt.Errorf("%w: %s sent %s out port %s, which is linked to nothing", ErrTopology, dev, addrs(pkt), out)
	}
	return branch{hop: hop, next: &transit{at: peer, next: next, pkt: wire(pkt), inner: inner}}, nil
}

// dropAt is the branch of a device dropping the packet of hop.
func dropAt(hop Hop, why string) branch {
	hop.Result = netfilter.Result{Verdict: netfilter.VerdictDrop, Disposition: netfilter.Dropped, Packet: hop.Packet}
	return branch{hop: hop, fate: Dropped, why: why}
}

// routerStep forwards t through a router.
func (n *Network) routerStep(r *Router, t transit) ([]branch, error) {
	hop := Hop{Device: r.name, Kind: KindRouter, In: t.at.Iface, Packet: t.pkt}
	if t.next.IsValid() && !r.owns("", t.next) {
		// A frame for a neighbour on one of the router's ports goes
		// there (a load balancer's floating IP to its backend); any other
		// is routed by its destination, as a cloud network routes every
		// packet whatever the sender took for on-link.
		if port, ok := r.onLink(t.next); ok && n.reaches(Port{r.name, port}, t.next) {
			b, err := n.forwardTo(hop, r.name, port, t.next, t.pkt, t.inner, true)
			return []branch{b}, err
		}
	}
	// A reply from a load balancer's backend goes back through it.
	for _, p := range r.ports {
		peer, ok := n.links[Port{r.name, p.name}]
		if !ok || peer.Iface != "backend" {
			continue
		}
		if lb, ok := n.devices[peer.Device].(*LoadBalancer); ok {
			if _, ok := lb.back[replyKey(t.pkt)]; ok {
				hop.Note = "reply of a connection of load balancer " + lb.name
				b, err := n.forwardTo(hop, r.name, p.name, netip.Addr{}, t.pkt, t.inner, true)
				return []branch{b}, err
			}
		}
	}
	port, next, err := r.lookup(t.pkt.Dst)
	if err != nil {
		return []branch{dropAt(hop, err.Error())}, nil
	}
	if next.IsValid() && !n.reaches(Port{r.name, port}, next) {
		return []branch{dropAt(hop, fmt.Sprintf("router %s: no neighbour %s on port %s", r.name, next, port))}, nil
	}
	b, err := n.forwardTo(hop, r.name, port, next, t.pkt, t.inner, true)
	return []branch{b}, err
}

// reaches reports whether a frame for neighbour a sent out port p finds
// it (ARP would): a host must own a on the linked interface, or have it
// behind the bridge the interface is a port of; other devices take what
// their port's prefixes send them. An unlinked port leads out of the
// model and reaches everything.
func (n *Network) reaches(p Port, a netip.Addr) bool {
	peer, ok := n.links[p]
	if !ok {
		return true
	}
	d, ok := n.devices[peer.Device].(*hostDev)
	if !ok {
		return true
	}
	if d.owns(peer.Iface, a) {
		return true
	}
	if br, ok := d.portOf[peer.Iface]; ok {
		_, ok := n.fdb(d, br)(a)
		return ok
	}
	return false
}

func tupleOf(p netfilter.Packet) flowKey {
	return flowKey{proto: p.Proto, src: netip.AddrPortFrom(p.Src, p.SrcPort), dst: netip.AddrPortFrom(p.Dst, p.DstPort)}
}

// isICMPError reports whether p is an ICMP error quoting a header
// (destination unreachable, source quench, redirect, time exceeded,
// parameter problem; for ICMPv6 types 1 to 4).
func isICMPError(p netfilter.Packet) bool {
	if p.Inner.Proto == 0 {
		return false
	}
	switch p.Proto {
	case inet.ICMP:
		switch p.ICMPType {
		case 3, 4, 5, 11, 12:
			return true
		}
	case inet.ICMPv6:
		return p.ICMPType >= 1 && p.ICMPType <= 4
	}
	return false
}

// replyKey is the tuple of the connection's reply direction p belongs to:
// its own, or for an ICMP error the reverse of the header it quotes (the
// error answers a packet of the connection going the other way).
func replyKey(p netfilter.Packet) flowKey {
	if isICMPError(p) {
		in := p.Inner
		return flowKey{proto: in.Proto, src: netip.AddrPortFrom(in.Dst, in.DstPort), dst: netip.AddrPortFrom(in.Src, in.SrcPort)}
	}
	return tupleOf(p)
}

// lbStep balances a packet on the frontend, or translates a reply back.
func (n *Network) lbStep(lb *LoadBalancer, t transit, explain bool) ([]branch, error) {
	hop := Hop{Device: lb.name, Kind: KindLoadBalancer, In: t.at.Iface, Packet: t.pkt}
	k := tupleOf(t.pkt)
	if t.at.Iface == "backend" {
		f, ok := lb.back[replyKey(t.pkt)]
		if !ok {
			return []branch{dropAt(hop, fmt.Sprintf("load balancer %s: %s is no reply of its connections", lb.name, addrs(t.pkt)))}, nil
		}
		p := t.pkt
		be := lb.rules[f.rule].Backends[f.backend].Name
		if isICMPError(p) {
			// An error about a packet the load balancer sent the backend:
			// the quoted destination goes back to the frontend, and so
			// does the error's source when the backend answered for it.
			if p.Src == p.Inner.Dst {
				p.Src = f.front.Addr()
			}
			p.Inner.Dst, p.Inner.DstPort = f.front.Addr(), f.front.Port()
			hop.Note = fmt.Sprintf("ICMP error from backend %s, quoted destination back to %s", be, f.front)
		} else {
			p.Src, p.SrcPort = f.front.Addr(), f.front.Port()
			hop.Note = fmt.Sprintf("reply from backend %s, source back to %s", be, f.front)
		}
		b, err := n.forwardTo(hop, lb.name, "frontend", netip.Addr{}, p, t.inner, true)
		return []branch{b}, err
	}
	ri := lb.rule(t.pkt.Proto, k.dst)
	if ri < 0 {
		return []branch{dropAt(hop, fmt.Sprintf("load balancer %s has no rule for %s %s", lb.name, t.pkt.Proto, k.dst))}, nil
	}
	rule := lb.rules[ri]
	choices := lb.healthy(ri)
	if f, ok := lb.flows[k]; ok {
		choices = []int{f.backend}
	}
	if len(choices) == 0 {
		return []branch{dropAt(hop, fmt.Sprintf("load balancer %s: no healthy backend for %s (every probe on port %d failed)", lb.name, k.dst, rule.ProbePort))}, nil
	}
	if !explain {
		_, known := lb.flows[k]
		c := choices[0]
		if !known && len(choices) > 1 {
			c = choices[n.rng.IntN(len(choices))]
		}
		choices = []int{c}
	}
	out := make([]branch, 0, len(choices))
	for _, c := range choices {
		be := rule.Backends[c]
		p := t.pkt
		if !rule.FloatingIP {
			port := rule.BackendPort
			if port == 0 {
				port = rule.Frontend.Port()
			}
			p.Dst, p.DstPort = be.Addr, port
		}
		h := hop
		h.Note = fmt.Sprintf("backend %s (%s, %d healthy of %d)", be.Name, be.Addr, len(lb.healthy(ri)), len(rule.Backends))
		if !explain {
			f := lbFlow{rule: ri, backend: c, front: rule.Frontend, client: k.src}
			lb.flows[k] = f
			lb.back[flowKey{proto: p.Proto, src: netip.AddrPortFrom(p.Dst, p.DstPort), dst: k.src}] = f
		}
		b, err := n.forwardTo(h, lb.name, "backend", be.Addr, p, t.inner, false)
		if err != nil {
			return nil, err
		}
		if explain {
			b.p = big.NewRat(1, int64(len(choices)))
		}
		out = append(out, b)
	}
	return out, nil
}

// gatewayStep translates a packet through a gateway.
func (n *Network) gatewayStep(g *Gateway, t transit, explain bool) ([]branch, error) {
	hop := Hop{Device: g.name, Kind: KindGateway, In: t.at.Iface, Packet: t.pkt}
	p := t.pkt
	if t.at.Iface == "inside" {
		if g.translates(p.Src) {
			k := tupleOf(p)
			s := g.snat(k, !explain)
			hop.Note = fmt.Sprintf("SNAT %s → %s", netip.AddrPortFrom(p.Src, p.SrcPort), s)
			p.Src, p.SrcPort = s.Addr(), s.Port()
		}
		b, err := n.forwardTo(hop, g.name, "outside", netip.Addr{}, p, t.inner, true)
		return []branch{b}, err
	}
	if p.Dst == g.public {
		inside, ok := g.in[replyKey(p)]
		if !ok {
			return []branch{dropAt(hop, fmt.Sprintf("gateway %s: %s belongs to no connection", g.name, addrs(p)))}, nil
		}
		if isICMPError(p) {
			// An error about a packet the gateway translated: its
			// destination and the quoted source go back inside.
			hop.Note = fmt.Sprintf("ICMP error: destination back to %s, quoted source back to %s", inside.Addr(), inside)
			p.Dst = inside.Addr()
			p.Inner.Src, p.Inner.SrcPort = inside.Addr(), inside.Port()
		} else {
			hop.Note = fmt.Sprintf("reply: destination back to %s", inside)
			p.Dst, p.DstPort = inside.Addr(), inside.Port()
		}
	}
	b, err := n.forwardTo(hop, g.name, "inside", netip.Addr{}, p, t.inner, false)
	return []branch{b}, err
}
