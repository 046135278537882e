package jhash

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// The kernel-backed suites check these hashes indirectly (conntrack's SNAT
// address choice in internal/harness/difftest, ipset's bucket order and Size in
// memory in ipset/kernel_test.go); the values here pin them, each length
// class of the final mix included.
func TestWords(t *testing.T) {
	for _, c := range []struct {
		k       []uint32
		initval uint32
		want    uint32
	}{
		{nil, 0, 0xdeadbeef}, // no words: the seed alone
		{[]uint32{1}, 0, 1923623579},
		{[]uint32{1, 2, 3, 4}, 0, 1716064838},
		{[]uint32{0xc0a80a02, 0, 0, 0}, 0x1234, 3432008177},
		{[]uint32{1, 2, 3, 4, 5, 6, 7, 8, 9}, 7, 1354146734},
	} {
		assert.Equal(t, c.want, Words(c.k, c.initval), "%v seed %#x", c.k, c.initval)
	}
}
