package netfilter

import "github.com/packetwalk/packetwalk/internal/services"

// serviceByPort returns the name iptables -L prints for port/proto: the
// first /etc/services entry, as getservbyport does.
func serviceByPort(port uint16, proto string) (string, bool) {
	return services.ByPort(port, proto)
}

// serviceByName resolves a service name or alias for proto, as
// getservbyname(name, proto) does for xtables_parse_port (tcp, sctp and
// multiport ports).
func serviceByName(name, proto string) (uint16, bool) {
	return services.ByName(name, proto)
}

// serviceAnyProto resolves a service name the way xtables_getportbyname
// does (the udp match, NAT ports): getaddrinfo with no hints, which finds
// names of tcp and udp entries alike.
func serviceAnyProto(name string) (uint16, bool) {
	return services.ByNameAnyProto(name)
}
