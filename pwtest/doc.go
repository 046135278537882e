// Package pwtest helps tests check the probabilities of packet fates that
// [netfilter.Host.Explain] computes, and generate inputs for property tests.
//
// Distributions are keyed by a function of the packet's [netfilter.Result]
// chosen by the test (for a load-balanced service, [ByDestination]).
// [AssertExact] compares exact rational probabilities and [AssertWithin]
// floating-point ones within a tolerance; both report, on failure, both
// distributions side by side. [Sample] sends connections through a host as
// real traffic would, and [ChiSquare] tests the counts against the exact
// distribution. [Packets], [Rulesets], [Services] and [EndpointSets] are
// pgregory.net/rapid generators.
//
// The assertions take testify's assert.TestingT, so *testing.T and
// *rapid.T both work.
package pwtest
