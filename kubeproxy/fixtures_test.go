package kubeproxy

import (
	"net/netip"
	"os"
	"path/filepath"
	"testing"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
)

// Recorded fixtures: a generated document and what the real iptables-save
// printed after iptables-restore loaded it into an empty namespace
// (iptables v1.8.9, nf_tables). Regenerate with
//
//	PACKETWALK_KERNEL=1 PACKETWALK_RECORD=1 go test ./kubeproxy -run TestKernelFixtures
type fixture struct {
	name string
	v6   bool
	doc  func(t *testing.T) []byte
}

var fixtures = []fixture{
	{"overall_current_v4", false, func(t *testing.T) []byte {
		cfg := upstreamTestConfig()
		cfg.PayloadOnly, cfg.NFAcct, cfg.RandomFully = false, false, true
		svcs, slices := overallObjects()
		out, err := Generate(cfg, svcs, slices, nil)
		require.NoError(t, err)
		return out
	}},
	{"overall_legacy_v4", false, func(t *testing.T) []byte {
		cfg := upstreamTestConfig()
		cfg.PayloadOnly, cfg.NFAcct, cfg.Layout, cfg.LegacyPortNames, cfg.LegacyProbability = false, false, LayoutLegacy, true, true
		svcs, slices := overallObjects()
		out, err := Generate(cfg, svcs, slices, nil)
		require.NoError(t, err)
		return out
	}},
	{"affinity_current_v6", true, func(t *testing.T) []byte {
		cfg := DefaultConfig("test-node")
		cfg.Family = corev1.IPv6Protocol
		cfg.Detector = LocalDetector{Mode: DetectClusterCIDR, CIDR: netip.MustParsePrefix("fd00:10::/64")}
		svc := makeSvc("ns1", "svc1", "LoadBalancer", "fd00:30::41", port("p80", tcp, 80, 3001), lbIngress("2001:db8:5::8"),
			sourceRanges("2001:db8:99::/48"), affinity(300), eTPLocal(30000))
		out, err := Generate(cfg, []corev1.Service{svc, makeSvc("ns6", "svc6", "ClusterIP", "fd00:30::46", port("", udp, 53, 0))},
			slicesOf(makeSlice("ns1", "svc1", "s", "p80", tcp, 80, ep{ip: "fd00:10::1"}, ep{ip: "fd00:10::2", node: "test-node"}, ep{ip: "fd00:10::3", node: "test-node"})), nil)
		require.NoError(t, err)
		return out
	}},
}

func TestKernelFixtures(t *testing.T) {
	kerneltest.Require(t)
	record := os.Getenv("PACKETWALK_RECORD") == "1"
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			ns := kerneltest.NewNS(t, "pw-kpfx")
			doc := f.doc(t)
			var save string
			var err error
			if f.v6 {
				require.NoError(t, ns.Restore6(string(doc)))
				save, err = ns.Save6()
			} else {
				require.NoError(t, ns.Restore(string(doc)))
				save, err = ns.Save()
			}
			require.NoError(t, err)
			path := filepath.Join("testdata", f.name+".iptables-save")
			if record {
				require.NoError(t, os.WriteFile(path, []byte(save), 0o644))
				return
			}
			want, err := os.ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, string(want), save, "kernel output changed; re-record if intended")
		})
	}
}

// TestRecordedSavesMatchPrediction checks, without a kernel, that the
// recorded iptables-save output is exactly the predicted normalisation of
// today's generated document.
func TestRecordedSavesMatchPrediction(t *testing.T) {
	for _, f := range fixtures {
		t.Run(f.name, func(t *testing.T) {
			save, err := os.ReadFile(filepath.Join("testdata", f.name+".iptables-save"))
			require.NoError(t, err)
			compareSave(t, predictSaveDoc(string(f.doc(t)), f.v6), parseSaveText(string(save)), 0, f.v6)
		})
	}
}
