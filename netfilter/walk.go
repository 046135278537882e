package netfilter

import (
	"net/netip"

	"github.com/packetwalk/packetwalk/conntrack"
)

// walk is one packet's way through the host: everything that lives only
// while the packet walks, beside the Host's configuration, tables and
// long-lived state. The functions of the path take it (Host.walk,
// Host.runHook, Host.runTable), and the evaluation context points to it,
// so a packet's way reads from their signatures.
//
// A packet netfilter generates while another walks (a REJECT reply) takes
// a walk of its own, which starts from what it inherits and leaves the
// other's untouched. Walk values are the Host's and reused (see
// Host.beginWalk), so walking allocates nothing.
type walk struct {
	// res receives the outcome; res.Packet is the packet being walked,
	// pkt points to it.
	res *Result
	pkt *Packet
	// own is the result Receive and Send copy out, and the storage of a
	// generated packet, which walks in own.Packet and is copied out.
	own Result
	// ctx is the evaluation context of the table being run.
	ctx evalCtx
	// cur is the packet's connection, set at the conntrack hook (or
	// inherited: see attached); notrack is set when raw's NOTRACK or CT
	// --notrack untracked the packet.
	cur     conntrack.Info
	facts   conntrack.Facts // the packet's, for the conntrack lookup
	notrack bool
	// loopback is set while a locally generated packet re-enters through
	// lo.
	loopback bool
	// attached is set while a generated packet (a REJECT reply) walks
	// with the connection of the packet that caused it.
	attached bool
	// tracing records the walk's steps in trace. Generated packets are
	// not traced: the kernel does not give them the nftrace of the packet
	// that caused them.
	tracing bool
	trace   []Step
	// where is the deciding place, turned into Result.Where at the end.
	where place
	// routes are the routing decisions, recorded when tracing.
	routes []RouteChoice
	// out is a local packet's output route (hasOut), chosen for
	// destination outDst; keys are what mangle OUTPUT compares.
	out    decision
	outDst netip.Addr
	hasOut bool
	keys   rerouteKeys
	// sock is the local socket TPROXY assigned the packet to (skb->sk),
	// which -m socket then sees and which receives the packet if it is
	// delivered.
	sock *Socket
	// dup is set while TEE's copy of a packet walks: a TEE it meets does
	// not copy it again (the kernel's nf_skb_duplicated).
	dup bool
}

// beginWalk returns a fresh walk writing its outcome into res, or into
// its own result when res is nil; endWalk gives it back. Walks nest: a
// packet generated during a walk begins the next one, and so may a packet
// given to the host while another walks (one coming back from another
// host). The walk's per-packet fields are the caller's to reset.
func (h *Host) beginWalk(res *Result) *walk {
	if h.depth == len(h.walks) {
		h.addWalk()
	}
	w := h.walks[h.depth]
	h.depth++
	if res == nil {
		// The caller copies the result out and keeps its Emitted slice.
		res = &w.own
		if res.Emitted != nil {
			res.Emitted = nil
		}
	}
	// Stored only when it changes: pointer stores cost write barrier
	// checks, and a host mostly walks into the same result.
	if w.res != res {
		w.res, w.pkt = res, &res.Packet
	}
	return w
}

// addWalk adds a walk value to the host's stack, once per nesting depth
// the host has seen.
func (h *Host) addWalk() {
	w := &walk{}
	w.ctx.host, w.ctx.walk = h, w
	h.walks = append(h.walks, w)
}

// endWalk ends the innermost walk.
func (h *Host) endWalk() { h.depth-- }
