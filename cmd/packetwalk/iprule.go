package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"net/netip"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/netfilter"
)

// Policy routing input: `ip -j rule` (and `ip -6 -j rule`) JSON, and the
// arguments of `ip rule add` and `ip route add` given verbatim on the
// command line (--ip-rule, --ip-route). Table names other than local,
// main and default come from the node's rt_tables file
// (/etc/iproute2/rt_tables), when the snapshot has one.

// tableNames maps the names of routing tables to their numbers.
type tableNames map[string]uint32

func defaultTableNames() tableNames {
	return tableNames{"local": netfilter.TableLocal, "main": netfilter.TableMain, "default": netfilter.TableDefault}
}

// parseRTTables reads an rt_tables file ("NUMBER NAME" lines, '#'
// comments) into names.
func parseRTTables(data []byte, names tableNames) error {
	sc := bufio.NewScanner(bytes.NewReader(data))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		if len(f) != 2 {
			return fmt.Errorf("line %d: expected NUMBER NAME", n)
		}
		v, err := strconv.ParseUint(f[0], 0, 32)
		if err != nil {
			return fmt.Errorf("line %d: bad table number %q", n, f[0])
		}
		names[f[1]] = uint32(v)
	}
	return sc.Err()
}

func (t tableNames) lookup(s string) (uint32, error) {
	if v, ok := t[s]; ok {
		return v, nil
	}
	v, err := strconv.ParseUint(s, 0, 32)
	if err != nil || v == 0 {
		return 0, fmt.Errorf("unknown routing table %q: expected a number (1-4294967295), local, main, default or a name of the node's rt_tables", s)
	}
	return uint32(v), nil
}

// ipRuleJSON is one entry of `ip -j rule`.
type ipRuleJSON struct {
	Priority   *uint32         `json:"priority"`
	Not        json.RawMessage `json:"not"`
	Src        string          `json:"src"`
	SrcLen     *int            `json:"srclen"`
	Dst        string          `json:"dst"`
	DstLen     *int            `json:"dstlen"`
	TOS        string          `json:"tos"`
	Fwmark     string          `json:"fwmark"`
	Fwmask     string          `json:"fwmask"`
	IIF        string          `json:"iif"`
	OIF        string          `json:"oif"`
	UIDStart   *uint32         `json:"uid_start"`
	UIDEnd     *uint32         `json:"uid_end"`
	IPProto    string          `json:"ipproto"`
	Sport      *uint16         `json:"sport"`
	SportStart *uint16         `json:"sport_start"`
	SportEnd   *uint16         `json:"sport_end"`
	Dport      *uint16         `json:"dport"`
	DportStart *uint16         `json:"dport_start"`
	DportEnd   *uint16         `json:"dport_end"`
	Goto       *uint32         `json:"goto"`
	Nop        json.RawMessage `json:"nop"`
	Action     string          `json:"action"`
	Table      string          `json:"table"`
	Suppress   *int            `json:"suppress_prefixlen"`
	// Selectors packetwalk does not model, refused by name.
	Realms         json.RawMessage `json:"realms"`
	SuppressIfgrp  json.RawMessage `json:"suppress_ifgroup"`
	L3mdev         json.RawMessage `json:"l3mdev"`
	TunID          json.RawMessage `json:"tun_id"`
	FlowLabel      json.RawMessage `json:"flowlabel"`
	DSCP           json.RawMessage `json:"dscp"`
	NatAddr        json.RawMessage `json:"nat"`
	IIFDetached    json.RawMessage `json:"iif_detached"`
	OIFDetached    json.RawMessage `json:"oif_detached"`
	Unresolved     json.RawMessage `json:"unresolved"`
	ProtocolIgnore string          `json:"protocol"`
}

// parseIPRuleJSON turns `ip -j rule` output of family f into rules.
func parseIPRuleJSON(data []byte, f netfilter.Family, names tableNames) ([]netfilter.RouteRule, error) {
	var entries []ipRuleJSON
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, jsonError(err)
	}
	out := make([]netfilter.RouteRule, 0, len(entries))
	for i, e := range entries {
		r, err := e.rule(f, names)
		if err != nil {
			where := fmt.Sprintf("entry %d", i+1)
			if e.Priority != nil {
				where += fmt.Sprintf(" (priority %d)", *e.Priority)
			}
			return nil, fmt.Errorf("%s: %v", where, err)
		}
		out = append(out, r)
	}
	return out, nil
}

func (e *ipRuleJSON) rule(f netfilter.Family, names tableNames) (netfilter.RouteRule, error) {
	r := netfilter.RouteRule{Family: f}
	for _, u := range []struct {
		v    json.RawMessage
		name string
	}{{e.Realms, "realms"}, {e.SuppressIfgrp, "suppress_ifgroup"}, {e.L3mdev, "l3mdev"}, {e.TunID, "tun_id"},
		{e.FlowLabel, "flowlabel"}, {e.DSCP, "dscp"}, {e.NatAddr, "nat"}} {
		if u.v != nil {
			return r, fmt.Errorf("rule selector %q is not modelled", u.name)
		}
	}
	if e.Priority == nil {
		return r, fmt.Errorf("no priority")
	}
	r.Priority = *e.Priority
	r.Not = e.Not != nil
	var err error
	if r.Src, err = rulePrefix(e.Src, e.SrcLen, f); err != nil {
		return r, fmt.Errorf("src: %v", err)
	}
	if r.Dst, err = rulePrefix(e.Dst, e.DstLen, f); err != nil {
		return r, fmt.Errorf("dst: %v", err)
	}
	if e.TOS != "" {
		v, err := strconv.ParseUint(e.TOS, 0, 8)
		if err != nil {
			return r, fmt.Errorf("bad tos %q", e.TOS)
		}
		r.TOS = uint8(v)
	}
	if e.Fwmark != "" {
		if r.Mark, err = parseU32(e.Fwmark); err != nil {
			return r, fmt.Errorf("bad fwmark %q", e.Fwmark)
		}
		r.HasMark, r.Mask = true, ^uint32(0)
		if e.Fwmask != "" {
			if r.Mask, err = parseU32(e.Fwmask); err != nil {
				return r, fmt.Errorf("bad fwmask %q", e.Fwmask)
			}
		}
	}
	r.IIF, r.OIF = e.IIF, e.OIF
	if e.UIDStart != nil && e.UIDEnd != nil {
		r.HasUIDs, r.UIDs = true, netfilter.UIDRange{Lo: *e.UIDStart, Hi: *e.UIDEnd}
	}
	if e.IPProto != "" {
		p, err := parseIPProto(e.IPProto)
		if err != nil {
			return r, err
		}
		r.IPProto = p
	}
	r.SPort = jsonPorts(e.Sport, e.SportStart, e.SportEnd)
	r.DPort = jsonPorts(e.Dport, e.DportStart, e.DportEnd)
	if e.Suppress != nil {
		r.HasSuppress, r.SuppressLen = true, *e.Suppress
	}
	switch {
	case e.Goto != nil:
		r.Action, r.Goto = netfilter.RuleGoto, *e.Goto
	case e.Nop != nil:
		r.Action = netfilter.RuleNop
	case e.Action != "":
		a, ok := map[string]netfilter.RuleAction{"blackhole": netfilter.RuleBlackhole, "unreachable": netfilter.RuleUnreachable, "prohibit": netfilter.RuleProhibit}[e.Action]
		if !ok {
			return r, fmt.Errorf("rule action %q is not modelled", e.Action)
		}
		r.Action = a
	case e.Table != "":
		t, err := names.lookup(e.Table)
		if err != nil {
			return r, err
		}
		r.Table = t
	default:
		return r, fmt.Errorf("no table, goto or action")
	}
	return r, nil
}

func jsonPorts(one, lo, hi *uint16) netfilter.PortRange {
	switch {
	case one != nil:
		return netfilter.PortRange{Lo: *one, Hi: *one}
	case lo != nil && hi != nil:
		return netfilter.PortRange{Lo: *lo, Hi: *hi}
	}
	return netfilter.PortRange{}
}

func parseU32(s string) (uint32, error) {
	v, err := strconv.ParseUint(s, 0, 32)
	return uint32(v), err
}

// rulePrefix reads a from/to selector: "all", ADDR (with a length
// given apart in JSON) or ADDR/LEN.
func rulePrefix(s string, bits *int, f netfilter.Family) (netip.Prefix, error) {
	if s == "" || s == "all" {
		return netip.Prefix{}, nil
	}
	addr, lenText, hasLen := strings.Cut(s, "/")
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("bad address %q: expected all, ADDRESS or ADDRESS/LENGTH", s)
	}
	if a.Is4() != (f == netfilter.IPv4) {
		return netip.Prefix{}, fmt.Errorf("address %s is not of family %s", a, f)
	}
	n := a.BitLen()
	if bits != nil {
		n = *bits
	}
	if hasLen {
		if n, err = strconv.Atoi(lenText); err != nil {
			return netip.Prefix{}, fmt.Errorf("bad prefix length in %q", s)
		}
	}
	if n < 0 || n > a.BitLen() {
		return netip.Prefix{}, fmt.Errorf("bad prefix length %d for %s", n, a)
	}
	return netip.PrefixFrom(a, n).Masked(), nil
}

var ipProtoNames = map[string]uint8{"icmp": 1, "igmp": 2, "tcp": 6, "udp": 17, "gre": 47, "esp": 50, "ah": 51, "ipv6-icmp": 58, "icmpv6": 58, "sctp": 132, "udplite": 136}

func parseIPProto(s string) (uint8, error) {
	if v, ok := ipProtoNames[s]; ok {
		return v, nil
	}
	s = strings.TrimPrefix(s, "ipproto-")
	v, err := strconv.ParseUint(s, 0, 8)
	if err != nil {
		return 0, fmt.Errorf("bad ipproto %q: expected a protocol name or number", s)
	}
	return uint8(v), nil
}

// splitFamily takes a leading "-4" or "-6" off ip arguments.
func splitFamily(args []string) ([]string, netfilter.Family, bool) {
	if len(args) > 0 && (args[0] == "-6" || args[0] == "-4") {
		return args[1:], map[bool]netfilter.Family{true: netfilter.IPv6, false: netfilter.IPv4}[args[0] == "-6"], true
	}
	return args, netfilter.IPv4, false
}

// parseIPRuleArgs reads the arguments of `ip rule add` (as `ip rule`
// lists them too). The family is that of the from/to addresses, else
// IPv4; a leading -6 or -4 sets it as `ip -6 rule add` does.
func parseIPRuleArgs(s string, names tableNames) (netfilter.RouteRule, error) {
	args, fam, explicit := splitFamily(strings.Fields(s))
	if !explicit {
		for i, a := range args {
			if (a == "from" || a == "to") && i+1 < len(args) {
				if p, err := rulePrefix(args[i+1], nil, netfilter.IPv6); err == nil && p.IsValid() {
					fam = netfilter.IPv6
				}
			}
		}
	}
	r := netfilter.RouteRule{Family: fam, AutoPriority: true, Table: netfilter.TableMain}
	hasTable, hasAction := false, false
	for i := 0; i < len(args); i++ {
		tok := args[i]
		val := func() (string, error) {
			if i+1 >= len(args) {
				return "", fmt.Errorf("%q needs a value", tok)
			}
			i++
			return args[i], nil
		}
		bad := func(err error) error { return fmt.Errorf("%s %s: %v", tok, args[i], err) }
		switch tok {
		case "not":
			r.Not = true
		case "from", "to":
			v, err := val()
			if err != nil {
				return r, err
			}
			p, err := rulePrefix(v, nil, fam)
			if err != nil {
				return r, bad(err)
			}
			if tok == "from" {
				r.Src = p
			} else {
				r.Dst = p
			}
		case "priority", "preference", "pref", "prio", "order":
			v, err := val()
			if err != nil {
				return r, err
			}
			n, err := parseU32(v)
			if err != nil {
				return r, bad(fmt.Errorf("expected a number"))
			}
			r.Priority, r.AutoPriority = n, false
		case "tos", "dsfield":
			v, err := val()
			if err != nil {
				return r, err
			}
			// ip reads the value as hexadecimal, with or without 0x.
			hex := strings.TrimPrefix(strings.TrimPrefix(v, "0x"), "0X")
			n, err := strconv.ParseUint(hex, 16, 8)
			if err != nil {
				return r, bad(fmt.Errorf("expected a hexadecimal TOS value"))
			}
			r.TOS = uint8(n)
		case "fwmark":
			v, err := val()
			if err != nil {
				return r, err
			}
			m, mask, hasMask := strings.Cut(v, "/")
			if r.Mark, err = parseU32(m); err != nil {
				return r, bad(fmt.Errorf("expected MARK[/MASK]"))
			}
			r.HasMark, r.Mask = true, ^uint32(0)
			if hasMask {
				if r.Mask, err = parseU32(mask); err != nil {
					return r, bad(fmt.Errorf("expected MARK[/MASK]"))
				}
			}
		case "iif", "dev":
			v, err := val()
			if err != nil {
				return r, err
			}
			if err := checkIfaceName(v); err != nil {
				return r, bad(err)
			}
			r.IIF = v
		case "oif":
			v, err := val()
			if err != nil {
				return r, err
			}
			if err := checkIfaceName(v); err != nil {
				return r, bad(err)
			}
			r.OIF = v
		case "uidrange":
			v, err := val()
			if err != nil {
				return r, err
			}
			lo, hi, ok := strings.Cut(v, "-")
			a, err1 := parseU32(lo)
			b, err2 := parseU32(hi)
			if !ok || err1 != nil || err2 != nil || a > b {
				return r, bad(fmt.Errorf("expected LOW-HIGH"))
			}
			r.HasUIDs, r.UIDs = true, netfilter.UIDRange{Lo: a, Hi: b}
		case "ipproto":
			v, err := val()
			if err != nil {
				return r, err
			}
			if r.IPProto, err = parseIPProto(v); err != nil {
				return r, bad(err)
			}
		case "sport", "dport":
			v, err := val()
			if err != nil {
				return r, err
			}
			lo, hi, isRange := strings.Cut(v, "-")
			if !isRange {
				hi = lo
			}
			a, err1 := strconv.ParseUint(lo, 10, 16)
			b, err2 := strconv.ParseUint(hi, 10, 16)
			if err1 != nil || err2 != nil || a > b {
				return r, bad(fmt.Errorf("expected PORT or LOW-HIGH"))
			}
			pr := netfilter.PortRange{Lo: uint16(a), Hi: uint16(b)}
			if tok == "sport" {
				r.SPort = pr
			} else {
				r.DPort = pr
			}
		case "suppress_prefixlength", "sup_pl":
			v, err := val()
			if err != nil {
				return r, err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return r, bad(fmt.Errorf("expected a prefix length"))
			}
			r.HasSuppress, r.SuppressLen = true, n
		case "table", "lookup":
			v, err := val()
			if err != nil {
				return r, err
			}
			t, err := names.lookup(v)
			if err != nil {
				return r, bad(err)
			}
			r.Table, hasTable = t, true
		case "goto":
			v, err := val()
			if err != nil {
				return r, err
			}
			n, err := parseU32(v)
			if err != nil {
				return r, bad(fmt.Errorf("expected a priority"))
			}
			r.Action, r.Goto, hasAction = netfilter.RuleGoto, n, true
		case "nop":
			r.Action, hasAction = netfilter.RuleNop, true
		case "blackhole", "unreachable", "prohibit", "type":
			a := tok
			if tok == "type" {
				v, err := val()
				if err != nil {
					return r, err
				}
				a = v
			}
			act, ok := map[string]netfilter.RuleAction{"blackhole": netfilter.RuleBlackhole, "unreachable": netfilter.RuleUnreachable, "prohibit": netfilter.RuleProhibit}[a]
			if !ok {
				return r, fmt.Errorf("rule type %q is not modelled", a)
			}
			r.Action, hasAction = act, true
		case "protocol", "proto":
			if _, err := val(); err != nil { // who installed the rule: no effect on lookups
				return r, err
			}
		default:
			return r, fmt.Errorf("%q: not an ip rule selector or action packetwalk models (from, to, not, priority, tos, dsfield, fwmark, iif, oif, uidrange, ipproto, sport, dport, suppress_prefixlength, lookup, table, goto, nop, blackhole, unreachable, prohibit)", tok)
		}
	}
	if hasAction && hasTable && r.Action != netfilter.RuleLookup {
		return r, fmt.Errorf("a rule has either a table or a %s action", r.Action)
	}
	return r, nil
}

var ipRouteTypes = map[string]netfilter.RouteType{
	"unicast": netfilter.RouteUnicast, "local": netfilter.RouteLocal, "broadcast": netfilter.RouteBroadcast,
	"blackhole": netfilter.RouteBlackhole, "unreachable": netfilter.RouteUnreachable,
	"prohibit": netfilter.RouteProhibit, "throw": netfilter.RouteThrow,
}

// parseIPRouteArgs reads the arguments of `ip route add`: [TYPE]
// PREFIX|default, via, dev, table, src, metric, mtu; proto and scope
// are accepted and have no effect on lookups. A leading -6 makes
// "default" IPv6.
func parseIPRouteArgs(s string, names tableNames) (netfilter.Route, error) {
	args, fam, explicit := splitFamily(strings.Fields(s))
	var r netfilter.Route
	if len(args) > 0 {
		if t, ok := ipRouteTypes[args[0]]; ok {
			r.Type, args = t, args[1:]
		} else if args[0] == "multicast" || args[0] == "anycast" || args[0] == "nat" {
			return r, fmt.Errorf("route type %q is not modelled", args[0])
		}
	}
	if len(args) == 0 {
		return r, fmt.Errorf("no destination: expected [TYPE] PREFIX|default and options")
	}
	dst := args[0]
	if dst == "to" && len(args) > 1 {
		args = args[1:]
		dst = args[0]
	}
	args = args[1:]
	var dstFam *netfilter.Family
	if dst != "default" && dst != "all" {
		addr, _, _ := strings.Cut(dst, "/")
		a, err := netip.ParseAddr(addr)
		if err != nil {
			return r, fmt.Errorf("bad destination %q: expected default, ADDRESS or PREFIX", dst)
		}
		f := netfilter.IPv4
		if a.Is6() {
			f = netfilter.IPv6
		}
		dstFam = &f
		p := netip.PrefixFrom(a, a.BitLen())
		if strings.Contains(dst, "/") {
			if p, err = netip.ParsePrefix(dst); err != nil {
				return r, fmt.Errorf("bad destination %q: expected default, ADDRESS or PREFIX", dst)
			}
		}
		if p != p.Masked() {
			return r, fmt.Errorf("destination %s has host bits set: expected %s (ip: Invalid prefix for given prefix length)", p, p.Masked())
		}
		r.Dst = p
	}
	for i := 0; i < len(args); i++ {
		tok := args[i]
		if i+1 >= len(args) {
			if tok == "onlink" {
				continue
			}
			return r, fmt.Errorf("%q needs a value", tok)
		}
		i++
		v := args[i]
		switch tok {
		case "via":
			if v == "inet" || v == "inet6" {
				if i+1 >= len(args) {
					return r, fmt.Errorf("via %s needs an address", v)
				}
				i++
				v = args[i]
			}
			a, err := netip.ParseAddr(v)
			if err != nil {
				return r, fmt.Errorf("via %s: expected an address", v)
			}
			r.Gateway = a
		case "dev", "oif":
			if err := checkIfaceName(v); err != nil {
				return r, fmt.Errorf("dev %s: %v", v, err)
			}
			r.Iface = v
		case "table":
			t, err := names.lookup(v)
			if err != nil {
				return r, fmt.Errorf("table %s: %v", v, err)
			}
			r.Table = t
		case "src":
			a, err := netip.ParseAddr(v)
			if err != nil {
				return r, fmt.Errorf("src %s: expected an address", v)
			}
			r.Src = a
		case "metric", "preference", "priority":
			n, err := parseU32(v)
			if err != nil {
				return r, fmt.Errorf("%s %s: expected a number", tok, v)
			}
			r.Metric = n
		case "mtu":
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return r, fmt.Errorf("mtu %s: expected a positive number", v)
			}
			r.MTU = n
		case "proto", "protocol", "scope":
		default:
			return r, fmt.Errorf("%q: not an ip route option packetwalk models (via, dev, table, src, metric, mtu, proto, scope, onlink)", tok)
		}
	}
	if dstFam == nil {
		f := fam
		if !explicit && (r.Gateway.Is6() || r.Src.Is6()) {
			f = netfilter.IPv6
		}
		dstFam = &f
		if f == netfilter.IPv6 {
			r.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		} else {
			r.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		}
	}
	if r.Type == netfilter.RouteUnicast && r.Iface == "" {
		return r, fmt.Errorf("a unicast route needs dev (packetwalk does not resolve the device of a gateway)")
	}
	if r.Type == netfilter.RouteLocal && r.Iface == "" {
		r.Iface = "lo"
	}
	return r, nil
}
