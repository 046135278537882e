package netfilter

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTEE: the copies TEE sends and where the original goes, as the
// kernel gave them in TestTEEKernel; the copy is untracked (mangle OUTPUT
// rule 2 counts it) and walks OUTPUT and POSTROUTING.
func TestTEE(t *testing.T) {
	for _, tc := range teeCases {
		t.Run(tc.name, func(t *testing.T) {
			h := teeHost(t, teeRules(tc.chain, tc.rule))
			got, res := teeModel(h, tc.dst)
			assert.Equal(t, tc.want, got)
			assert.Equal(t, tc.disposition, res.Disposition)
			out := h.Ruleset(IPv4).Table(Mangle).Chain("OUTPUT").Rules
			n := uint64(len(res.Emitted))
			assert.Equal(t, []uint64{n, n, 0}, []uint64{out[0].Counters.Packets, out[1].Counters.Packets, out[2].Counters.Packets},
				"every copy crosses mangle OUTPUT untracked")
			for _, e := range res.Emitted {
				assert.Equal(t, netip.MustParseAddr(tc.dst), e.Dst, "the copy keeps its addresses")
				assert.Equal(t, netip.MustParseAddr("192.168.10.2"), e.Src)
			}
		})
	}
}

// TestTEEOIFRefused: --oif binds the copy's route to a device, which is
// not modelled: refused by name when a host loads it.
func TestTEEOIFRefused(t *testing.T) {
	rs, err := ParseRestore(IPv4, []byte("*mangle\n-A PREROUTING -j TEE --gateway 10.0.0.1 --oif eth1\nCOMMIT\n"))
	require.NoError(t, err)
	err = NewHost(HostConfig{}).Load(rs)
	assert.ErrorIs(t, err, ErrNotModelled)
	assert.ErrorContains(t, err, "TEE: --oif")
}

// TestTEEZeroGateway: the kernel refuses --gateway 0.0.0.0 and :: (found
// by the grammar differential).
func TestTEEZeroGateway(t *testing.T) {
	for f, gw := range map[Family]string{IPv4: "0.0.0.0", IPv6: "::"} {
		_, err := ParseRestore(f, []byte("*mangle\n-A PREROUTING -j TEE --gateway "+gw+"\nCOMMIT\n"))
		assert.ErrorIs(t, err, ErrBadValue, gw)
		assert.ErrorContains(t, err, "the kernel refuses the unspecified address")
	}
}
