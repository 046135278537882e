package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"

	"github.com/packetwalk/packetwalk/netfilter"
)

// The loaders read the JSON of iproute2 (`ip -j addr`, `ip -j route`,
// also `ip -6 -j route`). Unknown JSON fields are ignored, since iproute2
// adds fields freely; what would change routing and is not modelled
// (multipath, other tables, odd route types) is refused by name.

type ipAddrJSON struct {
	Ifname   string `json:"ifname"`
	AddrInfo []struct {
		Family    string `json:"family"`
		Local     string `json:"local"`
		Prefixlen *int   `json:"prefixlen"`
	} `json:"addr_info"`
}

// parseIPAddrJSON turns `ip -j addr` output into interfaces with their
// IPv4 and IPv6 addresses.
func parseIPAddrJSON(data []byte) ([]netfilter.Interface, error) {
	var links []ipAddrJSON
	if err := json.Unmarshal(data, &links); err != nil {
		return nil, jsonError(err)
	}
	out := make([]netfilter.Interface, 0, len(links))
	for i, l := range links {
		if err := checkIfaceName(l.Ifname); err != nil {
			return nil, fmt.Errorf("entry %d: %v", i+1, err)
		}
		ifc := netfilter.Interface{Name: l.Ifname}
		for _, a := range l.AddrInfo {
			if a.Family != "inet" && a.Family != "inet6" {
				continue // mpls, link-layer families: not IP addresses
			}
			addr, err := netip.ParseAddr(a.Local)
			if err != nil || (a.Family == "inet") != addr.Is4() {
				return nil, fmt.Errorf("entry %d (%s): bad %s address %q", i+1, l.Ifname, a.Family, a.Local)
			}
			if a.Prefixlen == nil || *a.Prefixlen < 0 || *a.Prefixlen > addr.BitLen() {
				return nil, fmt.Errorf("entry %d (%s): bad or missing prefixlen for %s", i+1, l.Ifname, a.Local)
			}
			ifc.Addrs = append(ifc.Addrs, netip.PrefixFrom(addr, *a.Prefixlen))
		}
		out = append(out, ifc)
	}
	return out, nil
}

type ipRouteJSON struct {
	Type     string            `json:"type"`
	Dst      string            `json:"dst"`
	Gateway  string            `json:"gateway"`
	Dev      string            `json:"dev"`
	Table    string            `json:"table"`
	Protocol string            `json:"protocol"`
	Prefsrc  string            `json:"prefsrc"`
	Metric   *uint32           `json:"metric"`
	Pref     string            `json:"pref"` // only IPv6 routes have it
	Nexthops []json.RawMessage `json:"nexthops"`
	Metrics  []struct {
		MTU *int `json:"mtu"`
	} `json:"metrics"`
}

var routeTypes = map[string]netfilter.RouteType{
	"": netfilter.RouteUnicast, "unicast": netfilter.RouteUnicast,
	"local": netfilter.RouteLocal, "broadcast": netfilter.RouteBroadcast,
	"blackhole": netfilter.RouteBlackhole, "unreachable": netfilter.RouteUnreachable,
	"prohibit": netfilter.RouteProhibit, "throw": netfilter.RouteThrow,
}

// parseIPRouteJSON turns `ip -j route` (or `ip -6 -j route`, or `ip -j
// route show table all`, which lists both families) output into routes,
// each in its table. A "default" destination is IPv6 when the entry has
// IPv6's "pref" field or an IPv6 gateway or source, else takes the family
// of the other routes in the same output. The local table's entries the
// kernel made for the interfaces' addresses (protocol kernel) are left
// out: the host derives them from the addresses.
func parseIPRouteJSON(data []byte, names tableNames) ([]netfilter.Route, error) {
	var entries []ipRouteJSON
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, jsonError(err)
	}
	six := false
	for _, e := range entries {
		if p, err := parseAddrPrefix(e.Dst); err == nil {
			six = p.Addr().Is6()
			break
		}
	}
	out := make([]netfilter.Route, 0, len(entries))
	for i, e := range entries {
		where := fmt.Sprintf("entry %d (dst %q)", i+1, e.Dst)
		table := netfilter.TableMain
		if e.Table != "" {
			t, err := names.lookup(e.Table)
			if err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
			table = t
		}
		if table == netfilter.TableLocal && e.Protocol == "kernel" {
			continue // an address's local, broadcast, multicast or anycast entry
		}
		typ, ok := routeTypes[e.Type]
		if !ok {
			return nil, fmt.Errorf("%s: route type %q is not modelled", where, e.Type)
		}
		if len(e.Nexthops) > 0 {
			return nil, fmt.Errorf("%s: multipath routes (nexthops) are not modelled", where)
		}
		r := netfilter.Route{Iface: e.Dev, Type: typ, Table: table}
		if e.Metric != nil {
			r.Metric = *e.Metric
		}
		for _, m := range e.Metrics {
			if m.MTU != nil {
				r.MTU = *m.MTU
			}
		}
		if e.Gateway != "" {
			gw, err := netip.ParseAddr(e.Gateway)
			if err != nil {
				return nil, fmt.Errorf("%s: bad gateway %q", where, e.Gateway)
			}
			r.Gateway = gw
		}
		if e.Prefsrc != "" {
			a, err := netip.ParseAddr(e.Prefsrc)
			if err != nil {
				return nil, fmt.Errorf("%s: bad prefsrc %q", where, e.Prefsrc)
			}
			r.Src = a
		}
		switch {
		case e.Dst == "default" && (e.Pref != "" || r.Gateway.Is6() || r.Src.Is6() || (!r.Gateway.IsValid() && !r.Src.IsValid() && six)):
			r.Dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		case e.Dst == "default":
			r.Dst = netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		default:
			p, err := parseAddrPrefix(e.Dst)
			if err != nil {
				return nil, fmt.Errorf("%s: bad destination: expected default, ADDRESS or CIDR", where)
			}
			r.Dst = p.Masked()
		}
		if r.Gateway.IsValid() && r.Gateway.Is4() != r.Dst.Addr().Is4() {
			return nil, fmt.Errorf("%s: gateway %s is of another family (via inet6 gateways are not modelled)", where, r.Gateway)
		}
		if r.Src.IsValid() && r.Src.Is4() != r.Dst.Addr().Is4() {
			return nil, fmt.Errorf("%s: prefsrc %s is of another family", where, r.Src)
		}
		if typ == netfilter.RouteUnicast {
			if e.Dev == "" {
				return nil, fmt.Errorf("%s: unicast route without dev", where)
			}
			if err := checkIfaceName(e.Dev); err != nil {
				return nil, fmt.Errorf("%s: %v", where, err)
			}
		}
		out = append(out, r)
	}
	return out, nil
}

// jsonError names the byte offset of a JSON syntax or type error.
func jsonError(err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return fmt.Errorf("byte offset %d: bad JSON: %v", se.Offset, err)
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("byte offset %d: field %q: expected %s, got JSON %s", te.Offset, te.Field, te.Type, te.Value)
	}
	return fmt.Errorf("bad JSON: %v", err)
}
