// Package difftest compares packetwalk's netfilter simulator with the Linux
// kernel packet by packet. Its tests generate random rulesets and packets,
// load each ruleset both into a [netfilter.Host] and into the node of a
// [kerneltest.Lab], send the same packets through both and compare where
// every packet went, what it looked like when it arrived, and every rule and
// policy counter of `iptables-save -c`.
//
// The kernel tests run only with PACKETWALK_KERNEL=1 (see kerneltest.Require);
// the generator's own tests always run.
//
// # What the kernel does that netfilter does not
//
// The node's IP stack answers packets delivered to it: a TCP segment to a
// closed port gets a reset, a UDP datagram an ICMP port unreachable, an echo
// request an echo reply. Those answers are locally generated, so they cross
// raw/mangle/filter OUTPUT and mangle POSTROUTING and bump their counters.
// The comparison models them (see stackReply) and sends each one through
// the simulated host's OUTPUT path, so that every counter can be compared;
// REJECT's own replies, which the kernel also sends through OUTPUT, are sent
// the same way. Rules that would see those replies differently in the two
// (conntrack state: the kernel attaches a REJECT reset to the rejected
// packet's connection as RELATED) are kept out of chains reachable from
// OUTPUT and POSTROUTING by the generator.
//
// # One runner
//
// Every suite drawn by rapid is a diffSuite run by runSuite
// (runner_test.go): a diffSuite says how to make its lab, draw a case and
// run it in both worlds, and what it counts for the closing line of
// figures. The runner spreads the cases over PACKETWALK_DIFF_LABS labs,
// fails on the first divergence with the case and its transcript, and
// rapid shrinks it and prints the seed that replays it (docs/testing.md).
// A case runs in the kernel and in packetwalk step by step rather than one
// after the other, because the model takes over choices the kernel makes
// at random (NAT ports) before the next packet. The steps runs share are
// there too: loaded (both worlds took or refused the input), counterDiffs
// and savesWithCounters. The grammar differential, which batches 60
// numbered cases of a seed into one ruleset and reports every divergence,
// has a driver of its own (below).
//
// # Rules from the full grammar
//
// The generators above draw only what packetwalk implements. The grammar
// differential (grammar_gen_test.go, grammar_diff_test.go) writes rules
// from the whole option grammar of iptables 1.8.9 for every registered
// module (recorded in testdata/grammar by its record.sh), spellings,
// abbreviations, odd and invalid values included, and checks that the
// kernel and packetwalk accept and refuse the same ones, print them the
// same and give packets the same fates. TestKernelGrammar prints its seed;
// PACKETWALK_GRAMMAR_SEED and PACKETWALK_GRAMMAR_CASE replay a case.
// Divergence classes whose fix belongs elsewhere are listed there and
// skipped until fixed.
//
// [netfilter.Host]: github.com/packetwalk/packetwalk/netfilter.Host
// [kerneltest.Lab]: github.com/packetwalk/packetwalk/internal/harness/kerneltest.Lab
package difftest
