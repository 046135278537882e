package netfiltertest_test

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/netfilter/netfiltertest"
)

func TestReply(t *testing.T) {
	p := netfilter.TCP(netip.MustParseAddrPort("10.0.0.2:40000"), netip.MustParseAddrPort("10.0.0.1:22"), inet.SYN)
	p.In, p.Out, p.Mark, p.TTL, p.Length = "eth0", "eth1", 7, 3, 60
	p.UID, p.HasSocket, p.PhysIn, p.Bridged = 1000, true, "veth0", true
	want := netfilter.TCP(netip.MustParseAddrPort("10.0.0.1:22"), netip.MustParseAddrPort("10.0.0.2:40000"), inet.SYN|inet.ACK)
	want.Length = 60
	assert.Equal(t, want, netfiltertest.Reply(p, inet.SYN|inet.ACK))

	echo := netfilter.ICMP(netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1"), 8, 0)
	echo.ICMPID = 77
	r := netfiltertest.Reply(echo, 0)
	assert.Equal(t, []any{uint8(0), uint16(77), "10.0.0.1", "10.0.0.2"}, []any{r.ICMPType, r.ICMPID, r.Src.String(), r.Dst.String()})
	echo6 := netfilter.ICMP(netip.MustParseAddr("fd00::2"), netip.MustParseAddr("fd00::1"), 128, 0)
	assert.Equal(t, uint8(129), netfiltertest.Reply(echo6, 0).ICMPType)
	// An error is no request: its type stays.
	unreach := netfilter.ICMP(netip.MustParseAddr("10.0.0.2"), netip.MustParseAddr("10.0.0.1"), 3, 3)
	assert.Equal(t, uint8(3), netfiltertest.Reply(unreach, 0).ICMPType)
}

func TestWire(t *testing.T) {
	p := netfilter.UDP(netip.MustParseAddrPort("10.0.0.2:5353"), netip.MustParseAddrPort("10.0.0.1:53"))
	sent := p
	sent.In, sent.Out, sent.Mark, sent.PhysOut, sent.Bridged = "lo", "eth0", 0x4000, "veth1", true
	assert.Equal(t, p, netfiltertest.Wire(sent))
}

func TestMatched(t *testing.T) {
	h, _ := netfiltertest.NewHost(netfilter.HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24")))
	require.NoError(t, h.Exec("-A INPUT -p udp -j ACCEPT"))
	require.NoError(t, h.Exec("-A INPUT -p tcp -j DROP"))
	r := h.Receive("eth0", netfilter.TCP(netip.MustParseAddrPort("10.0.0.2:1"), netip.MustParseAddrPort("10.0.0.1:2"), inet.SYN))
	assert.True(t, netfiltertest.Matched(r, netfilter.Filter, "INPUT", 2))
	assert.False(t, netfiltertest.Matched(r, netfilter.Filter, "INPUT", 1))
	assert.False(t, netfiltertest.Matched(r, netfilter.NAT, "INPUT", 2))

	// Without a trace there is nothing to read.
	h.Tracing = false
	r = h.Receive("eth0", netfilter.TCP(netip.MustParseAddrPort("10.0.0.2:1"), netip.MustParseAddrPort("10.0.0.1:2"), inet.SYN))
	assert.Equal(t, netfilter.Dropped, r.Disposition)
	assert.False(t, netfiltertest.Matched(r, netfilter.Filter, "INPUT", 2))
}

func TestWriteTrace(t *testing.T) {
	h, _ := netfiltertest.NewHost(netfilter.HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("192.168.1.1/24")))
	require.NoError(t, h.Restore(netfilter.IPv4, []byte(`*mangle
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -j MARK --set-xmark 0x4/0xffffffff
COMMIT
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
:SVC - [0:0]
-A PREROUTING -p udp -j SVC
-A SVC -p udp -j DNAT --to-destination 192.168.1.9:5353
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
-A FORWARD -p udp -m udp --dport 5353 -j ACCEPT
COMMIT
`), netfilter.RestoreOptions{}))
	in := netfilter.UDP(netip.MustParseAddrPort("10.0.0.2:4000"), netip.MustParseAddrPort("10.0.0.1:53"))
	var b strings.Builder
	require.NoError(t, netfiltertest.WriteTrace(&b, in, h.Receive("eth0", in)))
	assert.Equal(t, `  PREROUTING  mangle PREROUTING                 #1  CONTINUE (MARK --set-xmark 0x4/0xffffffff)
      packet is now 10.0.0.2:4000 → 10.0.0.1:53 mark 0x4
  PREROUTING  nat    PREROUTING                 #1  JUMP:SVC
  PREROUTING  nat    SVC                        #1  ACCEPT (DNAT --to-destination 192.168.1.9:5353)
      packet is now 10.0.0.2:4000 → 192.168.1.9:5353 mark 0x4
  FORWARD     filter FORWARD                    #1  ACCEPT (ACCEPT)
  => ACCEPT forwarded out eth1 as 10.0.0.2:4000 → 192.168.1.9:5353 mark 0x4
`, b.String())

	// A DROP policy is shown; the last line says what dropped it.
	in = netfilter.TCP(netip.MustParseAddrPort("10.0.0.2:4000"), netip.MustParseAddrPort("192.168.1.9:80"), inet.SYN)
	b.Reset()
	require.NoError(t, netfiltertest.WriteTrace(&b, in, h.Receive("eth0", in)))
	assert.Equal(t, `  PREROUTING  mangle PREROUTING                 #1  CONTINUE (MARK --set-xmark 0x4/0xffffffff)
      packet is now 10.0.0.2:4000 → 192.168.1.9:80 mark 0x4
  FORWARD     filter FORWARD                    #0  POLICY:DROP
  => DROP dropped
`, b.String())
}
