// Package inet is the vocabulary the packetwalk packages share: IP protocol
// numbers with the names the tools print for them, and the TCP flags byte.
//
// It is the base of the module's layering: it imports nothing from the
// module, and netfilter, conntrack, ipset and the commands all use its
// types (netfilter.Packet.Proto, conntrack.Tuple.Proto, ipset.Key.Proto),
// so a protocol or a flag set means the same thing in every package.
package inet

import (
	"strconv"
	"strings"
)

// Proto is an IP protocol number (the IPv4 protocol field, the IPv6 upper
// layer header). 0 stands for "any protocol" in a rule and "unset" in a
// packet.
type Proto uint8

// Protocol numbers the packages treat specially.
const (
	ICMP    Proto = 1
	TCP     Proto = 6
	UDP     Proto = 17
	DCCP    Proto = 33
	GRE     Proto = 47
	ICMPv6  Proto = 58
	SCTP    Proto = 132
	UDPLite Proto = 136
)

// HasPorts reports whether the protocol's header starts with 16-bit source
// and destination ports (TCP, UDP, UDP-Lite, SCTP, DCCP): the protocols
// whose ports conntrack keeps in its tuples and NAT can rewrite.
func (p Proto) HasPorts() bool {
	switch p {
	case TCP, UDP, UDPLite, SCTP, DCCP:
		return true
	}
	return false
}

// IsICMP reports whether p is ICMP or ICMPv6.
func (p Proto) IsICMP() bool { return p == ICMP || p == ICMPv6 }

// netbase holds Debian's /etc/protocols (netbase), which iptables consults
// through getprotobynumber when it prints "-p" in iptables-save and -L.
// Keeping a copy makes the output independent of the machine it runs on.
var netbase = map[Proto]string{
	0: "ip", 1: "icmp", 2: "igmp", 3: "ggp", 4: "ipencap", 5: "st", 6: "tcp", 8: "egp", 9: "igp",
	12: "pup", 17: "udp", 20: "hmp", 22: "xns-idp", 27: "rdp", 29: "iso-tp4", 33: "dccp", 36: "xtp",
	37: "ddp", 38: "idpr-cmtp", 41: "ipv6", 43: "ipv6-route", 44: "ipv6-frag", 45: "idrp", 46: "rsvp",
	47: "gre", 50: "esp", 51: "ah", 57: "skip", 58: "ipv6-icmp", 59: "ipv6-nonxt", 60: "ipv6-opts",
	73: "rspf", 81: "vmtp", 88: "eigrp", 89: "ospf", 93: "ax.25", 94: "ipip", 97: "etherip",
	98: "encap", 103: "pim", 108: "ipcomp", 112: "vrrp", 115: "l2tp", 124: "isis", 132: "sctp",
	133: "fc", 135: "mobility-header", 136: "udplite", 137: "mpls-in-ip", 138: "manet", 139: "hip",
	140: "shim6", 141: "wesp", 142: "rohc", 143: "ethernet",
}

// byName is netbase reversed, for parsing.
var byName = func() map[string]Proto {
	m := make(map[string]Proto, len(netbase))
	for n, name := range netbase {
		m[name] = n
	}
	return m
}()

// aliases are the extra names iptables itself knows (xtables_chain_protos)
// plus the /etc/protocols aliases users type.
var aliases = map[string]Proto{
	"all": 0, "icmpv6": 58, "mh": 135, "ipv6-mh": 135, "hopopt": 0,
	"IP": 0, "ICMP": 1, "TCP": 6, "UDP": 17, "SCTP": 132,
}

// String returns the protocol as iptables-save and iptables -L print it:
// "all" for 0, the /etc/protocols name ("tcp", "ipv6-icmp") or the number.
func (p Proto) String() string {
	if p == 0 {
		return "all"
	}
	if n, ok := netbase[p]; ok {
		return n
	}
	return strconv.Itoa(int(p))
}

// ConntrackName returns the protocol as the conntrack tool (through
// libnetfilter_conntrack) prints it in an entry: "tcp", "udp", "udplite",
// "icmp", "icmpv6", "sctp", "gre", "dccp", and "unknown" for any other.
func (p Proto) ConntrackName() string {
	switch p {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case UDPLite:
		return "udplite"
	case ICMP:
		return "icmp"
	case ICMPv6:
		return "icmpv6"
	case SCTP:
		return "sctp"
	case GRE:
		return "gre"
	case DCCP:
		return "dccp"
	}
	return "unknown"
}

// ParseProto parses a protocol as iptables' -p takes it: a number 0-255, an
// /etc/protocols name or one of iptables' own aliases ("all", "icmpv6").
// The name is matched as given; iptables lower-cases it first. "all" and 0
// mean any protocol.
func ParseProto(s string) (Proto, bool) {
	// Only digits can be a number; the check saves ParseUint's error
	// allocation for every "-p tcp".
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		if n, err := strconv.ParseUint(s, 10, 8); err == nil {
			return Proto(n), true
		}
	}
	if p, ok := aliases[s]; ok {
		return p, true
	}
	if n, ok := byName[s]; ok {
		return n, true
	}
	return 0, false
}

// TCPFlags is the flags byte of a TCP header.
type TCPFlags uint8

// TCP flag bits.
const (
	FIN TCPFlags = 1 << iota
	SYN
	RST
	PSH
	ACK
	URG
	ECE
	CWR
)

var flagNames = [...]struct {
	f    TCPFlags
	name string
}{{FIN, "FIN"}, {SYN, "SYN"}, {RST, "RST"}, {PSH, "PSH"}, {ACK, "ACK"}, {URG, "URG"}, {ECE, "ECE"}, {CWR, "CWR"}}

// String returns the flags as iptables names them, comma-separated
// ("SYN,ACK"), or "NONE".
func (f TCPFlags) String() string {
	if f == 0 {
		return "NONE"
	}
	var b strings.Builder
	for _, n := range flagNames {
		if f&n.f != 0 {
			if b.Len() > 0 {
				b.WriteByte(',')
			}
			b.WriteString(n.name)
		}
	}
	return b.String()
}

// ParseTCPFlags parses a comma-separated flag list as iptables' --tcp-flags
// takes it: flag names in any case, "ALL" (FIN to URG, as iptables defines
// it) and "NONE".
func ParseTCPFlags(s string) (TCPFlags, bool) {
	var f TCPFlags
	for _, part := range strings.Split(s, ",") {
		switch up := strings.ToUpper(part); up {
		case "ALL":
			f |= FIN | SYN | RST | PSH | ACK | URG
		case "NONE":
		default:
			found := false
			for _, n := range flagNames {
				if n.name == up {
					f |= n.f
					found = true
				}
			}
			if !found {
				return 0, false
			}
		}
	}
	return f, true
}
