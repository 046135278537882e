// Package ipset models Linux ipset (kernel ip_set with the ipset 7.17 tool):
// set types with kernel lookup semantics and the `ipset save`, `ipset restore`
// and `ipset list` text formats.
//
// Supported types: hash:ip, hash:net, hash:ip,port, hash:net,port,
// hash:ip,port,ip, hash:ip,port,net, hash:net,iface, bitmap:ip, bitmap:port
// and list:set, for families inet and inet6 where the kernel allows them.
// hash:ip,mark is refused with the error the reference kernel gives
// ("set type not supported"); other types are refused by name.
//
// Semantics follow the kernel:
//   - In the net types the most specific prefix present in the set decides,
//     and a nomatch entry there turns the hit into a miss. Testing a prefix
//     (not a host address) looks for that exact entry.
//   - Entries with a timeout expire on the Registry's injected clock;
//     `timeout 0` on an entry makes it permanent.
//   - Adds are normalised to the prefix's network; CIDRs and ranges given to
//     host types expand to host entries; port ranges expand.
//
// Hash tables follow the kernel's (htable.go): an element's bucket is jhash2
// of its stored bytes with the set's initval (printed by save and list; a
// set created here draws it from the Registry's seeded source), buckets
// grow and shrink two slots at a time, a userspace add into a bucket at
// bucketsize doubles hashsize (the SET target's add fails instead), and
// hash:net,iface raises bucketsize for many interfaces of one network. So
// hash members print in the kernel's bucket order, bitmap members in
// ascending order, and "Size in memory" (memsize.go) is the kernel's figure
// for every type, family and extension. It stops being exact for sets with
// timeouts once an entry has expired (the kernel's garbage collector runs
// on its own clock; it is modelled only where an add to a full set runs
// it). Not modelled: maxelem split per 1024-bucket region in tables grown
// beyond 1024 buckets, and the kernel's failure to list a bucket too
// large for one netlink message.
//
// Storage is compact (htable.go): a hash set keeps no object per element
// but records of the hashed bytes in flat arrays, extensions in side
// arrays only when the set has them, so a million members take about as
// much memory as the kernel's "Size in memory" (20-34 bytes each), and
// lookups allocate nothing. Large IPv4 net sets keep a Bloom filter of
// their (prefix, length) pairs (pfilter.go) so that a lookup skips the
// prefix lengths that cannot hold the address. IPv4 hash:ip, hash:net,
// hash:ip,port and hash:net,port sets also keep their keys whole, with
// the nomatch flag, in an open-addressing index (kindex.go), so that a
// packet lookup probes one cache line per prefix length instead of the
// bucket, its slots and the record; the buckets stay the kernel's model.
//
// A Registry is not safe for concurrent use.
package ipset
