package netfilter

import (
	"math"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAppendNumLikeXtablesPrintNum(t *testing.T) {
	cases := []struct {
		n            uint64
		table, exact string
		notable      string
	}{
		{0, "    0 ", "       0 ", "0 "},
		{99999, "99999 ", "   99999 ", "99999 "},
		{100000, " 100K ", "  100000 ", "100K "},
		{999999, "1000K ", "  999999 ", "1000K "},
		{9999999, "  10M ", " 9999999 ", "10M "},
		{1234567, "1235K ", " 1234567 ", "1235K "},
		{1234567890123, "1235G ", "1234567890123 ", "1235G "},
		{99999999999999, " 100T ", "99999999999999 ", "100T "},
		{math.MaxUint64, "   0K ", "18446744073709551615 ", "0K "}, // n+500 wraps
	}
	for _, c := range cases {
		assert.Equal(t, c.table, string(appendNum(nil, c.n, false, false)), "%d", c.n)
		assert.Equal(t, c.exact, string(appendNum(nil, c.n, true, false)), "%d -x", c.n)
		assert.Equal(t, c.notable, string(appendNum(nil, c.n, false, true)), "%d header", c.n)
	}
}

func TestAppendListLayout(t *testing.T) {
	rs := NewRuleset(IPv4)
	require.NoError(t, rs.Restore([]byte(`*filter
:INPUT ACCEPT [123456:987654321]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:USER - [0:0]
[5:300] -A INPUT ! -s 127.0.0.0/8 -d 169.254.1.1 -i eth0 -p tcp --dport 22 -j USER
-A FORWARD ! -o eth1 -g USER
-A USER
COMMIT
`), RestoreOptions{Counters: true}))
	cases := []struct {
		name  string
		chain string
		opt   ListOptions
		want  string
	}{
		{"-L -n -v INPUT", "INPUT", ListOptions{Numeric: true, Verbose: true}, "" +
			"Chain INPUT (policy ACCEPT 123K packets, 988M bytes)\n" +
			" pkts bytes target     prot opt in     out     source               destination         \n" +
			"    5   300 USER       6    --  eth0   *      !127.0.0.0/8          169.254.1.1          tcp dpt:22\n"},
		{"-L INPUT", "INPUT", ListOptions{}, "" +
			"Chain INPUT (policy ACCEPT)\n" +
			"target     prot opt source               destination         \n" +
			"USER       tcp  -- !loopback/8           169.254.1.1          tcp dpt:ssh\n"},
		{"-L -v -x --line-numbers FORWARD", "FORWARD", ListOptions{Verbose: true, Exact: true, LineNumbers: true}, "" +
			"Chain FORWARD (policy DROP 0 packets, 0 bytes)\n" +
			"num      pkts      bytes target     prot opt in     out     source               destination         \n" +
			"1           0        0 USER       all  --  any    !eth1   anywhere             anywhere            [goto] \n"},
		{"-L -n USER", "USER", ListOptions{Numeric: true}, "" +
			"Chain USER (2 references)\n" +
			"target     prot opt source               destination         \n" +
			"           0    --  0.0.0.0/0            0.0.0.0/0           \n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := rs.AppendList(nil, Filter, c.chain, c.opt)
			require.NoError(t, err)
			assert.Equal(t, c.want, string(got))
		})
	}
}

func TestAppendListWholeTableSeparatesChains(t *testing.T) {
	rs := NewRuleset(IPv4) // no table loaded: iptables -L shows empty built-ins
	got, err := rs.AppendList(nil, NAT, "", ListOptions{Numeric: true})
	require.NoError(t, err)
	assert.Equal(t, ""+
		"Chain PREROUTING (policy ACCEPT)\ntarget     prot opt source               destination         \n\n"+
		"Chain INPUT (policy ACCEPT)\ntarget     prot opt source               destination         \n\n"+
		"Chain OUTPUT (policy ACCEPT)\ntarget     prot opt source               destination         \n\n"+
		"Chain POSTROUTING (policy ACCEPT)\ntarget     prot opt source               destination         \n",
		string(got))
}

func TestAppendListNoSuchChain(t *testing.T) {
	rs := NewRuleset(IPv4)
	rs.EnsureTable(Filter)
	_, err := rs.AppendList(nil, Filter, "NOPE", ListOptions{})
	require.ErrorIs(t, err, ErrNoSuchChain)
	assert.Contains(t, err.Error(), `"NOPE"`)
	_, err = rs.AppendList(nil, TableID(99), "", ListOptions{})
	require.ErrorIs(t, err, ErrUnknownTable)
}

func TestAppendListAddresses(t *testing.T) {
	cases := []struct {
		family  Family
		prefix  string
		numeric bool
		want    string
	}{
		{IPv4, "", true, "0.0.0.0/0"},
		{IPv4, "", false, "anywhere"},
		{IPv4, "10.0.0.1/32", false, "10.0.0.1"},
		{IPv4, "127.0.0.1/32", false, "localhost"},
		{IPv4, "127.0.0.1/32", true, "127.0.0.1"},
		{IPv4, "127.0.0.0/8", false, "loopback/8"},
		{IPv4, "0.0.0.0/8", false, "default/8"},
		{IPv4, "169.254.0.0/16", false, "link-local/16"},
		{IPv6, "", true, "::/0"},
		{IPv6, "::1/128", false, "::1"},
		{IPv6, "::1.2.3.4/128", true, "::1.2.3.4"},
		{IPv6, "::ffff:1.2.3.4/128", true, "::ffff:1.2.3.4"},
		{IPv6, "2001:db8::/32", false, "2001:db8::/32"},
	}
	for _, c := range cases {
		var p netip.Prefix
		if c.prefix != "" {
			p = netip.MustParsePrefix(c.prefix)
		}
		rs := NewRuleset(c.family)
		got := string(rs.appendListAddr(nil, p, netip.Addr{}, false, c.numeric))
		assert.Equal(t, " "+c.want+spaces(19-len(c.want))+" ", got, "%s numeric=%v", c.prefix, c.numeric)
	}
}

func spaces(n int) string {
	b := make([]byte, 0, n)
	for range n {
		b = append(b, ' ')
	}
	return string(b)
}
