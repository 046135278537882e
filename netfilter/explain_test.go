package netfilter

import (
	"fmt"
	"math/big"
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kubeServiceRules is kube-proxy's shape for a ClusterIP service with n
// endpoints 10.244.1.10:8080, 10.244.1.11:8080, ..., probabilities written %0.10f.
func kubeServiceRules(n int) string {
	s := "*nat\n:KUBE-SERVICES - [0:0]\n:KUBE-SVC-X - [0:0]\n"
	for i := 0; i < n; i++ {
		s += fmt.Sprintf(":KUBE-SEP-%d - [0:0]\n", i)
	}
	s += "-A PREROUTING -j KUBE-SERVICES\n-A KUBE-SERVICES -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-X\n"
	for i := 0; i < n; i++ {
		if i < n-1 {
			s += fmt.Sprintf("-A KUBE-SVC-X -m statistic --mode random --probability %0.10f -j KUBE-SEP-%d\n", 1/float64(n-i), i)
		} else {
			s += fmt.Sprintf("-A KUBE-SVC-X -j KUBE-SEP-%d\n", i)
		}
		s += fmt.Sprintf("-A KUBE-SEP-%d -p tcp -m tcp -j DNAT --to-destination 10.244.%d.%d:8080\n", i, 1+(10+i)/256, (10+i)%256)
	}
	return s + "COMMIT\n"
}

func TestExplainKubeProxyCascade(t *testing.T) {
	h := testHost(t, kubeServiceRules(3), HostConfig{Seed: 7})
	before := h.Ruleset(IPv4).AppendSave(nil, SaveOptions{Counters: true})
	out, err := h.Explain("eth0", tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN))
	require.NoError(t, err)
	require.Len(t, out, 3)
	// The kernel stores lround(p·2^31): 1/3 → 715827883, 1/2 → 2^30.
	p0 := big.NewRat(715827883, 1<<31)
	p1 := new(big.Rat).Mul(new(big.Rat).Sub(big.NewRat(1, 1), p0), big.NewRat(1, 2))
	p2 := new(big.Rat).Sub(big.NewRat(1, 1), new(big.Rat).Add(p0, p1))
	want := map[string]*big.Rat{"10.244.1.10": p0, "10.244.1.11": p1, "10.244.1.12": p2}
	sum := new(big.Rat)
	for _, o := range out {
		dst := o.Result.Packet.Dst.String()
		assert.Equal(t, want[dst].String(), o.Probability.Rat().String(), dst)
		assert.Equal(t, o.Probability.Rat().String(), new(big.Rat).SetFrac(o.Probability.Numerator(), o.Probability.Denominator()).String())
		assert.Equal(t, uint16(8080), o.Result.Packet.DstPort)
		assert.Equal(t, Forwarded, o.Result.Disposition)
		sum.Add(sum, o.Probability.Rat())
	}
	assert.Equal(t, "1/1", sum.String())
	// Explaining changes nothing.
	assert.Equal(t, string(before), string(h.Ruleset(IPv4).AppendSave(nil, SaveOptions{Counters: true})))
	assert.Equal(t, 0, h.Conntrack().Len())
	// The seeded run afterwards picks one of the explained outcomes.
	res := h.Receive("eth0", tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN))
	assert.Contains(t, want, res.Packet.Dst.String())
	assert.Equal(t, 1, h.Conntrack().Len())
}

// An established connection is pinned: it has a single outcome.
func TestExplainEstablishedIsPinned(t *testing.T) {
	h := testHost(t, kubeServiceRules(5), HostConfig{Seed: 1})
	first := h.Receive("eth0", tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN))
	require.Equal(t, Forwarded, first.Disposition)
	out, err := h.Explain("eth0", tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.ACK))
	require.NoError(t, err)
	require.Len(t, out, 1)
	assert.Equal(t, "1/1", out[0].Probability.String())
	assert.Equal(t, first.Packet.Dst, out[0].Result.Packet.Dst)
}

func TestExplainNthIsReadFromState(t *testing.T) {
	h := testHost(t, "*filter\n-A INPUT -p udp -m statistic --mode nth --every 3 --packet 1 -j DROP\nCOMMIT\n", HostConfig{})
	udp := Packet{Proto: inet.UDP, Src: netip.MustParseAddr("192.168.10.2"), Dst: netip.MustParseAddr("192.168.10.1"), SrcPort: 1, DstPort: 7, TTL: 64, Length: 28}
	var got []Disposition
	for i := 0; i < 6; i++ {
		out, err := h.Explain("eth0", udp)
		require.NoError(t, err)
		require.Len(t, out, 1)
		res := h.Receive("eth0", udp)
		assert.Equal(t, res.Disposition, out[0].Result.Disposition, "packet %d", i)
		got = append(got, res.Disposition)
	}
	assert.Equal(t, []Disposition{Delivered, Dropped, Delivered, Delivered, Dropped, Delivered}, got)
}

func BenchmarkExplain1000Endpoints(b *testing.B) {
	h := NewHost(HostConfig{})
	_ = h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24"))
	_ = h.AddInterface("eth1", netip.MustParsePrefix("10.244.0.1/16"))
	if err := h.Restore(IPv4, []byte(kubeServiceRules(1000)), RestoreOptions{}); err != nil {
		b.Fatal(err)
	}
	p := tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN)
	for b.Loop() {
		if _, err := h.Explain("eth0", p); err != nil {
			b.Fatal(err)
		}
	}
}

// Seeded sampling agrees with Explain: 20,000 new connections through a
// 5-endpoint service, chi-square goodness of fit against the exact
// distribution. The seed is fixed, so the test is deterministic.
func TestExplainMatchesSampling(t *testing.T) {
	h := testHost(t, kubeServiceRules(5), HostConfig{Seed: 42})
	out, err := h.Explain("eth0", tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN))
	require.NoError(t, err)
	require.Len(t, out, 5)
	const n = 20000
	counts := map[netip.Addr]float64{}
	for i := 0; i < n; i++ {
		p := tcpPacket("192.168.10.2", "10.96.0.10", 80, inet.SYN)
		p.SrcPort = uint16(1024 + i)
		counts[h.Receive("eth0", p).Packet.Dst]++
	}
	chi2 := 0.0
	for _, o := range out {
		exp := o.Probability.Float64() * n
		d := counts[o.Result.Packet.Dst] - exp
		chi2 += d * d / exp
	}
	// 4 degrees of freedom: P(chi2 > 18.47) = 0.001.
	assert.Less(t, chi2, 18.47, "chi-square %.2f for counts %v", chi2, counts)
}
