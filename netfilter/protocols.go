package netfilter

import "strconv"

// Protocol numbers the engine treats specially.
const (
	ProtoICMP    uint8 = 1
	ProtoTCP     uint8 = 6
	ProtoUDP     uint8 = 17
	ProtoICMPv6  uint8 = 58
	ProtoSCTP    uint8 = 132
	ProtoUDPLite uint8 = 136
)

// protoNames holds Debian's /etc/protocols (netbase), which iptables consults
// through getprotobynumber when it prints "-p" in iptables-save and -L.
// Keeping a copy makes the output independent of the machine it runs on.
var protoNames = map[uint8]string{
	0: "ip", 1: "icmp", 2: "igmp", 3: "ggp", 4: "ipencap", 5: "st", 6: "tcp", 8: "egp", 9: "igp",
	12: "pup", 17: "udp", 20: "hmp", 22: "xns-idp", 27: "rdp", 29: "iso-tp4", 33: "dccp", 36: "xtp",
	37: "ddp", 38: "idpr-cmtp", 41: "ipv6", 43: "ipv6-route", 44: "ipv6-frag", 45: "idrp", 46: "rsvp",
	47: "gre", 50: "esp", 51: "ah", 57: "skip", 58: "ipv6-icmp", 59: "ipv6-nonxt", 60: "ipv6-opts",
	73: "rspf", 81: "vmtp", 88: "eigrp", 89: "ospf", 93: "ax.25", 94: "ipip", 97: "etherip",
	98: "encap", 103: "pim", 108: "ipcomp", 112: "vrrp", 115: "l2tp", 124: "isis", 132: "sctp",
	133: "fc", 135: "mobility-header", 136: "udplite", 137: "mpls-in-ip", 138: "manet", 139: "hip",
	140: "shim6", 141: "wesp", 142: "rohc", 143: "ethernet",
}

// protoNumbers is protoNames reversed, for parsing "-p NAME".
var protoNumbers = func() map[string]uint8 {
	m := make(map[string]uint8, len(protoNames))
	for n, name := range protoNames {
		m[name] = n
	}
	return m
}()

// protoAliases are the extra names iptables itself knows (xtables_chain_protos)
// plus the /etc/protocols aliases users type.
var protoAliases = map[string]uint8{
	"all": 0, "icmpv6": 58, "mh": 135, "ipv6-mh": 135, "hopopt": 0,
	"IP": 0, "ICMP": 1, "TCP": 6, "UDP": 17, "SCTP": 132,
}

// parseProto parses the argument of -p: a name or a number 0-255.
// "all" and 0 mean any protocol.
func parseProto(s string) (uint8, bool) {
	// Only digits can be a number; the check saves ParseUint's error
	// allocation for every "-p tcp".
	if s != "" && s[0] >= '0' && s[0] <= '9' {
		if n, err := strconv.ParseUint(s, 10, 8); err == nil {
			return uint8(n), true
		}
	}
	if p, ok := protoAliases[s]; ok {
		return p, true
	}
	if n, ok := protoNumbers[s]; ok {
		return n, true
	}
	return 0, false
}

// protoName is the protocol as iptables-save and -L (without -n) print it.
func protoName(p uint8) string {
	if p == 0 {
		return "all"
	}
	if n, ok := protoNames[p]; ok {
		return n
	}
	return strconv.Itoa(int(p))
}
