package main

import (
	"net/netip"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/netfilter"
)

// The fixtures come from testdata/record-iproute.sh (real ip -j output).

func TestParseIPAddrJSONRecorded(t *testing.T) {
	data, err := os.ReadFile("testdata/iproute/ip-addr.json")
	require.NoError(t, err)
	ifs, err := parseIPAddrJSON(data)
	require.NoError(t, err)
	p := netip.MustParsePrefix
	require.Len(t, ifs, 4)
	assert.Equal(t, netfilter.Interface{Name: "lo", Addrs: []netip.Prefix{p("127.0.0.1/8"), p("::1/128")}}, ifs[0])
	assert.Equal(t, netfilter.Interface{Name: "eth0", Addrs: []netip.Prefix{p("192.168.10.1/24"), p("10.0.0.9/32"), p("fd00::1/64")}}, ifs[1])
	// The veth pair has only its random link-local addresses.
	for i, name := range []string{"x1", "cali1"} {
		assert.Equal(t, name, ifs[2+i].Name)
		require.Len(t, ifs[2+i].Addrs, 1)
		assert.True(t, ifs[2+i].Addrs[0].Addr().IsLinkLocalUnicast())
		assert.Equal(t, 64, ifs[2+i].Addrs[0].Bits())
	}
}

func TestParseIPRouteJSONRecorded(t *testing.T) {
	data, err := os.ReadFile("testdata/iproute/ip-route.json")
	require.NoError(t, err)
	rs, err := parseIPRouteJSON(data, defaultTableNames())
	require.NoError(t, err)
	p, a := netip.MustParsePrefix, netip.MustParseAddr
	assert.Equal(t, []netfilter.Route{
		{Dst: p("0.0.0.0/0"), Iface: "eth0", Gateway: a("192.168.10.254"), Table: netfilter.TableMain},
		{Dst: p("10.8.0.0/16"), Type: netfilter.RouteUnreachable, Table: netfilter.TableMain},
		{Dst: p("10.244.2.5/32"), Iface: "cali1", Table: netfilter.TableMain},
		{Dst: p("10.244.3.0/24"), Type: netfilter.RouteBlackhole, Table: netfilter.TableMain},
		{Dst: p("192.168.10.0/24"), Iface: "eth0", Table: netfilter.TableMain, Src: a("192.168.10.1")},
	}, rs)

	data, err = os.ReadFile("testdata/iproute/ip6-route.json")
	require.NoError(t, err)
	rs, err = parseIPRouteJSON(data, defaultTableNames())
	require.NoError(t, err)
	assert.Equal(t, netfilter.Route{Dst: p("fd00::/64"), Iface: "eth0", Table: netfilter.TableMain, Metric: 256}, rs[0])

	data, err = os.ReadFile("testdata/iproute/ip-route-multipath.json")
	require.NoError(t, err)
	_, err = parseIPRouteJSON(data, defaultTableNames())
	assert.EqualError(t, err, `entry 3 (dst "10.9.0.0/16"): multipath routes (nexthops) are not modelled`)
}

func TestIPJSONErrors(t *testing.T) {
	for _, tc := range []struct {
		route bool
		in    string
		want  string
	}{
		{false, `[{"ifname":"eth0"`, "byte offset 17: bad JSON: unexpected end of JSON input"},
		{false, `{"ifname":"eth0"}`, `byte offset 1: field "": expected []main.ipAddrJSON, got JSON object`},
		{false, `[{"ifname":"eth0","addr_info":[{"family":"inet","local":"fd00::1","prefixlen":64}]}]`, `entry 1 (eth0): bad inet address "fd00::1"`},
		{false, `[{"ifname":"eth0","addr_info":[{"family":"inet","local":"10.0.0.1","prefixlen":33}]}]`, `entry 1 (eth0): bad or missing prefixlen for 10.0.0.1`},
		{false, `[{"ifname":"eth0","addr_info":[{"family":"inet","local":"10.0.0.1"}]}]`, `entry 1 (eth0): bad or missing prefixlen for 10.0.0.1`},
		{false, `[{"ifname":""}]`, `entry 1: bad interface name "": expected 1 to 15 characters without '/', ':' or spaces`},
		{true, `[{"dst":"10.0.0.0/8","type":"nat"}]`, `entry 1 (dst "10.0.0.0/8"): route type "nat" is not modelled`},
		{true, `[{"dst":"10.0.0.0/8","dev":"eth0","table":"wg"}]`, `entry 1 (dst "10.0.0.0/8"): unknown routing table "wg": expected a number (1-4294967295), local, main, default or a name of the node's rt_tables`},
		{true, `[{"dst":"10.0.0.0/33","dev":"eth0"}]`, `entry 1 (dst "10.0.0.0/33"): bad destination: expected default, ADDRESS or CIDR`},
		{true, `[{"dst":"10.0.0.0/8"}]`, `entry 1 (dst "10.0.0.0/8"): unicast route without dev`},
		{true, `[{"dst":"default","gateway":"x","dev":"eth0"}]`, `entry 1 (dst "default"): bad gateway "x"`},
		{true, `[{"dst":"default","gateway":"fe80::1","dev":"eth0"},{"dst":"10.0.0.0/8","gateway":"fe80::1","dev":"eth0"}]`,
			`entry 2 (dst "10.0.0.0/8"): gateway fe80::1 is of another family (via inet6 gateways are not modelled)`},
	} {
		var err error
		if tc.route {
			_, err = parseIPRouteJSON([]byte(tc.in), defaultTableNames())
		} else {
			_, err = parseIPAddrJSON([]byte(tc.in))
		}
		assert.EqualError(t, err, tc.want, tc.in)
	}
}

func TestRouteDefaultFamily(t *testing.T) {
	rs, err := parseIPRouteJSON([]byte(`[{"dst":"default","dev":"eth0"},{"dst":"fd00::/64","dev":"eth0"}]`), defaultTableNames())
	require.NoError(t, err)
	assert.Equal(t, netip.MustParsePrefix("::/0"), rs[0].Dst)
}

func TestRouteFlag(t *testing.T) {
	p, a := netip.MustParsePrefix, netip.MustParseAddr
	for in, want := range map[string]netfilter.Route{
		"default=eth0@192.168.10.254": {Dst: p("0.0.0.0/0"), Iface: "eth0", Gateway: a("192.168.10.254")},
		"default=eth0@fe80::1":        {Dst: p("::/0"), Iface: "eth0", Gateway: a("fe80::1")},
		"10.244.0.0/16=cali1":         {Dst: p("10.244.0.0/16"), Iface: "cali1"},
		"10.244.1.5=cali2":            {Dst: p("10.244.1.5/32"), Iface: "cali2"},
	} {
		r, err := parseRouteFlag(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, r, in)
	}
	for _, bad := range []string{"10.0.0.0/8", "10.0.0.1/8=eth0", "x=eth0", "default=eth0@x", "10.0.0.0/8=", "10.0.0.0/8=eth0@fd00::1"} {
		_, err := parseRouteFlag(bad)
		assert.Error(t, err, bad)
	}
}

func FuzzParseIPAddrJSON(f *testing.F) {
	if data, err := os.ReadFile("testdata/iproute/ip-addr.json"); err == nil {
		f.Add(data)
	}
	f.Add([]byte(`[{"ifname":"eth0","addr_info":[{"family":"inet","local":"10.0.0.1","prefixlen":24}]}]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ifs, err := parseIPAddrJSON(data)
		if err != nil {
			return
		}
		h := netfilter.NewHost(netfilter.HostConfig{})
		for _, i := range ifs {
			for _, a := range i.Addrs {
				if !a.IsValid() {
					t.Fatalf("invalid prefix accepted from %q", data)
				}
			}
			_ = h.AddInterface(i.Name, i.Addrs...) // duplicates may fail; must not panic
		}
	})
}

func FuzzParseIPRouteJSON(f *testing.F) {
	for _, name := range []string{"ip-route.json", "ip6-route.json", "ip-route-multipath.json"} {
		if data, err := os.ReadFile("testdata/iproute/" + name); err == nil {
			f.Add(data)
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		rs, err := parseIPRouteJSON(data, defaultTableNames())
		if err != nil {
			return
		}
		for _, r := range rs {
			if !r.Dst.IsValid() || r.Dst != r.Dst.Masked() {
				t.Fatalf("bad destination %v accepted from %q", r.Dst, data)
			}
		}
	})
}
