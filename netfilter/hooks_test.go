package netfilter

import (
	"net/netip"
	"strconv"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testHost is a node like the kernel-differential lab: eth0 towards the
// client, eth1 towards the pods.
func testHost(t *testing.T, rules string, cfg HostConfig) *Host {
	t.Helper()
	h := NewHost(cfg)
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"), netip.MustParsePrefix("fd00:10::1/64")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.244.1.1/24"), netip.MustParsePrefix("fd00:244::1/64")))
	if rules != "" {
		require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
	}
	return h
}

func tcpPacket(src, dst string, dport uint16, flags inet.TCPFlags) Packet {
	return Packet{Proto: inet.TCP, Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst),
		SrcPort: 40000, DstPort: dport, TCPFlags: flags, TTL: 64, Length: 60}
}

func TestPaths(t *testing.T) {
	rules := `*filter
:INPUT ACCEPT [0:0]
:FORWARD DROP [0:0]
:OUTPUT ACCEPT [0:0]
:A - [0:0]
:B - [0:0]
:C - [0:0]
-A INPUT -p tcp --dport 22 -j DROP
-A INPUT -i eth+ -p tcp --dport 23 -j A
-A FORWARD -o eth1 -p tcp --dport 80 -j ACCEPT
-A FORWARD -p tcp --dport 81 -g B
-A FORWARD -p tcp --dport 81 -j ACCEPT
-A A -j B
-A A -j DROP
-A B -p tcp --dport 23 -j RETURN
-A B -p tcp --dport 81 -j RETURN
-A OUTPUT -d 10.244.1.9 -j DROP
COMMIT
`
	cases := []struct {
		name  string
		in    string // "" sends from a local process
		pkt   Packet
		disp  Disposition
		where Step
		out   string
		ttl   uint8
	}{
		{"local delivery", "eth0", tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN), Delivered, Step{Hook: Input, Table: Filter, Chain: "INPUT", Action: Action{Kind: ActionPolicyAccept}}, "", 64},
		{"127/8 is local", "eth0", tcpPacket("192.168.10.2", "127.0.0.5", 80, inet.SYN), Delivered, Step{Hook: Input, Table: Filter, Chain: "INPUT", Action: Action{Kind: ActionPolicyAccept}}, "", 64},
		{"drop rule", "eth0", tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN), Dropped, Step{Hook: Input, Table: Filter, Chain: "INPUT", Rule: 1, Text: "-A INPUT -p tcp -m tcp --dport 22 -j DROP", Action: Action{Kind: ActionDrop}}, "", 64},
		{"nested return then drop", "eth0", tcpPacket("192.168.10.2", "192.168.10.1", 23, inet.SYN), Dropped, Step{Hook: Input, Table: Filter, Chain: "A", Rule: 2, Text: "-A A -j DROP", Action: Action{Kind: ActionDrop}}, "", 64},
		{"forward accepted", "eth0", tcpPacket("192.168.10.2", "10.244.1.5", 80, inet.SYN), Forwarded, Step{Hook: Forward, Table: Filter, Chain: "FORWARD", Rule: 1, Text: "-A FORWARD -o eth1 -p tcp -m tcp --dport 80 -j ACCEPT", Action: Action{Kind: ActionAccept}}, "eth1", 63},
		{"goto then RETURN applies the policy", "eth0", tcpPacket("192.168.10.2", "10.244.1.5", 81, inet.SYN), Dropped, Step{Hook: Forward, Table: Filter, Chain: "FORWARD", Action: Action{Kind: ActionPolicyDrop}}, "eth1", 63},
		{"forward policy drop", "eth0", tcpPacket("192.168.10.2", "10.244.1.5", 82, inet.SYN), Dropped, Step{Hook: Forward, Table: Filter, Chain: "FORWARD", Action: Action{Kind: ActionPolicyDrop}}, "eth1", 63},
		{"output accepted", "", tcpPacket("10.244.1.1", "10.244.1.5", 80, inet.SYN), Sent, Step{Hook: Output, Table: Filter, Chain: "OUTPUT", Action: Action{Kind: ActionPolicyAccept}}, "eth1", 64},
		{"output dropped", "", tcpPacket("10.244.1.1", "10.244.1.9", 80, inet.SYN), Dropped, Step{Hook: Output, Table: Filter, Chain: "OUTPUT", Rule: 1, Text: "-A OUTPUT -d 10.244.1.9/32 -j DROP", Action: Action{Kind: ActionDrop}}, "eth1", 64},
		{"no route", "eth0", tcpPacket("192.168.10.2", "8.8.8.8", 80, inet.SYN), Dropped, Step{Hook: Prerouting, Action: Action{Kind: ActionRoute}}, "", 64},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := testHost(t, rules, HostConfig{})
			var res Result
			if c.in == "" {
				res = h.Send(c.pkt)
			} else {
				res = h.Receive(c.in, c.pkt)
			}
			assert.Equal(t, c.disp, res.Disposition)
			assert.Equal(t, c.where, res.Where)
			assert.Equal(t, c.out, res.Packet.Out)
			assert.Equal(t, c.ttl, res.Packet.TTL)
		})
	}
}

func TestCountersCountLikeTheKernel(t *testing.T) {
	h := testHost(t, `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:X - [0:0]
-A INPUT -j X
-A INPUT -p tcp --dport 22 -j DROP
-A X -p udp -j RETURN
COMMIT
`, HostConfig{})
	for i := 0; i < 3; i++ {
		h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN))
	}
	h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 80, inet.SYN))
	got := string(h.Ruleset(IPv4).AppendSave(nil, SaveOptions{Counters: true}))
	assert.Equal(t, `*filter
:INPUT ACCEPT [1:60]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:X - [0:0]
[4:240] -A INPUT -j X
[3:180] -A INPUT -p tcp -m tcp --dport 22 -j DROP
[0:0] -A X -p udp -j RETURN
COMMIT
`, got)
}

func TestTraceSteps(t *testing.T) {
	h := testHost(t, "*filter\n:X - [0:0]\n-A INPUT -j X\n-A X -p tcp -j RETURN\nCOMMIT\n", HostConfig{})
	h.Tracing = true
	res := h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN))
	var actions []string
	for _, s := range res.Trace {
		actions = append(actions, s.Table.String()+":"+s.Chain+":"+s.Action.String())
	}
	assert.Equal(t, []string{"filter:INPUT:ENTER", "filter:INPUT:JUMP:X", "filter:X:RETURN", "filter:INPUT:POLICY:ACCEPT"}, actions)
	assert.Equal(t, "-A INPUT -j X", res.Trace[1].Text)
}

// The kernel (recorded with iptables 1.8.9): iptables-nft refuses a jump
// that nests a 16th user chain ("RULE_APPEND failed (Too many links)"),
// iptables-legacy accepts any depth.
func TestJumpDepthLimit(t *testing.T) {
	nested := func(n int) *Ruleset {
		rs := NewRuleset(IPv4)
		prev := "INPUT"
		for i := 1; i <= n; i++ {
			name := "C" + strconv.Itoa(i)
			rs.MustExec("-N "+name, "-A "+prev+" -j "+name)
			prev = name
		}
		rs.MustExec("-A " + prev + " -p tcp -j DROP")
		return rs
	}
	h := testHost(t, "", HostConfig{})
	require.NoError(t, h.Load(nested(15)))
	assert.Equal(t, Step{Hook: Input, Table: Filter, Chain: "C15", Rule: 1, Text: "-A C15 -p tcp -j DROP", Action: Action{Kind: ActionDrop}}, h.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN)).Where)
	assert.ErrorIs(t, h.Load(nested(16)), ErrTooDeep)
	legacy := testHost(t, "", HostConfig{Backend: Legacy})
	require.NoError(t, legacy.Load(nested(40)))
	assert.Equal(t, Step{Hook: Input, Table: Filter, Chain: "C40", Rule: 1, Text: "-A C40 -p tcp -j DROP", Action: Action{Kind: ActionDrop}}, legacy.Receive("eth0", tcpPacket("192.168.10.2", "192.168.10.1", 22, inet.SYN)).Where)
}

func TestIPv6Path(t *testing.T) {
	h := testHost(t, "", HostConfig{})
	require.NoError(t, h.Restore(IPv6, []byte("*filter\n-A FORWARD -d fd00:244::5 -p tcp --dport 80 -j DROP\nCOMMIT\n"), RestoreOptions{}))
	res := h.Receive("eth0", tcpPacket("fd00:10::2", "fd00:244::5", 80, inet.SYN))
	assert.Equal(t, Dropped, res.Disposition)
	assert.Equal(t, Step{Hook: Forward, Table: Filter, Chain: "FORWARD", Rule: 1, Text: "-A FORWARD -d fd00:244::5/128 -p tcp -m tcp --dport 80 -j DROP", Action: Action{Kind: ActionDrop}}, res.Where)
	res = h.Receive("eth0", tcpPacket("fd00:10::2", "fd00:244::5", 81, inet.SYN))
	assert.Equal(t, Forwarded, res.Disposition)
	assert.Equal(t, "-A FORWARD -d fd00:244::5/128 -p tcp -m tcp --dport 80 -j DROP\n", string(must(h.Ruleset(IPv6).AppendRules(nil, Filter, "FORWARD", 1, false))))
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestLocalToLocalGoesThroughLoopback(t *testing.T) {
	h := testHost(t, "*filter\n-A OUTPUT -o lo -j ACCEPT\n-A INPUT -i lo -p tcp --dport 22 -j DROP\nCOMMIT\n", HostConfig{})
	p := tcpPacket("192.168.10.1", "192.168.10.1", 22, inet.SYN)
	p.Src = netip.Addr{} // chosen by the host
	res := h.Send(p)
	assert.Equal(t, Dropped, res.Disposition)
	assert.Equal(t, Step{Hook: Input, Table: Filter, Chain: "INPUT", Rule: 1, Text: "-A INPUT -i lo -p tcp -m tcp --dport 22 -j DROP", Action: Action{Kind: ActionDrop}}, res.Where)
	assert.Equal(t, netip.MustParseAddr("192.168.10.1"), res.Packet.Src)
	res = h.Send(tcpPacket("127.0.0.1", "127.0.0.1", 80, inet.SYN))
	assert.Equal(t, Delivered, res.Disposition)
	assert.Equal(t, "lo", res.Packet.In)
}
