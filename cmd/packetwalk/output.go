package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

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
	// Socket is the local socket a delivered packet reaches, as --socket
	// gives it; absent when the node has no sockets.
	Socket string `json:"socket,omitempty"`
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
	if res.Socket != nil {
		j.Socket = socketText(res.Socket)
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
		from := "from a local process"
		if o.in != "" {
			from = "in " + o.in
		}
		fmt.Fprintf(b, "packet %d: %s, %s\n", o.n, describe(o.input), from)
		writeWalk(b, nd.sysctls, nd.policy, o)
	}
}

// writeWalk writes one packet's walk through a host: its rules, the
// routing decision, the verdict and the packet as it leaves.
func writeWalk(b *bytes.Buffer, sysctls map[string]int, policy bool, o outcome) {
	{
		res := o.res
		var rows []textRow
		routed := res.Where.Action.Kind == netfilter.ActionRoute // its own line below
		route := func() {
			if !routed {
				routed = true
				if res.Packet.Bridged {
					// br_netfilter: the bridge forwards the frame between
					// its ports; no routing decision.
					rows = append(rows, textRow{cells: []string{"  bridging", "", "", "", "BRIDGE", "in " + res.Packet.PhysIn + " out " + res.Packet.PhysOut}})
					return
				}
				rows = append(rows, textRow{cells: []string{"  routing", "", "", "", "ROUTE", routeText(o) + firstChoice(policy, res)}})
			}
		}
		if o.in == "" {
			route() // a local packet is routed before OUTPUT
		}
		// What each target did to the packet is said below its rule. NAT
		// happens when the packet leaves the nat chain, so the change of
		// addresses shows at the next step: it belongs to the last NAT
		// rule that matched, or, with none, to conntrack (a reply, or a
		// later packet of a NATed connection).
		last, started := o.input, false
		pendingNAT := -1
		addrChange := func(p netfilter.Packet, at int) {
			if sameEndpoints(last, p) {
				return
			}
			if pendingNAT >= 0 {
				r := &rows[pendingNAT]
				r.notes = append(r.notes, targetOf(r.step)+": packet is now "+endpoints(p))
				pendingNAT = -1
				return
			}
			if at >= 0 {
				rows[at].notes = append(rows[at].notes, targetOf(rows[at].step)+": packet is now "+endpoints(p))
				return
			}
			rows = append(rows, textRow{notes: []string{"conntrack NAT: packet is now " + endpoints(p)}})
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
				rows = append(rows, textRow{cells: []string{"  routing", "", "", "", "REROUTE", routeChoiceText(c)}})
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
			if s.Packet != nil && !started {
				started = true
				if !last.Src.IsValid() {
					last.Src, last.SrcPort = s.Packet.Src, s.Packet.SrcPort // chosen by the host
				}
			}
			if s.Action.Kind == netfilter.ActionEnter {
				if s.Packet != nil {
					addrChange(*s.Packet, -1)
					last = *s.Packet
				}
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
			rows = append(rows, textRow{cells: []string{"  " + s.Hook.String(), s.Table.String(), s.Chain, rule, s.Action.String(), text}, step: *s})
			at := len(rows) - 1
			if s.Packet != nil {
				addrChange(*s.Packet, at)
				if what := otherChanges(last, *s.Packet); what != "" {
					rows[at].notes = append(rows[at].notes, targetOf(*s)+": "+what)
				}
				last = *s.Packet
			}
			if isNATRule(*s) {
				pendingNAT = at
			}
		}
		if started {
			addrChange(res.Packet, -1)
		}
		if res.Disposition == netfilter.Delivered || res.Disposition == netfilter.Forwarded {
			route()
		}
		reroute(nil)
		if res.Where.Action.Kind == netfilter.ActionRoute {
			rows = append(rows, textRow{cells: []string{"  routing", "", "", "", "DROP", routeDropText(sysctls, res) + firstChoice(policy, res)}})
		}
		writeRows(b, rows)
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
			if res.Socket != nil {
				fmt.Fprintf(b, "  to socket: %s\n", socketText(res.Socket))
			}
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

// textRow is one line of a text walk: its columns, and what its target
// did to the packet, on lines of their own below it.
type textRow struct {
	cells []string
	notes []string
	step  netfilter.Step
}

// writeRows aligns the columns of rows (two spaces apart, the last one
// free) and writes each row's notes indented below it.
func writeRows(b *bytes.Buffer, rows []textRow) {
	var width []int
	for _, r := range rows {
		for i, c := range r.cells {
			if i == len(r.cells)-1 {
				break
			}
			if i >= len(width) {
				width = append(width, 0)
			}
			width[i] = max(width[i], len(c))
		}
	}
	for _, r := range rows {
		if len(r.cells) > 0 {
			var l strings.Builder
			for i, c := range r.cells {
				l.WriteString(c)
				if i < len(r.cells)-1 {
					l.WriteString(strings.Repeat(" ", width[i]-len(c)+2))
				}
			}
			b.WriteString(strings.TrimRight(l.String(), " ") + "\n")
		}
		for _, n := range r.notes {
			b.WriteString("      " + n + "\n")
		}
	}
}

// targetOf is the part of the step's rule after -j, "DNAT
// --to-destination 10.244.1.5:8080", or its action.
func targetOf(s netfilter.Step) string {
	if i := strings.LastIndex(s.Text, " -j "); i >= 0 {
		return s.Text[i+4:]
	}
	return s.Action.String()
}

// isNATRule reports whether the step is a nat-table rule whose target
// binds the connection's addresses.
func isNATRule(s netfilter.Step) bool {
	if s.Table != netfilter.NAT || s.Action.Kind != netfilter.ActionAccept {
		return false
	}
	t := targetOf(s)
	for _, n := range []string{"DNAT", "SNAT", "MASQUERADE", "REDIRECT", "NETMAP"} {
		if t == n || strings.HasPrefix(t, n+" ") {
			return true
		}
	}
	return false
}

func sameEndpoints(a, b netfilter.Packet) bool {
	return a.Src == b.Src && a.Dst == b.Dst && a.SrcPort == b.SrcPort && a.DstPort == b.DstPort
}

// otherChanges says how a target changed the mark, TOS or TTL.
func otherChanges(before, after netfilter.Packet) string {
	var what []string
	if before.Mark != after.Mark {
		what = append(what, fmt.Sprintf("mark is now %#x", after.Mark))
	}
	if before.TOS != after.TOS {
		what = append(what, fmt.Sprintf("TOS is now %#x", after.TOS))
	}
	if before.TTL != after.TTL {
		what = append(what, fmt.Sprintf("TTL is now %d", after.TTL))
	}
	return strings.Join(what, ", ")
}

// endpoints prints a packet's addresses and ports: "10.0.0.4:34567 ->
// 10.244.1.5:8080", or the addresses alone for a protocol without ports.
func endpoints(p netfilter.Packet) string {
	if p.Proto.HasPorts() {
		return netip.AddrPortFrom(p.Src, p.SrcPort).String() + " -> " + netip.AddrPortFrom(p.Dst, p.DstPort).String()
	}
	return p.Src.String() + " -> " + p.Dst.String()
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

func firstChoice(policy bool, res netfilter.Result) string {
	if len(res.Routes) == 0 {
		return ""
	}
	c := res.Routes[0]
	if !policy && (c.Table == netfilter.TableMain || c.Table == netfilter.TableLocal || c.Rule < 0) {
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

func routeDropText(sysctls map[string]int, res netfilter.Result) string {
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
	case res.Reason == netfilter.ReasonForwardingDisabled && sysctls["net.ipv4.ip_forward"] == 0:
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
