package netfilter

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
)

// Expected texts recorded with iptables 1.8.9 (nf_tables) after
// `nfacct add` of the objects.
func TestNFAcctMatch(t *testing.T) {
	rs := NewRuleset(IPv4)
	require.NoError(t, rs.Exec("-A FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name ct_state_invalid_dropped_pkts -j DROP"))
	require.NoError(t, rs.Exec("-A INPUT -m nfacct --nfacct-name x2345678901234567890123456789012"))
	save := string(rs.AppendSave(nil, SaveOptions{}))
	assert.Contains(t, save, "-A INPUT -m nfacct --nfacct-name  x234567890123456789012345678901\n")
	assert.Contains(t, save, "-A FORWARD -m conntrack --ctstate INVALID -m nfacct --nfacct-name  ct_state_invalid_dropped_pkts -j DROP\n")

	// The saved form parses back to the same rule.
	rs2 := NewRuleset(IPv4)
	require.NoError(t, rs2.Restore([]byte(save), RestoreOptions{}))
	assert.Equal(t, save, string(rs2.AppendSave(nil, SaveOptions{})))

	for _, bad := range []struct {
		line string
		err  error
	}{
		{"-A INPUT -m nfacct ! --nfacct-name x", ErrSyntax},
		{"-A INPUT -m nfacct", ErrMissingArgument},
	} {
		err := NewRuleset(IPv4).Exec(bad.line)
		assert.ErrorIs(t, err, bad.err, bad.line)
	}
}

func TestNFAcctMatchCountsIntoItsObject(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	rules := []byte("*filter\n-A INPUT -m nfacct --nfacct-name localhost_nps_accepted_pkts -j DROP\nCOMMIT\n")
	// The kernel refuses a rule naming an object nobody created.
	err := h.Restore(IPv4, rules, RestoreOptions{})
	assert.ErrorIs(t, err, ErrNoSuchNFAcct)
	// Named at its line, like every restore error.
	var pe *ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 2, pe.Line)
	assert.Equal(t, "localhost_nps_accepted_pkts", pe.Token)
	require.NoError(t, h.AddNFAcct("localhost_nps_accepted_pkts"))
	require.NoError(t, h.Restore(IPv4, rules, RestoreOptions{}))
	res := h.Receive("eth0", Packet{Proto: inet.UDP, Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("192.168.10.1"), SrcPort: 1, DstPort: 7, TTL: 64, Length: 28})
	assert.Equal(t, Dropped, res.Disposition)
	c, ok := h.NFAcct("localhost_nps_accepted_pkts")
	require.True(t, ok)
	assert.Equal(t, Counters{Packets: 1, Bytes: 28}, c)
}

func TestSetNFAcct(t *testing.T) {
	h := NewHost(HostConfig{})
	assert.ErrorIs(t, h.SetNFAcct("nope", Counters{Packets: 1}), ErrNoSuchNFAcct)
	require.NoError(t, h.AddNFAcct("o"))
	require.NoError(t, h.SetNFAcct("o", Counters{Packets: 3, Bytes: 180}))
	c, ok := h.NFAcct("o")
	require.True(t, ok)
	assert.Equal(t, Counters{Packets: 3, Bytes: 180}, c)
}
