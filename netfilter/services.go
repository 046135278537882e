package netfilter

type serviceEntry struct {
	port    uint16
	proto   string
	name    string
	aliases []string
}

// serviceByPort returns the first /etc/services name for port/proto, as
// getservbyport does.
func serviceByPort(port uint16, proto string) (string, bool) {
	for _, e := range serviceTable {
		if e.port == port && e.proto == proto {
			return e.name, true
		}
	}
	return "", false
}

// serviceByName resolves a service name or alias for proto.
func serviceByName(name, proto string) (uint16, bool) {
	for _, e := range serviceTable {
		if e.proto != proto {
			continue
		}
		if e.name == name {
			return e.port, true
		}
		for _, a := range e.aliases {
			if a == name {
				return e.port, true
			}
		}
	}
	return 0, false
}
