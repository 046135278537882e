package inet

import "net/netip"

// AppendAddr appends a as glibc's inet_ntop writes it, which is how
// iptables, ipset and conntrack print addresses. It differs from Go's
// form only for an IPv6 address whose first 96 bits are zero and which is
// neither :: nor ::1: glibc prints it "::a.b.c.d" ("::0.5.0.0", not
// "::5:0").
func AppendAddr(b []byte, a netip.Addr) []byte {
	if a.Is6() && !a.Is4In6() {
		s := a.As16()
		zero := true
		for _, x := range s[:12] {
			if x != 0 {
				zero = false
				break
			}
		}
		if zero && (s[12] != 0 || s[13] != 0) {
			b = append(b, "::"...)
			return netip.AddrFrom4([4]byte(s[12:])).AppendTo(b)
		}
	}
	return a.AppendTo(b)
}
