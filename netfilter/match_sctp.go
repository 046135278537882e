package netfilter

import (
	"fmt"
	"strings"

	"github.com/packetwalk/packetwalk/inet"
)

// SCTPMatch is "-p sctp -m sctp [!] --sport P[:Q] [!] --dport P[:Q]
// [!] --chunk-types all|any|only CHUNKS".
type SCTPMatch struct {
	// SrcPorts and DstPorts mean what TCPMatch's do: nil is an absent
	// --sport or --dport, and the inversions apply only to a present one.
	SrcPorts, DstPorts       *PortRange
	InvSrcPorts, InvDstPorts bool
	// Chunks, when HasChunks is set, tests the packet's chunk list.
	Chunks    SCTPChunkTest
	HasChunks bool
	InvChunks bool
}

// SCTPChunkMatchType is how --chunk-types compares the packet's chunks
// with the listed types.
type SCTPChunkMatchType uint8

// Chunk match types, with the kernel's values.
const (
	// SCTPChunkAny: some chunk of a listed type (with its flags) is present.
	SCTPChunkAny SCTPChunkMatchType = 1
	// SCTPChunkAll: every listed type is present (with its flags).
	SCTPChunkAll SCTPChunkMatchType = 2
	// SCTPChunkOnly: every chunk is of a listed type (with its flags).
	SCTPChunkOnly SCTPChunkMatchType = 4
)

// SCTPChunkFlags requires (chunk flags & Mask) == Flags for chunks of Type.
type SCTPChunkFlags struct {
	Type, Flags, Mask uint8
}

// SCTPChunkTest is the argument of --chunk-types: a match type, a set of
// chunk types (bit t of Types[t/64]) and up to four per-type flag tests.
type SCTPChunkTest struct {
	Match SCTPChunkMatchType
	Types [4]uint64
	Flags []SCTPChunkFlags
}

func (ct *SCTPChunkTest) has(t uint8) bool { return ct.Types[t/64]&(1<<(t%64)) != 0 }

// maxSCTPFlagTests is XT_NUM_SCTP_FLAGS.
const maxSCTPFlagTests = 4

// sctpChunkNames is iptables' chunk table: name, type and the letters of
// the flags it may test, from bit 7 down to bit 0.
var sctpChunkNames = []struct {
	name  string
	typ   uint8
	flags string
}{
	{"DATA", 0, "----IUBE"}, {"INIT", 1, "--------"}, {"INIT_ACK", 2, "--------"}, {"SACK", 3, "--------"},
	{"HEARTBEAT", 4, "--------"}, {"HEARTBEAT_ACK", 5, "--------"}, {"ABORT", 6, "-------T"},
	{"SHUTDOWN", 7, "--------"}, {"SHUTDOWN_ACK", 8, "--------"}, {"ERROR", 9, "--------"},
	{"COOKIE_ECHO", 10, "--------"}, {"COOKIE_ACK", 11, "--------"}, {"ECN_ECNE", 12, "--------"},
	{"ECN_CWR", 13, "--------"}, {"SHUTDOWN_COMPLETE", 14, "-------T"}, {"ASCONF", 193, "--------"},
	{"ASCONF_ACK", 128, "--------"}, {"FORWARD_TSN", 192, "--------"}, {"I_DATA", 64, "----IUBE"},
	{"I_FORWARD_TSN", 194, "--------"},
}

func init() {
	registerMatch(&module{name: "sctp",
		opts: []option{
			{name: "sport", args: 1, invert: true, aliases: []string{"source-port"}},
			{name: "dport", args: 1, invert: true, aliases: []string{"destination-port"}},
			{name: "chunk-types", args: 2, invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &SCTPMatch{} }})
}

// parseSCTPPorts parses "P", "P:Q", ":Q" or "P:"; unlike tcp, a reversed
// range is an error.
func parseSCTPPorts(opt, s string) (PortRange, error) {
	lo, hi, isRange := strings.Cut(s, ":")
	bad := func(v string) error {
		return badValue("sctp", opt, v, "a port or a range PORT:PORT")
	}
	if !isRange {
		p, ok := parseServicePort(s, "sctp")
		if !ok {
			return PortRange{}, bad(s)
		}
		return PortRange{p, p}, nil
	}
	r := anyPorts
	var ok bool
	if lo != "" {
		if r.Lo, ok = parseServicePort(lo, "sctp"); !ok {
			return r, bad(lo)
		}
	}
	if hi != "" {
		if r.Hi, ok = parseServicePort(hi, "sctp"); !ok {
			return r, bad(hi)
		}
	}
	if r.Lo > r.Hi {
		return r, badValue("sctp", opt, s, "a range with min <= max")
	}
	return r, nil
}

func (m *SCTPMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	switch opt {
	case "sport":
		r, err := parseSCTPPorts("--sport", args[0])
		if err != nil {
			return err
		}
		m.SrcPorts, m.InvSrcPorts = &r, inv
	case "dport":
		r, err := parseSCTPPorts("--dport", args[0])
		if err != nil {
			return err
		}
		m.DstPorts, m.InvDstPorts = &r, inv
	case "chunk-types":
		ct, err := parseSCTPChunks(args[0], args[1])
		if err != nil {
			return err
		}
		m.Chunks, m.HasChunks, m.InvChunks = ct, true, inv
	}
	return nil
}

// parseSCTPChunks parses "all|any|only" and "ALL", "NONE" or a list of
// NAME[:FLAGS], where an upper-case flag letter must be set and a
// lower-case one clear.
func parseSCTPChunks(mode, list string) (SCTPChunkTest, error) {
	var ct SCTPChunkTest
	switch strings.ToLower(mode) {
	case "any":
		ct.Match = SCTPChunkAny
	case "all":
		ct.Match = SCTPChunkAll
	case "only":
		ct.Match = SCTPChunkOnly
	default:
		return ct, badValue("sctp", "--chunk-types", mode, "all, any or only")
	}
	switch {
	case strings.EqualFold(list, "ALL"):
		ct.Types = [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}
		return ct, nil
	case strings.EqualFold(list, "NONE"):
		return ct, nil
	}
	for _, item := range strings.Split(list, ",") {
		name, flags, _ := strings.Cut(item, ":")
		k := -1
		for i, n := range sctpChunkNames {
			if strings.EqualFold(n.name, name) {
				k = i
			}
		}
		if k < 0 {
			return ct, badValue("sctp", "--chunk-types", name, "a chunk name such as DATA, INIT or SHUTDOWN_COMPLETE")
		}
		c := sctpChunkNames[k]
		ct.Types[c.typ/64] |= 1 << (c.typ % 64)
		// iptables 1.8.9 records a flag test under the chunk's index in
		// its table, not its type; they differ only for I_DATA, whose
		// flags are therefore neither printed nor tested.
		flagType := uint8(k)
		for _, r := range flags {
			pos := strings.IndexRune(c.flags, []rune(strings.ToUpper(string(r)))[0])
			if pos < 0 {
				return ct, badValue("sctp", "--chunk-types", item, "flags among "+strings.Trim(c.flags, "-")+" for "+c.name)
			}
			bit := uint8(1) << (7 - pos)
			set := r >= 'A' && r <= 'Z'
			found := false
			for i := range ct.Flags {
				if ct.Flags[i].Type == flagType {
					ct.Flags[i].Mask |= bit
					if set {
						ct.Flags[i].Flags |= bit
					}
					found = true
				}
			}
			if !found {
				if len(ct.Flags) == maxSCTPFlagTests {
					return ct, badValue("sctp", "--chunk-types", list, "flags on at most 4 chunk types")
				}
				f := SCTPChunkFlags{Type: flagType, Mask: bit}
				if set {
					f.Flags = bit
				}
				ct.Flags = append(ct.Flags, f)
			}
		}
	}
	return ct, nil
}

// appendTo prints the test as iptables does after "--chunk-types" (save,
// names) or in -L -n (numbers as 0x%04X).
func (ct *SCTPChunkTest) appendTo(b []byte, numeric bool) []byte {
	switch ct.Match {
	case SCTPChunkAny:
		b = append(b, " any"...)
	case SCTPChunkAll:
		b = append(b, " all"...)
	default:
		b = append(b, " only"...)
	}
	switch {
	case ct.Types == [4]uint64{}:
		return append(b, " NONE"...)
	case ct.Types == [4]uint64{^uint64(0), ^uint64(0), ^uint64(0), ^uint64(0)}:
		return append(b, " ALL"...)
	}
	sep := byte(' ')
	for t := 0; t < 256; t++ {
		if !ct.has(uint8(t)) {
			continue
		}
		b = append(b, sep)
		sep = ','
		letters := ""
		if numeric {
			b = fmt.Appendf(b, "0x%04X", t)
		}
		for _, n := range sctpChunkNames {
			if int(n.typ) == t {
				if !numeric {
					b = append(b, n.name...)
				}
				letters = n.flags
			}
		}
		for _, f := range ct.Flags {
			if int(f.Type) != t || f.Mask == 0 {
				continue
			}
			b = append(b, ':')
			for i := 7; i >= 0; i-- {
				if f.Mask&(1<<i) == 0 {
					continue
				}
				c := letters[7-i]
				if f.Flags&(1<<i) == 0 && c >= 'A' && c <= 'Z' {
					c += 'a' - 'A'
				}
				b = append(b, c)
			}
		}
	}
	return b
}

// matchChunks is xt_sctp's match_packet; ok is false when the packet has
// no chunk, which the kernel treats as malformed (hotdrop).
func (ct *SCTPChunkTest) matchChunks(chunks []SCTPChunk) (matched, ok bool) {
	if len(chunks) == 0 {
		return false, false
	}
	flagsOK := func(c SCTPChunk) bool {
		for _, f := range ct.Flags {
			if f.Type == c.Type {
				return c.Flags&f.Mask == f.Flags
			}
		}
		return true
	}
	left := ct.Types
	for _, c := range chunks {
		if !ct.has(c.Type) {
			if ct.Match == SCTPChunkOnly {
				return false, true
			}
			continue
		}
		switch ct.Match {
		case SCTPChunkAny:
			if flagsOK(c) {
				return true, true
			}
		case SCTPChunkAll:
			if flagsOK(c) {
				left[c.Type/64] &^= 1 << (c.Type % 64)
			}
		case SCTPChunkOnly:
			if !flagsOK(c) {
				return false, true
			}
		}
	}
	switch ct.Match {
	case SCTPChunkAll:
		return left == [4]uint64{}, true
	case SCTPChunkAny:
		return false, true
	}
	return true, true
}

func (m *SCTPMatch) done(c *ruleCtx) (any, error) {
	if err := needProto(c, "sctp", inet.SCTP); err != nil {
		return nil, err
	}
	return m, nil
}

// Module implements Match.
func (m *SCTPMatch) Module() string { return "sctp" }

func (m *SCTPMatch) appendSave(b []byte) []byte {
	if m.SrcPorts != nil {
		b = appendPortOpt(b, "sport", *m.SrcPorts, m.InvSrcPorts)
	}
	if m.DstPorts != nil {
		b = appendPortOpt(b, "dport", *m.DstPorts, m.InvDstPorts)
	}
	if m.HasChunks {
		b = appendNot(b, m.InvChunks)
		b = append(b, " --chunk-types"...)
		b = m.Chunks.appendTo(b, false)
	}
	return b
}

func (m *SCTPMatch) appendList(b []byte, numeric bool) []byte {
	b = append(b, " sctp"...)
	// -L leaves out a full range that is not inverted; save keeps it.
	if m.SrcPorts != nil && (*m.SrcPorts != anyPorts || m.InvSrcPorts) {
		b = appendListPorts(b, "spt", *m.SrcPorts, m.InvSrcPorts, numeric, "sctp")
	}
	if m.DstPorts != nil && (*m.DstPorts != anyPorts || m.InvDstPorts) {
		b = appendListPorts(b, "dpt", *m.DstPorts, m.InvDstPorts, numeric, "sctp")
	}
	if m.HasChunks {
		b = appendNot(b, m.InvChunks)
		b = m.Chunks.appendTo(b, numeric)
	}
	return b
}

func (m *SCTPMatch) match(c *evalCtx) bool {
	p := c.pkt
	if p.FragOffset != 0 {
		return false
	}
	if m.SrcPorts != nil && m.SrcPorts.contains(p.SrcPort) == m.InvSrcPorts ||
		m.DstPorts != nil && m.DstPorts.contains(p.DstPort) == m.InvDstPorts {
		return false
	}
	if !m.HasChunks {
		return true
	}
	ok, wellFormed := m.Chunks.matchChunks(p.SCTPChunks[:min(int(p.NumSCTPChunks), len(p.SCTPChunks))])
	if !wellFormed {
		c.hotdrop = true
		return false
	}
	return ok != m.InvChunks
}
