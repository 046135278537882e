package netfilter

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/ipset"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelSetTarget runs the "block who knocked" rules in the kernel lab
// and in packetwalk: the SET target adds the client, the set match then
// lets it in, and the counters and the set's members agree.
func TestKernelSetTarget(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{})
	sets := "create knocked hash:ip family inet hashsize 1024 maxelem 65536\n"
	rules := `*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp -m tcp --dport 22 -m set --match-set knocked src -j ACCEPT
-A INPUT -p tcp -m tcp --dport 22 -j DROP
-A INPUT -p tcp -m tcp --dport 1234 -j SET --add-set knocked src
COMMIT
`
	require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv4: rules, IPSets: sets}))
	client, node := netip.MustParseAddr("192.168.10.2"), netip.MustParseAddr("192.168.10.1")
	var frames [][]byte
	for i, dport := range []uint16{22, 1234, 22} {
		f, err := lab.Frame(kerneltest.FrameSpec{Proto: "tcp", Src: client, Dst: node, SrcPort: uint16(40000 + i), DstPort: dport, TCPFlags: "SYN", Seq: 1})
		require.NoError(t, err)
		frames = append(frames, f)
	}
	for _, f := range frames {
		_, err := lab.Exchange(f)
		require.NoError(t, err)
	}
	kc, err := lab.Counters()
	require.NoError(t, err)
	kernelMembers, _, err := lab.Node().Exec("", "ipset", "list", "knocked")
	require.NoError(t, err)

	h := testHost(t, "", HostConfig{})
	require.NoError(t, h.Sets().Restore([]byte(sets), ipset.RestoreOptions{}))
	require.NoError(t, h.Restore(IPv4, []byte(rules), RestoreOptions{}))
	dec := NewDecoder()
	for _, f := range frames {
		p, err := dec.Decode(f)
		require.NoError(t, err)
		h.Receive("eth0", p)
	}
	for n := 1; n <= 3; n++ {
		k, ok := kc.Rule("filter", "INPUT", n)
		require.True(t, ok)
		got := h.Ruleset(IPv4).Table(Filter).Chain("INPUT").Rules[n-1].Counters
		assert.Equal(t, k.Packets, got.Packets, "rule %d packets", n)
		assert.Equal(t, k.Bytes, got.Bytes, "rule %d bytes", n)
	}
	assert.Contains(t, kernelMembers, "\n192.168.10.2\n")
	var b strings.Builder
	require.NoError(t, h.Sets().List(&b, "knocked"))
	assert.Contains(t, b.String(), "\n192.168.10.2\n")
}
