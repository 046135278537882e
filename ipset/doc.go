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
// Member order: the kernel prints hash members in hash-bucket order, which is
// random per set (initval). This package prints hash members in insertion
// order and bitmap members in ascending order, so callers comparing with the
// real tool must compare member lines as sets.
//
// "Size in memory" depends on kernel allocator details and is not modelled:
// the printed figure is an estimate. The kernel also grows hashsize as a set
// fills; this package keeps the hashsize given at creation.
//
// A Registry is not safe for concurrent use.
package ipset
