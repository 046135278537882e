package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

// JSON shape of `trace --format json`: one object per packet per line.
// Fields that do not apply to the protocol are null rather than zero, so
// a consumer can tell "port 0" from "no port".

type jsonWhere struct {
	Hook   string `json:"hook"`
	Table  string `json:"table"`
	Chain  string `json:"chain"`
	Rule   int    `json:"rule"`
	Action string `json:"action"`
}

type jsonPacket struct {
	Proto string  `json:"proto"`
	Src   *string `json:"src"`
	Sport *uint16 `json:"sport"`
	Dst   *string `json:"dst"`
	Dport *uint16 `json:"dport"`
	Flags *string `json:"flags"`
	Type  *uint8  `json:"type"`
	Code  *uint8  `json:"code"`
	ID    *uint16 `json:"id"`
	Mark  string  `json:"mark"`
	TTL   uint8   `json:"ttl"`
	Len   int     `json:"len"`
	// TCP only (null otherwise): sequence and acknowledgement numbers
	// and the window field as on the wire.
	Seq *uint32 `json:"seq"`
	Ack *uint32 `json:"ack"`
	Win *uint16 `json:"win"`
}

type jsonStep struct {
	Hook   string `json:"hook"`
	Table  string `json:"table"`
	Chain  string `json:"chain"`
	Rule   int    `json:"rule"`
	Text   string `json:"text"`
	Action string `json:"action"`
	// Placeholder marks a rule --lenient loaded without modelling it.
	Placeholder bool `json:"placeholder,omitempty"`
}

// jsonRoute is one routing decision of a packet.
type jsonRoute struct {
	Hook    string  `json:"hook"`
	Reroute bool    `json:"reroute"`
	Rule    *int    `json:"rule"` // null when no rule decided
	Table   *string `json:"table"`
	Dst     *string `json:"dst"`
	Type    *string `json:"type"`
	Dev     *string `json:"dev"`
	Via     *string `json:"via"`
	Error   *string `json:"error"` // why the lookup failed, null otherwise
}

func routeJSON(c netfilter.RouteChoice) jsonRoute {
	j := jsonRoute{Hook: c.Hook.String(), Reroute: c.Reroute, Dev: strPtr(c.Dev), Via: addrPtr(c.Via), Error: strPtr(c.Reason.String())}
	if c.Rule >= 0 {
		r := c.Rule
		j.Rule = &r
		j.Table = strPtr(netfilter.TableName(c.Table))
	}
	if c.Dst.IsValid() {
		j.Dst = strPtr(c.Dst.String())
	}
	if c.Reason == netfilter.NoReason {
		j.Type = strPtr(c.Type.String())
	}
	return j
}

// routeChoiceText is a routing decision for people: "rule 32765 lookup
// 51820: 0.0.0.0/0 dev wg0".
func routeChoiceText(c netfilter.RouteChoice) string {
	var b strings.Builder
	if c.Rule >= 0 {
		fmt.Fprintf(&b, "rule %d", c.Rule)
		if c.Dst.IsValid() {
			fmt.Fprintf(&b, " lookup %s: ", netfilter.TableName(c.Table))
		}
	} else {
		b.WriteString("no rule found a route")
	}
	if c.Dst.IsValid() {
		if c.Type != netfilter.RouteUnicast {
			b.WriteString(c.Type.String() + " ")
		}
		b.WriteString(c.Dst.String())
		if c.Via.IsValid() {
			b.WriteString(" via " + c.Via.String())
		}
		if c.Dev != "" {
			b.WriteString(" dev " + c.Dev)
		}
	}
	if c.Reason != netfilter.NoReason && !c.Dst.IsValid() {
		b.WriteString(": " + c.Reason.String())
	}
	return b.String()
}

type jsonResult struct {
	N           int          `json:"n"`
	Verdict     string       `json:"verdict"`
	Disposition string       `json:"disposition"`
	Where       *jsonWhere   `json:"where"`
	In          *string      `json:"in"`
	Out         *string      `json:"out"`
	Packet      jsonPacket   `json:"packet"`
	Emitted     []jsonPacket `json:"emitted"`
	Trace       []jsonStep   `json:"trace"`
	Routes      []jsonRoute  `json:"routes"`
	Conntrack   *string      `json:"conntrack"` // null when untracked
}

func strPtr(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func addrPtr(a netip.Addr) *string {
	if !a.IsValid() {
		return nil
	}
	return strPtr(a.String())
}

func packetJSON(p netfilter.Packet) jsonPacket {
	j := jsonPacket{
		Proto: (p.Proto).String(),
		Src:   addrPtr(p.Src),
		Dst:   addrPtr(p.Dst),
		Mark:  "0x" + strconv.FormatUint(uint64(p.Mark), 16),
		TTL:   p.TTL,
		Len:   p.Length,
	}
	if p.Proto.HasPorts() {
		sp, dp := p.SrcPort, p.DstPort
		j.Sport, j.Dport = &sp, &dp
	}
	if p.Proto == inet.TCP {
		j.Flags = strPtr(flagString(p.TCPFlags))
		seq, ack, win := p.Seq, p.Ack, p.Window
		j.Seq, j.Ack, j.Win = &seq, &ack, &win
	}
	if p.Proto.IsICMP() {
		t, c, id := p.ICMPType, p.ICMPCode, p.ICMPID
		j.Type, j.Code, j.ID = &t, &c, &id
	}
	return j
}

// resetNumbers fills in the numbers of a TCP reset REJECT emitted in
// answer to dropped, which the host leaves to the frame writer: as
// nf_send_reset, the answer to a segment with ACK has its ack number as
// sequence, the answer to one without acknowledges all it occupied.
func resetNumbers(e *netfilter.Packet, dropped netfilter.Packet) {
	if e.Proto != inet.TCP || e.TCPFlags&inet.RST == 0 || e.Seq != 0 || e.Ack != 0 {
		return
	}
	if dropped.TCPFlags&inet.ACK != 0 {
		e.Seq = dropped.Ack
		return
	}
	e.Ack = tcpNext(dropped)
}

func resultJSON(o outcome) jsonResult {
	res := o.res
	j := jsonResult{
		N:           o.n,
		Verdict:     res.Verdict.String(),
		Disposition: res.Disposition.String(),
		In:          strPtr(o.in),
		Out:         strPtr(res.Packet.Out),
		Packet:      packetJSON(res.Packet),
		Emitted:     []jsonPacket{},
		Trace:       []jsonStep{},
		Routes:      []jsonRoute{},
		Conntrack:   strPtr(o.ct),
	}
	for _, c := range res.Routes {
		j.Routes = append(j.Routes, routeJSON(c))
	}
	if decided(res) {
		w := &jsonWhere{Hook: res.Where.Hook.String(), Rule: res.Where.Rule, Action: whereAction(res)}
		if res.Where.Action.Kind != netfilter.ActionRoute {
			w.Table, w.Chain = res.Where.Table.String(), res.Where.Chain
		}
		j.Where = w
	}
	for _, e := range res.Emitted {
		resetNumbers(&e, res.Packet)
		j.Emitted = append(j.Emitted, packetJSON(e))
	}
	for _, s := range res.Trace {
		if s.Action.Kind == netfilter.ActionEnter {
			continue
		}
		j.Trace = append(j.Trace, jsonStep{
			Hook: s.Hook.String(), Table: s.Table.String(), Chain: s.Chain,
			Rule: s.Rule, Text: s.Text, Action: s.Action.String(), Placeholder: s.Placeholder,
		})
	}
	return j
}

func writeJSON(b *bytes.Buffer, outs []outcome) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false) // rule comments hold "->" and "&"
	for _, o := range outs {
		if err := enc.Encode(resultJSON(o)); err != nil {
			return err
		}
	}
	return nil
}

// describe prints a packet in one line for people:
// "tcp 192.168.10.2:40001 > 10.96.0.10:80 flags=S".
func describe(p netfilter.Packet) string {
	var b strings.Builder
	b.WriteString((p.Proto).String())
	b.WriteByte(' ')
	ep := func(a netip.Addr, port uint16) string {
		if !a.IsValid() {
			return "?"
		}
		if p.Proto.HasPorts() {
			return netip.AddrPortFrom(a, port).String()
		}
		return a.String()
	}
	b.WriteString(ep(p.Src, p.SrcPort))
	b.WriteString(" > ")
	b.WriteString(ep(p.Dst, p.DstPort))
	switch {
	case p.Proto == inet.TCP:
		b.WriteString(" flags=" + flagString(p.TCPFlags))
	case p.Proto.IsICMP():
		fmt.Fprintf(&b, " type=%d code=%d id=%d", p.ICMPType, p.ICMPCode, p.ICMPID)
	}
	if p.Mark != 0 {
		fmt.Fprintf(&b, " mark=%#x", p.Mark)
	}
	fmt.Fprintf(&b, " ttl=%d len=%d", p.TTL, p.Length)
	return b.String()
}

// writeText prints the walk for people: one line per step, then the
// verdict and the packet as it leaves.
func writeText(b *bytes.Buffer, nd *node, outs []outcome) {
	for i, o := range outs {
		if i > 0 {
			b.WriteByte('\n')
		}
		res := o.res
		from := "from a local process"
		if o.in != "" {
			from = "in " + o.in
		}
		fmt.Fprintf(b, "packet %d: %s, %s\n", o.n, describe(o.input), from)
		var cols bytes.Buffer
		tw := tabwriter.NewWriter(&cols, 0, 0, 2, ' ', 0)
		routed := res.Where.Action.Kind == netfilter.ActionRoute // its own line below
		route := func() {
			if !routed {
				routed = true
				fmt.Fprintf(tw, "  routing\t\t\t\tROUTE\t%s%s\n", routeText(o), firstChoice(nd, res))
			}
		}
		if o.in == "" {
			route() // a local packet is routed before OUTPUT
		}
		reroutes := res.Routes
		// reroute prints the reroutes that came before step s (nil: all).
		reroute := func(s *netfilter.Step) {
			for len(reroutes) > 0 {
				c := reroutes[0]
				if !c.Reroute {
					reroutes = reroutes[1:]
					continue
				}
				if s != nil && s.Hook == netfilter.Output && outputOrder(s.Table) <= outputOrder(c.After) {
					return
				}
				fmt.Fprintf(tw, "  routing\t\t\t\tREROUTE\t%s\n", routeChoiceText(c))
				reroutes = reroutes[1:]
			}
		}
		for i := range res.Trace {
			s := &res.Trace[i]
			if s.Hook != netfilter.Prerouting {
				route()
			}
			if o.in == "" {
				reroute(s)
			}
			if s.Action.Kind == netfilter.ActionEnter {
				continue
			}
			rule := "policy"
			if s.Rule > 0 {
				rule = "#" + strconv.Itoa(s.Rule)
			}
			text := s.Text
			if s.Placeholder {
				text += "  [placeholder: not modelled]"
			}
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\n", s.Hook, s.Table, s.Chain, rule, s.Action, text)
		}
		if res.Disposition == netfilter.Delivered || res.Disposition == netfilter.Forwarded {
			route()
		}
		reroute(nil)
		if res.Where.Action.Kind == netfilter.ActionRoute {
			fmt.Fprintf(tw, "  routing\t\t\t\tDROP\t%s%s\n", routeDropText(nd, res), firstChoice(nd, res))
		}
		tw.Flush()
		for _, l := range strings.SplitAfter(cols.String(), "\n") {
			if l != "" {
				b.WriteString(strings.TrimRight(l, " \n") + "\n")
			}
		}
		verdict := res.Verdict.String() + ", " + res.Disposition.String()
		switch {
		case res.Where.Action.Kind == netfilter.ActionRoute:
			fmt.Fprintf(b, "  => %s by the routing decision\n", verdict)
		case decided(res) && res.Where.Rule > 0:
			fmt.Fprintf(b, "  => %s at %s %s %s #%d\n", verdict, res.Where.Hook, res.Where.Table, res.Where.Chain, res.Where.Rule)
		case decided(res):
			fmt.Fprintf(b, "  => %s at %s %s policy\n", verdict, res.Where.Hook, res.Where.Table)
		default:
			fmt.Fprintf(b, "  => %s (no rule saw it)\n", verdict)
		}
		switch res.Disposition {
		case netfilter.Delivered:
			fmt.Fprintf(b, "  delivered locally: %s\n", describe(res.Packet))
		case netfilter.Forwarded, netfilter.Sent:
			fmt.Fprintf(b, "  leaves %s: %s\n", res.Packet.Out, describe(res.Packet))
		default:
			fmt.Fprintf(b, "  dropped as: %s\n", describe(res.Packet))
		}
		for _, e := range res.Emitted {
			fmt.Fprintf(b, "  netfilter emits: %s\n", describe(e))
		}
		if o.ct != "" {
			fmt.Fprintf(b, "  conntrack: %s\n", o.ct)
		}
	}
}

// routeText is the routing decision's line: local delivery or the
// output interface.
// firstChoice names the rule and table of a packet's first routing
// decision, " (rule ... lookup ...: ROUTE)", when routing rules were
// given or the route came from another table than main or local.
// outputOrder is the order of the tables at OUTPUT.
func outputOrder(t netfilter.TableID) int {
	switch t {
	case netfilter.Raw:
		return 0
	case netfilter.Mangle:
		return 1
	case netfilter.NAT:
		return 2
	case netfilter.Filter:
		return 3
	}
	return 4
}

func firstChoice(nd *node, res netfilter.Result) string {
	if len(res.Routes) == 0 {
		return ""
	}
	c := res.Routes[0]
	if !nd.policy && (c.Table == netfilter.TableMain || c.Table == netfilter.TableLocal || c.Rule < 0) {
		return ""
	}
	return " (" + routeChoiceText(c) + ")"
}

func routeText(o outcome) string {
	res := o.res
	if res.Disposition == netfilter.Delivered {
		return "local delivery"
	}
	for _, s := range res.Trace {
		if s.Hook == netfilter.Input {
			return "local delivery"
		}
		if s.Packet != nil && s.Packet.Out != "" {
			return "out " + s.Packet.Out
		}
	}
	return "out " + res.Packet.Out
}

func routeDropText(nd *node, res netfilter.Result) string {
	p := res.Packet
	const localnet = " (127.0.0.0/8 is routed only on lo with net.ipv4.conf.all.route_localnet=0)"
	switch {
	case res.Reason == netfilter.ReasonMartianDestination:
		return "martian destination " + p.Dst.String() + " in " + p.In + localnet
	case res.Reason == netfilter.ReasonMartianSource && !(p.Src.Is4() && p.Src.As4()[0] == 127):
		return "martian source " + p.Src.String() + " in " + p.In + " (one of the host's addresses; net.ipv4.conf.*.accept_local=0)"
	case res.Reason == netfilter.ReasonMartianSource:
		return "martian source " + p.Src.String() + " in " + p.In + localnet
	case res.Reason == netfilter.ReasonReversePath:
		return "reverse path filter: the route back to " + p.Src.String() + " fails the check for " + p.In + " (net.ipv4.conf.*.rp_filter)"
	case res.Reason == netfilter.ReasonBlackhole, res.Reason == netfilter.ReasonUnreachable,
		res.Reason == netfilter.ReasonProhibited, res.Reason == netfilter.ReasonNetUnreachable:
		return res.Reason.String() + ": " + p.Dst.String()
	case res.Reason == netfilter.ReasonInvalidSource:
		return "source " + p.Src.String() + " cannot reach " + p.Dst.String() + " off the host" + localnet
	case res.Where.Hook == netfilter.Output:
		return "no route to " + p.Dst.String()
	case res.Reason == netfilter.ReasonForwardingDisabled && nd.sysctls["net.ipv4.ip_forward"] == 0:
		return "not local and forwarding is off (net.ipv4.ip_forward=0)"
	case res.Reason == netfilter.ReasonForwardingDisabled:
		return "not local and forwarding is off for " + p.In + " (net.ipv4.conf." + p.In + ".forwarding=0)"
	case p.TTL <= 1:
		return "TTL expired in transit (or no route to " + p.Dst.String() + ")"
	}
	return "no route to " + p.Dst.String()
}

// xtablesID is the per-packet trace id; the kernel's is a hash of the
// skb, this one is a stable function of the packet number.
func xtablesID(n int) uint32 { return uint32(n) * 0x9e3779b1 }

// writeXtables prints the `xtables-monitor --trace` form: a PACKET line at
// each base chain the packet enters, then a TRACE line per matched rule
// and a policy line when the base chain falls off its end.
func writeXtables(b *bytes.Buffer, outs []outcome) {
	for _, o := range outs {
		id := xtablesID(o.n)
		for _, s := range o.res.Trace {
			fam, famArg := 2, "-4"
			if s.Packet.Family == netfilter.IPv6 {
				fam, famArg = 10, "-6"
			}
			if s.Action.Kind == netfilter.ActionEnter {
				appendXPacket(b, fam, id, *s.Packet)
				continue
			}
			fmt.Fprintf(b, " TRACE: %d %08x %s:%s:", fam, id, s.Table, s.Chain)
			switch s.Action.Kind {
			case netfilter.ActionPolicyAccept:
				b.WriteString("policy:ACCEPT \n")
				continue
			case netfilter.ActionPolicyDrop:
				b.WriteString("policy:DROP \n")
				continue
			}
			fmt.Fprintf(b, "rule:0x%x:%s  %s -t %s %s\n", s.Rule, xtablesVerdict(s.Action), famArg, s.Table, s.Text)
		}
	}
}

func xtablesVerdict(a netfilter.Action) string {
	switch a.Kind {
	case netfilter.ActionReturn:
		return "0xfffffffb" // NFT_RETURN, printed raw by xtables-monitor
	case netfilter.ActionReject:
		return "DROP"
	}
	return a.String()
}

func appendXPacket(b *bytes.Buffer, fam int, id uint32, p netfilter.Packet) {
	fmt.Fprintf(b, "PACKET: %d %08x ", fam, id)
	if p.In != "" {
		fmt.Fprintf(b, "IN=%s ", p.In)
	}
	if p.Out != "" {
		fmt.Fprintf(b, "OUT=%s ", p.Out)
	}
	fmt.Fprintf(b, "SRC=%s DST=%s ", p.Src, p.Dst)
	if p.Family == netfilter.IPv6 {
		fmt.Fprintf(b, "LEN=%d TC=%d HOPLIMIT=%d FLOWLBL=0 ", p.Length, p.TOS, p.TTL)
	} else {
		fmt.Fprintf(b, "LEN=%d TOS=0x%x TTL=%d ID=%d ", p.Length, p.TOS, p.TTL, p.ID)
		if p.FragOffset != 0 {
			fmt.Fprintf(b, "FRAG:%d ", p.FragOffset)
		}
	}
	if p.Proto.HasPorts() {
		fmt.Fprintf(b, "SPORT=%d DPORT=%d ", p.SrcPort, p.DstPort)
	}
	if p.Proto == inet.TCP {
		for _, f := range []struct {
			f    inet.TCPFlags
			name string
		}{{inet.SYN, "SYN"}, {inet.ACK, "ACK"}, {inet.FIN, "FIN"}, {inet.RST, "RST"}, {inet.PSH, "PSH"}, {inet.URG, "URG"}} {
			if p.TCPFlags&f.f != 0 {
				b.WriteString(f.name + " ")
			}
		}
	}
	if p.Mark != 0 {
		fmt.Fprintf(b, "MARK=0x%x ", p.Mark)
	}
	b.WriteByte('\n')
}
