package netfilter

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// addrTypeProbeRules counts, in raw PREROUTING, which address types the
// kernel gives an injected packet's source (rules 1..n), destination
// (n+1..2n) and destination looked up on eth0 only (2n+1..3n), then drops
// it so that nothing else happens. Only UDP counts: the client's own stack
// may send ICMPv6 (MLD, router solicitations) at any time.
func addrTypeProbeRules(types []AddrType) string {
	var b strings.Builder
	b.WriteString("*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n")
	for _, form := range []string{"--src-type %s", "--dst-type %s", "--dst-type %s --limit-iface-in"} {
		for _, t := range types {
			fmt.Fprintf(&b, "-A PREROUTING -i eth0 -p udp -m addrtype "+form+"\n", t)
		}
	}
	b.WriteString("-A PREROUTING -i eth0 -j DROP\nCOMMIT\n")
	return b.String()
}

// TestKernelAddrType injects packets into a real namespace and compares the
// types the kernel's addrtype match sees with Host.addrType on a host
// modelled like the lab's node.
func TestKernelAddrType(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-mx-at"})
	cfg := lab.Config()
	node := lab.Node()
	for _, args := range [][]string{
		{"ip", "route", "add", "blackhole", "10.9.9.0/24"},
		{"ip", "route", "add", "unreachable", "10.9.8.0/24"},
		{"ip", "route", "add", "prohibit", "10.9.6.0/24"},
		{"ip", "-6", "route", "add", "unreachable", "2001:db8:dead::/48"},
	} {
		_, _, err := node.Exec("", args...)
		require.NoError(t, err)
	}
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0, cfg.NodeEth0v6))
	require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1, cfg.NodeEth1v6))
	require.NoError(t, h.AddRoute(Route{Dst: p4("10.9.9.0/24"), Type: RouteBlackhole}))
	require.NoError(t, h.AddRoute(Route{Dst: p4("10.9.8.0/24"), Type: RouteUnreachable}))
	require.NoError(t, h.AddRoute(Route{Dst: p4("10.9.6.0/24"), Type: RouteProhibit}))
	require.NoError(t, h.AddRoute(Route{Dst: p4("2001:db8:dead::/48"), Type: RouteUnreachable}))

	v4Types := []AddrType{AddrUnspec, AddrUnicast, AddrLocal, AddrBroadcast, AddrAnycast, AddrMulticast,
		AddrBlackhole, AddrUnreachable, AddrProhibit, AddrThrow, AddrNAT, AddrXResolve}
	v6Types := []AddrType{AddrUnspec, AddrUnicast, AddrLocal, AddrAnycast, AddrMulticast, AddrUnreachable}

	run := func(t *testing.T, v6 bool, src, dst string) {
		types := v4Types
		rs := kerneltest.Ruleset{IPv4: addrTypeProbeRules(types)}
		if v6 {
			types = v6Types
			rs = kerneltest.Ruleset{IPv6: addrTypeProbeRules(types)}
		}
		require.NoError(t, lab.ResetRuleset(rs))
		frame, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr(dst), SrcPort: 1000, DstPort: 9})
		require.NoError(t, err)
		_, err = lab.Exchange(frame)
		require.NoError(t, err)
		cnt, err := lab.Counters()
		if v6 {
			cnt, err = lab.Counters6()
		}
		require.NoError(t, err)
		var got [3]AddrType
		for part := range got {
			for i, ty := range types {
				c, ok := cnt.Rule("raw", "PREROUTING", part*len(types)+i+1)
				require.True(t, ok)
				if c.Packets > 0 {
					got[part] |= ty
				}
			}
		}
		want := [3]AddrType{
			AddrType(h.addrType(netip.MustParseAddr(src), "")),
			AddrType(h.addrType(netip.MustParseAddr(dst), "")),
			AddrType(h.addrType(netip.MustParseAddr(dst), "eth0")),
		}
		assert.Equal(t, want, got, "kernel [src, dst, dst on eth0] = [%s | %s | %s]", got[0], got[1], got[2])
	}
	for _, c := range [][2]string{
		{"192.168.10.2", "192.168.10.1"},
		{"192.168.10.2", "10.244.1.1"},
		{"192.168.10.2", "192.168.10.255"},
		{"192.168.10.2", "10.244.1.255"},
		{"192.168.10.2", "192.168.10.0"},
		{"192.168.10.2", "255.255.255.255"},
		{"192.168.10.2", "224.0.0.5"},
		{"192.168.10.2", "10.9.9.1"},
		{"192.168.10.2", "10.9.8.1"},
		{"192.168.10.2", "10.9.6.1"},
		{"192.168.10.2", "0.0.0.1"},
		{"0.0.0.0", "192.168.10.1"},
		{"127.0.0.1", "192.168.10.1"},
		{"192.168.10.255", "192.168.10.1"},
		{"8.8.8.8", "127.0.0.5"},
	} {
		t.Run(c[0]+">"+c[1], func(t *testing.T) { run(t, false, c[0], c[1]) })
	}
	for _, c := range [][2]string{
		{"fd00:10::2", "fd00:10::1"},
		{"fd00:10::2", "fd00:244::1"},
		{"fd00:10::2", "fd00:10::"},
		{"fd00:10::2", "2001:db8::1"},
		{"fd00:10::2", "2001:db8:dead::1"},
		{"fd00:10::2", "ff02::1"},
		{"fd00:10::2", "fd00:244::5"},
		{"::", "fd00:10::1"},
	} {
		t.Run(c[0]+">"+c[1], func(t *testing.T) { run(t, true, c[0], c[1]) })
	}
}

// TestKernelPktType checks PktAuto, the packet type derived from the
// destination address, against the kernel's pkttype match for frames whose
// link-layer destination agrees with the IP destination.
func TestKernelPktType(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-mx-pt"})
	cfg := lab.Config()
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0, cfg.NodeEth0v6))
	require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1, cfg.NodeEth1v6))
	types := []PktType{PktUnicast, PktBroadcast, PktMulticast}
	rules := "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
	for _, ty := range types {
		rules += "-A PREROUTING -i eth0 -p udp -m pkttype --pkt-type " + ty.String() + "\n"
	}
	rules += "-A PREROUTING -i eth0 -j DROP\nCOMMIT\n"
	bcast := []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff}
	for _, c := range []struct {
		dst string
		mac []byte
	}{
		{"192.168.10.1", kerneltest.NodeEth0MAC},
		{"192.168.10.255", bcast},
		{"255.255.255.255", bcast},
		{"224.0.0.5", []byte{0x01, 0x00, 0x5e, 0x00, 0x00, 0x05}},
		{"239.1.2.3", []byte{0x01, 0x00, 0x5e, 0x01, 0x02, 0x03}},
	} {
		t.Run(c.dst, func(t *testing.T) {
			require.NoError(t, lab.Reset(rules))
			dst := netip.MustParseAddr(c.dst)
			frame, err := kerneltest.BuildFrame(kerneltest.ClientMAC, c.mac, kerneltest.FrameSpec{Proto: "udp", Src: cfg.Client.Addr(), Dst: dst, SrcPort: 1000, DstPort: 9})
			require.NoError(t, err)
			_, err = lab.Exchange(frame)
			require.NoError(t, err)
			cnt, err := lab.Counters()
			require.NoError(t, err)
			var got []PktType
			for i, ty := range types {
				if r, ok := cnt.Rule("raw", "PREROUTING", i+1); ok && r.Packets > 0 {
					got = append(got, ty)
				}
			}
			p := Packet{Family: IPv4, Dst: dst, In: "eth0"}
			assert.Equal(t, []PktType{pktType(&evalCtx{pkt: &p, host: h, walk: &walk{}})}, got)
		})
	}
}

// TestKernelConntrackICMPPorts sends an echo request from the client
// through the node and compares the counters of conntrack port rules: for
// ICMP and ICMPv6, xt_conntrack reads the type and code as the
// destination "port" (type<<8 | code) and the echo id as the source one.
func TestKernelConntrackICMPPorts(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-ctip"})
	cfg := lab.Config()
	rules := func(typ int) string {
		r := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
		for _, m := range []string{
			fmt.Sprintf("--ctorigdstport %d", typ<<8), "--ctorigdstport 0:1024", fmt.Sprintf("! --ctorigdstport %d", typ<<8),
			"--ctorigsrcport 77", "--ctorigsrcport 0", "--ctreplsrcport 77", "--ctrepldstport 0", "--ctrepldstport 0:255",
			fmt.Sprintf("--ctrepldstport %d", (typ+1)<<8),
		} {
			r += "-A FORWARD -m conntrack " + m + "\n"
		}
		return r + "COMMIT\n"
	}
	for _, tc := range []struct {
		name string
		v6   bool
		typ  int
		hits int // the echo reply is type 0 for ICMP, 129 for ICMPv6
	}{{"icmp", false, 8, 5}, {"icmpv6", true, 128, 4}} {
		t.Run(tc.name, func(t *testing.T) {
			text := rules(tc.typ)
			rs, fam := kerneltest.Ruleset{IPv4: text}, IPv4
			spec := kerneltest.FrameSpec{Proto: "icmp", Src: cfg.Client.Addr(), Dst: cfg.Server[0].Addr(), ICMPType: uint8(tc.typ), ICMPID: 77, ICMPSeq: 1, ID: 5}
			if tc.v6 {
				rs, fam = kerneltest.Ruleset{IPv6: text}, IPv6
				spec = kerneltest.FrameSpec{Proto: "icmp", Src: cfg.Client6.Addr(), Dst: cfg.Server6[0].Addr(), ICMPType: uint8(tc.typ), ICMPID: 77, ICMPSeq: 1}
			}
			require.NoError(t, lab.ResetRuleset(rs))
			h := NewHost(HostConfig{})
			require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0, cfg.NodeEth0v6))
			require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1, cfg.NodeEth1v6))
			require.NoError(t, h.Restore(fam, []byte(text), RestoreOptions{}))
			frame, err := lab.Frame(spec)
			require.NoError(t, err)
			_, err = lab.Exchange(frame)
			require.NoError(t, err)
			_, err = NewFrameHost(h).ReceiveFrame("eth0", frame)
			require.NoError(t, err)
			cnt, err := lab.Counters()
			if tc.v6 {
				cnt, err = lab.Counters6()
			}
			require.NoError(t, err)
			hits := 0
			for i, r := range h.Ruleset(fam).Table(Filter).Chain("FORWARD").Rules {
				kc, ok := cnt.Rule("filter", "FORWARD", i+1)
				require.True(t, ok)
				assert.Equal(t, kc.Packets, r.Counters.Packets, "rule %d: %s", i+1, r)
				hits += int(kc.Packets)
			}
			assert.Equal(t, tc.hits, hits, "the kernel's matches: dst port = type<<8, id 77, the reply's type")
		})
	}
}
