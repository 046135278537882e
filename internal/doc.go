// Package internal holds no code; it documents how the packages under it
// divide.
//
// Building blocks, imported by production code:
//
//   - jhash: the kernel's jhash2 (conntrack's NAT choice, ipset buckets,
//     the cluster match, HMARK);
//   - services: the embedded services database iptables and ipset read
//     port names from (netfilter, ipset, cmd/packetwalk);
//   - cnum: numbers as C's strtoul reads them with base 0 (netfilter,
//     ipset);
//   - probability: the exact endpoint probabilities of statistic --mode
//     random cascades (netfilter/netfiltertest, kubeproxy's tests).
//
// The test harness, under harness/, imported only by tests, by the
// test-support package examples/internal/storytest and by its own
// commands:
//
//   - harness/kerneltest: the real kernel in network namespaces
//     (namespaces, the client-node-server lab, frames built and decoded as
//     bytes, the real tools' text); it imports no other packetwalk
//     package, so that the tests of every package, netfilter's own
//     included, can use it;
//   - harness/difftest: the random differential suites against the kernel;
//   - harness/bench: the benchmarks and the benchtable command;
//   - harness/golden: the golden-file comparison with -update.
//
// TestHarnessStaysOutOfProduction (layout_test.go) keeps the division:
// production code imports nothing under harness/.
package internal
