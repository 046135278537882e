package netfilter

import (
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestStrings(t *testing.T) {
	p := TCP(netip.MustParseAddrPort("10.0.0.1:40000"), netip.MustParseAddrPort("10.0.0.2:80"), inet.SYN)
	p.In, p.Mark = "eth0", 0x4000
	assert.Equal(t, "tcp 10.0.0.1:40000 -> 10.0.0.2:80 SYN in=eth0 mark=0x4000 ttl=64 len=40", p.String())
	q := ICMP(netip.MustParseAddr("fd00::1"), netip.MustParseAddr("fd00::2"), 128, 0)
	assert.Equal(t, "ipv6-icmp fd00::1 -> fd00::2 type=128 code=0 ttl=64 len=48", q.String())

	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.2/24")))
	require.NoError(t, h.Restore(IPv4, []byte("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m tcp --dport 80 -j DROP\nCOMMIT\n"), RestoreOptions{}))
	h.Tracing = true
	res := h.Receive("eth0", p)
	assert.Equal(t, "DROP dropped at INPUT filter INPUT #1 DROP: tcp 10.0.0.1:40000 -> 10.0.0.2:80 SYN in=eth0 mark=0x4000 ttl=64 len=40", res.String())
	require.NotEmpty(t, res.Trace)
	assert.Equal(t, "INPUT filter INPUT #1 DROP", res.Trace[len(res.Trace)-1].String())
	assert.Equal(t, "PREROUTING ROUTE", Step{Hook: Prerouting, Action: Action{Kind: ActionRoute}}.String())
	assert.Equal(t, "INPUT filter INPUT policy POLICY:DROP", Step{Hook: Input, Table: Filter, Chain: "INPUT", Action: Action{Kind: ActionPolicyDrop}}.String())
	assert.Equal(t, "JUMP:KUBE-SERVICES", Action{Kind: ActionJump, Chain: "KUBE-SERVICES"}.String())
	assert.Equal(t, "TTL exceeded", ReasonTTLExceeded.String())
}
