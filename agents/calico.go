package agents

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/packetwalk/packetwalk/netfilter"
)

// Calico's nat-outgoing chains and IPAM pool sets. The set names are
// Felix's "cali" + IP version + "0" + set id.
const (
	CalicoPostrouting = "cali-POSTROUTING"
	CalicoFIPSNAT     = "cali-fip-snat"
	CalicoNATOutgoing = "cali-nat-outgoing"
)

// Felix's rule comments ("cali:" + a hash of the chain name and the rule).
// Felix computes them from its internal rendering of each rule; they are
// copied here as data from the post "AKS Azure CNI Calico IP Masquerade"
// (Calico 3.x on AKS, 2020; docs/blog-posts.md), which is why only the
// post's rule shapes are generated. They are the IPv4 hashes; Felix hashes
// IPv6 chains the same way (the rule text does not name the family), but
// no dump we have shows them.
const (
	calicoHashPostroutingJump = "O3lYWMrLQYEMJtB5" // POSTROUTING → cali-POSTROUTING
	calicoHashFIPSNAT         = "Z-c7XtVd2Bq7s_hA" // cali-POSTROUTING → cali-fip-snat
	calicoHashNATOutgoing     = "nYKhEzDlr11Jccal" // cali-POSTROUTING → cali-nat-outgoing
	calicoHashMasquerade      = "flqWnvo8yq4ULQLa" // cali-nat-outgoing MASQUERADE
)

// CalicoPool is the part of a Calico IPPool that Felix's NAT uses.
type CalicoPool struct {
	CIDR netip.Prefix
	// NATOutgoing masquerades traffic from the pool to destinations in no
	// pool.
	NATOutgoing bool
	// Disabled stops IPAM from assigning addresses from the pool. It does
	// not remove the pool from Felix's sets: the Calico post creates a disabled
	// natOutgoing pool and sees it in cali40masq-ipam-pools, and Calico
	// documents disabled pools as the way to exempt a destination range
	// from NAT.
	Disabled bool
}

// CalicoNATConfig is the cluster's IPPools as Felix sees them.
type CalicoNATConfig struct {
	Pools []CalicoPool
}

// CalicoSetNames returns the masq and all-pools set names of family f:
// cali40masq-ipam-pools / cali40all-ipam-pools for IPv4, cali60… for IPv6.
func CalicoSetNames(f netfilter.Family) (masq, all string) {
	v := "4"
	if f == netfilter.IPv6 {
		v = "6"
	}
	return "cali" + v + "0masq-ipam-pools", "cali" + v + "0all-ipam-pools"
}

func (c CalicoNATConfig) validate() error {
	for i, p := range c.Pools {
		if !p.CIDR.IsValid() || p.CIDR.Masked() != p.CIDR || p.CIDR.Addr().Is4In6() {
			return &ConfigError{Agent: "calico", Key: fmt.Sprintf("pools[%d].cidr", i), Value: p.CIDR.String(), Want: "a CIDR aligned to its block", Err: ErrBadCIDR}
		}
	}
	return nil
}

// pools returns the pools of family f: every pool, and those with
// natOutgoing, deduplicated in input order.
func (c CalicoNATConfig) pools(f netfilter.Family) (all, masq []netip.Prefix) {
	seenAll, seenMasq := map[netip.Prefix]bool{}, map[netip.Prefix]bool{}
	for _, p := range c.Pools {
		if p.CIDR.Addr().Is6() != (f == netfilter.IPv6) {
			continue
		}
		if !seenAll[p.CIDR] {
			seenAll[p.CIDR] = true
			all = append(all, p.CIDR)
		}
		if p.NATOutgoing && !seenMasq[p.CIDR] {
			seenMasq[p.CIDR] = true
			masq = append(masq, p.CIDR)
		}
	}
	return all, masq
}

// CalicoIPSets returns the `ipset restore` text of Felix's two pool sets
// for family f, with Felix's options (hash:net, hashsize 1024, maxelem
// 1048576): the masq set first, as the Calico post lists them
// (docs/blog-posts.md).
func CalicoIPSets(cfg CalicoNATConfig, f netfilter.Family) ([]byte, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	all, masq := cfg.pools(f)
	masqName, allName := CalicoSetNames(f)
	family := "inet"
	if f == netfilter.IPv6 {
		family = "inet6"
	}
	var b strings.Builder
	for _, s := range []struct {
		name    string
		members []netip.Prefix
	}{{masqName, masq}, {allName, all}} {
		fmt.Fprintf(&b, "create %s hash:net family %s hashsize 1024 maxelem 1048576\n", s.name, family)
		for _, m := range s.members {
			fmt.Fprintf(&b, "add %s %s\n", s.name, m)
		}
	}
	return []byte(b.String()), nil
}

// CalicoNATRules returns Felix's nat POSTROUTING path for family f as
// iptables-restore text for --noflush (Felix inserts its jump at the top of
// POSTROUTING and owns the cali-* chains): POSTROUTING → cali-POSTROUTING →
// cali-fip-snat (empty without floating IPs) and cali-nat-outgoing, which
// masquerades from a natOutgoing pool to destinations in no pool. With no
// natOutgoing pool of the family cali-nat-outgoing is empty, as Felix
// writes it. Felix's other nat chains (cali-PREROUTING, cali-OUTPUT,
// cali-fip-dnat) and IPIP/VXLAN tunnel rules are not written.
func CalicoNATRules(cfg CalicoNATConfig, f netfilter.Family) ([]byte, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	_, masq := cfg.pools(f)
	masqName, allName := CalicoSetNames(f)
	var b strings.Builder
	b.WriteString("*nat\n")
	for _, c := range []string{CalicoPostrouting, CalicoFIPSNAT, CalicoNATOutgoing} {
		fmt.Fprintf(&b, ":%s - [0:0]\n", c)
	}
	fmt.Fprintf(&b, "-I POSTROUTING 1 -m comment --comment \"cali:%s\" -j %s\n", calicoHashPostroutingJump, CalicoPostrouting)
	fmt.Fprintf(&b, "-A %s -m comment --comment \"cali:%s\" -j %s\n", CalicoPostrouting, calicoHashFIPSNAT, CalicoFIPSNAT)
	fmt.Fprintf(&b, "-A %s -m comment --comment \"cali:%s\" -j %s\n", CalicoPostrouting, calicoHashNATOutgoing, CalicoNATOutgoing)
	if len(masq) > 0 {
		fmt.Fprintf(&b, "-A %s -m comment --comment \"cali:%s\" -m set --match-set %s src -m set ! --match-set %s dst -j MASQUERADE\n", CalicoNATOutgoing, calicoHashMasquerade, masqName, allName)
	}
	b.WriteString("COMMIT\n")
	return []byte(b.String()), nil
}
