package cnum

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseUint(t *testing.T) {
	// Read whole, in the base the prefix selects, up to the maximum.
	for in, want := range map[string]uint64{"0": 0, "255": 255, "0x1F": 31, "0X1f": 31, "017": 15, "00": 0} {
		n, ok := ParseUint(in, 255)
		assert.True(t, ok, in)
		assert.Equal(t, want, n, in)
	}
	// Over the maximum, not digits of the base, empty after the prefix,
	// signed, separated or padded.
	for _, in := range []string{"256", "08", "0x", "", "+1", "-1", "0x-1", "1_0", " 1", "1 "} {
		_, ok := ParseUint(in, 255)
		assert.False(t, ok, in)
	}
	n, ok := ParseUint("18446744073709551615", math.MaxUint64)
	assert.True(t, ok)
	assert.Equal(t, uint64(math.MaxUint64), n)
	_, ok = ParseUint("18446744073709551616", math.MaxUint64)
	assert.False(t, ok, "beyond 64 bits")

	base, digits := Base("0")
	assert.Equal(t, 10, base, "a lone 0 is decimal")
	assert.Equal(t, "0", digits)
}
