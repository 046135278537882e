package kerneltest

import (
	"errors"
	"fmt"
	"net/netip"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var (
	clientIP = netip.MustParseAddr("192.168.10.2")
	serverIP = netip.MustParseAddr("10.244.1.5")
	nodeEth1 = netip.MustParseAddr("10.244.1.1")
	nodeEth0 = netip.MustParseAddr("192.168.10.1")
	vip      = netip.MustParseAddr("10.96.0.10")
)

const emptyFilter = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"

func syn(src, dst netip.Addr, sport, dport uint16) FrameSpec {
	return FrameSpec{Proto: "tcp", Src: src, Dst: dst, SrcPort: sport, DstPort: dport, TCPFlags: "SYN", Seq: 1000, ID: 7}
}

func mustFrame(t *testing.T, l *Lab, side Side, spec FrameSpec) []byte {
	t.Helper()
	f, err := l.FrameFrom(side, spec)
	require.NoError(t, err)
	return f
}

// newTestLab is shared by the subtests of one test: creating namespaces per
// case would be far slower than Reset.
func newTestLab(t *testing.T) *Lab {
	t.Helper()
	Require(t)
	return NewLab(t, LabConfig{})
}

func TestLab(t *testing.T) {
	l := newTestLab(t)

	t.Run("forwarded packet arrives with TTL-1", func(t *testing.T) {
		require.NoError(t, l.Reset(""))
		obs, err := l.Exchange(mustFrame(t, l, Client, syn(clientIP, serverIP, 40000, 80)))
		require.NoError(t, err)
		assert.Empty(t, obs.Client)
		require.Len(t, obs.Server, 1, obs.String())
		s := obs.Server[0].Summary
		assert.Equal(t, "IPv4 tcp 192.168.10.2:40000 > 10.244.1.5:80 [SYN] ttl=63 len=40", s.String())
		assert.Equal(t, NodeEth1MAC.String(), s.EthSrc)
		assert.Equal(t, ServerMAC.String(), s.EthDst)
	})

	t.Run("DROP in filter FORWARD counts 1", func(t *testing.T) {
		require.NoError(t, l.Reset(emptyFilter+"-A FORWARD -d 10.244.1.5/32 -p tcp -j DROP\nCOMMIT\n"))
		obs, err := l.Exchange(mustFrame(t, l, Client, syn(clientIP, serverIP, 40000, 80)))
		require.NoError(t, err)
		assert.Empty(t, obs.Client)
		assert.Empty(t, obs.Server)
		c, err := l.Counters()
		require.NoError(t, err)
		rc, ok := c.Rule("filter", "FORWARD", 1)
		require.True(t, ok)
		assert.Equal(t, Counter{Packets: 1, Bytes: 40}, rc)
		assert.Equal(t, "-A FORWARD -d 10.244.1.5/32 -p tcp -j DROP", c.Chain("filter", "FORWARD").Rules[0].Rule)
		assert.Equal(t, []string{"filter/FORWARD#1 1"}, c.NonZero())
	})

	t.Run("REJECT tcp-reset answers the client", func(t *testing.T) {
		require.NoError(t, l.Reset(emptyFilter+"-A FORWARD -p tcp -j REJECT --reject-with tcp-reset\nCOMMIT\n"))
		obs, err := l.Exchange(mustFrame(t, l, Client, syn(clientIP, serverIP, 40000, 80)))
		require.NoError(t, err)
		assert.Empty(t, obs.Server)
		require.Len(t, obs.Client, 1, obs.String())
		s := obs.Client[0].Summary
		assert.Equal(t, "IPv4 tcp 10.244.1.5:80 > 192.168.10.2:40000 [RST,ACK] ttl=64 len=40", s.String())
		assert.Equal(t, uint32(0), s.Seq)
		assert.Equal(t, uint32(1001), s.Ack)
		assert.Equal(t, NodeEth0MAC.String(), s.EthSrc)
		// The RST is locally generated: it traverses filter OUTPUT.
		c, err := l.Counters()
		require.NoError(t, err)
		assert.Equal(t, []string{"filter/FORWARD#1 1", "filter/OUTPUT#0 1"}, c.NonZero())
	})

	t.Run("REJECT default answers ICMP port unreachable quoting the packet", func(t *testing.T) {
		require.NoError(t, l.Reset(emptyFilter+"-A FORWARD -p udp -j REJECT\nCOMMIT\n"))
		spec := FrameSpec{Proto: "udp", Src: clientIP, Dst: serverIP, SrcPort: 5000, DstPort: 53, PayloadLen: 10}
		obs, err := l.Exchange(mustFrame(t, l, Client, spec))
		require.NoError(t, err)
		require.Len(t, obs.Client, 1, obs.String())
		// The node answers from the address of the interface facing the
		// client, not from the packet's destination, and the quoted packet
		// already has its TTL decremented: forwarding decrements it before
		// the FORWARD hook.
		assert.Equal(t, "IPv4 icmp 192.168.10.1 > 192.168.10.2 type=3 code=3 ttl=64 len=66 {IPv4 udp 192.168.10.2:5000 > 10.244.1.5:53 ttl=63 len=38}", obs.Client[0].Summary.String())
	})

	t.Run("DNAT rewrites the destination and de-DNATs the reply", func(t *testing.T) {
		require.NoError(t, l.Reset("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"+
			"-A PREROUTING -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.244.1.5:8080\nCOMMIT\n"))
		obs, err := l.Exchange(mustFrame(t, l, Client, syn(clientIP, vip, 40000, 80)))
		require.NoError(t, err)
		assert.Empty(t, obs.Client)
		require.Len(t, obs.Server, 1, obs.String())
		assert.Equal(t, "IPv4 tcp 192.168.10.2:40000 > 10.244.1.5:8080 [SYN] ttl=63 len=40", obs.Server[0].Summary.String())

		ct, err := l.Conntrack()
		require.NoError(t, err)
		require.Len(t, ct, 1)
		assert.Regexp(t, `^tcp      6 \d+ SYN_SENT src=192\.168\.10\.2 dst=10\.96\.0\.10 sport=40000 dport=80 \[UNREPLIED\] src=10\.244\.1\.5 dst=192\.168\.10\.2 sport=8080 dport=40000 mark=0 use=1$`, ct[0])

		reply := FrameSpec{Proto: "tcp", Src: serverIP, Dst: clientIP, SrcPort: 8080, DstPort: 40000, TCPFlags: "SYN,ACK", Seq: 5000, Ack: 1001}
		require.NoError(t, l.InjectFrom(Server, mustFrame(t, l, Server, reply)))
		obs, err = l.Settle()
		require.NoError(t, err)
		assert.Empty(t, obs.Server)
		require.Len(t, obs.Client, 1, obs.String())
		assert.Equal(t, "IPv4 tcp 10.96.0.10:80 > 192.168.10.2:40000 [SYN,ACK] ttl=63 len=40", obs.Client[0].Summary.String())
	})

	t.Run("locally generated packet traverses OUTPUT", func(t *testing.T) {
		require.NoError(t, l.Reset(emptyFilter+"-A OUTPUT -d 10.244.1.5/32 -p udp -m udp --dport 53 -j ACCEPT\nCOMMIT\n"))
		pkt, err := BuildPacket(FrameSpec{Proto: "udp", Src: nodeEth1, Dst: serverIP, SrcPort: 3333, DstPort: 53, PayloadLen: 4})
		require.NoError(t, err)
		require.NoError(t, l.SendFromNode(pkt))
		obs, err := l.Settle()
		require.NoError(t, err)
		require.Len(t, obs.Server, 1, obs.String())
		assert.Equal(t, "IPv4 udp 10.244.1.1:3333 > 10.244.1.5:53 ttl=64 len=32", obs.Server[0].Summary.String())
		c, err := l.Counters()
		require.NoError(t, err)
		rc, _ := c.Rule("filter", "OUTPUT", 1)
		assert.Equal(t, Counter{Packets: 1, Bytes: 32}, rc)
		pc, _ := c.Policy("filter", "OUTPUT")
		assert.Equal(t, Counter{}, pc)
	})

	t.Run("node kernel answers a SYN to a closed local port with RST", func(t *testing.T) {
		require.NoError(t, l.Reset(""))
		obs, err := l.Exchange(mustFrame(t, l, Client, syn(clientIP, nodeEth0, 40001, 22)))
		require.NoError(t, err)
		require.Len(t, obs.Client, 1, obs.String())
		assert.Equal(t, "IPv4 tcp 192.168.10.1:22 > 192.168.10.2:40001 [RST,ACK] ttl=64 len=40", obs.Client[0].Summary.String())
	})

	t.Run("IPv6 forwarded packet arrives with hop limit-1", func(t *testing.T) {
		require.NoError(t, l.ResetRuleset(Ruleset{IPv6: emptyFilter + "-A FORWARD -p udp -j ACCEPT\nCOMMIT\n"}))
		spec := FrameSpec{Proto: "udp", Src: netip.MustParseAddr("fd00:10::2"), Dst: netip.MustParseAddr("fd00:244::5"), SrcPort: 5000, DstPort: 53, PayloadLen: 8}
		obs, err := l.Exchange(mustFrame(t, l, Client, spec))
		require.NoError(t, err)
		require.Len(t, obs.Server, 1, obs.String())
		assert.Equal(t, "IPv6 udp [fd00:10::2]:5000 > [fd00:244::5]:53 ttl=63 len=56", obs.Server[0].Summary.String())
		c, err := l.Counters6()
		require.NoError(t, err)
		assert.Equal(t, []string{"filter/FORWARD#1 1"}, c.NonZero())
	})

	t.Run("restore error carries the tool's stderr", func(t *testing.T) {
		err := l.Reset(emptyFilter + "-A FORWARD -j NOSUCHCHAIN\nCOMMIT\n")
		var ce *CommandError
		require.True(t, errors.As(err, &ce), "%v", err)
		assert.Equal(t, 2, ce.ExitCode)
		assert.Regexp(t, regexp.MustCompile(`^iptables-restore v\S+ \(nf_tables\): Chain 'NOSUCHCHAIN' does not exist\nError occurred at line: 6\nTry `+"`"+`iptables-restore -h' or 'iptables-restore --help' for more information.\n$`), ce.Stderr)
	})
}

// TestLabManyCases checks that Settle is exact over many reused cases and
// logs the case rate.
func TestLabManyCases(t *testing.T) {
	l := newTestLab(t)
	const n = 200
	start := time.Now()
	for i := range n {
		drop := i%2 == 0
		rules := emptyFilter + "-A FORWARD -p tcp -j ACCEPT\nCOMMIT\n"
		if drop {
			rules = emptyFilter + "-A FORWARD -p tcp -j REJECT --reject-with tcp-reset\nCOMMIT\n"
		}
		require.NoError(t, l.Reset(rules))
		obs, err := l.Exchange(mustFrame(t, l, Client, syn(clientIP, serverIP, uint16(10000+i), 80)))
		require.NoError(t, err)
		c, err := l.Counters()
		require.NoError(t, err)
		want := []string{"filter/FORWARD#1 1"}
		if drop {
			want = append(want, "filter/OUTPUT#0 1") // the RST
		}
		require.Equal(t, want, c.NonZero(), "case %d", i)
		if drop {
			require.Len(t, obs.Client, 1, "case %d: %s", i, obs)
			require.Empty(t, obs.Server, "case %d", i)
		} else {
			require.Empty(t, obs.Client, "case %d: %s", i, obs)
			require.Len(t, obs.Server, 1, "case %d", i)
		}
	}
	el := time.Since(start)
	t.Logf("%d cases (Reset + 1 frame + Settle + Counters) in %v: %.1f cases/s", n, el, float64(n)/el.Seconds())
}

func BenchmarkLabCase(b *testing.B) {
	Require(b)
	l := NewLab(b, LabConfig{})
	rules := emptyFilter + "-A FORWARD -p tcp -j REJECT --reject-with tcp-reset\nCOMMIT\n"
	frame, err := l.Frame(syn(clientIP, serverIP, 40000, 80))
	require.NoError(b, err)
	for b.Loop() {
		require.NoError(b, l.Reset(rules))
		if _, err := l.Exchange(frame); err != nil {
			b.Fatal(err)
		}
		if _, err := l.Counters(); err != nil {
			b.Fatal(err)
		}
	}
}

func TestKernelNS(t *testing.T) {
	Require(t)
	ns := NewNS(t, "pw-kt")
	assert.Regexp(t, `^pw-kt-\d+-[0-9a-f]{8}$`, ns.Name())

	require.NoError(t, ns.Restore("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -s 10.0.0.1 -j ACCEPT\nCOMMIT\n"))
	save, err := ns.Save()
	require.NoError(t, err)
	assert.Equal(t, "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n-A INPUT -s 10.0.0.1/32 -j ACCEPT\nCOMMIT\n", save)
	raw, err := ns.SaveRaw()
	require.NoError(t, err)
	assert.Regexp(t, `^# Generated by iptables-save v\S+ \(nf_tables\) on .*\n\*filter\n`, raw)
	assert.Equal(t, save, StripSaveComments(raw))

	out, err := ns.IPTables("-S", "INPUT")
	require.NoError(t, err)
	assert.Equal(t, "-P INPUT ACCEPT\n-A INPUT -s 10.0.0.1/32 -j ACCEPT\n", out)

	_, err = ns.IPTables("-A", "INPUT", "-o", "eth0", "-j", "ACCEPT")
	var ce *CommandError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, 2, ce.ExitCode)
	assert.Contains(t, ce.Stderr, "Can't use -o with INPUT")

	deleted, err := CleanupLeftovers()
	require.NoError(t, err)
	assert.NotContains(t, deleted, ns.Name(), "a live namespace of this process must survive")
}

func TestCreateNSBadPrefix(t *testing.T) {
	for _, p := range []string{"lab", "pw-Lab", "pw-a_b", ""} {
		_, err := CreateNS(p)
		assert.ErrorIs(t, err, ErrBadName, p)
	}
}

func ExampleLab() {
	// In a test: kerneltest.Require(t); l := kerneltest.NewLab(t, kerneltest.LabConfig{})
	l, err := CreateLab(LabConfig{})
	if err != nil {
		fmt.Println("no kernel lab here")
		return
	}
	defer l.Close()
	_ = l.Reset("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A FORWARD -j DROP\nCOMMIT\n")
	frame, _ := l.Frame(FrameSpec{Proto: "udp", Src: clientIP, Dst: serverIP, SrcPort: 1000, DstPort: 53})
	obs, _ := l.Exchange(frame)
	c, _ := l.Counters()
	fmt.Println(len(obs.Server), c.NonZero())
}

// BenchmarkLabParts times the pieces of one differential case.
func BenchmarkLabParts(b *testing.B) {
	Require(b)
	l := NewLab(b, LabConfig{})
	rules := emptyFilter + "-A FORWARD -p tcp -j REJECT --reject-with tcp-reset\nCOMMIT\n"
	frame, err := l.Frame(syn(clientIP, serverIP, 40000, 80))
	require.NoError(b, err)
	b.Run("Reset", func(b *testing.B) {
		for b.Loop() {
			require.NoError(b, l.Reset(rules))
		}
	})
	b.Run("Exchange", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Exchange(frame); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Counters", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Counters(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("Conntrack", func(b *testing.B) {
		for b.Loop() {
			if _, err := l.Conntrack(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestKernelLabParallel runs independent Labs concurrently: Reset's cost is mostly
// waiting for kernel RCU grace periods, which concurrent labs share.
func TestKernelLabParallel(t *testing.T) {
	Require(t)
	const labs, perLab = 4, 50
	start := time.Now()
	for i := range labs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			l := NewLab(t, LabConfig{Prefix: fmt.Sprintf("pw-par%d", i)})
			rules := emptyFilter + "-A FORWARD -p tcp -j REJECT --reject-with tcp-reset\nCOMMIT\n"
			for j := range perLab {
				require.NoError(t, l.Reset(rules))
				obs, err := l.Exchange(mustFrame(t, l, Client, syn(clientIP, serverIP, uint16(20000+j), 80)))
				require.NoError(t, err)
				require.Len(t, obs.Client, 1, "case %d: %s", j, obs)
				c, err := l.Counters()
				require.NoError(t, err)
				require.Equal(t, []string{"filter/FORWARD#1 1", "filter/OUTPUT#0 1"}, c.NonZero(), "case %d", j)
			}
		})
	}
	t.Cleanup(func() {
		el := time.Since(start)
		t.Logf("%d labs x %d cases in %v: %.1f cases/s", labs, perLab, el, float64(labs*perLab)/el.Seconds())
	})
}

// TestKernelLabServerResponds checks that Settle waits for a 3-hop chain: the
// forwarded SYN, the server kernel's RST, and its forwarding to the client.
func TestKernelLabServerResponds(t *testing.T) {
	Require(t)
	l := NewLab(t, LabConfig{ServerResponds: true})
	require.NoError(t, l.Reset(""))
	for i := range 50 {
		obs, err := l.Exchange(mustFrame(t, l, Client, syn(clientIP, serverIP, uint16(30000+i), 80)))
		require.NoError(t, err)
		require.Len(t, obs.Server, 1, "case %d: %s", i, obs)
		require.Len(t, obs.Client, 1, "case %d: %s", i, obs)
		assert.Equal(t, fmt.Sprintf("IPv4 tcp 10.244.1.5:80 > 192.168.10.2:%d [RST,ACK] ttl=63 len=40", 30000+i), obs.Client[0].Summary.String())
	}
}
