#!/usr/bin/env bash
# record.sh records what the real iptables-restore 1.8.9 (nf_tables) does
# with each grammar case in this directory. Run as root:
#
#   netfilter/testdata/grammar/record.sh [NAME.rules ...]
#
# A case is NAME.rules (IPv4) or NAME.rules6 (IPv6), fed byte for byte to
# "iptables-restore" in a fresh network namespace, after an optional
# NAME.ipsets fed to "ipset restore". It writes NAME.out:
#
#   refused at line N          when the restore fails, N from the tool's
#                              "Error occurred at line: N", "line N failed"
#                              or "COMMIT expected at line N" (0 when it
#                              names no line: the kernel refused the commit),
#                              then the tool's other stderr lines;
#   accepted                   otherwise, then "# save" and the
#                              iptables-save output without its "#" lines,
#                              then for every table named in the input, in
#                              iptables-save order, "# S T" and
#                              "iptables -t T -S", "# L T" and
#                              "iptables -t T -L -n -v".
#
# grammar_test.go checks packetwalk against these files, and re-runs this
# script live when PACKETWALK_KERNEL=1. NAME must be unique across .rules
# and .rules6 files.
set -euo pipefail

cd "$(dirname "$0")"
ns="pw-gram-$$"
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
	if [[ -f "$name.ipsets" ]]; then
		ip netns exec "$ns" ipset restore <"$name.ipsets"
	fi
	local err
	if ! err=$(ip netns exec "$ns" "$tool-restore" <"$in" 2>&1 >/dev/null); then
		local line
		line=$(sed -n -e 's/^Error occurred at line: \([0-9]*\)$/\1/p' \
			-e 's/^.*restore: line \([0-9]*\) failed.*$/\1/p' \
			-e 's/^.*restore: COMMIT expected at line \([0-9]*\)$/\1/p' <<<"$err" | head -1)
		{
			echo "refused at line ${line:-0}"
			grep -v -e '^Error occurred at line: ' -e '^Try `' <<<"$err" || true
		} >"$name.out"
		cleanup
		return
	fi
	{
		echo accepted
		echo "# save"
		ip netns exec "$ns" "$tool-save" | grep -v "^#" || true
		local t
		for t in "${order[@]}"; do
			if grep -q "^[[:space:]]*\*$t\b" "$in"; then
				echo "# S $t"
				ip netns exec "$ns" "$tool" -t "$t" -S
				echo "# L $t"
				ip netns exec "$ns" "$tool" -t "$t" -L -n -v
			fi
		done
	} >"$name.out"
	cleanup
}

if [[ $# -eq 0 ]]; then
	set -- *.rules *.rules6
fi
for f in "$@"; do
	[[ -e "$f" ]] || continue
	record "$f"
done
