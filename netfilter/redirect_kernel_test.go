package netfilter

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// redirectRules REDIRECTs TCP port 80 to 8080 in nat PREROUTING and
// OUTPUT; filter INPUT counts the packet per candidate destination, then
// drops it so that the node's stack does not answer.
func redirectRules(cands []netip.Addr) string {
	var b strings.Builder
	b.WriteString("*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -p tcp\n-A OUTPUT -p tcp\nCOMMIT\n")
	b.WriteString("*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n")
	b.WriteString("-A PREROUTING -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 8080\n")
	b.WriteString("-A OUTPUT -p tcp -m tcp --dport 80 -j REDIRECT --to-ports 8080\nCOMMIT\n")
	b.WriteString("*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, a := range cands {
		fmt.Fprintf(&b, "-A INPUT -d %s/%d -p tcp -m tcp --dport 8080\n", a, a.BitLen())
	}
	b.WriteString("-A INPUT -p tcp -j DROP\n-A FORWARD -p tcp\nCOMMIT\n")
	return b.String()
}

// TestKernelRedirectAddress gives the lab node's eth0 several addresses
// (IPv4 primaries and a secondary, later a host-scope 127.0.0.5; IPv6
// globals and a link-local) and compares where the kernel and a Host
// modelled like it REDIRECT a packet received on eth0, sent by the node
// itself, and received on an interface without an address.
func TestKernelRedirectAddress(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-redir"})
	cfg := lab.Config()
	node := lab.Node()
	require.NoError(t, node.Sysctl("net.ipv4.conf.all.route_localnet", "1"))
	pfx := netip.MustParsePrefix
	extra := []netip.Prefix{pfx("192.168.10.9/24"), pfx("172.16.5.1/16"), pfx("fd00:99::1/64"), pfx("fd00:10::9/64"), pfx("fe80::5/64")}
	eth0 := []netip.Prefix{cfg.NodeEth0, cfg.NodeEth0v6}
	addAddr := func(p netip.Prefix) {
		args := []string{"ip", "addr", "add", p.String(), "dev", "eth0"}
		if p.Addr().Is6() {
			args = append(args, "nodad")
		}
		_, _, err := node.Exec("", args...)
		require.NoError(t, err)
		eth0 = append(eth0, p)
	}
	for _, p := range extra {
		addAddr(p)
	}
	out, _, _ := node.Exec("", "ip", "addr", "show", "dev", "eth0")
	t.Logf("node eth0:\n%s", out)
	// tentative is an address the kernel has but not yet for use (DAD in
	// progress): the Host does not get it, the rules count it.
	var tentative []netip.Addr
	cands := func(v6 bool) []netip.Addr {
		l := []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("127.0.0.5")}
		if v6 {
			l = append([]netip.Addr{netip.IPv6Loopback()}, tentative...)
		}
		for _, p := range eth0 {
			if p.Addr().Is6() == v6 && !p.Addr().IsLoopback() {
				l = append(l, p.Addr())
			}
		}
		return l
	}

	// run sends one packet and compares every counter; it returns the
	// address packetwalk REDIRECTed to (invalid when it dropped).
	run := func(t *testing.T, eth1 []netip.Prefix, side string, src, dst netip.Addr) netip.Addr {
		v6 := dst.Is6()
		rules := redirectRules(cands(v6))
		rs, fam := kerneltest.Ruleset{IPv4: rules}, IPv4
		if v6 {
			rs, fam = kerneltest.Ruleset{IPv6: rules}, IPv6
		}
		require.NoError(t, lab.ResetRuleset(rs))
		spec := kerneltest.FrameSpec{Proto: "tcp", Src: src, Dst: dst, SrcPort: 40000, DstPort: 80, TCPFlags: "SYN", Seq: 1}
		switch side {
		case "local":
			pkt, err := kerneltest.BuildPacket(spec)
			require.NoError(t, err)
			require.NoError(t, lab.SendFromNode(pkt))
			_, err = lab.Settle()
			require.NoError(t, err)
		case "eth0", "eth1":
			from := kerneltest.Client
			if side == "eth1" {
				from = kerneltest.Server
			}
			f, err := lab.FrameFrom(from, spec)
			require.NoError(t, err)
			require.NoError(t, lab.InjectFrom(from, f))
			_, err = lab.Settle()
			require.NoError(t, err)
		}
		kc, err := lab.Counters()
		if v6 {
			kc, err = lab.Counters6()
		}
		require.NoError(t, err)
		t.Logf("kernel: %s", strings.Join(kc.NonZero(), ", "))

		h := NewHost(HostConfig{})
		require.NoError(t, h.AddInterface("eth0", eth0...))
		require.NoError(t, h.AddInterface("eth1", eth1...))
		require.NoError(t, h.Restore(fam, []byte(rules), RestoreOptions{}))
		p := Packet{Proto: inet.TCP, Src: src, Dst: dst, SrcPort: 40000, DstPort: 80, TCPFlags: inet.SYN, Seq: 1, TTL: 64, Length: 40}
		if v6 {
			p.Length = 60
		}
		var res Result
		if side == "local" {
			res = h.Send(p)
		} else {
			res = h.Receive(side, p)
		}
		t.Logf("packetwalk: %s %s to %s", res.Disposition, res.Verdict, res.Packet.Dst)
		assertSameCounters(t, h, fam, kc)
		if res.Packet.DstPort != 8080 {
			return netip.Addr{}
		}
		return res.Packet.Dst
	}
	a := netip.MustParseAddr
	eth1 := []netip.Prefix{cfg.NodeEth1, cfg.NodeEth1v6}
	for _, tc := range []struct {
		side     string
		src, dst string
		want     string
	}{
		// The first IPv4 address, not the destination's nor its subnet's.
		{"eth0", "192.168.10.2", "172.16.5.1", "192.168.10.1"},
		{"eth0", "192.168.10.2", "192.168.10.9", "192.168.10.1"},
		{"eth0", "192.168.10.2", "10.244.1.5", "192.168.10.1"},
		// The newest global IPv6 address.
		{"eth0", "fd00:10::2", "fd00:10::1", "fd00:10::9"},
		{"eth0", "fd00:10::2", "fd00:244::5", "fd00:10::9"},
		// A link-local destination asks for a link-local address.
		{"eth0", "fd00:10::2", "fe80::5", "fe80::5"},
		// Loopback for what the node sends.
		{"local", "192.168.10.1", "10.244.1.5", "127.0.0.1"},
		{"local", "fd00:10::1", "fd00:244::5", "::1"},
	} {
		t.Run(tc.side+"/"+tc.dst, func(t *testing.T) {
			assert.Equal(t, a(tc.want), run(t, eth1, tc.side, a(tc.src), a(tc.dst)))
		})
	}
	// A tentative address (DAD running for 30 s) heads the list but is
	// skipped.
	for _, kv := range [][2]string{{"net.ipv6.conf.eth0.accept_dad", "1"}, {"net.ipv6.conf.eth0.dad_transmits", "1"}, {"net.ipv6.neigh.eth0.retrans_time_ms", "30000"}} {
		require.NoError(t, node.Sysctl(kv[0], kv[1]))
	}
	_, _, err := node.Exec("", "ip", "addr", "add", "fd00:77::1/64", "dev", "eth0")
	require.NoError(t, err)
	tentative = []netip.Addr{a("fd00:77::1")}
	out, _, _ = node.Exec("", "ip", "-6", "addr", "show", "dev", "eth0")
	require.Contains(t, out, "fd00:77::1/64 scope global tentative")
	// The new address makes the kernel send its DAD solicitation and MLD
	// reports after random delays of up to a second each; let them pass
	// before the rules (and their counters) are reset for the test packet.
	time.Sleep(2500 * time.Millisecond)
	t.Run("eth0/tentative-skipped", func(t *testing.T) {
		assert.Equal(t, a("fd00:10::9"), run(t, eth1, "eth0", a("fd00:10::2"), a("fd00:244::5")))
	})
	// A host-scope address goes before the global ones.
	addAddr(pfx("127.0.0.5/8"))
	t.Run("eth0/host-scope-first", func(t *testing.T) {
		assert.Equal(t, a("127.0.0.5"), run(t, eth1, "eth0", a("192.168.10.2"), a("10.244.1.5")))
	})
	// Without an address of the family on the input interface, the
	// kernel drops the packet at nat PREROUTING.
	for _, fam := range []string{"-4", "-6"} {
		_, _, err := node.Exec("", "ip", fam, "addr", "flush", "dev", "eth1")
		require.NoError(t, err)
	}
	for _, tc := range []struct{ src, dst string }{{"10.244.1.5", "192.168.10.2"}, {"fd00:244::5", "fd00:10::2"}} {
		t.Run("eth1-no-address/"+tc.src, func(t *testing.T) {
			assert.False(t, run(t, nil, "eth1", a(tc.src), a(tc.dst)).IsValid(), "dropped")
		})
	}
}
