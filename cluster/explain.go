package cluster

import (
	"fmt"
	"math/big"
	"slices"
	"strings"

	"github.com/packetwalk/packetwalk/netfilter"
)

// Outcome is one possible walk of a packet and its exact probability.
type Outcome struct {
	// Probability is exact: the product of the load balancers' spreads
	// over their healthy backends (1/k) and of each host's statistic
	// rules (multiples of 2^-31), a rational number.
	Probability *big.Rat
	Walk        Walk
}

// maxOutcomes bounds the walks Explain follows.
const maxOutcomes = 1 << 14

// Explain returns every walk that a packet a local process of host sends
// may take, with its exact probability: the load balancers' choices among
// their healthy backends times each host's choices (kube-proxy's endpoint
// choice) times what each host does, dropped walks included. It changes
// no state: connections of hosts, load balancers and gateways are read,
// not made. Walks that cross the same devices the same way are merged;
// the probabilities sum to exactly 1, most probable first (ties in the
// order they were found).
func (n *Network) Explain(host string, p netfilter.Packet) ([]Outcome, error) {
	if _, err := n.host(host); err != nil {
		return nil, err
	}
	return n.explain(transit{at: Port{Device: host}, pkt: p, local: true})
}

// ExplainReceive is Explain for a packet arriving from outside the model at
// port at, as Receive walks it.
func (n *Network) ExplainReceive(at Port, p netfilter.Packet) ([]Outcome, error) {
	d, ok := n.devices[at.Device]
	if !ok {
		return nil, fmt.Errorf("%w: no device %q", ErrTopology, at.Device)
	}
	if !d.hasPort(at.Iface) {
		return nil, fmt.Errorf("%w: %s %q has no port %q", ErrTopology, d.kind(), at.Device, at.Iface)
	}
	return n.explain(transit{at: at, pkt: p})
}

func (n *Network) explain(t transit) ([]Outcome, error) {
	var out []Outcome
	index := map[string]int{}
	var rec func(t transit, p *big.Rat, hops []Hop) error
	rec = func(t transit, p *big.Rat, hops []Hop) error {
		if len(hops) >= n.cfg.MaxHops {
			return fmt.Errorf("%w: more than %d hops (last at %s)", ErrLoop, n.cfg.MaxHops, t.at)
		}
		bs, err := n.step(t, true)
		if err != nil {
			return err
		}
		for _, b := range bs {
			q := p
			if b.p != nil {
				q = new(big.Rat).Mul(p, b.p)
			}
			hs := append(slices.Clip(hops), b.hop)
			if b.next != nil {
				if err := rec(*b.next, q, hs); err != nil {
					return err
				}
				continue
			}
			w := Walk{Hops: hs, Fate: b.fate, Reason: b.why}
			key := walkKey(w)
			if i, ok := index[key]; ok {
				out[i].Probability.Add(out[i].Probability, q)
				continue
			}
			if len(out) == maxOutcomes {
				return fmt.Errorf("%w: more than %d outcomes", netfilter.ErrNotModelled, maxOutcomes)
			}
			index[key] = len(out)
			out = append(out, Outcome{Probability: new(big.Rat).Set(q), Walk: w})
		}
		return nil
	}
	if err := rec(t, big.NewRat(1, 1), nil); err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b Outcome) int { return b.Probability.Cmp(a.Probability) })
	return out, nil
}

// walkKey identifies a walk by what each hop did: the device, its ports
// and the packet as it arrived and left, and the end.
func walkKey(w Walk) string {
	var b strings.Builder
	for _, h := range w.Hops {
		r := h.Result
		fmt.Fprintf(&b, "%s|%s|%s|%s|%s|%d|%s|%v|%d;", h.Device, h.In, h.Out, addrs(h.Packet), addrs(r.Packet), r.Disposition, r.Where.Chain, r.Where.Rule, r.Reason)
	}
	fmt.Fprintf(&b, "%d|%s", w.Fate, w.Reason)
	return b.String()
}
