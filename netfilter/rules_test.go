package netfilter

import (
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	pfx = netip.MustParsePrefix
	adr = netip.MustParseAddr
)

// policyHost is a router with eth0 (192.168.10.1/24, clients), eth1
// (10.244.1.1/24, pods) and wg0 (10.99.0.1/24), default route via eth0.
func policyHost(t *testing.T, cfg HostConfig) *Host {
	t.Helper()
	h := NewHost(cfg)
	require.NoError(t, h.AddInterface("eth0", pfx("192.168.10.1/24"), pfx("fd00:10::1/64")))
	require.NoError(t, h.AddInterface("eth1", pfx("10.244.1.1/24"), pfx("fd00:244::1/64")))
	require.NoError(t, h.AddInterface("wg0", pfx("10.99.0.1/24")))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "eth0", Gateway: adr("192.168.10.254")}))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("::/0"), Iface: "eth0", Gateway: adr("fd00:10::fe")}))
	return h
}

func TestDefaultRules(t *testing.T) {
	h := NewHost(HostConfig{})
	prios := func(f Family) (ps []uint32) {
		for _, r := range h.Rules(f) {
			ps = append(ps, r.Priority)
		}
		return ps
	}
	assert.Equal(t, []uint32{0, 32766, 32767}, prios(IPv4))
	assert.Equal(t, []uint32{0, 32766}, prios(IPv6)) // ip -6 rule has no default rule
	// Without priority, each rule lands before the previous one.
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, AutoPriority: true, HasMark: true, Mark: 1, Mask: ^uint32(0), Table: 100}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, AutoPriority: true, Table: TableMain, HasSuppress: true}))
	assert.Equal(t, []uint32{0, 32764, 32765, 32766, 32767}, prios(IPv4))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 100, Table: 7}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, AutoPriority: true, Table: 8}))
	assert.Equal(t, []uint32{0, 99, 100, 32764, 32765, 32766, 32767}, prios(IPv4))
	assert.Error(t, h.AddRule(RouteRule{Family: IPv4, Priority: 5, Action: RuleGoto, Goto: 5}))
	assert.Error(t, h.AddRule(RouteRule{Family: IPv4, Priority: 5, Src: pfx("fd00::/8"), Table: 1}))
	assert.Error(t, h.AddRule(RouteRule{Family: IPv4, Priority: 5}), "lookup without table")
	assert.Error(t, h.AddRule(RouteRule{Priority: 5, Table: 1}), "no family")
}

// sendOut sends a UDP packet from the host and returns the interface it
// leaves by and the result.
func sendOut(h *Host, p Packet) Result {
	if p.Proto == 0 {
		p.Proto = inet.UDP
	}
	if p.SrcPort == 0 && p.Proto != inet.ICMP {
		p.SrcPort, p.DstPort = 40000, 53
	}
	return h.Send(p)
}

// wg-quick: "ip rule add not fwmark 0xca6c table 51820", "ip rule add
// table main suppress_prefixlength 0", a default route in 51820 on wg0.
func TestRouteWGQuick(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "wg0", Table: 51820}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, AutoPriority: true, Not: true, HasMark: true, Mark: 0xca6c, Mask: ^uint32(0), Table: 51820}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, AutoPriority: true, Table: TableMain, HasSuppress: true}))
	h.Tracing = true
	res := sendOut(h, Packet{Dst: adr("8.8.8.8")})
	assert.Equal(t, Sent, res.Disposition)
	assert.Equal(t, "wg0", res.Packet.Out)
	require.Len(t, res.Routes, 1)
	assert.Equal(t, RouteChoice{Hook: Output, Rule: 32765, Table: 51820, Dst: pfx("0.0.0.0/0"), Dev: "wg0"}, res.Routes[0])
	// The tunnel's own packets carry the mark: main's default route.
	res = sendOut(h, Packet{Dst: adr("8.8.8.8"), Mark: 0xca6c})
	assert.Equal(t, "eth0", res.Packet.Out)
	assert.Equal(t, 32766, res.Routes[0].Rule)
	// The LAN stays on main: its /24 is longer than the suppressed /0.
	res = sendOut(h, Packet{Dst: adr("192.168.10.7")})
	assert.Equal(t, "eth0", res.Packet.Out)
	assert.Equal(t, 32764, res.Routes[0].Rule)
	// A mark set in mangle OUTPUT routes the packet again.
	require.NoError(t, h.Restore(IPv4, []byte("*mangle\n-A OUTPUT -p udp --dport 53 -j MARK --set-mark 0xca6c\nCOMMIT\n"), RestoreOptions{}))
	res = sendOut(h, Packet{Dst: adr("8.8.8.8")})
	assert.Equal(t, "eth0", res.Packet.Out)
	require.Len(t, res.Routes, 2)
	assert.True(t, res.Routes[1].Reroute)
	assert.Equal(t, "wg0", res.Routes[0].Dev)
	assert.Equal(t, "eth0", res.Routes[1].Dev)
	// The source chosen by the first route stays (the kernel does not
	// choose again).
	assert.Equal(t, adr("10.99.0.1"), res.Packet.Src)
}

// Tailscale: "ip rule add fwmark 0x80000/0xff0000 table main priority
// 5210", "... table default 5230", "... type unreachable 5250", "table 52
// priority 5270"; routes to the tailnet in table 52.
func TestRouteTailscale(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.AddInterface("tailscale0", pfx("100.64.0.5/32")))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("100.100.0.0/16"), Iface: "tailscale0", Table: 52}))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("100.64.0.0/10"), Type: RouteThrow, Table: 52}))
	m := func(prio uint32, a RuleAction, table uint32) RouteRule {
		return RouteRule{Family: IPv4, Priority: prio, HasMark: true, Mark: 0x80000, Mask: 0xff0000, Action: a, Table: table}
	}
	for _, r := range []RouteRule{m(5210, RuleLookup, TableMain), m(5230, RuleLookup, TableDefault), m(5250, RuleUnreachable, 0), {Family: IPv4, Priority: 5270, Table: 52}} {
		require.NoError(t, h.AddRule(r))
	}
	h.Tracing = true
	res := sendOut(h, Packet{Dst: adr("100.100.3.4")})
	assert.Equal(t, "tailscale0", res.Packet.Out)
	assert.Equal(t, 5270, res.Routes[0].Rule)
	res = sendOut(h, Packet{Dst: adr("100.100.3.4"), Mark: 0x80000})
	assert.Equal(t, "eth0", res.Packet.Out, "marked: main")
	// throw in 52: on to main.
	res = sendOut(h, Packet{Dst: adr("100.65.0.1")})
	assert.Equal(t, "eth0", res.Packet.Out)
	assert.Equal(t, 32766, res.Routes[0].Rule)
	// A forwarded packet from a pod follows table 52 too.
	res = h.Receive("eth1", Packet{Proto: inet.UDP, Src: adr("10.244.1.5"), Dst: adr("100.100.9.9"), SrcPort: 1, DstPort: 2, TTL: 64})
	assert.Equal(t, Forwarded, res.Disposition)
	assert.Equal(t, "tailscale0", res.Packet.Out)
}

// The unreachable rule stops a marked packet without a route in main
// (an empty main table for it).
func TestRouteRuleActions(t *testing.T) {
	for _, tc := range []struct {
		a      RuleAction
		reason Reason
	}{{RuleUnreachable, ReasonNetUnreachable}, {RuleBlackhole, ReasonBlackhole}, {RuleProhibit, ReasonProhibited}} {
		h := policyHost(t, HostConfig{})
		require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 10, Dst: pfx("8.8.0.0/16"), Action: tc.a}))
		res := sendOut(h, Packet{Dst: adr("8.8.8.8")})
		assert.Equal(t, Dropped, res.Disposition, tc.a)
		assert.Equal(t, tc.reason, res.Reason, tc.a)
		res = h.Receive("eth1", Packet{Proto: inet.UDP, Src: adr("10.244.1.5"), Dst: adr("8.8.8.8"), SrcPort: 1, DstPort: 2, TTL: 64})
		assert.Equal(t, tc.reason, res.Reason, tc.a)
		assert.Equal(t, Sent, sendOut(h, Packet{Dst: adr("9.9.9.9")}).Disposition)
	}
}

func TestRouteSelectors(t *testing.T) {
	recv := func(h *Host, p Packet) string {
		p.Proto, p.TTL = inet.TCP, 64
		if p.SrcPort == 0 {
			p.SrcPort, p.DstPort = 1234, 443
		}
		if !p.Src.IsValid() {
			p.Src = adr("10.244.1.5")
		}
		if p.In == "" {
			p.In = "eth1"
		}
		res := h.Receive(p.In, p)
		require.Equal(t, Forwarded, res.Disposition, "%+v", res)
		return res.Packet.Out
	}
	for _, tc := range []struct {
		name    string
		rule    RouteRule
		hit     Packet
		miss    Packet
		missOut string
	}{
		{"from", RouteRule{Src: pfx("10.244.1.5/32")}, Packet{}, Packet{Src: adr("10.244.1.6")}, "eth0"},
		{"to", RouteRule{Dst: pfx("8.8.8.0/24")}, Packet{}, Packet{Dst: adr("8.8.4.4")}, "eth0"},
		{"fwmark/mask", RouteRule{HasMark: true, Mark: 0x100, Mask: 0xf00}, Packet{Mark: 0x1100}, Packet{Mark: 0x200}, "eth0"},
		{"iif", RouteRule{IIF: "eth1"}, Packet{}, Packet{In: "eth0", Src: adr("192.168.10.2")}, "eth0"},
		{"tos", RouteRule{TOS: 0x10}, Packet{TOS: 0x10}, Packet{TOS: 0x08}, "eth0"},
		{"ipproto", RouteRule{IPProto: 6}, Packet{}, Packet{Proto: inet.UDP}, "eth0"},
		{"sport", RouteRule{SPort: PortRange{1000, 2000}}, Packet{SrcPort: 1500, DstPort: 1}, Packet{SrcPort: 999, DstPort: 1}, "eth0"},
		{"dport", RouteRule{DPort: PortRange{443, 443}}, Packet{}, Packet{SrcPort: 1, DstPort: 80}, "eth0"},
		{"uidrange 0 (forwarded)", RouteRule{HasUIDs: true, UIDs: UIDRange{0, 0}}, Packet{}, Packet{}, "wg0"},
		{"oif never (no bound socket)", RouteRule{OIF: "eth1"}, Packet{}, Packet{}, "eth0"},
		{"not", RouteRule{Not: true, Src: pfx("10.244.1.6/32")}, Packet{}, Packet{Src: adr("10.244.1.6")}, "eth0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := policyHost(t, HostConfig{})
			require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "wg0", Table: 100}))
			r := tc.rule
			r.Family, r.Priority, r.Table = IPv4, 100, 100
			require.NoError(t, h.AddRule(r))
			hit, miss := tc.hit, tc.miss
			for _, p := range []*Packet{&hit, &miss} {
				if !p.Dst.IsValid() {
					p.Dst = adr("8.8.8.8")
				}
			}
			if miss.Proto == inet.UDP {
				miss.Proto = 0
				h2 := h
				m := miss
				m.Proto, m.TTL, m.Src, m.SrcPort, m.DstPort = inet.UDP, 64, adr("10.244.1.5"), 1, 2
				assert.Equal(t, tc.missOut, h2.Receive("eth1", m).Packet.Out)
				return
			}
			if tc.name != "oif never (no bound socket)" {
				assert.Equal(t, "wg0", recv(h, hit), "hit")
			}
			assert.Equal(t, tc.missOut, recv(h, miss), "miss")
		})
	}
}

func TestRouteGotoSuppressThrowMetric(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "wg0", Table: 100}))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("8.8.8.0/24"), Iface: "eth1", Table: 200, Metric: 20}))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("8.8.8.0/24"), Iface: "wg0", Table: 200, Metric: 10}))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("8.8.4.0/24"), Type: RouteThrow, Table: 200}))
	// 10: goto 30 skips 20 (which would send everything to table 100).
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 10, Dst: pfx("8.8.0.0/16"), Action: RuleGoto, Goto: 30}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 20, Table: 100}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 30, Table: 200, HasSuppress: true, SuppressLen: 16}))
	h.Tracing = true
	res := sendOut(h, Packet{Dst: adr("8.8.8.8")})
	assert.Equal(t, "wg0", res.Packet.Out, "metric 10 wins")
	assert.Equal(t, RouteChoice{Hook: Output, Rule: 30, Table: 200, Dst: pfx("8.8.8.0/24"), Dev: "wg0"}, res.Routes[0])
	res = sendOut(h, Packet{Dst: adr("8.8.4.4")})
	assert.Equal(t, "eth0", res.Packet.Out, "throw: on to main")
	assert.Equal(t, 32766, res.Routes[0].Rule)
	res = sendOut(h, Packet{Dst: adr("9.9.9.9")})
	assert.Equal(t, "wg0", res.Packet.Out, "no goto: table 100")
	assert.Equal(t, 20, res.Routes[0].Rule)
}

// TPROXY's layout: "ip rule add fwmark 1337 lookup 133", "ip route add
// local 0.0.0.0/0 dev lo table 133": a marked forwarded packet is
// delivered locally.
func TestRouteTPROXYLocal(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "lo", Type: RouteLocal, Table: 133}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, AutoPriority: true, HasMark: true, Mark: 1337, Mask: ^uint32(0), Table: 133}))
	require.NoError(t, h.Restore(IPv4, []byte("*mangle\n-A PREROUTING -p tcp --dport 80 -j MARK --set-mark 1337\nCOMMIT\n"), RestoreOptions{}))
	p := Packet{Proto: inet.TCP, Src: adr("10.244.1.5"), Dst: adr("93.184.216.34"), SrcPort: 40000, DstPort: 80, TTL: 64, TCPFlags: inet.SYN}
	h.Tracing = true
	res := h.Receive("eth1", p)
	assert.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, RouteChoice{Hook: Prerouting, Rule: 32765, Table: 133, Dst: pfx("0.0.0.0/0"), Dev: "lo", Type: RouteLocal}, res.Routes[0])
	p.DstPort = 443
	assert.Equal(t, Forwarded, h.Receive("eth1", p).Disposition)
}

// AWS VPC CNI: one "from POD lookup TABLE" per pod with a secondary ENI.
func TestRoutePerPodTable(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.AddInterface("eth2", pfx("192.168.20.1/24")))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "eth2", Gateway: adr("192.168.20.254"), Table: 2}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 512, Dst: pfx("10.244.1.7/32"), Table: TableMain}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 1536, Src: pfx("10.244.1.7/32"), Table: 2}))
	send := func(src string) string {
		return h.Receive("eth1", Packet{Proto: inet.UDP, Src: adr(src), Dst: adr("1.1.1.1"), SrcPort: 1, DstPort: 2, TTL: 64}).Packet.Out
	}
	assert.Equal(t, "eth2", send("10.244.1.7"))
	assert.Equal(t, "eth0", send("10.244.1.8"))
	// Traffic to the pod stays in main.
	res := h.Receive("eth0", Packet{Proto: inet.UDP, Src: adr("1.1.1.1"), Dst: adr("10.244.1.7"), SrcPort: 1, DstPort: 2, TTL: 64})
	assert.Equal(t, "eth1", res.Packet.Out)
}

func TestRPFilter(t *testing.T) {
	p := Packet{Proto: inet.UDP, Src: adr("10.244.1.5"), Dst: adr("8.8.8.8"), SrcPort: 1, DstPort: 2, TTL: 64}
	// A pod address arriving on eth0: the route back leaves by eth1.
	for _, tc := range []struct {
		cfg  HostConfig
		want Reason
	}{
		{HostConfig{}, NoReason},
		{HostConfig{RPFilter: 1}, ReasonReversePath},
		{HostConfig{RPFilter: 2}, NoReason},
		{HostConfig{Devices: map[string]DeviceConfig{"eth0": {RPFilter: 1}}}, ReasonReversePath},
		{HostConfig{RPFilter: 2, Devices: map[string]DeviceConfig{"eth0": {RPFilter: 1}}}, NoReason},
	} {
		h := policyHost(t, tc.cfg)
		res := h.Receive("eth0", p)
		assert.Equal(t, tc.want, res.Reason, "%+v", tc.cfg)
	}
	// Loose mode fails when the way back is a blackhole.
	h := policyHost(t, HostConfig{RPFilter: 2})
	require.NoError(t, h.AddRoute(Route{Dst: pfx("10.244.1.5/32"), Type: RouteBlackhole}))
	assert.Equal(t, ReasonReversePath, h.Receive("eth0", p).Reason)
	// src_valid_mark: the way back by mark goes through eth0.
	for _, vm := range []bool{false, true} {
		h := policyHost(t, HostConfig{RPFilter: 1, SrcValidMark: vm})
		require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "eth0", Table: 7}))
		require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 7, HasMark: true, Mark: 7, Mask: ^uint32(0), Table: 7}))
		q := p
		q.Mark = 7
		want := ReasonReversePath
		if vm {
			want = NoReason
		}
		assert.Equal(t, want, h.Receive("eth0", q).Reason, "src_valid_mark %v", vm)
	}
	// The host's own address as source: a martian without accept_local.
	q := p
	q.Src = adr("10.244.1.1")
	assert.Equal(t, ReasonMartianSource, policyHost(t, HostConfig{}).Receive("eth0", q).Reason)
	assert.Equal(t, NoReason, policyHost(t, HostConfig{AcceptLocal: true}).Receive("eth0", q).Reason)
	// Per-device forwarding.
	h = policyHost(t, HostConfig{Devices: map[string]DeviceConfig{"eth0": {NoForwarding: true}}})
	assert.Equal(t, ReasonForwardingDisabled, h.Receive("eth0", Packet{Proto: inet.UDP, Src: adr("192.168.10.2"), Dst: adr("10.244.1.5"), SrcPort: 1, DstPort: 2, TTL: 64}).Reason)
	assert.Equal(t, Forwarded, h.Receive("eth1", p).Disposition)
}

func TestRouteIPv6Rules(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.AddInterface("wg6", pfx("fd00:99::1/64")))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("::/0"), Iface: "wg6", Table: 51820}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv6, AutoPriority: true, Not: true, HasMark: true, Mark: 0xca6c, Mask: ^uint32(0), Table: 51820}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv6, AutoPriority: true, Table: TableMain, HasSuppress: true}))
	res := sendOut(h, Packet{Dst: adr("2001:db8::1")})
	assert.Equal(t, "wg6", res.Packet.Out)
	res = sendOut(h, Packet{Dst: adr("2001:db8::1"), Mark: 0xca6c})
	assert.Equal(t, "eth0", res.Packet.Out)
	res = sendOut(h, Packet{Dst: adr("fd00:244::5")})
	assert.Equal(t, "eth1", res.Packet.Out)
	// IPv4 is untouched by IPv6 rules.
	assert.Equal(t, "eth0", sendOut(h, Packet{Dst: adr("8.8.8.8")}).Packet.Out)
}

func TestRouteSrcHint(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.AddAddress("eth0", pfx("192.168.10.9/24")))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("8.8.8.0/24"), Iface: "eth0", Src: adr("192.168.10.9")}))
	assert.Equal(t, adr("192.168.10.9"), sendOut(h, Packet{Dst: adr("8.8.8.8")}).Packet.Src)
	assert.Equal(t, adr("192.168.10.1"), sendOut(h, Packet{Dst: adr("8.8.4.4")}).Packet.Src)
}

// With rules of its own the host still walks packets without allocating.
func TestPolicyRoutingAllocs(t *testing.T) {
	h := policyHost(t, HostConfig{RPFilter: 1})
	require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "wg0", Table: 100}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 10, HasMark: true, Mark: 1, Mask: 1, Table: 100}))
	p := Packet{Proto: inet.UDP, Src: adr("10.244.1.5"), Dst: adr("8.8.8.8"), SrcPort: 1, DstPort: 2, TTL: 64}
	require.Equal(t, Forwarded, h.Receive("eth1", p).Disposition)
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.Receive("eth1", p) }))
	// A local packet rerouted after mangle OUTPUT set its mark.
	require.NoError(t, h.Restore(IPv4, []byte("*mangle\n-A OUTPUT -j MARK --set-mark 1\nCOMMIT\n"), RestoreOptions{}))
	q := Packet{Proto: inet.UDP, Dst: adr("8.8.8.8"), SrcPort: 1, DstPort: 2, TTL: 64}
	var res Result
	h.SendTo(&res, &q)
	require.Equal(t, "wg0", res.Packet.Out)
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.SendTo(&res, &q) }))
}

// suppress_prefixlength skips only routes found: a blackhole,
// unreachable or prohibit route ends the lookup with its error.
func TestRouteSuppressKeepsErrors(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Type: RouteUnreachable, Table: 100}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 10, Table: 100, HasSuppress: true}))
	res := sendOut(h, Packet{Dst: adr("8.8.8.8")})
	assert.Equal(t, ReasonUnreachable, res.Reason)
	h = policyHost(t, HostConfig{})
	require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "wg0", Table: 100}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 10, Table: 100, HasSuppress: true}))
	assert.Equal(t, "eth0", sendOut(h, Packet{Dst: adr("8.8.8.8")}).Packet.Out)
}

// Istio/Cilium's steering without TPROXY: "-m socket --transparent -j
// MARK" finds the transparent socket bound to the foreign address (a
// wildcard listener does not count without --nowildcard), the mark
// selects table 133 with its local route, and the packet is delivered
// instead of forwarded.
func TestRouteSocketMarkSteering(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.AddSocket(Socket{Proto: inet.TCP, Addr: adr("93.184.216.34"), Port: 80, Transparent: true}))
	require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "lo", Type: RouteLocal, Table: 133}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 32000, HasMark: true, Mark: 1337, Mask: ^uint32(0), Table: 133}))
	require.NoError(t, h.Restore(IPv4, []byte("*mangle\n-A PREROUTING -p tcp -m socket --transparent -j MARK --set-mark 1337\nCOMMIT\n"), RestoreOptions{}))
	p := Packet{Proto: inet.TCP, Src: adr("10.244.1.5"), Dst: adr("93.184.216.34"), SrcPort: 40000, DstPort: 80, TTL: 64, TCPFlags: inet.SYN}
	h.Tracing = true
	res := h.Receive("eth1", p)
	assert.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, uint32(1337), res.Packet.Mark)
	assert.Equal(t, RouteChoice{Hook: Prerouting, Rule: 32000, Table: 133, Dst: pfx("0.0.0.0/0"), Dev: "lo", Type: RouteLocal}, res.Routes[0])
	p.DstPort = 443
	res = h.Receive("eth1", p)
	assert.Equal(t, Forwarded, res.Disposition)
	assert.Equal(t, "eth0", res.Packet.Out)
}

// Bad routing rules and routes are refused with what is wrong, never a
// panic.
func TestRouteRuleErrors(t *testing.T) {
	h := NewHost(HostConfig{})
	for _, r := range []RouteRule{
		{Family: IPv4, Priority: 1, TOS: 0x20, Table: 1},
		{Family: IPv4, Priority: 1, TOS: 0x02, Table: 1},
		{Family: IPv6, Priority: 1, TOS: 0x01, Table: 1},
		{Family: IPv4, Priority: 1, SPort: PortRange{Lo: 9, Hi: 1}, Table: 1},
		{Family: IPv4, Priority: 1, HasUIDs: true, UIDs: UIDRange{Lo: 9, Hi: 1}, Table: 1},
		{Family: IPv4, Priority: 1, HasSuppress: true, SuppressLen: 129, Table: 1},
		{Family: IPv4, Priority: 1, Action: RuleProhibit + 1},
		{Family: IPv4, Priority: 1, IIF: "a/b", Table: 1},
	} {
		assert.Error(t, h.AddRule(r), "%+v", r)
	}
	for _, r := range []Route{
		{Dst: pfx("10.0.0.0/8"), Iface: "nope"},
		{Dst: pfx("10.0.0.0/8"), Type: RouteThrow + 1},
		{Dst: pfx("10.0.0.0/8"), Type: RouteBlackhole, Gateway: adr("fd00::1")},
		{Dst: pfx("10.0.0.0/8"), Type: RouteBlackhole, Src: adr("fd00::1")},
		{},
	} {
		assert.Error(t, h.AddRoute(r), "%+v", r)
	}
	assert.Error(t, h.SetRules(IPv4, []RouteRule{{Family: IPv6, Table: 1}}))
	assert.Len(t, h.Rules(IPv4), 0, "SetRules left what it had set before the error")
	require.NoError(t, h.SetRules(IPv4, nil))
	assert.Len(t, h.Rules(IPv4), 3)
}

// A snapshot's rules that are the defaults leave the host as without
// rules: a 127.0.0.0/8 source other than 127.0.0.1 is no martian with
// route_localnet=1 (the kernel checks only its addresses then).
func TestSetRulesDefaults(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.SetRules(IPv4, defaultRules(IPv4)))
	assert.True(t, h.DefaultRules(IPv4))
	p := Packet{Proto: inet.UDP, Src: adr("127.0.0.5"), Dst: adr("10.244.1.5"), SrcPort: 1, DstPort: 2, TTL: 64}
	assert.Equal(t, Forwarded, h.Receive("eth0", p).Disposition)
	require.NoError(t, h.SetRules(IPv4, append(defaultRules(IPv4), RouteRule{Family: IPv4, Priority: 5, Table: 100})))
	assert.False(t, h.DefaultRules(IPv4))
	assert.Equal(t, ReasonMartianSource, h.Receive("eth0", p).Reason, "with rules of its own the kernel checks the source fully: 127.0.0.0/8 is local")
}

// A reroute in mangle OUTPUT moves the packet to another device from
// POSTROUTING on; filter OUTPUT, in the same hook, still sees the device
// of the first decision, as the kernel's hook state does
// (docs/kernel-notes.md, "Policy routing").
func TestRerouteShowsFromPostrouting(t *testing.T) {
	h := policyHost(t, HostConfig{})
	require.NoError(t, h.AddRoute(Route{Dst: pfx("0.0.0.0/0"), Iface: "wg0", Table: 100}))
	require.NoError(t, h.AddRule(RouteRule{Family: IPv4, Priority: 100, HasMark: true, Mark: 7, Mask: ^uint32(0), Table: 100}))
	require.NoError(t, h.Restore(IPv4, []byte(`*mangle
-A OUTPUT -j MARK --set-mark 7
-A POSTROUTING -o eth0
-A POSTROUTING -o wg0
COMMIT
*filter
-A OUTPUT -o eth0
-A OUTPUT -o wg0
COMMIT
`), RestoreOptions{}))
	res := sendOut(h, Packet{Dst: adr("8.8.8.8")})
	require.Equal(t, Sent, res.Disposition)
	assert.Equal(t, "wg0", res.Packet.Out)
	rs := h.Ruleset(IPv4)
	count := func(table TableID, chain string, i int) uint64 {
		return rs.Table(table).Chain(chain).Rules[i].Counters.Packets
	}
	assert.Equal(t, []uint64{1, 0}, []uint64{count(Filter, "OUTPUT", 0), count(Filter, "OUTPUT", 1)}, "filter OUTPUT -o eth0, -o wg0")
	assert.Equal(t, []uint64{0, 1}, []uint64{count(Mangle, "POSTROUTING", 0), count(Mangle, "POSTROUTING", 1)}, "mangle POSTROUTING -o eth0, -o wg0")
}
