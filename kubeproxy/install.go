package kubeproxy

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/packetwalk/packetwalk/netfilter"
)

// ErrMixedFamilies marks a document given to [Install] that names both IPv4
// and IPv6 addresses, which neither iptables-restore nor ip6tables-restore
// accepts.
var ErrMixedFamilies = errors.New("document mixes IPv4 and IPv6 addresses")

// Install loads a document written by [Generate] into h, as iptables-restore
// (or ip6tables-restore) would on a node. The family is that of the
// addresses the document names (IPv6 when they are IPv6, IPv4 otherwise; a
// document without addresses is the same text in both families and goes to
// IPv4 — use [InstallFamily] to choose). A complete document replaces the
// tables it names; a payload (Config.PayloadOnly, which declares no
// built-in chain) is applied with --noflush, as kube-proxy applies it, so
// it keeps the jump rules already in the built-in chains.
func Install(h *netfilter.Host, data []byte) error {
	f, err := DocumentFamily(data)
	if err != nil {
		return err
	}
	return InstallFamily(h, f, data)
}

// InstallFamily is [Install] with the family given, e.g. from
// Config.Family through [NetfilterFamily].
func InstallFamily(h *netfilter.Host, f netfilter.Family, data []byte) error {
	// kube-proxy creates its nfacct counters before it writes rules that
	// name them; a node without them refuses those rules.
	if bytes.Contains(data, []byte("-m nfacct")) {
		for _, name := range []string{nfacctInvalidDropped, nfacctLocalhostNPs} {
			if _, ok := h.NFAcct(name); !ok {
				if err := h.AddNFAcct(name); err != nil {
					return fmt.Errorf("kubeproxy: install into %s: %w", f, err)
				}
			}
		}
	}
	opt := netfilter.RestoreOptions{NoFlush: !declaresBuiltin(data)}
	if err := h.Restore(f, data, opt); err != nil {
		return fmt.Errorf("kubeproxy: install into %s: %w", f, err)
	}
	return nil
}

// NetfilterFamily returns the netfilter family of cfg.Family.
func NetfilterFamily(cfg Config) netfilter.Family {
	if cfg.isIPv6() {
		return netfilter.IPv6
	}
	return netfilter.IPv4
}

// addressOptions are the options whose argument is an address, prefix or
// address:port in kube-proxy's and kubelet's rules.
var addressOptions = map[string]bool{"-s": true, "-d": true, "--source": true, "--destination": true, "--to-destination": true, "--to-source": true}

// DocumentFamily tells the family of an iptables-restore document from the
// addresses it names: IPv6 when they are IPv6, IPv4 when they are IPv4 or
// when there are none. A document naming both is refused with
// [ErrMixedFamilies], naming the first line of the minority family.
func DocumentFamily(data []byte) (netfilter.Family, error) {
	var first4, first6 int
	n := 0
	// A 10k-service document has 170k lines: fields are visited in place
	// and addresses told apart by their characters, without allocating.
	for line := range bytes.Lines(data) {
		n++
		if len(line) == 0 || line[0] != '-' {
			continue
		}
		prevAddr := false
		for len(line) > 0 {
			i := 0
			for i < len(line) && asciiBlank(line[i]) {
				i++
			}
			j := i
			for j < len(line) && !asciiBlank(line[j]) {
				j++
			}
			tok := line[i:j]
			line = line[j:]
			if len(tok) == 0 {
				break
			}
			if prevAddr {
				switch tokenFamily(tok) {
				case 4:
					if first4 == 0 {
						first4 = n
					}
				case 6:
					if first6 == 0 {
						first6 = n
					}
				}
			}
			prevAddr = tok[0] == '-' && addressOptions[string(tok)]
		}
	}
	switch {
	case first4 != 0 && first6 != 0:
		return 0, fmt.Errorf("%w: IPv4 on line %d, IPv6 on line %d", ErrMixedFamilies, first4, first6)
	case first6 != 0:
		return netfilter.IPv6, nil
	}
	return netfilter.IPv4, nil
}

// asciiBlank reports whether c separates words in a rule line.
func asciiBlank(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// tokenFamily is addrFamily for the common forms, decided by characters:
// a dotted quad with an optional /len or :port, or a hexadecimal address
// with colons. Anything else goes to addrFamily.
func tokenFamily(tok []byte) int {
	dots, colons, hex := 0, 0, false
	for _, c := range tok {
		switch {
		case c == '.':
			dots++
		case c == ':':
			colons++
		case c == '/' || c >= '0' && c <= '9':
		case c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F':
			hex = true
		default:
			return addrFamily(string(tok))
		}
	}
	switch {
	case dots == 3 && colons <= 1 && !hex && tok[0] != '.':
		return 4
	case colons >= 2 && dots == 0:
		return 6
	}
	return addrFamily(string(tok))
}

// addrFamily returns 4 or 6 for an address argument ("10.0.0.1/32",
// "[fd00::1]:80", "10.0.0.1:80", "fd00::/64"), 0 when it is none.
func addrFamily(s string) int {
	if strings.HasPrefix(s, "[") {
		return 6
	}
	s, _, _ = strings.Cut(s, "/")
	if a, err := netip.ParseAddr(s); err == nil {
		if a.Is4() {
			return 4
		}
		return 6
	}
	if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Is4() {
		return 4
	}
	if host, _, ok := strings.Cut(s, "-"); ok { // a NAT range
		return addrFamily(host)
	}
	return 0
}

// declaresBuiltin reports whether the document declares a built-in chain
// (":PREROUTING ACCEPT [0:0]"), i.e. is a complete document rather than
// kube-proxy's --noflush payload.
func declaresBuiltin(data []byte) bool {
	for _, line := range bytes.Split(data, []byte("\n")) {
		if len(line) < 2 || line[0] != ':' {
			continue
		}
		name, rest, _ := strings.Cut(string(line[1:]), " ")
		switch name {
		case "PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING":
			if !strings.HasPrefix(rest, "-") {
				return true
			}
		}
	}
	return false
}
