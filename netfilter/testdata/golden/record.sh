#!/usr/bin/env bash
# record.sh regenerates the golden outputs of the real iptables next to each
# corpus file. Run as root on a machine with iptables 1.8.9 (nf_tables):
#
#   netfilter/testdata/golden/record.sh [NAME.rules ...]
#
# For every NAME.rules (IPv4) or NAME.rules6 (IPv6) it loads the file with
# "iptables-restore -c" (counters applied, as ParseRestore does) in a fresh
# network namespace and writes:
#   NAME.save          iptables-save without the "#" lines
#   NAME.save-c        iptables-save -c without the "#" lines
#   NAME.S             iptables -t T -S
#   NAME.L-nv          iptables -t T -L -n -v
#   NAME.L-n           iptables -t T -L -n
#   NAME.L-nvx-line    iptables -t T -L -n -v -x --line-numbers
#   NAME.L             iptables -t T -L
# where the per-table outputs hold one section per table of the input, in
# iptables-save order, each after a line "# table T". When the restore
# fails, only NAME.err (its stderr) is written. An optional NAME.ipsets is
# fed to "ipset restore" first, for rules that use -m set. NAME must be
# unique across .rules and .rules6 files.
set -euo pipefail

cd "$(dirname "$0")"
ns="pw-rec-$$"
cleanup() { ip netns del "$ns" 2>/dev/null || true; }
trap cleanup EXIT

order=(mangle security raw filter nat)

record() {
	local in="$1" name tool
	case "$in" in
	*.rules6) name="${in%.rules6}" tool=ip6tables ;;
	*.rules) name="${in%.rules}" tool=iptables ;;
	*) echo "skipping $in" >&2; return ;;
	esac
	cleanup
	ip netns add "$ns"
	rm -f "$name".save "$name".save-c "$name".S "$name".L-nv "$name".L-n "$name".L-nvx-line "$name".L "$name".err
	if [[ -f "$name.ipsets" ]]; then
		ip netns exec "$ns" ipset restore <"$name.ipsets"
	fi
	if ! ip netns exec "$ns" "$tool-restore" -c <"$in" 2>"$name.err"; then
		echo "$in: restore failed: $(head -1 "$name.err")" >&2
		cleanup
		return
	fi
	rm -f "$name.err"
	ip netns exec "$ns" "$tool-save" | grep -v '^#' >"$name.save"
	ip netns exec "$ns" "$tool-save" -c | grep -v '^#' >"$name.save-c"
	local present=() t
	for t in "${order[@]}"; do
		if grep -q "^\*$t\b" "$in"; then present+=("$t"); fi
	done
	local out flags
	for out in S L-nv L-n L-nvx-line L; do
		case "$out" in
		S) flags=(-S) ;;
		L-nv) flags=(-L -n -v) ;;
		L-n) flags=(-L -n) ;;
		L-nvx-line) flags=(-L -n -v -x --line-numbers) ;;
		L) flags=(-L) ;;
		esac
		: >"$name.$out"
		for t in "${present[@]}"; do
			echo "# table $t" >>"$name.$out"
			ip netns exec "$ns" "$tool" -t "$t" "${flags[@]}" >>"$name.$out"
		done
	done
	cleanup
	echo "recorded $name" >&2
}

if [[ $# -eq 0 ]]; then
	set -- *.rules *.rules6
fi
for f in "$@"; do
	[[ -e "$f" ]] || continue
	record "$f"
done
