package ipset

import "github.com/packetwalk/packetwalk/inet"

// protoNames maps numbers to the names ipset prints (from /etc/protocols on
// the reference machine). Unknown numbers print as digits.
var protoNames = map[inet.Proto]string{
	0: "ip", 1: "icmp", 2: "igmp", 4: "ipencap", 6: "tcp", 8: "egp", 12: "pup",
	17: "udp", 22: "idp", 27: "rdp", 41: "ipv6", 43: "ipv6-route",
	44: "ipv6-frag", 46: "rsvp", 47: "gre", 50: "esp", 51: "ah", 58: "ipv6-icmp",
	59: "ipv6-nonxt", 60: "ipv6-opts", 89: "ospf", 94: "ipip", 103: "pim",
	108: "ipcomp", 112: "vrrp", 115: "l2tp", 132: "sctp", 136: "udplite",
}

var protoByName = func() map[string]inet.Proto {
	m := map[string]inet.Proto{"icmpv6": inet.ICMPv6}
	for n, s := range protoNames {
		m[s] = n
	}
	return m
}()

type icmpName struct {
	name      string
	typ, code uint8
}

// icmpNames and icmp6Names are ipset's tables; the first name of a
// type/code pair is the one printed.
var icmpNames = []icmpName{
	{"echo-reply", 0, 0}, {"pong", 0, 0},
	{"network-unreachable", 3, 0}, {"host-unreachable", 3, 1},
	{"protocol-unreachable", 3, 2}, {"port-unreachable", 3, 3},
	{"fragmentation-needed", 3, 4}, {"source-route-failed", 3, 5},
	{"network-unknown", 3, 6}, {"host-unknown", 3, 7},
	{"network-prohibited", 3, 9}, {"host-prohibited", 3, 10},
	{"TOS-network-unreachable", 3, 11}, {"TOS-host-unreachable", 3, 12},
	{"communication-prohibited", 3, 13}, {"host-precedence-violation", 3, 14},
	{"precedence-cutoff", 3, 15}, {"source-quench", 4, 0},
	{"network-redirect", 5, 0}, {"host-redirect", 5, 1},
	{"TOS-network-redirect", 5, 2}, {"TOS-host-redirect", 5, 3},
	{"echo-request", 8, 0}, {"ping", 8, 0},
	{"router-advertisement", 9, 0}, {"router-solicitation", 10, 0},
	{"ttl-zero-during-transit", 11, 0}, {"ttl-zero-during-reassembly", 11, 1},
	{"ip-header-bad", 12, 0}, {"required-option-missing", 12, 1},
	{"timestamp-request", 13, 0}, {"timestamp-reply", 14, 0},
	{"address-mask-request", 17, 0}, {"address-mask-reply", 18, 0},
}

var icmp6Names = []icmpName{
	{"no-route", 1, 0}, {"communication-prohibited", 1, 1},
	{"address-unreachable", 1, 3}, {"port-unreachable", 1, 4},
	{"packet-too-big", 2, 0}, {"ttl-zero-during-transit", 3, 0},
	{"ttl-zero-during-reassembly", 3, 1}, {"bad-header", 4, 0},
	{"unknown-header-type", 4, 1}, {"unknown-option", 4, 2},
	{"echo-request", 128, 0}, {"ping", 128, 0},
	{"echo-reply", 129, 0}, {"pong", 129, 0},
	{"router-solicitation", 133, 0}, {"router-advertisement", 134, 0},
	{"neighbour-solicitation", 135, 0}, {"neigbour-solicitation", 135, 0},
	{"neighbour-advertisement", 136, 0}, {"neigbour-advertisement", 136, 0},
	{"redirect", 137, 0},
}
