package netfilter

import (
	"net/netip"

	"github.com/packetwalk/packetwalk/inet"
)

// minIndexRun is the shortest run of rules worth a dispatch map: below it
// a linear walk is as fast as hashing the packet's key.
const minIndexRun = 8

// dispatch indexes a run of consecutive rules of one chain that each test
// a single destination address (kube-proxy's KUBE-SERVICES is such a run,
// nftables would use a verdict map). A rule whose destination or protocol
// differs from the packet's fails in matchIP before any match or target
// runs, so skipping it changes nothing: no counter, trace step or nth
// state. The dispatch therefore only ever skips rules that cannot match,
// and the rules it lands on are evaluated in full, in order.
type dispatch struct {
	end int // index of the first rule after the run
	// idx maps a packet's key to the rules of the run that may match it,
	// as ascending rule indexes.
	idx map[dispatchKey][]int32
	// ports is set when some key has a port, so a lookup by port is
	// worth trying.
	ports bool
}

// dispatchKey is what a rule of an indexed run can require of a packet:
// its destination, its protocol (0 for any) and, when port is set, its
// destination port. It has no padding (pad is always zero), so that the
// map hashes and compares it as one block of memory rather than field by
// field.
type dispatchKey struct {
	dst   netip.Addr
	proto inet.Proto
	port  bool
	dport uint16
	//lint:ignore U1000 fills what would be padding (see above)
	pad uint32
}

// indexClass says how a rule takes part in a dispatch run.
type indexClass uint8

const (
	notIndexed indexClass = iota
	byDst                 // a single destination, maybe a protocol
	byDstPort             // a single destination, tcp or udp and one port
)

// classify decides whether r can join an indexed run and returns its key.
// byDstPort needs a rule that matches exactly when destination, protocol
// and port are the packet's (and it is not a fragment): comments aside,
// its only match is tcp or udp with one destination port and nothing
// else, since any other match could have state or effects of its own.
func classify(r *Rule) (indexClass, dispatchKey) {
	ip := &r.IP
	if !ip.Dst.IsValid() || ip.InvDst || ip.Dst.Bits() != ip.Dst.Addr().BitLen() || ip.DstMask.IsValid() {
		return notIndexed, dispatchKey{}
	}
	k := dispatchKey{dst: ip.Dst.Addr()}
	if ip.Proto != 0 {
		if ip.InvProto {
			return notIndexed, dispatchKey{}
		}
		k.proto = ip.Proto
	}
	if ip.Src.IsValid() || ip.SrcMask.IsValid() || ip.In != "" || ip.Out != "" || ip.Fragment != AnyFragment {
		return byDst, k
	}
	var port *PortRange
	for _, m := range r.Matches {
		switch m := m.(type) {
		case *CommentMatch:
			continue
		case *TCPMatch:
			if port != nil || k.proto != inet.TCP || m.InvDstPorts || m.SrcPorts != nil && (m.InvSrcPorts || *m.SrcPorts != anyPorts) ||
				m.FlagsMask != 0 || m.HasOption {
				return byDst, k
			}
			port = m.DstPorts
		case *UDPMatch:
			if port != nil || k.proto != inet.UDP || m.InvDstPorts || m.SrcPorts != nil && (m.InvSrcPorts || *m.SrcPorts != anyPorts) {
				return byDst, k
			}
			port = m.DstPorts
		default:
			return byDst, k
		}
	}
	if port == nil || port.Lo != port.Hi {
		return byDst, k
	}
	k.port, k.dport = true, port.Lo
	return byDstPort, k
}

// buildDispatch indexes the runs of rules [from, to) of ct, which are the
// rules of one chain.
func buildDispatch(ct *ctable, from, to int) {
	classes := make([]indexClass, to-from)
	keys := make([]dispatchKey, to-from)
	for i := from; i < to; i++ {
		classes[i-from], keys[i-from] = classify(ct.rules[i].rule)
	}
	for i := from; i < to; {
		if classes[i-from] == notIndexed {
			i++
			continue
		}
		j := i
		for j < to && classes[j-from] != notIndexed {
			j++
		}
		if j-i >= minIndexRun {
			d := newDispatch(classes[i-from:j-from], keys[i-from:j-from], i)
			for k := i; k < j; k++ {
				ct.rules[k].disp = d
			}
		}
		i = j
	}
}

// newDispatch builds the index of the run of rules first, first+1, ...
// with the given classes and keys.
func newDispatch(classes []indexClass, keys []dispatchKey, first int) *dispatch {
	d := &dispatch{end: first + len(keys), idx: make(map[dispatchKey][]int32)}
	type dstProto struct {
		dst   netip.Addr
		proto inet.Proto
	}
	// General rules by destination and protocol (0 for any protocol).
	general := map[dstProto][]int32{}
	for i, k := range keys {
		if classes[i] == byDst {
			dp := dstProto{k.dst, k.proto}
			general[dp] = append(general[dp], int32(first+i))
		}
	}
	// A packet's candidates with protocol P are the general rules for P
	// and for any protocol, plus, when its port is known, the port rules.
	merged := func(dst netip.Addr, proto inet.Proto, extra []int32) []int32 {
		out := append([]int32(nil), extra...)
		out = append(out, general[dstProto{dst, proto}]...)
		if proto != 0 {
			out = append(out, general[dstProto{dst, 0}]...)
		}
		sortInt32(out)
		return out
	}
	ports := map[dispatchKey][]int32{}
	for i, k := range keys {
		if classes[i] == byDstPort {
			ports[k] = append(ports[k], int32(first+i))
			d.ports = true
		}
	}
	for k, own := range ports {
		d.idx[k] = merged(k.dst, k.proto, own)
	}
	for dp := range general {
		d.idx[dispatchKey{dst: dp.dst, proto: dp.proto}] = merged(dp.dst, dp.proto, nil)
	}
	return d
}

// sortInt32 sorts a short list in place (insertion sort: the lists are a
// few rules long).
func sortInt32(s []int32) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// next returns the first rule at or after pc that may match p, or the end
// of the run when none can.
func (d *dispatch) next(p *Packet, pc int) int {
	list, ok := d.lookup(p)
	if !ok {
		return d.end
	}
	// Binary search: the first index >= pc.
	lo, hi := 0, len(list)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if int(list[m]) < pc {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(list) {
		return d.end
	}
	return int(list[lo])
}

func (d *dispatch) lookup(p *Packet) ([]int32, bool) {
	k := dispatchKey{dst: p.Dst, proto: p.Proto}
	if d.ports && (p.Proto == inet.TCP || p.Proto == inet.UDP) {
		k.port, k.dport = true, p.DstPort
		if l, ok := d.idx[k]; ok {
			return l, true
		}
		k.port, k.dport = false, 0
	}
	if l, ok := d.idx[k]; ok {
		return l, true
	}
	if k.proto != 0 {
		k.proto = 0
		l, ok := d.idx[k]
		return l, ok
	}
	return nil, false
}

// referenceEval reports whether the host runs the reference evaluator:
// no dispatch maps, and Explain replays every path from the start.
func (h *Host) referenceEval() bool {
	for _, p := range h.progs {
		if p == nil {
			continue
		}
		for _, t := range p.tables {
			if t != nil && t.linear {
				return true
			}
		}
	}
	return false
}
