#!/usr/bin/env bash
# record.sh runs every line of specs.txt ("4|6 TABLE -A CHAIN SPEC") through
# the real iptables or ip6tables (1.8.9, nf_tables) in a fresh network
# namespace and writes specs.out: the line, a tab, then "ACCEPT " and the
# rule as "-S CHAIN" prints it, or "REFUSE" and the tool's first error line.
# TestExtSpecsRecorded compares packetwalk with it. Run as root:
#
#   netfilter/testdata/extspecs/record.sh
set -euo pipefail
cd "$(dirname "$0")"
ns="pw-rec-extspecs-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT
ip netns add "$ns"
while IFS= read -r line; do
	[[ -z "$line" || "$line" == \#* ]] && continue
	fam=${line%% *}
	rest=${line#* }
	table=${rest%% *}
	spec=${rest#* }
	tool=iptables
	[[ $fam == 6 ]] && tool=ip6tables
	chain=$(awk '{print $2}' <<<"$spec")
	ip netns exec "$ns" "$tool" -t "$table" -F "$chain" 2>/dev/null || true
	# shellcheck disable=SC2086 # the spec is split into arguments on purpose
	if out=$(ip netns exec "$ns" "$tool" -t "$table" $spec 2>&1); then
		r="ACCEPT $(ip netns exec "$ns" "$tool" -t "$table" -S "$chain" 2>/dev/null | tail -1)"
	else
		r="REFUSE $(grep -v '^Try\|^$\|Warning' <<<"$out" | head -1)"
	fi
	printf '%s\t%s\n' "$line" "$r"
done <specs.txt >specs.out
echo "recorded $(wc -l <specs.out) specs" >&2
