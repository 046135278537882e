package kubeproxy

import (
	"math/rand/v2"
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// layoutCases are the generator variants every random cluster is written in.
var layoutCases = []struct {
	name   string
	v6     bool
	layout Layout
}{
	{"current-v4", false, LayoutCurrent},
	{"current-v6", true, LayoutCurrent},
	{"legacy-v4", false, LayoutLegacy},
	{"legacy-v6", true, LayoutLegacy},
}

// generatedCluster writes random cluster seed in layout, with the legacy
// naming and probability options cycling with the seed as in the kernel
// acceptance test.
func generatedCluster(t testing.TB, seed uint64, v6 bool, layout Layout, payload bool) (Config, []byte) {
	t.Helper()
	cfg, svcs, slices := randomCluster(randFor(seed), v6)
	cfg.Layout = layout
	cfg.LegacyPortNames = layout == LayoutLegacy && seed%2 == 0
	cfg.LegacyProbability = layout == LayoutLegacy && seed%3 == 0
	cfg.PayloadOnly = payload
	doc, err := Generate(cfg, svcs, slices, nil)
	require.NoError(t, err)
	return cfg, doc
}

// TestInstallEveryGeneratedCluster: netfilter must accept everything the
// generator writes (complete documents and --noflush payloads), and the
// loaded ruleset must save back to the same rules.
func TestInstallEveryGeneratedCluster(t *testing.T) {
	const seeds = 300
	for _, lc := range layoutCases {
		t.Run(lc.name, func(t *testing.T) {
			for seed := range uint64(seeds) {
				cfg, doc := generatedCluster(t, seed, lc.v6, lc.layout, false)
				f, err := DocumentFamily(doc)
				require.NoError(t, err)
				require.Equal(t, NetfilterFamily(cfg), f, "seed %d: family of the document", seed)
				h := netfilter.NewHost(netfilter.HostConfig{})
				require.NoError(t, Install(h, doc), "seed %d:\n%s", seed, doc)
				// What was loaded is what was written, rule for rule.
				saved := h.Ruleset(f).AppendSave(nil, netfilter.SaveOptions{})
				want := predictSaveDoc(string(doc), lc.v6)
				got := parseSaveText(string(saved))
				for table, wt := range want {
					for ch, rules := range wt.rules {
						assert.Equal(t, rules, got[table].rules[ch], "seed %d %s %s", seed, table, ch)
					}
				}
				// The payload goes on top with --noflush and changes nothing.
				_, payload := generatedCluster(t, seed, lc.v6, lc.layout, true)
				require.NoError(t, Install(h, payload), "seed %d payload:\n%s", seed, payload)
				assert.Equal(t, string(saved), string(h.Ruleset(f).AppendSave(nil, netfilter.SaveOptions{})), "seed %d: payload changed the tables", seed)
			}
		})
	}
}

func TestDocumentFamily(t *testing.T) {
	for _, c := range []struct {
		doc  string
		want netfilter.Family
		err  error
	}{
		{"*nat\n-A KUBE-SEP-X -p tcp -m tcp -j DNAT --to-destination 10.1.2.3:80\nCOMMIT\n", netfilter.IPv4, nil},
		{"*nat\n-A KUBE-SEP-X -p tcp -m tcp -j DNAT --to-destination [fd00::1]:80\nCOMMIT\n", netfilter.IPv6, nil},
		{"*filter\n-A KUBE-FW -d fd00::/64 -j DROP\nCOMMIT\n", netfilter.IPv6, nil},
		{"*filter\n:KUBE-FORWARD - [0:0]\nCOMMIT\n", netfilter.IPv4, nil},
		{"*filter\n-A X -s 10.0.0.0/8 -j DROP\n-A X -d fd00::1/128 -j DROP\nCOMMIT\n", 0, ErrMixedFamilies},
	} {
		f, err := DocumentFamily([]byte(c.doc))
		if c.err != nil {
			assert.ErrorIs(t, err, c.err)
			assert.ErrorContains(t, err, "IPv4 on line 2, IPv6 on line 3")
			continue
		}
		require.NoError(t, err)
		assert.Equal(t, c.want, f, c.doc)
	}
}

// A document netfilter refuses comes back as the restore error, naming the
// line.
func TestInstallRefusal(t *testing.T) {
	h := netfilter.NewHost(netfilter.HostConfig{})
	err := Install(h, []byte("*nat\n:KUBE-X - [0:0]\n-A KUBE-X -m frobnicate -j ACCEPT\nCOMMIT\n"))
	require.Error(t, err)
	var pe *netfilter.ParseError
	require.ErrorAs(t, err, &pe)
	assert.Equal(t, 3, pe.Line)
}

// randFor is the random source of generated cluster seed.
func randFor(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x6b70)) }

// kube-proxy ≥ v1.30 names nfacct counters it creates first; Install does
// the same, so the upstream TestOverallIPTablesRules payload (which has
// them) loads, and the counters count.
func TestInstallCreatesNFAcctCounters(t *testing.T) {
	cfg := upstreamTestConfig()
	cfg.PayloadOnly = false
	svcs, slices := overallObjects()
	data, err := Generate(cfg, svcs, slices, nil)
	require.NoError(t, err)
	require.Contains(t, string(data), "-m nfacct --nfacct-name")
	h := netfilter.NewHost(netfilter.HostConfig{})
	require.NoError(t, Install(h, data))
	_, ok := h.NFAcct("ct_state_invalid_dropped_pkts")
	assert.True(t, ok)
}

// tokenFamily's shortcut agrees with parsing on every address form a rule
// names: addresses, prefixes, address:port and ranges, IPv4 and IPv6.
func TestTokenFamilyAgreesWithParsing(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		var b [16]byte
		for i := range b {
			b[i] = rapid.Byte().Draw(t, "b")
		}
		a := netip.AddrFrom16(b)
		if rapid.Bool().Draw(t, "v4") {
			a = netip.AddrFrom4([4]byte(b[:4]))
		}
		forms := []string{a.String(), netip.PrefixFrom(a, rapid.IntRange(0, a.BitLen()).Draw(t, "bits")).String(),
			netip.AddrPortFrom(a, rapid.Uint16().Draw(t, "port")).String(), a.String() + "-" + a.String()}
		for _, s := range forms {
			if got, want := tokenFamily([]byte(s)), addrFamily(s); got != want {
				t.Fatalf("%q: tokenFamily %d, addrFamily %d", s, got, want)
			}
		}
	})
}
