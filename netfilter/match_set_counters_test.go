package netfilter

import (
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Save and -L forms as iptables 1.8.9 prints them (checked in a namespace).
func TestSetMatchCounterOptions(t *testing.T) {
	cases := []struct{ in, save, list string }{
		{"--match-set S src --packets-eq 3", "--match-set S src --packets-eq 3", "match-set S src packets-eq 3"},
		{"--match-set S src ! --packets-eq 3", "--match-set S src ! --packets-eq 3", "match-set S src ! packets-eq 3"},
		{"--match-set S src --bytes-eq 100 --packets-gt 2", "--match-set S src --packets-gt 2 --bytes-eq 100", "match-set S src packets-gt 2 bytes-eq 100"},
		{"--match-set S src ! --bytes-eq 100 ! --update-counters --return-nomatch",
			"--match-set S src --return-nomatch ! --update-counters ! --bytes-eq 100", "match-set S src return-nomatch ! update-counters ! bytes-eq 100"},
		{"--match-set S src --packets-eq 0x10", "--match-set S src --packets-eq 16", "match-set S src packets-eq 16"},
		{"--match-set S src --packets-eq 010", "--match-set S src --packets-eq 8", "match-set S src packets-eq 8"},
		{"--match-set S src --packets-eq +5", "--match-set S src --packets-eq 5", "match-set S src packets-eq 5"},
		{"--match-set S src --packets-eq 18446744073709551615", "--match-set S src --packets-eq 18446744073709551615", "match-set S src packets-eq 18446744073709551615"},
		{"--match-set S src --bytes-gt 0 --packets-lt 10 ! --update-subcounters",
			"--match-set S src ! --update-subcounters --packets-lt 10 --bytes-gt 0", "match-set S src ! update-subcounters packets-lt 10 bytes-gt 0"},
	}
	for _, c := range cases {
		rs := NewRuleset(IPv4)
		require.NoError(t, rs.Exec("-A INPUT -m set "+c.in+" -j ACCEPT"), c.in)
		assert.Contains(t, rs.String(), "-A INPUT -m set "+c.save+" -j ACCEPT\n", c.in)
		r := rs.Table(Filter).Chain("INPUT").Rules
		assert.Equal(t, " "+c.list, string(r[0].Matches[0].appendList(nil, true)), c.in)
	}
	bad := []struct {
		in   string
		want error
	}{
		{"--match-set S src,dst --bytes-lt 5 --bytes-gt 2", ErrMultipleFlags},
		{"--match-set S src --packets-eq 3 --packets-gt 1", ErrMultipleFlags},
		{"--match-set S src ! --packets-lt 3", ErrSyntax},
		{"--match-set S src --packets-eq 18446744073709551616", ErrBadValue},
		{"--match-set S src --packets-eq 09", ErrBadValue},
		{"--match-set S src --packets-eq 1k", ErrBadValue},
		{"--match-set S src --packets-eq 0x", ErrBadValue},
		{"--match-set S src --packets-eq 1_0", ErrBadValue},
	}
	for _, c := range bad {
		err := NewRuleset(IPv4).Exec("-A INPUT -m set " + c.in + " -j ACCEPT")
		assert.ErrorIs(t, err, c.want, c.in)
	}
}

// Each candidate entry is counted, then compared (kernel 6.18); an entry
// failing the comparison does not decide, so a shorter prefix may.
func TestSetMatchCounterSemantics(t *testing.T) {
	h := testHost(t, "", HostConfig{})
	sets := h.Sets()
	require.NoError(t, sets.Create("N", "hash:net", false, "counters"))
	require.NoError(t, sets.Add("N", "10.244.0.0/16", false))
	require.NoError(t, sets.Add("N", "10.244.1.5", false))
	require.NoError(t, h.Restore(IPv4, []byte("*filter\n-A FORWARD -m set --match-set N dst --packets-lt 2 -j ACCEPT\n-A FORWARD -j DROP\nCOMMIT\n"), RestoreOptions{}))
	var got []Disposition
	for range 5 {
		got = append(got, h.Receive("eth0", tcpPacket("192.168.10.2", "10.244.1.5", 80, inet.SYN)).Disposition)
	}
	// The /32 decides at count 1, the /16 at count 1 (the /32 is at 2).
	assert.Equal(t, []Disposition{Forwarded, Forwarded, Dropped, Dropped, Dropped}, got)
	b, err := sets.AppendSave(nil, "N")
	require.NoError(t, err)
	assert.Contains(t, string(b), "add N 10.244.1.5 packets 5 bytes 300\n")
	assert.Contains(t, string(b), "add N 10.244.0.0/16 packets 4 bytes 240\n")
}
