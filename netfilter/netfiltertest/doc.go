// Package netfiltertest helps tests of firewall rules written against
// [netfilter.Host]: helpers to build and follow packets, probability
// assertions over [netfilter.Host.Explain], and generators for property
// tests. It imports no Kubernetes package; the generators of Services and
// EndpointSlices are in package kubeproxytest, beside kubeproxy.
//
// Following packets: [NewHost] returns a tracing host on a manual clock
// (starting at [Epoch]), so that conntrack timeouts are the same on every
// run; [Reply] builds the answer to a packet and [Wire] what the next host
// receives of one that left; [Matched] tells whether a rule matched a
// packet, from the Result's trace; [WriteTrace] prints a packet's walk (the
// rules that matched, how the packet changed, its fate) and [Addrs] a
// packet's addresses. Build packets with [netfilter.TCP], [netfilter.UDP]
// and [netfilter.ICMP].
//
// Probabilities: distributions are keyed by a function of the packet's
// [netfilter.Result] chosen by the test (for a load-balanced service,
// [ByDestination]). [AssertExact] compares exact rational probabilities and
// [AssertWithin] floating-point ones within a tolerance; both report, on
// failure, both distributions side by side. [Sample] sends connections
// through a host as real traffic would, and [ChiSquare] tests the counts
// against the exact distribution.
//
// Property tests: [Packets] and [Rulesets] are pgregory.net/rapid
// generators of well-formed packets and of iptables-restore documents that
// load.
//
// The helpers that can fail a test take testify's assert.TestingT, so
// *testing.T and *rapid.T both work.
package netfiltertest
