package netfilter

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/kerneltest"
)

// realKernelCase is a real ruleset of testdata/golden (plus extra text,
// e.g. counting rules), the packets the lab's client sends to the node, and
// the chains whose counters are compared: those the packets cross on their
// way in. (What the node's own stack answers, RSTs to closed ports, goes
// out through OUTPUT, which a Host does not generate.)
type realKernelCase struct {
	file, extra string
	pkts        []Packet
	chains      map[string][]string // table -> chains
}

func runRealKernel(t *testing.T, lab *kerneltest.Lab, tc realKernelCase) *Host {
	t.Helper()
	cfg := lab.Config()
	in, err := os.ReadFile(filepath.Join(goldenDir, tc.file))
	require.NoError(t, err)
	text := string(in) + tc.extra
	require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv4: text}))
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0))
	require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1))
	require.NoError(t, h.Restore(IPv4, []byte(text), RestoreOptions{}))
	for i, p := range tc.pkts {
		spec := kerneltest.FrameSpec{Proto: p.Proto.String(), Src: p.Src, Dst: p.Dst, SrcPort: p.SrcPort, DstPort: p.DstPort, Seq: p.Seq}
		if p.Proto == inet.TCP {
			spec.TCPFlags = "SYN"
		}
		f, err := lab.FrameFrom(kerneltest.Client, spec)
		require.NoError(t, err)
		require.NoError(t, lab.InjectFrom(kerneltest.Client, f))
		_, err = lab.Settle()
		require.NoError(t, err)
		res := h.Receive("eth0", p)
		t.Logf("packet %d (%s %d): packetwalk %s at %s %s rule %d", i+1, p.Proto, p.DstPort, res.Disposition, res.Where.Table, res.Where.Chain, res.Where.Rule)
	}
	kc, err := lab.Counters()
	require.NoError(t, err)
	t.Logf("kernel: %s", strings.Join(kc.NonZero(), ", "))
	rs := h.Ruleset(IPv4)
	for tbl, chains := range tc.chains {
		id, err := ParseTable(tbl)
		require.NoError(t, err)
		for _, name := range chains {
			ch := rs.Table(id).Chain(name)
			require.NotNil(t, ch, "%s %s", tbl, name)
			for n, r := range ch.Rules {
				want, ok := kc.Rule(tbl, name, n+1)
				require.True(t, ok, "%s %s rule %d", tbl, name, n+1)
				assert.Equal(t, want.Packets, r.Counters.Packets, "%s %s rule %d (%s): kernel (want) vs packetwalk", tbl, name, n+1, strings.TrimSpace(r.String()))
			}
			if ch.Builtin() {
				want, ok := kc.Policy(tbl, name)
				require.True(t, ok)
				assert.Equal(t, want.Packets, ch.Counters.Packets, "%s %s policy", tbl, name)
			}
		}
	}
	return h
}

// TestRealRulesetsKernel sends packets from the lab's client to the node
// under the ufw and istio rulesets and compares the counters of the chains
// they cross with packetwalk's: ufw accepting HTTP, limiting SSH (the sixth
// new connection within 30 s rejected), dropping and logging a closed port;
// istio redirecting inbound TCP to 15006 except 15008.
func TestRealRulesetsKernel(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-real"})
	cfg := lab.Config()
	client, node := cfg.Client.Addr(), cfg.NodeEth0.Addr()
	syn := func(sport, dport uint16) Packet {
		return Packet{Proto: inet.TCP, Src: client, Dst: node, SrcPort: sport, DstPort: dport, TCPFlags: inet.SYN, Seq: 1, TTL: 64, Length: 40}
	}

	t.Run("ufw", func(t *testing.T) {
		pkts := []Packet{syn(40000, 80), syn(40001, 23)}
		for i := 0; i < 7; i++ {
			pkts = append(pkts, syn(uint16(41000+i), 22))
		}
		pkts = append(pkts, Packet{Proto: inet.UDP, Src: client, Dst: node, SrcPort: 137, DstPort: 137, TTL: 64, Length: 28})
		h := runRealKernel(t, lab, realKernelCase{file: "real-ufw.rules", pkts: pkts, chains: map[string][]string{"filter": {
			"INPUT", "ufw-before-logging-input", "ufw-before-input", "ufw-after-input", "ufw-after-logging-input",
			"ufw-reject-input", "ufw-track-input", "ufw-not-local", "ufw-user-input", "ufw-user-limit",
			"ufw-user-limit-accept", "ufw-skip-to-policy-input", "ufw-logging-deny"}}})
		// The unit test's expectations, here confirmed by the counters.
		rs := h.Ruleset(IPv4)
		assert.Equal(t, uint64(2), rs.Table(Filter).Chain("ufw-user-limit").Rules[1].Counters.Packets, "SSH SYNs 6 and 7 rejected")
		assert.Equal(t, uint64(5), rs.Table(Filter).Chain("ufw-user-limit-accept").Rules[0].Counters.Packets)
	})

	t.Run("istio", func(t *testing.T) {
		extra := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n" +
			"-A INPUT -p tcp -m tcp --dport 15006\n-A INPUT -p tcp -m tcp --dport 15008\n-A INPUT -p tcp -m tcp --dport 8080\nCOMMIT\n"
		h := runRealKernel(t, lab, realKernelCase{file: "real-istio.rules", extra: extra,
			pkts: []Packet{syn(40000, 8080), syn(40001, 15008), syn(40002, 9080)},
			chains: map[string][]string{
				"nat":    {"PREROUTING", "ISTIO_INBOUND", "ISTIO_IN_REDIRECT"},
				"filter": {"INPUT"},
			}})
		in := h.Ruleset(IPv4).Table(Filter).Chain("INPUT").Rules
		assert.Equal(t, uint64(2), in[0].Counters.Packets, "8080 and 9080 arrive at 15006")
		assert.Equal(t, uint64(1), in[1].Counters.Packets, "15008 is not captured")
		assert.Equal(t, uint64(0), in[2].Counters.Packets)
	})
}
