package render

import (
	"bytes"
	"fmt"
	"net/netip"
	"strings"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/netfilter"
)

// WalkOptions select what WalkDOT draws.
type WalkOptions struct {
	// Title labels the graph.
	Title string
}

// WalkDOT returns the Graphviz DOT text of a packet's walk across a
// cluster (cluster.Walk): one box per hop, top to bottom, with the device,
// the interfaces or ports it came in and left through, the packet's
// addresses as it arrived and, where they changed, as it left, and what
// changed or decided it there (the host's NAT, MARK, DROP and REJECT
// rules from its trace, a device's note). The box where the walk was
// dropped is highlighted.
func WalkDOT(w cluster.Walk, opt WalkOptions) []byte {
	var b bytes.Buffer
	b.WriteString("digraph walk {\n  rankdir=TB;\n")
	if opt.Title != "" {
		fmt.Fprintf(&b, "  label=%s; labelloc=t; fontname=\"Helvetica\";\n", quote(opt.Title))
	}
	b.WriteString("  node [shape=box, style=rounded, fontname=\"Helvetica\", fontsize=10];\n")
	b.WriteString("  edge [fontname=\"Helvetica\", fontsize=9];\n")
	for i, h := range w.Hops {
		attrs := ""
		if i == len(w.Hops)-1 && w.Fate == cluster.Dropped {
			attrs = ", " + highlight
		}
		fmt.Fprintf(&b, "  h%d [label=%s%s];\n", i, quote(hopLabel(h)), attrs)
	}
	for i := 1; i < len(w.Hops); i++ {
		fmt.Fprintf(&b, "  h%d -> h%d [label=%s];\n", i-1, i, quote(w.Hops[i].In))
	}
	end := w.Fate.String()
	if w.Reason != "" {
		end += "\n" + w.Reason
	}
	fmt.Fprintf(&b, "  end [shape=plaintext, label=%s];\n", quote(end))
	if len(w.Hops) > 0 {
		fmt.Fprintf(&b, "  h%d -> end [style=dashed];\n", len(w.Hops)-1)
	}
	b.WriteString("}\n")
	return b.Bytes()
}

// hopLabel is a hop's box text.
func hopLabel(h cluster.Hop) string {
	var s strings.Builder
	fmt.Fprintf(&s, "%s (%s)\n", h.Device, h.Kind)
	in, out := h.In, h.Out
	if in == "" {
		in = "local process"
	}
	if out == "" {
		out = "-"
	}
	fmt.Fprintf(&s, "in %s, out %s\n", in, out)
	s.WriteString(endpoints(h.Packet))
	if p := h.Result.Packet; p.Src != h.Packet.Src || p.Dst != h.Packet.Dst || p.SrcPort != h.Packet.SrcPort || p.DstPort != h.Packet.DstPort {
		s.WriteString("\nnow " + endpoints(p))
	}
	for _, st := range h.Result.Trace {
		if t := stepTarget(st); t != "" {
			fmt.Fprintf(&s, "\n%s %s: %s", st.Table, st.Chain, t)
		}
	}
	if h.Note != "" {
		s.WriteString("\n" + h.Note)
	}
	if r := h.Result; r.Disposition == netfilter.Dropped || r.Disposition == netfilter.Rejected {
		s.WriteString("\n" + r.Disposition.String())
		if r.Reason != netfilter.NoReason {
			s.WriteString(": " + r.Reason.String())
		}
	}
	return s.String()
}

// stepTarget is the target of a rule that changed or decided the packet,
// or "".
func stepTarget(st netfilter.Step) string {
	i := strings.LastIndex(st.Text, " -j ")
	if st.Rule == 0 || i < 0 {
		return ""
	}
	t := st.Text[i+4:]
	name, _, _ := strings.Cut(t, " ")
	switch name {
	case "DNAT", "SNAT", "MASQUERADE", "REDIRECT", "MARK", "DROP", "REJECT":
		return t
	}
	return ""
}

func endpoints(p netfilter.Packet) string {
	if p.Proto.HasPorts() {
		return fmt.Sprintf("%s %s → %s", p.Proto, netip.AddrPortFrom(p.Src, p.SrcPort), netip.AddrPortFrom(p.Dst, p.DstPort))
	}
	return fmt.Sprintf("%s %s → %s", p.Proto, p.Src, p.Dst)
}
