package cnum

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestParseUint(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  uint64
		want uint64
		ok   bool
	}{
		{"0", 255, 0, true},
		{"255", 255, 255, true},
		{"256", 255, 0, false},
		{"0x1F", 255, 31, true},
		{"0X1f", 255, 31, true},
		{"017", 255, 15, true},
		{"08", 255, 0, false}, // not an octal digit
		{"0x", 255, 0, false},
		{"", 255, 0, false},
		{"+1", 255, 0, false},
		{"-1", 255, 0, false},
		{"0x-1", 255, 0, false},
		{"1_0", 255, 0, false},
		{" 1", 255, 0, false},
		{"18446744073709551615", math.MaxUint64, math.MaxUint64, true},
		{"18446744073709551616", math.MaxUint64, 0, false},
	} {
		n, ok := ParseUint(tc.in, tc.max)
		assert.Equal(t, tc.ok, ok, "%q", tc.in)
		assert.Equal(t, tc.want, n, "%q", tc.in)
	}
	base, digits := Base("0")
	assert.Equal(t, 10, base)
	assert.Equal(t, "0", digits)
}
