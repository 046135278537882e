package netfilter

import (
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strconv"
)

// String returns the packet in one line for logs and test diffs, e.g.
// "tcp 10.0.0.1:40000 -> 10.0.0.2:80 SYN in=eth0 mark=0x4000 ttl=64 len=60".
// It is not a format any tool prints.
func (p Packet) String() string {
	b := append([]byte(nil), p.Proto.String()...)
	b = append(b, ' ')
	switch {
	case p.Proto.HasPorts():
		b = netip.AddrPortFrom(p.Src, p.SrcPort).AppendTo(b)
		b = append(b, " -> "...)
		b = netip.AddrPortFrom(p.Dst, p.DstPort).AppendTo(b)
	default:
		b = p.Src.AppendTo(b)
		b = append(b, " -> "...)
		b = p.Dst.AppendTo(b)
	}
	if p.Proto == inet.TCP {
		b = append(b, ' ')
		b = append(b, p.TCPFlags.String()...)
	}
	if p.Proto.IsICMP() {
		b = append(b, " type="...)
		b = strconv.AppendUint(b, uint64(p.ICMPType), 10)
		b = append(b, " code="...)
		b = strconv.AppendUint(b, uint64(p.ICMPCode), 10)
		if p.ICMPID != 0 {
			b = append(b, " id="...)
			b = strconv.AppendUint(b, uint64(p.ICMPID), 10)
		}
	}
	if p.In != "" {
		b = append(b, " in="...)
		b = append(b, p.In...)
	}
	if p.Out != "" {
		b = append(b, " out="...)
		b = append(b, p.Out...)
	}
	if p.Mark != 0 {
		b = append(b, " mark=0x"...)
		b = strconv.AppendUint(b, uint64(p.Mark), 16)
	}
	b = append(b, " ttl="...)
	b = strconv.AppendUint(b, uint64(p.TTL), 10)
	b = append(b, " len="...)
	b = strconv.AppendInt(b, int64(p.Length), 10)
	return string(b)
}

// String returns the step in one line, e.g.
// "PREROUTING nat KUBE-SERVICES #3 JUMP:KUBE-SVC-X", "INPUT filter INPUT
// policy POLICY:DROP" or "PREROUTING ROUTE".
func (s Step) String() string {
	b := append([]byte(nil), s.Hook.String()...)
	if s.Chain != "" {
		b = append(b, ' ')
		b = append(b, s.Table.String()...)
		b = append(b, ' ')
		b = append(b, s.Chain...)
		switch {
		case s.Rule > 0:
			b = append(b, " #"...)
			b = strconv.AppendInt(b, int64(s.Rule), 10)
		case s.Action.Kind != ActionEnter:
			b = append(b, " policy"...)
		}
	}
	if a := s.Action.String(); a != "" {
		b = append(b, ' ')
		b = append(b, a...)
	}
	return string(b)
}

// String returns the result in one line: verdict, disposition, the
// deciding place, the reason and the packet as it left, e.g.
// "DROP dropped at INPUT filter INPUT #2 DROP: tcp 10.0.0.1:1 -> ...".
func (r Result) String() string {
	b := append([]byte(nil), r.Verdict.String()...)
	b = append(b, ' ')
	b = append(b, r.Disposition.String()...)
	if r.Where.Chain != "" || r.Where.Action.Kind != ActionNone {
		b = append(b, " at "...)
		b = append(b, r.Where.String()...)
	}
	if r.Reason != NoReason {
		b = append(b, " ("...)
		b = append(b, r.Reason.String()...)
		b = append(b, ')')
	}
	if r.Err != nil {
		b = append(b, " ("...)
		b = append(b, r.Err.Error()...)
		b = append(b, ')')
	}
	b = append(b, ": "...)
	b = append(b, r.Packet.String()...)
	return string(b)
}
