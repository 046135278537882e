package netfilter

import (
	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
)

// fillCT describes the packet's connection for the conntrack matches.
func (w *walk) fillCT(c *evalCtx) {
	c.ct, c.ctReady = ctInfo{untracked: w.notrack || c.notrack}, true
	if c.tmpl {
		// The template of CT --zone/--ctevents: a connection in the
		// original direction, NEW, with the confirmed bit set so that it is
		// never inserted, and the mark CONNMARK gave it.
		c.ct.tracked, c.ct.tmpl, c.ct.state = true, true, stateBit(conntrack.StateNew)
		c.ct.status, c.ct.mark = conntrack.StatusConfirmed, c.tmplMark
		return
	}
	e := w.cur.Entry
	if e == nil {
		return
	}
	ct := &c.ct
	ct.tracked = true
	ct.reply = w.cur.Dir == conntrack.Reply
	switch w.cur.State {
	case conntrack.StateNew, conntrack.StateEstablished, conntrack.StateRelated:
		ct.state = stateBit(w.cur.State)
	}
	if e.NATed(conntrack.SNAT) {
		ct.state |= natStateBit(conntrack.SNAT)
	}
	if e.NATed(conntrack.DNAT) {
		ct.state |= natStateBit(conntrack.DNAT)
	}
	ct.status = e.Status
	ct.mark = e.Mark
}

// setCTMark sets the mark of the packet's connection (CONNMARK).
func (c *evalCtx) setCTMark(v uint32) {
	if c.tmpl {
		c.conn()
		c.tmplMark, c.ct.mark = v, v
		return
	}
	if e := c.walk.cur.Entry; e != nil {
		c.conn() // the mark read so far, before it changes
		if !c.host.explaining || !e.Confirmed() {
			e.Mark = v
		}
		c.ct.mark = v
	}
}

// fillFacts writes what conntrack needs to know of a packet into f, in
// place: Facts are large, and this runs for every tracked packet.
func fillFacts(f *conntrack.Facts, p *Packet) {
	// Field by field: a Facts built whole would be zeroed, filled and
	// copied, with write barriers, for every packet.
	f.Src, f.Dst, f.Proto, f.Zone = p.Src, p.Dst, p.Proto, 0
	f.SrcPort, f.DstPort, f.ICMPType, f.ICMPCode = 0, 0, 0, 0
	switch {
	case p.Proto.HasPorts():
		f.SrcPort, f.DstPort = p.SrcPort, p.DstPort
	case p.Proto == inet.ICMP || p.Proto == inet.ICMPv6:
		f.SrcPort, f.ICMPType, f.ICMPCode = p.ICMPID, p.ICMPType, p.ICMPCode
	}
	f.TCPFlags, f.Len = p.TCPFlags, p.Length
	if conntrack.IsICMPError(p.Proto, p.ICMPType) {
		f.Inner = innerTuple(&p.Inner)
	} else if f.Inner.Proto != 0 || f.Inner.Src.IsValid() {
		f.Inner = conntrack.Tuple{}
	}
	if p.Proto != inet.TCP {
		f.Seq, f.Ack, f.Window, f.PayloadLen = 0, 0, 0, 0
		f.HasOptions, f.WScale, f.HasWScale, f.SACKPerm, f.SACKEnd, f.HasSACK = false, 0, false, false, 0, false
		return
	}
	// Sequence-window tracking inputs (conntrack/window.go).
	ipHL, tcpHL := int(p.IPHeaderLen), int(p.TCPHeaderLen)
	if ipHL == 0 {
		ipHL = 20
		if p.Dst.Is6() {
			ipHL = 40
		}
	}
	if tcpHL == 0 {
		tcpHL = 20
	}
	f.Seq, f.Ack, f.Window = p.Seq, p.Ack, p.Window
	f.PayloadLen = max(p.Length-ipHL-tcpHL, 0)
	f.HasOptions = tcpHL > 20 || p.TCPOptions != [4]uint64{}
	f.WScale, f.HasWScale = p.WScale, p.hasTCPOption(3)
	f.SACKPerm = p.hasTCPOption(4)
	f.SACKEnd, f.HasSACK = p.SACKEnd, p.hasTCPOption(5)
}

// innerTuple is the conntrack tuple of the packet an ICMP error quotes.
func innerTuple(in *InnerHeader) conntrack.Tuple {
	t := conntrack.Tuple{Src: in.Src, Dst: in.Dst, Proto: in.Proto}
	switch {
	case in.Proto.HasPorts():
		t.SrcPort, t.DstPort = in.SrcPort, in.DstPort
	case in.Proto == inet.ICMP || in.Proto == inet.ICMPv6:
		t.SrcPort, t.ICMPType, t.ICMPCode = in.ICMPID, in.ICMPType, in.ICMPCode
	}
	return t
}
