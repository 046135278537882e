package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
)

// RejectType is the reply REJECT sends (--reject-with).
type RejectType uint8

// The reject types of iptables (IPv4) and ip6tables (IPv6).
const (
	RejectICMPPortUnreachable RejectType = iota // iptables' default
	RejectICMPNetUnreachable
	RejectICMPHostUnreachable
	RejectICMPProtoUnreachable
	RejectICMPNetProhibited
	RejectICMPHostProhibited
	RejectICMPAdminProhibited
	RejectTCPReset // both families
	RejectICMP6NoRoute
	RejectICMP6AdmProhibited
	RejectICMP6AddrUnreachable
	RejectICMP6PortUnreachable // ip6tables' default
	RejectICMP6PolicyFail
	RejectICMP6RejectRoute
	numRejectTypes
)

// rejectTypes describes each type: its canonical name, the short alias
// iptables also accepts, its family (0 for both) and the ICMP code sent.
var rejectTypes = [numRejectTypes]struct {
	name, alias string
	family      Family
	code        uint8
}{
	RejectICMPPortUnreachable:  {"icmp-port-unreachable", "port-unreach", IPv4, 3},
	RejectICMPNetUnreachable:   {"icmp-net-unreachable", "net-unreach", IPv4, 0},
	RejectICMPHostUnreachable:  {"icmp-host-unreachable", "host-unreach", IPv4, 1},
	RejectICMPProtoUnreachable: {"icmp-proto-unreachable", "proto-unreach", IPv4, 2},
	RejectICMPNetProhibited:    {"icmp-net-prohibited", "net-prohib", IPv4, 9},
	RejectICMPHostProhibited:   {"icmp-host-prohibited", "host-prohib", IPv4, 10},
	RejectICMPAdminProhibited:  {"icmp-admin-prohibited", "admin-prohib", IPv4, 13},
	RejectTCPReset:             {"tcp-reset", "", 0, 0},
	RejectICMP6NoRoute:         {"icmp6-no-route", "no-route", IPv6, 0},
	RejectICMP6AdmProhibited:   {"icmp6-adm-prohibited", "adm-prohibited", IPv6, 1},
	RejectICMP6AddrUnreachable: {"icmp6-addr-unreachable", "addr-unreach", IPv6, 3},
	RejectICMP6PortUnreachable: {"icmp6-port-unreachable", "port-unreach", IPv6, 4},
	RejectICMP6PolicyFail:      {"icmp6-policy-fail", "policy-fail", IPv6, 5},
	RejectICMP6RejectRoute:     {"icmp6-reject-route", "reject-route", IPv6, 6},
}

// String returns the type as iptables-save prints it ("tcp-reset").
func (r RejectType) String() string {
	if r < numRejectTypes {
		return rejectTypes[r].name
	}
	return fmt.Sprintf("reject-type(%d)", uint8(r))
}

// parseRejectType finds a --reject-with name or alias for family f.
// "tcp-rst" is an alias only iptables (IPv4) knows.
func parseRejectType(f Family, s string) (RejectType, bool) {
	if s == "tcp-rst" && f == IPv4 {
		return RejectTCPReset, true
	}
	for i, t := range rejectTypes {
		if t.family != 0 && t.family != f {
			continue
		}
		if s == t.name || (t.alias != "" && s == t.alias) {
			return RejectType(i), true
		}
	}
	return 0, false
}

// RejectTarget is "-j REJECT": it drops the packet and sends back an ICMP
// error or a TCP reset. With must suit the ruleset's family.
type RejectTarget struct {
	With RejectType
}

func init() {
	registerTarget(&module{name: "REJECT", opts: []option{{name: "reject-with", args: 1}},
		newBuilder: func(c *ruleCtx) builder {
			t := &RejectTarget{With: RejectICMPPortUnreachable}
			if c.family == IPv6 {
				t.With = RejectICMP6PortUnreachable
			}
			return t
		},
		// ipt_REJECT and ip6t_REJECT register for the filter table only.
		tables: []TableID{Filter},
		hooks:  []Hook{Input, Forward, Output}})
}

func (t *RejectTarget) set(c *ruleCtx, _ string, _ bool, args []string) error {
	r, ok := parseRejectType(c.family, args[0])
	if !ok {
		want := "icmp-net-unreachable, icmp-host-unreachable, icmp-port-unreachable, icmp-proto-unreachable, icmp-net-prohibited, icmp-host-prohibited, icmp-admin-prohibited or tcp-reset"
		if c.family == IPv6 {
			want = "icmp6-no-route, icmp6-adm-prohibited, icmp6-addr-unreachable, icmp6-port-unreachable, icmp6-policy-fail, icmp6-reject-route or tcp-reset"
		}
		return badValue("REJECT", "--reject-with", args[0], want)
	}
	t.With = r
	return nil
}

func (t *RejectTarget) done(c *ruleCtx) (any, error) {
	// The kernel's checkentry refuses a TCP reset for a rule that can
	// match anything but TCP.
	if t.With == RejectTCPReset && (c.ip.Proto != inet.TCP || c.ip.InvProto) {
		return nil, fmt.Errorf("%w: REJECT --reject-with tcp-reset needs \"-p tcp\"", ErrNotAllowed)
	}
	return t, nil
}

// Name implements Target.
func (t *RejectTarget) Name() string { return "REJECT" }

func (t *RejectTarget) appendSave(b []byte) []byte {
	b = append(b, " --reject-with "...)
	return append(b, t.With.String()...)
}

func (t *RejectTarget) appendList(b []byte, _ bool) []byte {
	b = append(b, " reject-with "...)
	return append(b, t.With.String()...)
}

func (t *RejectTarget) apply(c *evalCtx) verdict {
	c.rejected, c.reject = true, t.With
	return vDrop
}
