package netfilter

import (
	"encoding/binary"
	"fmt"
	"strconv"

	"github.com/packetwalk/packetwalk/internal/jhash"
)

// ClusterMatch is "-m cluster --cluster-total-nodes N
// [!] --cluster-local-node K | [!] --cluster-local-nodemask MASK
// --cluster-hash-seed SEED": as the kernel's xt_cluster, the original
// source address of the packet's connection is hashed (jhash with the
// seed, scaled to 0..N-1) and the packet matches when that node's bit is
// in NodeMask. A packet without a connection never matches. A multicast
// packet is turned into a host one (skb->pkt_type), as the kernel does
// for its cluster peers' shared MAC addresses.
type ClusterMatch struct {
	TotalNodes uint32
	NodeMask   uint32
	HashSeed   uint32
	Invert     bool
}

type clusterBuilder struct {
	m                 ClusterMatch
	node              uint32
	hasTotal, hasSeed bool
	hasNode, hasMask  bool
	nodeOpt           string
}

func init() {
	registerMatch(&module{name: "cluster",
		opts: []option{
			{name: "cluster-total-nodes", args: 1},
			{name: "cluster-local-node", args: 1, invert: true},
			{name: "cluster-local-nodemask", args: 1, invert: true},
			{name: "cluster-hash-seed", args: 1},
		},
		newBuilder: func(*ruleCtx) builder { return &clusterBuilder{} }})
}

func (b *clusterBuilder) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	max := uint64(0xffffffff)
	if opt != "cluster-hash-seed" {
		// iptables 1.8.9 gives --cluster-local-nodemask the range of
		// a node number too, so a mask above 32 is refused.
		max = 32
	}
	n, ok := parseCUint(args[0], max)
	if !ok || (max == 32 && n == 0) {
		want := "a number 0-4294967295"
		if max == 32 {
			want = "a number 1-32"
		}
		return badValue("cluster", "--"+opt, args[0], want)
	}
	switch opt {
	case "cluster-total-nodes":
		b.m.TotalNodes, b.hasTotal = uint32(n), true
	case "cluster-hash-seed":
		b.m.HashSeed, b.hasSeed = uint32(n), true
	default:
		if b.nodeOpt != "" {
			return fmt.Errorf("%w: cluster: option \"--%s\" cannot be used together with \"--%s\"", ErrIncompatibleOpts, b.nodeOpt, opt)
		}
		b.nodeOpt = opt
		b.m.Invert = inv
		if opt == "cluster-local-node" {
			b.node, b.hasNode = uint32(n), true
		} else {
			b.m.NodeMask, b.hasMask = uint32(n), true
		}
	}
	return nil
}

func (b *clusterBuilder) done(*ruleCtx) (any, error) {
	switch {
	case !b.hasTotal:
		return nil, mustSpecify("cluster", "--cluster-total-nodes")
	case !b.hasSeed:
		return nil, mustSpecify("cluster", "--cluster-hash-seed")
	case !b.hasNode && !b.hasMask:
		return nil, fmt.Errorf("%w: cluster: --cluster-local-node or --cluster-local-nodemask is missing", ErrMissingArgument)
	case b.hasNode && b.node > b.m.TotalNodes:
		return nil, badValue("cluster", "--cluster-local-node", strconv.FormatUint(uint64(b.node), 10), "a node <= --cluster-total-nodes")
	case b.hasMask && uint64(b.m.NodeMask) >= 1<<b.m.TotalNodes:
		return nil, badValue("cluster", "--cluster-local-nodemask", fmt.Sprintf("0x%x", b.m.NodeMask), "a mask of --cluster-total-nodes bits")
	}
	m := b.m
	if b.hasNode {
		m.NodeMask = 1 << (b.node - 1)
	}
	return &m, nil
}

// Module implements Match.
func (m *ClusterMatch) Module() string { return "cluster" }

func (m *ClusterMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	return fmt.Appendf(b, " --cluster-local-nodemask 0x%08x --cluster-total-nodes %d --cluster-hash-seed 0x%08x", m.NodeMask, m.TotalNodes, m.HashSeed)
}

func (m *ClusterMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " cluster "...)
	if m.Invert {
		b = append(b, '!')
	}
	return fmt.Appendf(b, "node_mask=0x%08x total_nodes=%d hash_seed=0x%08x", m.NodeMask, m.TotalNodes, m.HashSeed)
}

// node is the cluster node, 0..TotalNodes-1, of a connection whose
// original source is src: jhash over the address as the kernel holds it
// (network-order words read on a little-endian machine), scaled with
// reciprocal_scale.
func (m *ClusterMatch) node(src [16]byte, v4 bool) uint32 {
	var w [4]uint32
	n := 4
	if v4 {
		w[0], n = binary.LittleEndian.Uint32(src[12:]), 1
	} else {
		for i := range w {
			w[i] = binary.LittleEndian.Uint32(src[4*i:])
		}
	}
	h := jhash.Words(w[:n], m.HashSeed)
	return uint32(uint64(h) * uint64(m.TotalNodes) >> 32)
}

func (m *ClusterMatch) match(c *evalCtx) bool {
	if pktType(c) == PktMulticast {
		c.pkt.PktType = PktUnicast
	}
	e := c.walk.cur.Entry
	if e == nil {
		return false
	}
	src := e.Original().Src
	return (m.NodeMask&(1<<m.node(src.As16(), src.Is4())) != 0) != m.Invert
}
