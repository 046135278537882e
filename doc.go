// Package packetwalk is a pure-Go model of Linux netfilter, faithful enough
// to stand in for the kernel in unit tests of iptables rules and to show,
// step by step, where a packet goes on a Kubernetes node.
//
// The module has no code at its root; its packages are:
//
//   - netfilter: the ruleset model (iptables-save and iptables-restore text,
//     iptables -S and -L views), the matches and targets, and Host, which
//     sends packets through the hooks below; its package documentation is
//     the map of the engine.
//   - inet: the vocabulary the packages share (protocol numbers and their
//     names, TCP flags, ErrNotModelled: what every package's
//     ErrNotModelled means, for errors.Is); it imports nothing from the
//     module.
//   - conntrack: connection tracking and NAT bindings (a leaf package).
//   - ipset: IP sets and their text formats (a leaf package).
//
// The leaf packages conntrack and ipset import no sibling domain package
// (only inet and internal helpers); netfilter builds on both, and the
// packages above it on netfilter. layering_test.go checks the rule.
//   - kubeproxy: the ruleset kube-proxy (iptables mode) writes for a
//     cluster's Services and EndpointSlices.
//   - agents: the rules and sets of the other node agents (ip-masq-agent,
//     Calico natOutgoing, Docker's bridge network).
//   - cluster: hosts composed into a network (pods, veth links, bridges
//     with br_netfilter, cloud routers and route tables, a load balancer
//     with health probes, an Internet gateway with SNAT, IP-in-IP and
//     VXLAN tunnels); walks across it hop by hop, replies back through
//     every device's state, and Explain's exact outcomes of the whole path.
//   - render: a table of a ruleset drawn as a Graphviz graph, with a traced
//     packet's path; a cluster walk drawn hop by hop.
//   - netfilter/netfiltertest: helpers for tests of rules, importing no
//     Kubernetes package: a tracing host on a manual clock, a packet's
//     reply, whether a rule matched, a trace printer, probability
//     assertions over Host.Explain, and generators of packets and
//     rulesets for property tests.
//   - kubeproxy/kubeproxytest: generators of the Services and
//     EndpointSlices kube-proxy reads, for property tests.
//   - cmd/packetwalk: the command line over node snapshots.
//   - examples/aks-kubenet, examples/calico-masquerade,
//     examples/day-in-the-life, examples/localhost-nodeport,
//     examples/nodeport, examples/virtual-node: runnable walks
//     (go run ./examples/NAME), each asserting what it teaches.
//
// Under internal/ are the harness that drives the real kernel in network
// namespaces (kerneltest), the differential suites built on it (difftest),
// the benchmarks (bench), exact statistic probabilities (probability) and
// the kernel's jhash (jhash); docs/testing.md describes the test suites.
//
// A packet received on an interface, or sent by a local process, crosses
// the hooks in this order; each hook runs its tables by the kernel's
// priorities (raw −300, the conntrack lookup −200, mangle −150, nat
// destination −100, filter 0, security 50 with iptables-legacy or 150 with
// iptables-nft, nat source 100, the conntrack confirmation last on INPUT
// and POSTROUTING), so the INPUT order drawn below is iptables-nft's
// (legacy runs security before nat):
//
//	frame ─► PREROUTING ─► routing ──┬─► INPUT ─► local process
//	         raw, mangle,  decision  │   mangle, filter, nat, security
//	         nat (DNAT)              │                  │
//	                                 │                  ▼
//	                                 │                OUTPUT  raw, mangle,
//	                                 │                  │     nat (DNAT), filter,
//	                                 ▼                  │     security, reroute
//	                              FORWARD               │
//	                              mangle, filter,       │
//	                              security              │
//	                                 │                  │
//	                                 ▼                  ▼
//	                              POSTROUTING  mangle, nat (SNAT, MASQUERADE) ─► frame
//
// A packet a local process sends to one of the host's own addresses goes
// OUTPUT → POSTROUTING and comes back in on lo through PREROUTING and INPUT,
// keeping its connection. The nat table sees only the first packet of a
// connection; conntrack translates the rest, in both directions.
package packetwalk
