// Package jhash is the Linux kernel's jhash2, which conntrack's NAT address
// choice and ipset's hash buckets both use; packetwalk must hash as the
// kernel does to place entries and pick addresses as it does.
package jhash

import "math/bits"

// Words is the kernel's jhash2 (Bob Jenkins' lookup3 hashword) over k with
// the seed initval.
func Words(k []uint32, initval uint32) uint32 {
	a := 0xdeadbeef + uint32(len(k))<<2 + initval
	b, c := a, a
	for len(k) > 3 {
		a += k[0]
		b += k[1]
		c += k[2]
		a -= c
		a ^= bits.RotateLeft32(c, 4)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 6)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 8)
		b += a
		a -= c
		a ^= bits.RotateLeft32(c, 16)
		c += b
		b -= a
		b ^= bits.RotateLeft32(a, 19)
		a += c
		c -= b
		c ^= bits.RotateLeft32(b, 4)
		b += a
		k = k[3:]
	}
	switch len(k) {
	case 0:
		return c
	case 3:
		c += k[2]
		fallthrough
	case 2:
		b += k[1]
		fallthrough
	case 1:
		a += k[0]
	}
	c ^= b
	c -= bits.RotateLeft32(b, 14)
	a ^= c
	a -= bits.RotateLeft32(c, 11)
	b ^= a
	b -= bits.RotateLeft32(a, 25)
	c ^= b
	c -= bits.RotateLeft32(b, 16)
	a ^= c
	a -= bits.RotateLeft32(c, 4)
	b ^= a
	b -= bits.RotateLeft32(a, 14)
	c ^= b
	c -= bits.RotateLeft32(b, 24)
	return c
}
