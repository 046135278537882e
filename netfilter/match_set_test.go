package netfilter

import (
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/ipset"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Calico's natOutgoing: traffic from a pool to outside all pools is
// masqueraded; hash:net picks the most specific entry, nomatch included.
func TestSetMatchOnPackets(t *testing.T) {
	h := testHost(t, "", HostConfig{})
	sets := h.Sets()
	require.NoError(t, sets.Create("pools", "hash:net", false))
	require.NoError(t, sets.Add("pools", "10.244.0.0/16", false))
	require.NoError(t, sets.Add("pools", "10.244.1.7", false, "nomatch"))
	require.NoError(t, sets.Create("svc", "hash:ip,port", false))
	require.NoError(t, sets.Add("svc", "10.244.1.5,tcp:80", false))
	require.NoError(t, h.Restore(IPv4, []byte(`*filter
-A FORWARD -m set --match-set svc dst,dst -j ACCEPT
-A FORWARD -m set --match-set pools dst -j DROP
-A FORWARD -m set --match-set pools dst --return-nomatch -j REJECTED
:REJECTED - [0:0]
COMMIT
`), RestoreOptions{}))
	cases := []struct {
		dst   string
		dport uint16
		where Step
	}{
		{"10.244.1.5", 80, Step{Hook: Forward, Table: Filter, Chain: "FORWARD", Rule: 1, Text: "-A FORWARD -m set --match-set svc dst,dst -j ACCEPT", Action: Action{Kind: ActionAccept}}},
		{"10.244.1.5", 81, Step{Hook: Forward, Table: Filter, Chain: "FORWARD", Rule: 2, Text: "-A FORWARD -m set --match-set pools dst -j DROP", Action: Action{Kind: ActionDrop}}},
		{"10.244.1.7", 80, Step{Hook: Forward, Table: Filter, Chain: "FORWARD", Action: Action{Kind: ActionPolicyAccept}}},
	}
	for _, c := range cases {
		res := h.Receive("eth0", tcpPacket("192.168.10.2", c.dst, c.dport, inet.SYN))
		assert.Equal(t, c.where, res.Where, "%s:%d", c.dst, c.dport)
	}
	assert.Equal(t, 2, sets.Get("pools").References())
	assert.ErrorIs(t, h.Restore(IPv4, []byte("*filter\n-A INPUT -m set --match-set nope src\nCOMMIT\n"), RestoreOptions{}), ErrNoSuchSet)
	_ = netip.Addr{}
}

func TestSetMatchParsePrint(t *testing.T) {
	rs := NewRuleset(IPv4)
	// Recorded with iptables 1.8.9 (nf_tables).
	rs.MustExec(
		"-A INPUT -m set --match-set A src --return-nomatch ! --update-counters ! --update-subcounters -j ACCEPT",
		"-A INPUT -m set ! --match-set B dst,src -j ACCEPT",
	)
	assert.Contains(t, rs.String(), "-A INPUT -m set --match-set A src --return-nomatch ! --update-counters ! --update-subcounters -j ACCEPT\n-A INPUT -m set ! --match-set B dst,src -j ACCEPT\n")
	r := rs.Table(Filter).Chain("INPUT").Rules
	assert.Equal(t, " match-set A src return-nomatch ! update-counters ! update-subcounters", string(r[0].Matches[0].appendList(nil, true)))
	assert.Equal(t, " ! match-set B dst,src", string(r[1].Matches[0].appendList(nil, false)))
	assert.ErrorIs(t, rs.Exec("-A INPUT -m set --match-set A foo"), ErrBadValue)
	assert.ErrorIs(t, rs.Exec("-A INPUT -m set --match-set A src --match-set B dst"), ErrMultipleFlags)
}

// The SET target adds the packet to a set, which a later rule reads: the
// classic "block who knocked" pattern.
func TestSetTargetAddsAndDeletes(t *testing.T) {
	h := testHost(t, "", HostConfig{})
	require.NoError(t, h.Sets().Create("knocked", "hash:ip", false, "timeout", "60"))
	require.NoError(t, h.Restore(IPv4, []byte(`*filter
-A INPUT -m set --match-set knocked src -p tcp --dport 22 -j ACCEPT
-A INPUT -p tcp --dport 22 -j DROP
-A INPUT -p tcp --dport 1234 -j SET --add-set knocked src
-A INPUT -p tcp --dport 4321 -j SET --del-set knocked src
COMMIT
`), RestoreOptions{}))
	ssh := func() Disposition {
		return h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN)).Disposition
	}
	assert.Equal(t, Dropped, ssh())
	h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 1234, inet.SYN))
	ok, err := h.Sets().Test("knocked", "192.168.10.2")
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, Delivered, ssh())
	h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 4321, inet.SYN))
	assert.Equal(t, Dropped, ssh())
}

// A list:set hands its flags to every member: a bitmap:port member reads
// the port along the first flag, a hash:ip,port member the address along
// the first and the port along the second (kernel 6.18, issue #6).
func TestSetMatchListMembersReadTheirOwnDimensions(t *testing.T) {
	h := testHost(t, "", HostConfig{})
	require.NoError(t, h.Sets().Restore([]byte(`create P bitmap:port range 0-1024
add P 80
create IP hash:ip,port
add IP 192.168.10.2,tcp:443
create L list:set
add L P
add L IP
`), ipset.RestoreOptions{}))
	require.NoError(t, h.Restore(IPv4, []byte(`*filter
-A INPUT -m set --match-set L dst -j DROP
-A INPUT -m set --match-set L src,dst -j REJECT
COMMIT
`), RestoreOptions{}))
	cases := []struct {
		dport uint16
		rule  int
	}{
		{80, 1},   // P by the dst port (the first flag)
		{443, 2},  // IP by src address and dst port; P misses 1234
		{8080, 0}, // nothing
	}
	for _, c := range cases {
		p := tcpPacket("192.168.10.2", "192.168.10.1", c.dport, inet.SYN)
		p.SrcPort = 1234
		res := h.Receive("eth0", p)
		assert.Equal(t, c.rule, res.Where.Rule, "dport %d", c.dport)
	}
	// With src first (rule 2), P reads the source port.
	p := tcpPacket("192.168.10.2", "192.168.10.1", 8080, inet.SYN)
	p.SrcPort = 80
	assert.Equal(t, 2, h.Receive("eth0", p).Where.Rule)
}
