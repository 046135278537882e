package netfilter

import (
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strconv"
)

// ListOptions are the flags of "iptables -L" that change its output.
type ListOptions struct {
	// Numeric prints addresses, ports and protocols as numbers (-n).
	Numeric bool
	// Verbose adds counters and interfaces (-v).
	Verbose bool
	// Exact prints counters in full instead of with K/M/G/T units (-x).
	Exact bool
	// LineNumbers prefixes each rule with its position (--line-numbers).
	LineNumbers bool
}

// AppendList appends the rules of table as "iptables -t TABLE -L [CHAIN]"
// (ip6tables for an IPv6 ruleset) of iptables 1.8.9 prints them, with the
// flags in opt. An empty chain lists every chain. A chain that does not
// exist is an error wrapping ErrNoSuchChain.
//
// Names without Numeric come from copies of Debian's /etc/protocols,
// /etc/services and /etc/networks and from the single /etc/hosts entry
// "127.0.0.1 localhost", so the output does not depend on the machine.
func (rs *Ruleset) AppendList(b []byte, table TableID, chain string, opt ListOptions) ([]byte, error) {
	if table == NoTable || table >= numTables {
		return b, fmt.Errorf("%w: %s", ErrUnknownTable, table)
	}
	t := rs.Table(table)
	if t == nil {
		t = newTable(table) // a table never touched lists its empty built-ins
	}
	chains := t.chainList()
	if chain != "" {
		c := t.Chain(chain)
		if c == nil {
			return b, fmt.Errorf("%w: %q in table %s", ErrNoSuchChain, chain, table)
		}
		chains = []*Chain{c}
	}
	refs := t.referenceCounts()
	for i, c := range chains {
		if i > 0 {
			b = append(b, '\n')
		}
		b = appendListHeader(b, refs[c.Name], c, opt)
		for n, r := range c.Rules {
			b = rs.appendListRule(b, n+1, r, opt)
		}
	}
	return b, nil
}

// appendListHeader appends the "Chain ..." line and the column titles.
// The titles keep iptables' trailing spaces.
func appendListHeader(b []byte, refs int, c *Chain, opt ListOptions) []byte {
	b = append(b, "Chain "...)
	b = append(b, c.Name...)
	if c.builtin {
		b = append(b, " (policy "...)
		b = append(b, c.Policy.String()...)
		if opt.Verbose {
			b = append(b, ' ')
			b = appendNum(b, c.Counters.Packets, opt.Exact, true)
			b = append(b, "packets, "...)
			b = appendNum(b, c.Counters.Bytes, opt.Exact, true)
			b = append(b, "bytes"...)
		}
		b = append(b, ")\n"...)
	} else {
		b = append(b, " ("...)
		b = strconv.AppendInt(b, int64(refs), 10)
		b = append(b, " references)\n"...)
	}
	if opt.LineNumbers {
		b = append(b, "num  "...)
	}
	if opt.Verbose {
		if opt.Exact {
			b = append(b, "    pkts      bytes "...)
		} else {
			b = append(b, " pkts bytes "...)
		}
	}
	b = append(b, "target     prot opt"...)
	if opt.Verbose {
		b = append(b, " in     out    "...)
	}
	// " %-19s " for each address column.
	return append(b, " source               destination         \n"...)
}

// appendListRule appends one rule row.
func (rs *Ruleset) appendListRule(b []byte, num int, r *Rule, opt ListOptions) []byte {
	if opt.LineNumbers {
		start := len(b)
		b = padRight(strconv.AppendInt(b, int64(num), 10), start, 4)
		b = append(b, ' ')
	}
	if opt.Verbose {
		b = appendNum(b, r.Counters.Packets, opt.Exact, false)
		b = appendNum(b, r.Counters.Bytes, opt.Exact, false)
	}
	start := len(b)
	if r.Target != nil {
		if ln, ok := r.Target.(listNamer); ok {
			b = append(b, ln.listName()...) // NOTRACK lists as CT
		} else {
			b = append(b, r.Target.Name()...)
		}
	}
	b = padRight(b, start, 9)
	b = append(b, ' ')

	ip := &r.IP
	b = append(b, invChar(ip.InvProto))
	start = len(b)
	if opt.Numeric {
		b = strconv.AppendUint(b, uint64(ip.Proto), 10)
	} else {
		b = append(b, ip.Proto.String()...)
	}
	b = padRight(b, start, 4) // "%-4s ": a long name still gets its space
	b = append(b, ' ')

	// The fragment flag: '-' or '!' for its inversion, then '-' or 'f'.
	switch ip.Fragment {
	case OnlyFragments:
		b = append(b, "-f "...)
	case NoFragments:
		b = append(b, "!f "...)
	default:
		b = append(b, "-- "...)
	}

	if opt.Verbose {
		b = append(b, ' ')
		b = appendIface(b, ip.In, ip.InvIn, opt.Numeric)
		b = append(b, ' ')
		b = appendIface(b, ip.Out, ip.InvOut, opt.Numeric)
		b = append(b, ' ')
	}
	b = rs.appendListAddr(b, ip.Src, ip.SrcMask, ip.InvSrc, opt.Numeric)
	b = rs.appendListAddr(b, ip.Dst, ip.DstMask, ip.InvDst, opt.Numeric)

	if j, ok := r.Target.(*JumpTarget); ok && j.Goto {
		b = append(b, "[goto] "...)
	}
	for _, m := range shownMatches(r) {
		b = m.appendList(b, opt.Numeric)
	}
	if r.Target != nil {
		b = r.Target.appendList(b, opt.Numeric)
	}
	return append(b, '\n')
}

func invChar(inv bool) byte {
	if inv {
		return '!'
	}
	return ' '
}

// padRight pads b, whose field began at start, with spaces to width w.
// Longer fields overflow as printf's "%-Ns" lets them.
func padRight(b []byte, start, w int) []byte {
	for n := len(b) - start; n < w; n++ {
		b = append(b, ' ')
	}
	return b
}

// appendIface appends an interface column: "!" when inverted, then the
// name, "*" (with -n) or "any" when none is given, padded to 6.
func appendIface(b []byte, name string, inv, numeric bool) []byte {
	start := len(b)
	if inv {
		b = append(b, '!')
	}
	switch {
	case name != "":
		b = append(b, name...)
	case numeric:
		b = append(b, '*')
	default:
		b = append(b, "any"...)
	}
	return padRight(b, start, 6)
}

// appendListAddr appends an inversion character and an address column
// padded to 19 and followed by a space.
func (rs *Ruleset) appendListAddr(b []byte, p netip.Prefix, mask netip.Addr, inv, numeric bool) []byte {
	b = append(b, invChar(inv))
	start := len(b)
	switch {
	case (!p.IsValid() || p.Bits() == 0) && !numeric:
		b = append(b, "anywhere"...)
	case !p.IsValid():
		if rs.family == IPv6 {
			b = append(b, "::/0"...)
		} else {
			b = append(b, "0.0.0.0/0"...)
		}
	default:
		p = p.Masked()
		a := p.Addr()
		name := ""
		if !numeric {
			name = addrName(a)
		}
		if name != "" {
			b = append(b, name...)
		} else {
			b = inet.AppendAddr(b, a)
		}
		if mask.IsValid() {
			b = append(b, '/')
			b = inet.AppendAddr(b, mask)
		} else if p.Bits() != a.BitLen() {
			b = append(b, '/')
			b = strconv.AppendInt(b, int64(p.Bits()), 10)
		}
	}
	b = padRight(b, start, 19)
	return append(b, ' ')
}

// addrName is the name iptables -L finds for an address: a host name
// (gethostbyaddr), else for IPv4 a network name (getnetbyaddr), else "".
// Only fixed entries are known; packetwalk does no lookups.
func addrName(a netip.Addr) string {
	if n, ok := listHostNames[a]; ok {
		return n
	}
	if a.Is4() {
		return listNetworkNames[a]
	}
	return ""
}

// listHostNames is the reverse of /etc/hosts as the recording machine has
// it; a network namespace has no DNS, so nothing else resolves.
var listHostNames = map[netip.Addr]string{
	netip.AddrFrom4([4]byte{127, 0, 0, 1}): "localhost",
}

// listNetworkNames holds Debian's /etc/networks (netbase).
var listNetworkNames = map[netip.Addr]string{
	netip.AddrFrom4([4]byte{0, 0, 0, 0}):     "default",
	netip.AddrFrom4([4]byte{127, 0, 0, 0}):   "loopback",
	netip.AddrFrom4([4]byte{169, 254, 0, 0}): "link-local",
}

// appendLibcPrefix appends "ADDR/BITS" with the address as glibc writes
// it, as iptables-save and -S print -s and -d.
func appendLibcPrefix(b []byte, p netip.Prefix) []byte {
	b = inet.AppendAddr(b, p.Addr())
	b = append(b, '/')
	return strconv.AppendInt(b, int64(p.Bits()), 10)
}

// appendLibcMasked is appendLibcPrefix, or "ADDR/MASK" for a
// non-contiguous mask, as iptables prints it.
func appendLibcMasked(b []byte, p netip.Prefix, mask netip.Addr) []byte {
	if !mask.IsValid() {
		return appendLibcPrefix(b, p)
	}
	b = inet.AppendAddr(b, p.Addr())
	b = append(b, '/')
	return inet.AppendAddr(b, mask)
}

// appendNum appends a counter as xtables_print_num does: padded columns
// ("%5llu ", "%4lluK ") in a table, bare ("%llu ") in a chain header
// (notable), and in full ("%8llu ") with exact. The rounding adds 500 in
// uint64 and so wraps for counters near 2^64, as iptables does.
func appendNum(b []byte, n uint64, exact, notable bool) []byte {
	pad := func(b []byte, start, w int) []byte {
		if notable {
			return b
		}
		digits := b[start:]
		if len(digits) >= w {
			return b
		}
		// Shift right to pad on the left.
		k := w - len(digits)
		b = append(b, make([]byte, k)...)
		copy(b[start+k:], b[start:len(b)-k])
		for i := start; i < start+k; i++ {
			b[i] = ' '
		}
		return b
	}
	start := len(b)
	if exact {
		b = strconv.AppendUint(b, n, 10)
		return append(pad(b, start, 8), ' ')
	}
	if n <= 99999 {
		b = strconv.AppendUint(b, n, 10)
		return append(pad(b, start, 5), ' ')
	}
	for _, unit := range []byte("KMGT") {
		n = (n + 500) / 1000
		if n <= 9999 || unit == 'T' {
			b = strconv.AppendUint(b, n, 10)
			b = pad(b, start, 4)
			return append(b, unit, ' ')
		}
	}
	return b
}
