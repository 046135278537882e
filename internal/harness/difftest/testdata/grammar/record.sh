#!/bin/sh
# Records the option grammar the real iptables/ip6tables print for every
# match and target packetwalk registers (netfilter/match_*.go, target_*.go),
# the reference the grammar-driven differential (internal/harness/difftest/
# grammar_gen_test.go) is written against. Run as root from this directory:
#   sh record.sh
# Only the module's own section is kept (the generic help that precedes it
# is the same for every module).
set -eu
matches="addrtype comment conntrack state connmark helper icmp iprange length limit mac mark multiport nfacct owner physdev pkttype recent sctp set statistic tcp udp udplite"
targets="CONNMARK CT NOTRACK LOG MARK DNAT SNAT MASQUERADE REDIRECT NFLOG REJECT SET TRACE"
icmp6="icmp6"
# The extension modules of issue 19 (docs/extensions.md); the generator
# draws them only with PACKETWALK_GRAMMAR_EXT=1.
ext_matches="ah bpf cgroup cluster connbytes connlabel connlimit cpu dccp devgroup dscp ecn esp hashlimit ipcomp ipvs osf policy quota rateest rpfilter socket string tcpmss time tos u32 realm ttl"
ext_matches6="ah dst eui64 frag hbh hl ipv6header mh rt srh"
ext_targets="AUDIT CHECKSUM CLASSIFY CONNSECMARK DSCP HMARK IDLETIMER NETMAP NFQUEUE RATEEST SYNPROXY TCPMSS TCPOPTSTRIP TEE TOS TPROXY"
ext_targets4="ECN TTL"
ext_targets6="HL DNPT SNPT"
keep() { # drop the generic help: everything up to its last line (--version)
	awk 'f{print} /--version[ \t]+-V/{f=1}'
}
for tool in iptables ip6tables; do
	for m in $matches $icmp6; do
		[ "$tool" = iptables ] && [ "$m" = icmp6 ] && continue
		[ "$tool" = ip6tables ] && [ "$m" = icmp ] && continue
		out=$($tool -m "$m" --help 2>&1 || true)
		if printf '%s\n' "$out" | grep -q "Couldn't load"; then
			# not an extension of this iptables (udplite): keep the refusal
			printf '%s\n' "$out" | grep "Couldn't load" > "$tool-m-$m.txt"
		else
			printf '%s\n' "$out" | keep > "$tool-m-$m.txt"
		fi
	done
	if [ "$tool" = iptables ]; then em=$ext_matches; et="$ext_targets $ext_targets4"; else em="$ext_matches $ext_matches6"; et="$ext_targets $ext_targets6"; fi
	for m in $em; do
		out=$($tool -m "$m" --help 2>&1 || true)
		if printf '%s\n' "$out" | grep -q "Couldn't load"; then
			printf '%s\n' "$out" | grep "Couldn't load" > "$tool-m-$m.txt"
		else
			printf '%s\n' "$out" | keep > "$tool-m-$m.txt"
		fi
	done
	for j in $et; do
		$tool -j "$j" --help 2>&1 | keep > "$tool-j-$j.txt" || true
	done
	for j in $targets; do
		$tool -j "$j" --help 2>&1 | keep > "$tool-j-$j.txt" || true
	done
	$tool --version > "$tool-version.txt"
	$tool --help > "$tool-generic.txt" 2>&1 || true
done
