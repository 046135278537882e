package netfilter

type rejectKind uint8

func buildReject(p *Packet, k rejectKind) (Packet, bool) { return Packet{}, false }
