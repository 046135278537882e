package netfilter

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// TestKernelDefrag sends the same IPv4 fragments of a 1408-byte UDP
// datagram through the kernel lab's node and through a FrameHost, with a
// stateless ruleset (fragments cross the hooks one by one; -f matches the
// later ones) and with a DNAT + MASQUERADE ruleset (conntrack reassembles
// before raw PREROUTING: every table counts one 1428-byte packet, and the
// datagram leaves cut along the fragments received, in offset order,
// without DF). Counters (iptables-save -c) and the frames reaching the
// server are compared; Ethernet addresses are masked as in
// TestKernelFrameHost.
func TestKernelDefrag(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-df"})
	cfg := lab.Config()
	client, server := cfg.Client.Addr(), cfg.Server[0].Addr()
	svc := netip.MustParseAddr("10.96.0.10")
	const filter = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
	const raw = "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -p udp\n-A PREROUTING -f\nCOMMIT\n"
	for n, tc := range []struct {
		name  string
		rules string
		dst   netip.Addr
		order []int
		cuts  []cut
	}{
		{"stateless", filter + "-A FORWARD -p udp -m udp --dport 9999 -j ACCEPT\n-A FORWARD -f -j ACCEPT\nCOMMIT\n",
			server, []int{0, 1, 2}, labCuts},
		{"dnat-masquerade", "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
			"-A PREROUTING -d 10.96.0.10/32 -p udp -m udp --dport 9999 -j DNAT --to-destination 10.244.1.5:5353\n" +
			"-A POSTROUTING -o eth1 -j MASQUERADE\nCOMMIT\n" + raw +
			filter + "-A FORWARD -p udp -m udp --dport 5353 -j ACCEPT\n-A FORWARD -f -j ACCEPT\nCOMMIT\n",
			svc, []int{2, 1, 0}, labCuts},
		{"dnat-df-on-all", "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n" +
			"-A PREROUTING -d 10.96.0.10/32 -p udp -m udp --dport 9999 -j DNAT --to-destination 10.244.1.5:5353\nCOMMIT\n" +
			filter + "COMMIT\n",
			svc, []int{0, 1, 2}, []cut{{0, 400, true, true}, {400, 800, true, true}, {1200, 208, false, true}}},
		{"conntrack-overlap", filter + "-A FORWARD -m conntrack --ctstate NEW -j ACCEPT\nCOMMIT\n",
			server, []int{0, 3, 1, 2}, append(labCuts[:3:3], cut{200, 400, true, false})},
		{"conntrack-ip-options", filter + "-A FORWARD -m conntrack --ctstate NEW -j ACCEPT\nCOMMIT\n",
			server, []int{0, 1, 2}, labCuts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, lab.Reset(tc.rules))
			whole, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: client, Dst: tc.dst, SrcPort: 40000, DstPort: 9999, ID: 0x1234 + uint16(n), PayloadLen: 1400})
			// A distinct ID per case: a queue an earlier case left
			// incomplete (the overlap case) would otherwise take these
			// fragments, since a conntrack flush does not clear queues.
			require.NoError(t, err)
			if tc.name == "conntrack-ip-options" {
				whole = withIPv4Options(whole, labOptions)
			}
			frags := fragments4(t, whole, tc.cuts...)
			var sent [][]byte
			for _, i := range tc.order {
				sent = append(sent, frags[i])
			}
			obs, err := lab.Exchange(sent...)
			require.NoError(t, err)
			kc, err := lab.Counters()
			require.NoError(t, err)

			h, ours := receiveFrames(t, IPv4, cfg.NodeEth0, cfg.NodeEth1, tc.rules, sent)
			require.Len(t, ours, len(obs.Server), "frames reaching the server; kernel:\n%s", obs)
			for i, c := range obs.Server {
				k, o := ipFrame(t, c.Frame), ipFrame(t, ours[i])
				assert.Equal(t, fmt.Sprintf("% x", k[12:]), fmt.Sprintf("% x", o[12:]), "frame %d: kernel (want) vs FrameHost (got)", i+1)
			}
			assertSameRuleCounters(t, h, IPv4, kc, true)
		})
	}
}

// labOptions are two IPv4 options no router acts on: an unassigned
// option with the copied flag (0x9e) and one without it (0x1e), each 4
// bytes.
var labOptions = []byte{0x9e, 4, 0xaa, 0xbb, 0x1e, 4, 0xcc, 0xdd}

// withIPv4Options returns an Ethernet frame's IPv4 packet with opts (a
// multiple of 4 bytes) inserted after its 20-byte header.
func withIPv4Options(frame, opts []byte) []byte {
	f := append(append(append([]byte(nil), frame[:34]...), opts...), frame[34:]...)
	ip := f[14:]
	ip[0] = 0x40 | byte((20+len(opts))/4)
	binary.BigEndian.PutUint16(ip[2:4], binary.BigEndian.Uint16(ip[2:4])+uint16(len(opts)))
	ipChecksum(ip[:20+len(opts)])
	return f
}

// ipFrame6 is an IPv6 frame up to the end of its packet (payload length
// plus the 40-byte header): a veth adds no padding, but be sure.
func ipFrame6(t *testing.T, f []byte) []byte {
	t.Helper()
	require.GreaterOrEqual(t, len(f), 54)
	require.Equal(t, []byte{0x86, 0xdd}, f[12:14], "IPv6 EtherType")
	n := 14 + 40 + int(binary.BigEndian.Uint16(f[18:20]))
	require.LessOrEqual(t, n, len(f))
	return f[:n]
}

// TestKernelDefrag6 is TestKernelDefrag for IPv6: the same 1408-byte UDP
// datagram (fd00:10::2 -> fd00:244::5) cut into 400/800/208-byte fragments
// with fragment headers, through ip6tables rulesets without and with
// conntrack (nf_defrag_ipv6 reassembles before raw PREROUTING), sent in
// order and out of order. Counters (ip6tables-save -c) and the frames
// reaching the server are compared byte for byte past the Ethernet
// addresses.
func TestKernelDefrag6(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-df6"})
	cfg := lab.Config()
	client, server := cfg.Client6.Addr(), cfg.Server6[0].Addr()
	svc := netip.MustParseAddr("fd00:96::10")
	const filter = "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
	const nat = "*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
	const raw = "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n-A PREROUTING -p udp\n-A PREROUTING -p udp -m udp --dport 9999\nCOMMIT\n"
	for n, tc := range []struct {
		name  string
		rules string
		dst   netip.Addr
		order []int
		cuts  []cut
	}{
		{"stateless", raw + filter + "-A FORWARD -p udp -m udp --dport 9999 -j ACCEPT\n-A FORWARD -p udp -j ACCEPT\nCOMMIT\n",
			server, []int{0, 1, 2}, labCuts},
		{"stateless-reversed", raw + filter + "-A FORWARD -p udp -m udp --dport 9999 -j ACCEPT\n-A FORWARD -p udp -j ACCEPT\nCOMMIT\n",
			server, []int{2, 1, 0}, labCuts},
		{"dnat-masquerade", nat +
			"-A PREROUTING -d fd00:96::10/128 -p udp -m udp --dport 9999 -j DNAT --to-destination [fd00:244::5]:5353\n" +
			"-A POSTROUTING -o eth1 -j MASQUERADE\nCOMMIT\n" + raw +
			filter + "-A FORWARD -p udp -m udp --dport 5353 -j ACCEPT\n-A FORWARD -p udp -j ACCEPT\nCOMMIT\n",
			svc, []int{2, 0, 1}, labCuts},
		{"conntrack-overlap", filter + "-A FORWARD -m conntrack --ctstate NEW -j ACCEPT\nCOMMIT\n",
			server, []int{0, 3, 1, 2}, append(labCuts[:3:3], cut{200, 400, true, false})},
		{"conntrack-duplicate", filter + "-A FORWARD -m conntrack --ctstate NEW -j ACCEPT\nCOMMIT\n",
			server, []int{0, 1, 1, 2}, labCuts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv6: tc.rules}))
			whole, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: client, Dst: tc.dst, SrcPort: 40000, DstPort: 9999, PayloadLen: 1400})
			require.NoError(t, err)
			frags := fragments6(t, whole, 0x1234abcd+uint32(n), tc.cuts...)
			var sent [][]byte
			for _, i := range tc.order {
				sent = append(sent, frags[i])
			}
			obs, err := lab.Exchange(sent...)
			require.NoError(t, err)
			kc, err := lab.Counters6()
			require.NoError(t, err)

			h, ours := receiveFrames(t, IPv6, cfg.NodeEth0v6, cfg.NodeEth1v6, tc.rules, sent)
			require.Len(t, ours, len(obs.Server), "frames reaching the server; kernel:\n%s", obs)
			var kernelID uint32
			for i, c := range obs.Server {
				k, o := ipFrame6(t, c.Frame), ipFrame6(t, ours[i])
				if len(obs.Server) > 1 {
					// ip6_fragment gives the fragments a new identification
					// (ipv6_select_ident, a keyed hash of the addresses), the
					// same in each of them; FrameHost keeps the original.
					require.Equal(t, byte(44), k[14+6], "frame %d: fragment header", i+1)
					id := binary.BigEndian.Uint32(k[14+40+4:])
					if i == 0 {
						kernelID = id
					}
					assert.Equal(t, kernelID, id, "frame %d: one identification for all fragments", i+1)
					assert.Equal(t, 0x1234abcd+uint32(n), binary.BigEndian.Uint32(o[14+40+4:]), "frame %d: FrameHost keeps the identification", i+1)
					k, o = bytes.Clone(k), bytes.Clone(o)
					clear(k[14+40+4 : 14+40+8])
					clear(o[14+40+4 : 14+40+8])
				}
				assert.Equal(t, fmt.Sprintf("% x", k[12:]), fmt.Sprintf("% x", o[12:]), "frame %d: kernel (want) vs FrameHost (got)", i+1)
			}
			assertSameRuleCounters(t, h, IPv6, kc, true)
		})
	}
}

// receiveFrames sends frames into a FrameHost with eth0 and eth1 and the
// rules of family f, and returns the host and every frame that left.
func receiveFrames(t *testing.T, f Family, eth0, eth1 netip.Prefix, rules string, frames [][]byte) (*Host, [][]byte) {
	t.Helper()
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", eth0))
	require.NoError(t, h.AddInterface("eth1", eth1))
	require.NoError(t, h.Restore(f, []byte(rules), RestoreOptions{}))
	fh := NewFrameHost(h)
	var out [][]byte
	for _, fr := range frames {
		res, err := fh.ReceiveFrame("eth0", fr)
		require.NoError(t, err)
		switch {
		case res.Fragments != nil:
			for _, x := range res.Fragments {
				out = append(out, append([]byte(nil), x...))
			}
		case res.Frame != nil:
			out = append(out, append([]byte(nil), res.Frame...))
		}
	}
	return h, out
}
