package conntrack

import (
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEntryString(t *testing.T) {
	tb, _ := newTestTable(t, Config{})
	e := track(t, tb, tcpFacts("192.168.10.2:40001", "10.0.0.1:80", inet.SYN)).Entry
	require.NoError(t, tb.Confirm(e))
	track(t, tb, tcpFacts("10.0.0.1:80", "192.168.10.2:40001", inet.SYN|inet.ACK))
	assert.Equal(t, "tcp SYN_RECV src=192.168.10.2 dst=10.0.0.1 sport=40001 dport=80 src=10.0.0.1 dst=192.168.10.2 sport=80 dport=40001 [SEEN_REPLY|CONFIRMED] mark=0", e.String())
	u := track(t, tb, udpFacts("192.168.10.2:40001", "10.0.0.1:53")).Entry
	assert.Equal(t, "udp src=192.168.10.2 dst=10.0.0.1 sport=40001 dport=53 src=10.0.0.1 dst=192.168.10.2 sport=53 dport=40001 [NONE] mark=0", u.String())
}
