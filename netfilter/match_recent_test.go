package netfilter

import (
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRecentParsePrint(t *testing.T) {
	rs := NewRuleset(IPv4)
	// Inputs and outputs recorded with iptables 1.8.9 (nf_tables).
	rs.MustExec(
		"-A INPUT -m recent --update --seconds 60 --hitcount 3 --rttl --name A --rdest -j DROP",
		"-A INPUT -m recent ! --rcheck --mask 255.255.0.0 -j DROP",
		"-A INPUT -m recent --remove --name B",
		"-A INPUT -m recent --set",
		"-A INPUT -m recent --name X --rcheck --seconds 10800 --reap -j DROP",
	)
	b, err := rs.AppendRules(nil, Filter, "INPUT", 0, false)
	require.NoError(t, err)
	assert.Equal(t, `-P INPUT ACCEPT
-A INPUT -m recent --update --seconds 60 --hitcount 3 --rttl --name A --mask 255.255.255.255 --rdest -j DROP
-A INPUT -m recent ! --rcheck --name DEFAULT --mask 255.255.0.0 --rsource -j DROP
-A INPUT -m recent --remove --name B --mask 255.255.255.255 --rsource
-A INPUT -m recent --set --name DEFAULT --mask 255.255.255.255 --rsource
-A INPUT -m recent --rcheck --seconds 10800 --reap --name X --mask 255.255.255.255 --rsource -j DROP
`, string(b))
	var got []string
	for _, r := range rs.Table(Filter).Chain("INPUT").Rules {
		got = append(got, string(r.Matches[0].appendList(nil, true)))
	}
	assert.Equal(t, []string{
		" recent: UPDATE seconds: 60 hit_count: 3 TTL-Match name: A side: dest mask: 255.255.255.255",
		" ! recent: CHECK name: DEFAULT side: source mask: 255.255.0.0",
		" recent: REMOVE name: B side: source mask: 255.255.255.255",
		" recent: SET name: DEFAULT side: source mask: 255.255.255.255",
		" recent: CHECK seconds: 10800 reap name: X side: source mask: 255.255.255.255",
	}, got)
	for _, bad := range []string{
		"-A INPUT -m recent --set --rcheck",
		"-A INPUT -m recent --seconds 5",
		"-A INPUT -m recent --set --seconds 5",
		"-A INPUT -m recent --rcheck --reap",
	} {
		assert.Error(t, rs.Exec(bad), bad)
	}
	v6 := NewRuleset(IPv6)
	v6.MustExec("-A INPUT -m recent --set")
	assert.Contains(t, v6.String(), "-A INPUT -m recent --set --name DEFAULT --mask ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff --rsource\n")
}

// kube-proxy's ClientIP affinity: --rcheck within the timeout sends the
// client back to the endpoint whose --set recorded it.
func TestRecentAffinity(t *testing.T) {
	clock := NewManualClock(time.Unix(1000, 0))
	h := testHost(t, `*filter
:SEEN - [0:0]
-A INPUT -p tcp --dport 80 -m recent --name aff --rcheck --seconds 10 --reap -j SEEN
-A INPUT -p tcp --dport 80 -m recent --name aff --set -j ACCEPT
-A SEEN -j ACCEPT
COMMIT
`, HostConfig{Clock: clock})
	where := func() int {
		return h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN)).Where.Rule
	}
	assert.Equal(t, 2, where()) // first time: recorded
	clock.Advance(5 * time.Second)
	assert.Equal(t, 1, where()) // within 10 s: recognised (SEEN rule 1)
	clock.Advance(11 * time.Second)
	assert.Equal(t, 2, where()) // --rcheck does not stamp: the only stamp is 16 s old
}
