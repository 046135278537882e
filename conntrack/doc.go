// Package conntrack models the Linux connection tracker (nf_conntrack) and
// its NAT bindings (nf_nat) for a netfilter simulator. It imports no
// packet library: callers describe each packet with [Facts].
//
// # How netfilter drives it
//
// A [Table] holds the confirmed connections of one network namespace. Per
// packet, the hooks call, in kernel priority order:
//
//	PREROUTING/OUTPUT, priority -200:  info, err := ct.Track(&facts)  // err: drop (table full)
//	nat PREROUTING/OUTPUT (-100):      if NEW and !e.NATDone(DNAT): run the nat chain;
//	                                   DNAT/REDIRECT call ct.SetupNAT(e, DNAT, range);
//	                                   then ct.SetupNullNAT(e, DNAT)
//	                                   tuple, _ = e.Translate(DNAT, info.Dir, tuple)
//	nat POSTROUTING/INPUT (+100):      same with SNAT (SNAT, MASQUERADE)
//	last hook (confirm):               err := ct.Confirm(e)                // err: drop (clash)
//
// ICMP errors come back from Track as [StateRelated] and are rewritten
// with [Entry.TranslateRelated]. Packets marked NOTRACK in the raw table
// should not be passed to Track; their state is [StateUntracked].
//
// Track returns an unconfirmed entry for the first packet of a
// connection; it is invisible to lookups until Confirm inserts it, so a
// packet dropped before the last hook leaves nothing behind, as in the
// kernel. Later packets skip the nat table and are translated from the
// entry: a NAT binding is the entry's Reply tuple differing from
// Original.Reverse().
//
// # Fidelity
//
// The protocol trackers follow the kernel (nf_conntrack_proto_tcp.c, _udp.c,
// _icmp.c) with the default sysctls ([DefaultTimeouts]):
//
//   - TCP uses the kernel's state transition table, including ignored
//     segments, mid-stream pickup with nf_conntrack_tcp_loose=1 (a bare ACK
//     creates ESTABLISHED, capped at the 300 s unacknowledged timeout until
//     a reply), ASSURED on the ACK that completes the handshake, immediate
//     destruction of a connection whose only answer is a RST, SYN
//     retransmissions that do not extend SYN_SENT, and reopening from
//     TIME_WAIT. Sequence windows are tracked per direction (tcp_in_window,
//     see window.go): segments outside them are INVALID or ignored, window
//     scaling and SACK included, unless [Config.TCPBeLiberal] or the
//     connection was picked up mid-stream (always liberal); RSTs are
//     checked against the peer's acks; repeated ACKs, unacknowledged data
//     and zero windows shorten timeouts to 300 s, as in the kernel.
//   - UDP entries time out after 30 s; a flow still active more than 2 s
//     after its first packet and replied to becomes ASSURED with 120 s. A
//     single request/response is neither [UNREPLIED] nor [ASSURED].
//   - ICMP queries are tracked by identifier with a 30 s timeout; replies,
//     or errors matching no connection, are INVALID.
//   - Other protocols use the generic tracker (600 s, addresses only).
//
// NAT port and address choice follows get_unique_tuple (see
// [Table.SetupNAT]); random choices come from the table's seeded source,
// so runs are reproducible but do not reproduce the kernel's numbers.
// When the table holds Config.Max entries (nf_conntrack_max), a new
// connection runs the kernel's early drop: the entries that are not
// ASSURED in the first of eight hash buckets from the new tuple's
// (Config.Buckets, nf_conntrack_buckets) holding any are dropped; if
// there are none the packet is dropped ([ErrTableFull]). [Table.Stats]
// counts both as `conntrack -S` does (drop, early_drop).
//
// Time is injected ([Clock]): nothing expires until the clock moves.
// Expired entries are removed lazily when a lookup meets them, and all at
// once by [Table.Expire], whose cost is that of the entries due (entries
// are filed by deadline); [Table.Entries] never returns them.
//
// # Scale
//
// A table of a million connections keeps about 235 bytes per entry: the
// 160-byte Entry, its three index slots of 12 bytes (two tuples and the
// NAT source, kept between half and three quarters full) and its expiry
// filing; an established packet's lookup costs the same at any size and
// allocates nothing. The entry keeps its tuples compactly (four IPv4
// addresses in 16 bytes) and what few entries need (IPv6 addresses,
// labels, a use count other than 1) in a second allocation, which is why
// the tuples, the deadline, the labels and the use count are read and set
// through methods: [Entry.Original], [Entry.Reply], [Entry.Tuple],
// [Entry.Expires], [Entry.Labels], [Entry.Use], and [NewEntry],
// [Entry.SetTuples], [Entry.SetExpires], [Entry.SetLabels],
// [Entry.SetUse] for entries built outside a table. [Table.All] walks the
// entries without copying them and [Format.TableOrder] lists them as a
// stream.
//
// # Text
//
// [Entry.AppendText], [Table.Dump] and [Table.WriteTo] print entries exactly
// as `conntrack -L` (conntrack-tools 1.4.7) does, with `-o extended`,
// `-o id` and accounting counters as [Format] options. [Parse],
// [ParseEntry] and [Table.Restore] read that text back, reporting errors as
// [*ParseError] with the line and token. testdata/record.sh records real
// listings for the golden tests.
//
// A Table is not safe for concurrent use.
package conntrack
