package netfilter

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lastRule runs "-A CHAIN spec" (creating the user chain T when CHAIN is T)
// and returns the rule it added.
func lastRule(t *testing.T, f Family, table, chain, spec string) *Rule {
	t.Helper()
	rs := NewRuleset(f)
	if chain == "T" {
		require.NoError(t, rs.Exec("-t "+table+" -N T"))
	}
	require.NoError(t, rs.Exec("-t "+table+" -A "+chain+" "+spec))
	tid, err := ParseTable(table)
	require.NoError(t, err)
	rules := rs.Table(tid).Chain(chain).Rules
	require.NotEmpty(t, rules)
	return rules[len(rules)-1]
}

func listText(r *Rule, numeric bool) string {
	var b []byte
	for _, m := range r.Matches {
		b = m.appendList(b, numeric)
	}
	return strings.TrimPrefix(string(b), " ")
}

// TestMatchPrinting checks iptables-save, -L -n and -L forms. Every vector
// was recorded from iptables 1.8.9 (nf_tables) in a network namespace with
// "iptables -A CHAIN SPEC; iptables -S CHAIN; iptables -L CHAIN [-n]".
func TestMatchPrinting(t *testing.T) {
	cases := []struct {
		chain, in string
		save      string // after "-A CHAIN"
		listN     string // last column of -L -n
		list      string // last column of -L ("" means same as listN)
	}{
		// comment
		{"T", "-m comment --comment x", "-m comment --comment x", "/* x */", ""},
		{"T", `-m comment --comment "a b"`, `-m comment --comment "a b"`, "/* a b */", ""},
		{"T", `-m comment --comment ""`, `-m comment --comment ""`, "/*  */", ""},
		{"T", `-m comment --comment default/web:http`, `-m comment --comment "default/web:http"`, "/* default/web:http */", ""},
		// mark
		{"T", "-m mark --mark 0x50", "-m mark --mark 0x50", "mark match 0x50", ""},
		{"T", "-m mark --mark 0x50/0xffffffff", "-m mark --mark 0x50", "mark match 0x50", ""},
		{"T", "-m mark ! --mark 0x4000/0x4000", "-m mark ! --mark 0x4000/0x4000", "mark match ! 0x4000/0x4000", ""},
		{"T", "-m mark --mark 80/0xff", "-m mark --mark 0x50/0xff", "mark match 0x50/0xff", ""},
		{"T", "-m mark --mark 0", "-m mark --mark 0x0", "mark match 0x0", ""},
		{"T", "-m mark --mark 010", "-m mark --mark 0x8", "mark match 0x8", ""},
		{"T", "-m mark --mark 0x1/0", "-m mark --mark 0x1/0x0", "mark match 0x1/0x0", ""},
		{"T", "-m mark --mark 0xffffffff", "-m mark --mark 0xffffffff", "mark match 0xffffffff", ""},
		// multiport
		{"T", "-p tcp -m multiport --dports 80,443,8000:8080", "-p tcp -m multiport --dports 80,443,8000:8080", "multiport dports 80,443,8000:8080", "multiport dports http,https,8000:http-alt"},
		{"T", "-p tcp -m multiport ! --dports 80,443", "-p tcp -m multiport ! --dports 80,443", "multiport dports  !80,443", "multiport dports  !http,https"},
		{"T", "-p udp -m multiport --sports 53,domain", "-p udp -m multiport --sports 53,53", "multiport sports 53,53", "multiport sports domain,domain"},
		{"T", "-p tcp -m multiport --ports 22,80:90", "-p tcp -m multiport --ports 22,80:90", "multiport ports 22,80:90", "multiport ports ssh,http:90"},
		{"T", "-p tcp -m multiport ! --ports 22", "-p tcp -m multiport ! --ports 22", "multiport ports  !22", "multiport ports  !ssh"},
		{"T", "-p sctp -m multiport --dports 1,2,3", "-p sctp -m multiport --dports 1,2,3", "multiport dports 1,2,3", ""},
		{"T", "-p dccp -m multiport --dports 1", "-p dccp -m multiport --dports 1", "multiport dports 1", ""},
		{"T", "-p udplite -m multiport --dports 1", "-p udplite -m multiport --dports 1", "multiport dports 1", ""},
		{"T", "-p tcp -m multiport --destination-ports 80", "-p tcp -m multiport --dports 80", "multiport dports 80", "multiport dports http"},
		{"T", "-p tcp -m multiport --source-ports 80", "-p tcp -m multiport --sports 80", "multiport sports 80", "multiport sports http"},
		{"T", "-p tcp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", "-p tcp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15",
			"multiport dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15", "multiport dports tcpmux,2,3,4,5,6,echo,8,discard,10,systat,12,daytime,14,netstat"},
		{"T", "-p tcp -m multiport --dports 1:2,3:4,5:6,7:8,9:10,11:12,13:14,15", "-p tcp -m multiport --dports 1:2,3:4,5:6,7:8,9:10,11:12,13:14,15",
			"multiport dports 1:2,3:4,5:6,7:8,9:10,11:12,13:14,15", "multiport dports tcpmux:2,3:4,5:6,echo:8,discard:10,systat:12,daytime:14,netstat"},
		{"T", "-p tcp -m multiport --dports 0", "-p tcp -m multiport --dports 0", "multiport dports 0", ""},
		// icmp
		{"T", "-p icmp -m icmp --icmp-type 8", "-p icmp -m icmp --icmp-type 8", "icmptype 8", "icmp echo-request"},
		{"T", "-p icmp --icmp-type echo-request", "-p icmp -m icmp --icmp-type 8", "icmptype 8", "icmp echo-request"},
		{"T", "-p icmp --icmp-type echo-req", "-p icmp -m icmp --icmp-type 8", "icmptype 8", "icmp echo-request"},
		{"T", "-p icmp --icmp-type ECHO-REQUEST", "-p icmp -m icmp --icmp-type 8", "icmptype 8", "icmp echo-request"},
		{"T", "-p icmp --icmp-type ping", "-p icmp -m icmp --icmp-type 8", "icmptype 8", "icmp echo-request"},
		{"T", "-p icmp --icmp-type pong", "-p icmp -m icmp --icmp-type 0", "icmptype 0", "icmp echo-reply"},
		{"T", "-p icmp --icmp-type 0x8", "-p icmp -m icmp --icmp-type 8", "icmptype 8", "icmp echo-request"},
		{"T", "-p icmp --icmp-type 3/3", "-p icmp -m icmp --icmp-type 3/3", "icmptype 3 code 3", "icmp port-unreachable"},
		{"T", "-p icmp ! --icmp-type port-unreachable", "-p icmp -m icmp ! --icmp-type 3/3", "icmp !type 3 code 3", "icmp !port-unreachable"},
		{"T", "-p icmp --icmp-type any", "-p icmp -m icmp --icmp-type any", "icmptype 255", "icmp any"},
		{"T", "-p icmp ! --icmp-type any", "-p icmp -m icmp ! --icmp-type any", "icmp !type 255", "icmp !any"},
		{"T", "-p icmp --icmp-type 255", "-p icmp -m icmp --icmp-type any", "icmptype 255", "icmp any"},
		{"T", "-p icmp --icmp-type 255/0", "-p icmp -m icmp --icmp-type any", "icmptype 255 code 0", ""},
		{"T", "-p icmp --icmp-type 3", "-p icmp -m icmp --icmp-type 3", "icmptype 3", "icmp destination-unreachable"},
		{"T", "-p icmp --icmp-type 5/1", "-p icmp -m icmp --icmp-type 5/1", "icmptype 5 code 1", "icmp host-redirect"},
		{"T", "-p icmp --icmp-type 11/0", "-p icmp -m icmp --icmp-type 11/0", "icmptype 11 code 0", "icmp ttl-zero-during-transit"},
		{"T", "-p icmp --icmp-type 12/2", "-p icmp -m icmp --icmp-type 12/2", "icmptype 12 code 2", ""},
		{"T", "-p icmp --icmp-type 8/0", "-p icmp -m icmp --icmp-type 8/0", "icmptype 8 code 0", ""},
		{"T", "-p icmp --icmp-type 200/7", "-p icmp -m icmp --icmp-type 200/7", "icmptype 200 code 7", ""},
		// sctp
		{"T", "-p sctp --sport 1 --dport 2:3", "-p sctp -m sctp --sport 1 --dport 2:3", "sctp spt:1 dpts:2:3", ""},
		{"T", "-p sctp -m sctp ! --sport 5 ! --dport 6", "-p sctp -m sctp ! --sport 5 ! --dport 6", "sctp spt:!5 dpt:!6", ""},
		{"T", "-p sctp --sport 0:100", "-p sctp -m sctp --sport 0:100", "sctp spts:0:100", ""},
		{"T", "-p sctp --source-port 10 --destination-port 20", "-p sctp -m sctp --sport 10 --dport 20", "sctp spt:10 dpt:20", ""},
		{"T", "-p sctp -m sctp", "-p sctp -m sctp", "sctp", ""},
		{"T", "-p sctp --chunk-types any INIT,DATA", "-p sctp -m sctp --chunk-types any DATA,INIT", "sctp any 0x0000,0x0001", "sctp any DATA,INIT"},
		{"T", "-p sctp --chunk-types ANY data:ie", "-p sctp -m sctp --chunk-types any DATA:ie", "sctp any 0x0000:ie", "sctp any DATA:ie"},
		{"T", "-p sctp -m sctp ! --chunk-types all INIT", "-p sctp -m sctp ! --chunk-types all INIT", "sctp ! all 0x0001", "sctp ! all INIT"},
		{"T", "-p sctp -m sctp --chunk-types only DATA:Be", "-p sctp -m sctp --chunk-types only DATA:Be", "sctp only 0x0000:Be", "sctp only DATA:Be"},
		{"T", "-p sctp --chunk-types any DATA:I,ABORT:T,SHUTDOWN_COMPLETE:t,INIT:-", "-p sctp -m sctp --chunk-types any DATA:I,INIT:-,ABORT:T,SHUTDOWN_COMPLETE:t",
			"sctp any 0x0000:I,0x0001:-,0x0006:T,0x000E:t", "sctp any DATA:I,INIT:-,ABORT:T,SHUTDOWN_COMPLETE:t"},
		{"T", "-p sctp --chunk-types all ALL", "-p sctp -m sctp --chunk-types all ALL", "sctp all ALL", ""},
		{"T", "-p sctp --chunk-types any none", "-p sctp -m sctp --chunk-types any NONE", "sctp any NONE", ""},
		{"T", "-p sctp --chunk-types any DATA:BEIU", "-p sctp -m sctp --chunk-types any DATA:IUBE", "sctp any 0x0000:IUBE", "sctp any DATA:IUBE"},
		{"T", "-p sctp --chunk-types any DATA:-", "-p sctp -m sctp --chunk-types any DATA:-", "sctp any 0x0000:-", "sctp any DATA:-"},
		{"T", "-p sctp --chunk-types any ABORT:T,SHUTDOWN_COMPLETE:T", "-p sctp -m sctp --chunk-types any ABORT:T,SHUTDOWN_COMPLETE:T", "sctp any 0x0006:T,0x000E:T", "sctp any ABORT:T,SHUTDOWN_COMPLETE:T"},
		{"T", "-p sctp --chunk-types any DATA:I,ABORT:T,SHUTDOWN_COMPLETE:t,I_DATA:E,DATA:U", "-p sctp -m sctp --chunk-types any DATA:IU,ABORT:T,SHUTDOWN_COMPLETE:t,I_DATA",
			"sctp any 0x0000:IU,0x0006:T,0x000E:t,0x0040", "sctp any DATA:IU,ABORT:T,SHUTDOWN_COMPLETE:t,I_DATA"},
		{"T", "-p sctp --chunk-types any ASCONF,ASCONF_ACK,FORWARD_TSN,I_FORWARD_TSN,ECN_CWR", "-p sctp -m sctp --chunk-types any ECN_CWR,ASCONF_ACK,FORWARD_TSN,ASCONF,I_FORWARD_TSN",
			"sctp any 0x000D,0x0080,0x00C0,0x00C1,0x00C2", "sctp any ECN_CWR,ASCONF_ACK,FORWARD_TSN,ASCONF,I_FORWARD_TSN"},
		{"T", "-p sctp --sport 5 ! --chunk-types only DATA:B,SACK --dport 7", "-p sctp -m sctp --sport 5 --dport 7 ! --chunk-types only DATA:B,SACK", "sctp spt:5 dpt:7 ! only 0x0000:B,0x0003", "sctp spt:5 dpt:7 ! only DATA:B,SACK"},
		// iprange
		{"T", "-m iprange --src-range 10.0.0.1-10.0.0.5", "-m iprange --src-range 10.0.0.1-10.0.0.5", "source IP range 10.0.0.1-10.0.0.5", ""},
		{"T", "-m iprange ! --src-range 10.0.0.1-10.0.0.5 ! --dst-range 10.1.0.0-10.2.0.0", "-m iprange ! --src-range 10.0.0.1-10.0.0.5 ! --dst-range 10.1.0.0-10.2.0.0",
			"source IP range ! 10.0.0.1-10.0.0.5 destination IP range ! 10.1.0.0-10.2.0.0", ""},
		{"T", "-m iprange --dst-range 10.0.0.7", "-m iprange --dst-range 10.0.0.7-10.0.0.7", "destination IP range 10.0.0.7-10.0.0.7", ""},
		{"T", "-m iprange --src-range 10.0.0.5-10.0.0.1", "-m iprange --src-range 10.0.0.5-10.0.0.1", "source IP range 10.0.0.5-10.0.0.1", ""},
		// addrtype
		{"T", "-m addrtype --src-type UNICAST", "-m addrtype --src-type UNICAST", "ADDRTYPE match src-type UNICAST", ""},
		{"T", "-m addrtype --src-type local", "-m addrtype --src-type LOCAL", "ADDRTYPE match src-type LOCAL", ""},
		{"T", "-m addrtype ! --dst-type LOCAL,BROADCAST", "-m addrtype ! --dst-type LOCAL,BROADCAST", "ADDRTYPE match dst-type !LOCAL,BROADCAST", ""},
		{"T", "-m addrtype --src-type UNSPEC,UNICAST,LOCAL,BROADCAST,ANYCAST,MULTICAST,BLACKHOLE,UNREACHABLE,PROHIBIT,THROW,NAT,XRESOLVE",
			"-m addrtype --src-type UNSPEC,UNICAST,LOCAL,BROADCAST,ANYCAST,MULTICAST,BLACKHOLE,UNREACHABLE,PROHIBIT,THROW,NAT,XRESOLVE",
			"ADDRTYPE match src-type UNSPEC,UNICAST,LOCAL,BROADCAST,ANYCAST,MULTICAST,BLACKHOLE,UNREACHABLE,PROHIBIT,THROW,NAT,XRESOLVE", ""},
		{"INPUT", "-m addrtype --dst-type LOCAL --limit-iface-in", "-m addrtype --dst-type LOCAL --limit-iface-in", "ADDRTYPE match dst-type LOCAL limit-in", ""},
		{"T", "-m addrtype --limit-iface-in --src-type LOCAL", "-m addrtype --src-type LOCAL --limit-iface-in", "ADDRTYPE match src-type LOCAL limit-in", ""},
		{"OUTPUT", "-m addrtype ! --src-type LOCAL --limit-iface-out", "-m addrtype ! --src-type LOCAL --limit-iface-out", "ADDRTYPE match src-type !LOCAL limit-out", ""},
		{"T", "-m addrtype --src-type LOCAL ! --dst-type UNICAST --limit-iface-in", "-m addrtype --src-type LOCAL ! --dst-type UNICAST --limit-iface-in",
			"ADDRTYPE match src-type LOCAL dst-type !UNICAST limit-in", ""},
		// statistic (docs/kernel-notes.md, "statistic: probability quantisation")
		{"T", "-m statistic --mode random --probability 0.3333333333", "-m statistic --mode random --probability 0.33333333349", "statistic mode random probability 0.33333333349", ""},
		{"T", "-m statistic --mode random ! --probability 0.25", "-m statistic --mode random ! --probability 0.25000000000", "statistic mode random ! probability 0.25000000000", ""},
		{"T", "-m statistic --mode random --probability 1e-1", "-m statistic --mode random --probability 0.10000000009", "statistic mode random probability 0.10000000009", ""},
		{"T", "-m statistic --mode nth --every 3 --packet 1", "-m statistic --mode nth --every 3 --packet 1", "statistic mode nth every 3 packet 1", ""},
		{"T", "-m statistic --mode nth ! --every 5 --packet 0", "-m statistic --mode nth ! --every 5 --packet 0", "statistic mode nth ! every 5", ""},
		{"T", "-m statistic --mode nth --every 4294967295 --packet 0", "-m statistic --mode nth --every 4294967295 --packet 0", "statistic mode nth every 4294967295", ""},
		// length
		{"T", "-m length --length 100", "-m length --length 100", "length 100", ""},
		{"T", "-m length ! --length 0:100", "-m length ! --length 0:100", "length !0:100", ""},
		{"T", "-m length --length 100:", "-m length --length 100:65535", "length 100:65535", ""},
		{"T", "-m length --length :100", "-m length --length 0:100", "length 0:100", ""},
		{"T", "-m length --length :", "-m length --length 0:65535", "length 0:65535", ""},
		{"T", "-m length --length 100:50", "-m length --length 100:50", "length 100:50", ""},
		{"T", "-m length --length 50:50", "-m length --length 50", "length 50", ""},
		{"T", "-m length --length 0x10", "-m length --length 16", "length 16", ""},
		// limit
		{"T", "-m limit", "-m limit --limit 3/hour", "limit: avg 3/hour burst 5", ""},
		{"T", "-m limit --limit 5/sec --limit-burst 10", "-m limit --limit 5/sec --limit-burst 10", "limit: avg 5/sec burst 10", ""},
		{"T", "-m limit --limit 3/minute", "-m limit --limit 3/min", "limit: avg 3/min burst 5", ""},
		{"T", "-m limit --limit 3/day", "-m limit --limit 3/day", "limit: avg 3/day burst 5", ""},
		{"T", "-m limit --limit 7/s", "-m limit --limit 7/sec", "limit: avg 7/sec burst 5", ""},
		{"T", "-m limit --limit 2", "-m limit --limit 2/sec", "limit: avg 2/sec burst 5", ""},
		{"T", "-m limit --limit 2/mi", "-m limit --limit 2/min", "limit: avg 2/min burst 5", ""},
		{"T", "-m limit --limit 1/d", "-m limit --limit 1/day", "limit: avg 1/day burst 5", ""},
		{"T", "-m limit --limit 90/min", "-m limit --limit 90/min", "limit: avg 90/min burst 5", ""},
		{"T", "-m limit --limit 60/min", "-m limit --limit 1/sec", "limit: avg 1/sec burst 5", ""},
		{"T", "-m limit --limit 120/min", "-m limit --limit 2/sec", "limit: avg 2/sec burst 5", ""},
		{"T", "-m limit --limit 24/day", "-m limit --limit 1/hour", "limit: avg 1/hour burst 5", ""},
		{"T", "-m limit --limit 86401/day", "-m limit --limit 1/sec", "limit: avg 1/sec burst 5", ""},
		{"T", "-m limit --limit 10000/sec", "-m limit --limit 10000/sec", "limit: avg 10000/sec burst 5", ""},
		{"T", "-m limit --limit-burst 0", "-m limit --limit 3/hour", "limit: avg 3/hour burst 5", ""},
		{"T", "-m limit --limit-burst 10000", "-m limit --limit 3/hour --limit-burst 10000", "limit: avg 3/hour burst 10000", ""},
		// pkttype
		{"T", "-m pkttype --pkt-type unicast", "-m pkttype --pkt-type unicast", "PKTTYPE = unicast", ""},
		{"T", "-m pkttype --pkt-type UNICAST", "-m pkttype --pkt-type unicast", "PKTTYPE = unicast", ""},
		{"T", "-m pkttype --pkt-type host", "-m pkttype --pkt-type unicast", "PKTTYPE = unicast", ""},
		{"T", "-m pkttype ! --pkt-type broadcast", "-m pkttype ! --pkt-type broadcast", "PKTTYPE != broadcast", ""},
		{"T", "-m pkttype --pkt-type multicast", "-m pkttype --pkt-type multicast", "PKTTYPE = multicast", ""},
		{"T", "-m pkttype --pkt-type otherhost", "-m pkttype --pkt-type otherhost", "PKTTYPE = otherhost", ""},
		{"T", "-m pkttype --pkt-type Multicast", "-m pkttype --pkt-type multicast", "PKTTYPE = multicast", ""},
		{"T", "-p tcp -m multiport --dports 0x50", "-p tcp -m multiport --dports 80", "multiport dports 80", "multiport dports http"},
		{"T", "-m limit --limit 5/SEC", "-m limit --limit 5/sec", "limit: avg 5/sec burst 5", ""},
		{"T", "-m limit --limit 5x/sec", "-m limit --limit 5/sec", "limit: avg 5/sec burst 5", ""},
		{"T", "-m limit --limit-burst 0x10", "-m limit --limit 3/hour --limit-burst 16", "limit: avg 3/hour burst 16", ""},
		{"T", "-m length --length 010", "-m length --length 8", "length 8", ""},
		{"T", "-m statistic --mode random --probability 5e-1", "-m statistic --mode random --probability 0.50000000000", "statistic mode random probability 0.50000000000", ""},
		{"T", "-m statistic --mode nth --every 0x3 --packet 0x1", "-m statistic --mode nth --every 3 --packet 1", "statistic mode nth every 3 packet 1", ""},
		{"T", "-m mark --mark 0X50", "-m mark --mark 0x50", "mark match 0x50", ""},
		{"OUTPUT", "-m owner --uid-owner 0x10", "-m owner --uid-owner 16", "owner UID match 16", ""},
		{"OUTPUT", "-m owner --uid-owner 010", "-m owner --uid-owner 8", "owner UID match 8", "owner UID match mail"},
		{"OUTPUT", `-m owner --uid-owner " 5"`, "-m owner --uid-owner 5", "owner UID match 5", "owner UID match games"},
		{"T", "-m comment --comment " + strings.Repeat("a", 256), "-m comment --comment " + strings.Repeat("a", 255), "/* " + strings.Repeat("a", 255) + " */", ""},
		// mac
		{"INPUT", "-m mac --mac-source 00:11:22:aa:BB:cc", "-m mac --mac-source 00:11:22:aa:bb:cc", "MAC 00:11:22:aa:bb:cc", ""},
		{"INPUT", "-m mac ! --mac-source 00:11:22:aa:BB:cc", "-m mac ! --mac-source 00:11:22:aa:bb:cc", "MAC ! 00:11:22:aa:bb:cc", ""},
		{"T", "-m mac --mac-source 0:1:2:3:4:5", "-m mac --mac-source 00:01:02:03:04:05", "MAC 00:01:02:03:04:05", ""},
		// owner
		{"OUTPUT", "-m owner --uid-owner 0", "-m owner --uid-owner 0", "owner UID match 0", "owner UID match root"},
		{"OUTPUT", "-m owner --uid-owner root", "-m owner --uid-owner 0", "owner UID match 0", "owner UID match root"},
		{"OUTPUT", "-m owner --gid-owner root", "-m owner --gid-owner 0", "owner GID match 0", "owner GID match root"},
		{"OUTPUT", "-m owner ! --uid-owner 1000-2000 --gid-owner 5 --socket-exists", "-m owner --socket-exists ! --uid-owner 1000-2000 --gid-owner 5",
			"owner socket exists ! owner UID match 1000-2000 owner GID match 5", "owner socket exists ! owner UID match 1000-2000 owner GID match tty"},
		{"OUTPUT", "-m owner ! --socket-exists", "-m owner ! --socket-exists", "! owner socket exists", ""},
		{"OUTPUT", "-m owner --gid-owner 5 --suppl-groups", "-m owner --gid-owner 5 --suppl-groups", "owner GID match 5 incl. suppl. groups", "owner GID match tty incl. suppl. groups"},
		{"OUTPUT", "-m owner --uid-owner 1000-1000", "-m owner --uid-owner 1000", "owner UID match 1000", ""},
		{"OUTPUT", "-m owner --uid-owner 1", "-m owner --uid-owner 1", "owner UID match 1", "owner UID match daemon"},
		{"OUTPUT", "-m owner --uid-owner 65534", "-m owner --uid-owner 65534", "owner UID match 65534", "owner UID match nobody"},
		{"OUTPUT", "-m owner --uid-owner 4294967294", "-m owner --uid-owner 4294967294", "owner UID match 4294967294", ""},
		{"OUTPUT", "-m owner --gid-owner 1000-2000", "-m owner --gid-owner 1000-2000", "owner GID match 1000-2000", ""},
		{"OUTPUT", "-m owner --uid-owner 0 --gid-owner 0 --socket-exists", "-m owner --socket-exists --uid-owner 0 --gid-owner 0",
			"owner socket exists owner UID match 0 owner GID match 0", "owner socket exists owner UID match root owner GID match root"},
		// physdev
		{"T", "-m physdev --physdev-in eth0", "-m physdev --physdev-in eth0", "PHYSDEV match --physdev-in eth0", ""},
		{"T", "-m physdev ! --physdev-in eth+ --physdev-is-bridged", "-m physdev ! --physdev-in eth+ --physdev-is-bridged", "PHYSDEV match ! --physdev-in eth+ --physdev-is-bridged", ""},
		{"FORWARD", "-m physdev --physdev-out eth1 ! --physdev-is-in --physdev-is-out", "-m physdev ! --physdev-is-in --physdev-is-out --physdev-out eth1",
			"PHYSDEV match ! --physdev-is-in --physdev-is-out --physdev-out eth1", ""},
		{"T", "-m physdev --physdev-in eth0 --physdev-out eth1 --physdev-is-in --physdev-is-out --physdev-is-bridged",
			"-m physdev --physdev-is-in --physdev-in eth0 --physdev-is-out --physdev-out eth1 --physdev-is-bridged",
			"PHYSDEV match --physdev-is-in --physdev-in eth0 --physdev-is-out --physdev-out eth1 --physdev-is-bridged", ""},
		{"T", "-m physdev ! --physdev-is-bridged", "-m physdev ! --physdev-is-bridged", "PHYSDEV match ! --physdev-is-bridged", ""},
		{"OUTPUT", "-m physdev --physdev-out eth1 --physdev-is-bridged", "-m physdev --physdev-out eth1 --physdev-is-bridged", "PHYSDEV match --physdev-out eth1 --physdev-is-bridged", ""},
		// helper
		{"T", "-m helper --helper ftp", "-m helper --helper ftp", `helper match "ftp"`, ""},
		{"T", "-m helper ! --helper sip", "-m helper ! --helper sip", `helper match ! "sip"`, ""},
		{"T", `-m helper --helper ""`, `-m helper --helper ""`, `helper match ""`, ""},
		{"T", "-m helper --helper abcdefghijklmnopqrstuvwxyz1234567890", "-m helper --helper abcdefghijklmnopqrstuvwxyz123", `helper match "abcdefghijklmnopqrstuvwxyz123"`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			r := lastRule(t, IPv4, "filter", tc.chain, tc.in+" -j ACCEPT")
			assert.Equal(t, " "+tc.save+" -j ACCEPT", r.String())
			assert.Equal(t, tc.listN, listText(r, true), "-L -n")
			want := tc.list
			if want == "" {
				want = tc.listN
			}
			assert.Equal(t, want, listText(r, false), "-L")
		})
	}
}

// TestMatchPrintingIPv6 checks ip6tables forms recorded the same way.
func TestMatchPrintingIPv6(t *testing.T) {
	cases := []struct{ in, save, listN, list string }{
		{"-p icmpv6 --icmpv6-type echo-request", "-p ipv6-icmp -m icmp6 --icmpv6-type 128", "ipv6-icmptype 128", "ipv6-icmp echo-request"},
		{"-p ipv6-icmp --icmpv6-type 128/0", "-p ipv6-icmp -m icmp6 --icmpv6-type 128/0", "ipv6-icmptype 128 code 0", ""},
		{"-p icmpv6 ! --icmpv6-type port-unreachable", "-p ipv6-icmp -m icmp6 ! --icmpv6-type 1/4", "ipv6-icmp !type 1 code 4", "ipv6-icmp !port-unreachable"},
		{"-p icmpv6 --icmpv6-type 1", "-p ipv6-icmp -m icmp6 --icmpv6-type 1", "ipv6-icmptype 1", "ipv6-icmp destination-unreachable"},
		{"-p icmpv6 --icmpv6-type 255", "-p ipv6-icmp -m icmp6 --icmpv6-type 255", "ipv6-icmptype 255", ""},
		{"-p icmpv6 --icmpv6-type neighbor-solicitation", "-p ipv6-icmp -m icmp6 --icmpv6-type 135", "ipv6-icmptype 135", "ipv6-icmp neighbour-solicitation"},
		{"-p icmpv6 --icmpv6-type 200/3", "-p ipv6-icmp -m icmp6 --icmpv6-type 200/3", "ipv6-icmptype 200 code 3", ""},
		{"-p icmpv6 -m icmp6 --icmpv6-type 2", "-p ipv6-icmp -m icmp6 --icmpv6-type 2", "ipv6-icmptype 2", "ipv6-icmp packet-too-big"},
		{"-m addrtype --dst-type MULTICAST", "-m addrtype --dst-type MULTICAST", "ADDRTYPE match dst-type MULTICAST", ""},
		{"-m addrtype --dst-type UNREACHABLE", "-m addrtype --dst-type UNREACHABLE", "ADDRTYPE match dst-type UNREACHABLE", ""},
		{"-m addrtype --dst-type LOCAL,UNICAST,ANYCAST,UNSPEC", "-m addrtype --dst-type UNSPEC,UNICAST,LOCAL,ANYCAST", "ADDRTYPE match dst-type UNSPEC,UNICAST,LOCAL,ANYCAST", ""},
		{"-m iprange --src-range ::1-::5", "-m iprange --src-range ::1-::5", "source IP range ::1-::5", ""},
		{"-m iprange ! --dst-range 2001:db8::1-2001:db8::ff", "-m iprange ! --dst-range 2001:db8::1-2001:db8::ff", "destination IP range ! 2001:db8::1-2001:db8::ff", ""},
		{"-m mac --mac-source 00:11:22:33:44:55", "-m mac --mac-source 00:11:22:33:44:55", "MAC 00:11:22:33:44:55", ""},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			r := lastRule(t, IPv6, "filter", "T", tc.in+" -j ACCEPT")
			assert.Equal(t, " "+tc.save+" -j ACCEPT", r.String())
			assert.Equal(t, tc.listN, listText(r, true))
			want := tc.list
			if want == "" {
				want = tc.listN
			}
			assert.Equal(t, want, listText(r, false))
		})
	}
}

// TestMatchErrors checks inputs iptables 1.8.9 refuses (each recorded in a
// namespace) are refused with the right sentinel.
func TestMatchErrors(t *testing.T) {
	cases := []struct {
		f     Family
		chain string
		in    string
		err   error
	}{
		{IPv4, "T", "-m comment", ErrMissingArgument},
		{IPv4, "T", "-m mark", ErrMissingArgument},
		{IPv4, "T", "-m mark --mark 0x100000000", ErrBadValue},
		{IPv4, "T", "-m mark --mark -1", ErrBadValue},
		{IPv4, "T", "-m mark --mark abc", ErrBadValue},
		{IPv4, "T", "-m mark --mark 1/", ErrBadValue},
		{IPv4, "T", "-m mark --mark 08", ErrBadValue},
		{IPv4, "T", "-m mark --mark 1_0", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports 1:2,3:4,5:6,7:8,9:10,11:12,13:14,15:16", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports 1:2,3:4,5:6,7:8,9:10,11:12,13:14,15,16", ErrBadValue},
		{IPv4, "T", "-m multiport --dports 80", ErrNotAllowed},
		{IPv4, "T", "-p icmp -m multiport --dports 80", ErrNotAllowed},
		{IPv4, "T", "! -p tcp -m multiport --dports 80", ErrNotAllowed},
		{IPv4, "T", "-p tcp -m multiport", ErrMissingArgument},
		{IPv4, "T", "-p tcp -m multiport --dports 80 --sports 90", ErrIncompatibleOpts},
		{IPv4, "T", "-p tcp -m multiport --dports 90:80", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports 80:80", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports 80,", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports ,80", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports 80:", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports :80", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports 65536", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports foo", ErrBadValue},
		{IPv4, "T", "-p udp -m multiport --dports domain,http", ErrBadValue},
		{IPv4, "T", "-p icmp --icmp-type p", ErrBadValue},
		{IPv4, "T", "-p icmp --icmp-type 256", ErrBadValue},
		{IPv4, "T", "-p icmp --icmp-type 3/256", ErrBadValue},
		{IPv4, "T", "-p icmp --icmp-type foo", ErrBadValue},
		{IPv4, "T", "-p icmp --icmp-type 3/x", ErrBadValue},
		{IPv4, "T", "-p icmp --icmp-type 08", ErrBadValue},
		{IPv4, "T", "-m icmp --icmp-type 8", ErrNotAllowed},
		{IPv4, "T", "-p tcp -m icmp --icmp-type 8", ErrNotAllowed},
		{IPv4, "T", "-p icmp -m icmp", ErrMissingArgument},
		{IPv6, "T", "-p icmpv6 --icmpv6-type any", ErrBadValue},
		{IPv6, "T", "-m icmp6 --icmpv6-type 2", ErrNotAllowed},
		{IPv6, "T", "-p icmp --icmp-type 8", ErrUnknownOption},
		{IPv4, "T", "-p sctp --sport 100:0", ErrBadValue},
		{IPv4, "T", "-p sctp --dport http", ErrBadValue},
		{IPv4, "T", "-m sctp --dport 10", ErrNotAllowed},
		{IPv4, "T", "-p sctp --chunk-types none ALL", ErrBadValue},
		{IPv4, "T", "-p sctp --chunk-types any FOO", ErrBadValue},
		{IPv4, "T", "-p sctp --chunk-types any DATA:X", ErrBadValue},
		{IPv4, "T", "-p sctp --chunk-types any INIT:T", ErrBadValue},
		{IPv4, "T", "-p sctp --chunk-types any DATA:I,ABORT:T,SHUTDOWN_COMPLETE:t,I_DATA:E,INIT:-", ErrBadValue},
		{IPv4, "T", "-m iprange --src-range 10.0.0.1-", ErrBadValue},
		{IPv4, "T", "-m iprange --src-range 10.0.0.1-10.0.0.x", ErrBadValue},
		{IPv4, "T", "-m iprange --src-range 10.0.0.0/24", ErrBadValue},
		{IPv4, "T", "-m iprange --src-range ::1-::2", ErrBadValue},
		{IPv4, "T", "-m iprange", ErrMissingArgument},
		{IPv4, "T", "-m addrtype", ErrMissingArgument},
		{IPv4, "T", "-m addrtype --src-type LOCAL,", ErrBadValue},
		{IPv4, "T", "-m addrtype --src-type FOO", ErrBadValue},
		{IPv4, "T", "-m addrtype --limit-iface-in --limit-iface-out --src-type LOCAL", ErrIncompatibleOpts},
		{IPv4, "INPUT", "-m addrtype --src-type LOCAL --limit-iface-out", ErrNotAllowed},
		{IPv4, "OUTPUT", "-m addrtype --src-type LOCAL --limit-iface-in", ErrNotAllowed},
		{IPv6, "T", "-m addrtype --dst-type BROADCAST", ErrNotAllowed},
		{IPv6, "T", "-m addrtype --dst-type BLACKHOLE", ErrNotAllowed},
		{IPv6, "T", "-m addrtype --dst-type PROHIBIT", ErrNotAllowed},
		{IPv6, "T", "-m addrtype --dst-type THROW", ErrNotAllowed},
		{IPv6, "T", "-m addrtype --dst-type NAT", ErrNotAllowed},
		{IPv6, "T", "-m addrtype --dst-type XRESOLVE", ErrNotAllowed},
		{IPv4, "T", "-m statistic --mode random --probability 1.5", ErrBadValue},
		{IPv4, "T", "-m statistic --mode random --probability -0.1", ErrBadValue},
		{IPv4, "T", "-m statistic --mode random --probability abc", ErrBadValue},
		{IPv4, "T", "-m statistic --mode random", ErrMissingArgument},
		{IPv4, "T", "-m statistic --probability 0.5", ErrMissingArgument},
		{IPv4, "T", "-m statistic --mode nth --every 3", ErrMissingArgument},
		{IPv4, "T", "-m statistic --mode nth --packet 1", ErrBadValue},
		{IPv4, "T", "-m statistic --mode nth --every 0 --packet 0", ErrBadValue},
		{IPv4, "T", "-m statistic --mode nth --every 3 --packet 3", ErrBadValue},
		{IPv4, "T", "-m statistic --mode random --every 3 --packet 1", ErrMissingArgument},
		{IPv4, "T", "-m statistic --mode nth --every 3 --packet 1 --probability 0.5", ErrIncompatibleOpts},
		{IPv4, "T", "-m statistic --mode foo", ErrBadValue},
		{IPv4, "T", "-m statistic --mode nth --every 4294967296 --packet 0", ErrBadValue},
		{IPv4, "T", "-m statistic --mode nth --every 2 ! --packet 1", ErrSyntax},
		{IPv4, "T", "-m statistic ! --mode random --probability 0.5", ErrSyntax},
		{IPv4, "T", "-m length --length 65536", ErrBadValue},
		{IPv4, "T", "-m length --length abc", ErrBadValue},
		{IPv4, "T", "-m length", ErrMissingArgument},
		{IPv4, "T", "-m limit --limit 0/sec", ErrBadValue},
		{IPv4, "T", "-m limit --limit 10001/sec", ErrBadValue},
		{IPv4, "T", "-m limit --limit 1/week", ErrBadValue},
		{IPv4, "T", "-m limit --limit-burst 10001", ErrBadValue},
		{IPv4, "T", "-m limit --limit 1/sx", ErrBadValue},
		{IPv4, "T", "-m limit --limit 1/", ErrBadValue},
		{IPv4, "T", "-m limit --limit /sec", ErrBadValue},
		{IPv4, "T", "-m limit ! --limit 1/sec", ErrSyntax},
		{IPv4, "T", "-m pkttype --pkt-type foo", ErrBadValue},
		{IPv4, "T", "-m pkttype --pkt-type outgoing", ErrBadValue},
		{IPv4, "T", "-m pkttype --pkt-type loopback", ErrBadValue},
		{IPv4, "T", "-m pkttype --pkt-type fastroute", ErrBadValue},
		{IPv4, "T", "-p tcp -m multiport --dports 080", ErrBadValue},
		{IPv4, "T", "-m limit --limit 0x5/sec", ErrBadValue},
		{IPv4, "T", "-m statistic --mode random --probability inf", ErrBadValue},
		{IPv4, "T", "-m statistic --mode nth --every 3 --packet 1 --mode nth", ErrMultipleFlags},
		{IPv4, "T", "-m addrtype --src-type LOCAL --src-type UNICAST", ErrMultipleFlags},
		{IPv4, "OUTPUT", "-m owner --gid-owner 5 ! --suppl-groups", ErrSyntax},
		{IPv4, "T", "-m pkttype", ErrMissingArgument},
		{IPv4, "T", "-m mac --mac-source 00:11:22:33:44", ErrBadValue},
		{IPv4, "T", "-m mac --mac-source 00-11-22-33-44-55", ErrBadValue},
		{IPv4, "OUTPUT", "-m mac --mac-source 00:11:22:33:44:55", ErrNotAllowed},
		{IPv4, "T", "-m helper", ErrMissingArgument},
		{IPv4, "T", "-m physdev", ErrMissingArgument},
		{IPv4, "T", "-m physdev --physdev-in abcdefghijklmnop", ErrBadValue},
		{IPv4, "OUTPUT", "-m physdev --physdev-out eth1", ErrNotAllowed},
		{IPv4, "OUTPUT", "-m physdev --physdev-is-out", ErrNotAllowed},
		{IPv4, "OUTPUT", "-m owner", ErrMissingArgument},
		{IPv4, "OUTPUT", "-m owner --uid-owner 5-3", ErrBadValue},
		{IPv4, "OUTPUT", "-m owner --uid-owner nosuchuser", ErrBadValue},
		{IPv4, "OUTPUT", "-m owner --uid-owner 4294967295", ErrBadValue},
		{IPv4, "OUTPUT", "-m owner --suppl-groups", ErrBadValue},
		{IPv4, "INPUT", "-m owner --uid-owner 0", ErrNotAllowed},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			rs := NewRuleset(tc.f)
			if tc.chain == "T" {
				require.NoError(t, rs.Exec("-N T"))
			}
			err := rs.Exec("-A " + tc.chain + " " + tc.in + " -j ACCEPT")
			require.Error(t, err)
			assert.True(t, errors.Is(err, tc.err), "got %v", err)
		})
	}
}

// FuzzMatchSpec feeds rule specifications to the match parsers: what is
// accepted must print as a save line that parses back to the same line,
// and the -L printers must cope with it.
func FuzzMatchSpec(f *testing.F) {
	for _, s := range []string{
		"-m comment --comment x", "-m mark ! --mark 0x4000/0x4000", "-p tcp -m multiport --dports 80,443,8000:8080",
		"-p udp -m multiport ! --ports 53", "-p icmp --icmp-type port-unreachable", "-p icmp ! --icmp-type any",
		"-p sctp --sport 1 --dport 2:3", "-m iprange ! --src-range 10.0.0.1-10.0.0.5",
		"-m addrtype --src-type LOCAL ! --dst-type UNICAST --limit-iface-in", "-m statistic --mode random --probability 0.3",
		"-m statistic --mode nth --every 3 --packet 1", "-m length --length 100:", "-m limit --limit 5/sec --limit-burst 10",
		"-m pkttype --pkt-type host", "-m mac --mac-source 0:1:2:3:4:5", "-m physdev ! --physdev-in eth+ --physdev-is-bridged",
		"-m helper --helper ftp",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		rs := NewRuleset(IPv4)
		require.NoError(t, rs.Exec("-N T"))
		if err := rs.Exec("-A T " + spec); err != nil {
			require.NotEmpty(t, err.Error())
			return
		}
		rules := rs.Table(Filter).Chain("T").Rules
		for _, r := range rules {
			if r.IP.In != "" || r.IP.Out != "" {
				t.Skip("interface names are the core parser's business")
			}
			line := r.String()
			rs2 := NewRuleset(IPv4)
			require.NoError(t, rs2.Exec("-N T"))
			require.NoError(t, rs2.Exec("-A T"+line), "save line %q of %q", line, spec)
			r2 := rs2.Table(Filter).Chain("T").Rules[0]
			require.Equal(t, line, r2.String())
			listText(r, true)
			listText(r, false)
		}
	})
}
