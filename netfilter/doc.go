// Package netfilter models Linux netfilter as iptables 1.8.9 drives it: a
// [Ruleset] read from iptables-restore text or iptables command lines and
// printed back byte for byte as iptables-save, iptables -S and iptables -L
// print it, and a [Host] (interfaces, routes, conntrack, ipsets) that walks
// packets through the hooks and tables of a loaded ruleset and reports what
// the kernel would do to each one: a [Result].
//
// What packetwalk does not model is refused by name when the text is read
// (an unknown module, option or target is a [*ParseError] naming the line),
// never ignored, unless a restore asks for leniency ([RestoreOptions].Lenient):
// then a rule whose match or target module is unknown or unmodelled loads as
// a placeholder that never or always matches, printed back as given, marked
// in traces ([Step].Placeholder) and listed by [Ruleset.Placeholders].
//
// # A packet's way through the host
//
// A Host holds configuration (interfaces, routes, sysctls), the loaded
// rulesets with their compiled tables, and the state that outlives a
// packet: conntrack, ipsets, recent lists, nfacct and rule counters, the
// random sources and the clock. What lives only while one packet walks is
// a walk value (walk.go): the packet and the Result it fills, its
// connection and conntrack facts, the notrack, loopback and attached
// flags, its trace and deciding place, and the evaluation context of the
// table being run (evalCtx, evalctx.go), which points back to it
// (evalCtx.walk) and to the host (evalCtx.host). The functions of the path take the walk (Host.walk,
// Host.runHook, Host.runTable, Host.bindNAT, walk.translate), so a
// packet's way reads from their signatures. The Host keeps a small stack
// of walk values (Host.beginWalk, Host.endWalk), reused from packet to
// packet so that walking allocates nothing: Receive, Send and each path
// of Explain take the first, and a packet netfilter generates while
// another walks (a REJECT reply) takes the next, starting from what it
// inherits (the connection it is attached to, notrack) and leaving the
// other's untouched.
//
// [Host.Receive] (a packet arriving on an interface), [Host.Send] (a packet
// from a local process) and their allocation-free forms [Host.ReceiveTo] and
// [Host.SendTo] all end in Host.walk (hooks.go), which resets the walk's
// per-packet state and calls Host.walkHooks:
//
//   - Received: PREROUTING, then the input routing decision (Host.martian
//     for route_localnet; Host.lookup in rules.go, the routing rules and
//     tables with the packet's mark at that moment; with only the default
//     rules the IPv4 tables compiled to integer prefixes, route.go;
//     Host.validSource for rp_filter and accept_local; a failure answered
//     with ICMP unreachable), then INPUT (delivered, Result.Socket naming
//     the local socket it reaches: the one TPROXY assigned, walk.sock, or
//     the lookup of match_socket.go) or, after the TTL check, FORWARD and
//     POSTROUTING (forwarded; a packet TPROXY assigned is dropped instead). A packet failing the TTL check
//     is answered with an ICMP time exceeded (Host.timeExceededReply in
//     reject.go), sent like REJECT's replies.
//   - Sent: routing first (the source address is chosen by Host.sourceFor
//     when unset), OUTPUT, where the packet is routed again after mangle
//     when its mark, addresses or TOS changed and after nat when DNAT
//     changed its destination (Host.rerouteAfter), POSTROUTING; a packet to a local address then comes back in
//     through lo, PREROUTING and INPUT, keeping its connection.
//
// At each hook, Host.runHook runs what is registered there in the kernel's
// priority order, as Host.hookTables lists it:
//
//   - PREROUTING: raw, the conntrack lookup, mangle, nat (DNAT);
//   - INPUT: mangle, filter, nat (SNAT), security, the conntrack
//     confirmation (security before nat with the legacy backend, see
//     [HostConfig]);
//   - FORWARD: mangle, filter, security;
//   - OUTPUT: raw, the conntrack lookup, mangle, nat (DNAT), filter,
//     security;
//   - POSTROUTING: mangle, nat (SNAT, MASQUERADE), the conntrack
//     confirmation.
//
// The conntrack lookup is
// [conntrack.Table.Track], done only when some loaded rule needs conntrack
// (program.conntrack, set by needsConntrack in compile.go); the
// confirmation is [conntrack.Table.Confirm]. What conntrack is told of a
// packet (fillFacts) and what the conntrack matches see of its connection
// (walk.fillCT) are built in ctview.go.
//
// A table runs in Host.runTable (interpreter.go) over its compiled form:
// one flat array of compiled rules (crule, compile.go) per table, each
// built-in and user chain a run of rules ending in an end marker, jumps
// resolved to array indexes, a return stack for -j, none for -g. For each
// rule, crule.matchIP checks the IP header part (-s, -d, -i, -o, -p, -f),
// then Host.runMatches calls each [Match]'s match method in order; a rule
// that matches is counted, and its target either decides (ACCEPT, DROP,
// RETURN, jump, goto: the kind the compiler stored) or acts through its
// apply method (MARK, CONNMARK, NAT targets, REJECT, SET, CT...) and
// returns a verdict. Runs of rules that test only destination, protocol and
// port (KUBE-SERVICES) are indexed (compile_index.go), so a packet skips
// the rules that cannot match; the linear walk stays as the reference in a
// property test.
//
// In the nat table a NAT target only records its request (NATTarget.apply
// fills evalCtx.natReq). After the table, Host.bindNAT (nat.go) asks
// conntrack for the binding ([conntrack.Table.SetupNAT]: address and port
// choice, ranges, --random, --persistent) and walk.translate rewrites the
// packet. nat runs only for the first packet of a connection
// (walk.natApplies); later packets and replies are translated from the
// connection's bindings, as the kernel's nf_nat_packet does, and ICMP
// errors RELATED to a connection are translated without crossing nat.
//
// A DROP or REJECT ends the walk: Host.runHook fills [Result.Verdict] and
// [Result.Disposition], and REJECT's reply is built by Host.rejectReply
// (reject.go) and sent through OUTPUT and POSTROUTING by Host.sendEmitted
// in a walk of its own, attached to the rejected packet's connection and
// not traced; it lands in [Result.Emitted]. [Result.Where] names the deciding rule or policy,
// [Result.Reason] a drop outside the rules, [Result.Conn] the connection,
// and with [Host.Tracing] on, [Result.Trace] holds every step (result.go:
// Result, Step, Verdict, Disposition and the recording of the deciding place).
//
// [Host.ReceiveBridged] (bridge.go) walks a frame arriving on a port of one
// of the host's Linux bridges as br_netfilter shows it to iptables: up to
// the host through Host.walk, or bridged to another port through
// PREROUTING, FORWARD and POSTROUTING without a routing decision, with
// [Packet].PhysIn, PhysOut and Bridged set for -m physdev; [Host.Lookup]
// is the route lookup callers composing hosts (package cluster) need.
//
// [Host.Explain] runs the same walk under an oracle (explain.go) that, at
// each statistic --mode random match, follows both branches and weighs them
// by the kernel's stored 31-bit probability; it returns every [Outcome]
// with its exact probability and changes no state. [FrameHost] wraps a Host
// for raw frames (decoding, defragmentation as conntrack does it,
// refragmentation).
//
// # From text to a loaded ruleset
//
// The vocabulary of a ruleset, [Family], [TableID], [Hook], [Policy] and
// [Backend], with which tables have which built-in chains, is in
// tables_hooks.go.
//
// iptables-restore input goes through [Ruleset.Restore] (restore.go), or
// [ParseRestore] for a new ruleset, or [Host.Restore] for a host's own:
//
//  1. tokenize: appendArgs (tokenize.go) splits each line as
//     iptables-restore does (double quotes, backslash escapes inside them);
//  2. parse: parseCommandWith (command.go) reads the command (-A, -I, -N,
//     -P, ...) and parseRuleSpecWith (parse_rule.go) the rule spec: the IP
//     header options, then each -m module's options, routed by
//     ruleParser.moduleOption to the module's builder, and the -j/-g
//     target; the result is a [Rule] with its [Match] and [Target] values;
//  3. validate: at each COMMIT, Table.validateChains (validate.go) checks
//     what the kernel checks when a table is replaced (jumps to existing
//     chains, no loops, each module only in the tables and hooks it
//     allows); a table is replaced whole or not at all, and tables
//     committed before an error stay;
//  4. compile: [Host.Load] (or [Host.Restore]) calls compile
//     (compile.go), which turns every table into its flat rule array,
//     resolving jumps through validation's chain indexes, and builds the
//     dispatch indexes; with the nf_tables backend Host.load then refuses
//     user chains nested deeper than iptables-nft allows ([ErrTooDeep]).
//
// Two other input forms come in through Restore and become restore
// input first: a fragment ([RestoreOptions].Fragment, fragment.go: the
// lines of `iptables-save | grep X`, each line's table inferred from its
// chain names and target, the chains it uses declared, what was assumed
// in a [FragmentReport]) and a listing ([RestoreOptions].Listing,
// listparse.go: `iptables -L` output read row by row into rules, then as
// a fragment, kept only when every chain lists back exactly as given).
//
// Single command lines take the same path through [Ruleset.Exec] and
// [Host.Exec]. The way back is [Ruleset.AppendSave] (iptables-save),
// [Ruleset.AppendRules] (iptables -S) and [Ruleset.AppendList]
// (iptables -L with -n, -v, -x, --line-numbers).
//
// # Anatomy of a match or target module
//
// Each extension lives in one file, match_NAME.go or target_NAME.go
// (match_length.go is a short one to read first), and has four parts:
//
//   - The exported type holding the parsed options (LengthMatch,
//     MarkTarget), documented with the option syntax and its semantics.
//   - An init function that registers a module: registerMatch or
//     registerTarget with the module's name (as given to -m or -j), its
//     options (name without "--", number of arguments, whether "!" may
//     precede it, aliases), newBuilder, and optionally the families,
//     tables and hooks the kernel allows it in (checked by validate).
//   - A builder: set is called once per option with its arguments and
//     inversion, and checks and stores them; done checks the option set
//     as a whole (required options, exclusions) and returns the Match or
//     Target. Numbers and VALUE/MASK are read as iptables reads them by
//     the shared helpers of parse_value.go (parseCUint, strtoul,
//     parseMarkArg), addresses by addrparse.go, and needProto
//     (parse_rule.go) checks a protocol match's -p. Errors say what was
//     given and what was expected (badValue and mustSpecify in
//     errors.go).
//   - The methods: Module or Name; appendSave, which prints the options as
//     iptables-save does (after " -m NAME" or " -j NAME", each with a
//     leading space); appendList, the text of the last -L column; and
//     either match(c *evalCtx) bool for a match, or, for a target that acts
//     on the packet, apply(c *evalCtx) returning vContinue, vAccept or
//     vDrop. The context gives the packet (c.pkt), the conntrack view
//     (c.conn()), the packet's walk (c.walk: its connection, c.walk.cur)
//     and the host (c.host: clock, sets, recent lists, explaining). A
//     match with per-rule state implements stateful (a uint32:
//     statistic's nth counter) or extStateful (limit's token bucket), so
//     that compile gives each compiled rule its own.
//
// To add one: write the file as above; add its name to needsConntrack if
// the kernel's checkentry takes a conntrack reference; keep match and
// apply free of allocations (tests check 0 allocations per packet); add
// unit tests for parsing, printing and matching (match_batch_test.go has
// tables of spec → save → -L text), a golden ruleset in testdata/golden
// recorded from the real tools by testdata/golden/record.sh, and a
// kernel-backed test (PACKETWALK_KERNEL=1) where packets can show the
// semantics. docs/testing.md describes the suites.
//
// A match built in Go must mean what its fields say, with no state only
// the parser sets, so that a hand-built match prints and matches like the
// parsed one (handbuilt_test.go). Three ways, each match's comment says
// which: an option that may be absent is a nil pointer, so the zero value
// of a field tests nothing (TCPMatch, UDPMatch and SCTPMatch port ranges,
// built with Port and Ports; MarkMatch's Mask; the SPIs, IDs and
// SegsLeft ranges of AHMatch, ESPMatch, FragMatch and RTMatch); where a
// zero value is a real argument ("--ctproto 0"), a set of the options
// given and inverted (ConntrackMatch and SRHMatch Tests and Inverted);
// where the defaults depend on the family, a constructor (NewRecentMatch).
// A match that is one of two modules says which in a field (TTLMatch.HL,
// OptsMatch.Dst), and MultiportMatch.Proto names the protocol whose
// service names -L prints.
//
// Protocols, TCP flags and the "not modelled" error come from package
// inet, connection states, status bits and NAT kinds from package
// conntrack; a trace step's Action and a result's Reason are typed values
// whose String is their text.
package netfilter
