#!/bin/bash
# Records what iptables 1.8.9 prints for each rule of cases.txt into
# vectors.txt: the rule as -S prints it, its -L -n and -L rows, or the
# first line of the error. Needs root, iptables, ip6tables and ipset; it
# works in a namespace of its own and removes it.
set -euo pipefail
cd "$(dirname "$0")"
ns=pw-rec-targets-$$
ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
x() { ip netns exec "$ns" "$@"; }
x ipset create S1 hash:ip
x ipset create S2 hash:ip,port
x ipset create S3 hash:ip timeout 100
{
	echo "# Recorded by record.sh with $(x iptables -V) on $(uname -r). Do not edit."
	while IFS= read -r line; do
		case "$line" in '#'* | '') continue ;; esac
		eval "set -- $line"
		fam=$1 table=$2 chain=$3
		shift 3
		ipt=iptables
		[ "$fam" = 6 ] && ipt=ip6tables
		echo "case: $line"
		if ! out=$(x "$ipt" -t "$table" -A "$chain" "$@" 2>&1); then
			echo "ERR: $(printf '%s\n' "$out" | grep -v '^warn' | head -1)"
			continue
		fi
		echo "S: $(x "$ipt" -t "$table" -S "$chain" 1)"
		echo "Ln: $(x "$ipt" -t "$table" -L "$chain" -n | tail -1)"
		echo "L: $(x "$ipt" -t "$table" -L "$chain" | tail -1)"
		x "$ipt" -t "$table" -F "$chain"
	done <cases.txt
} >vectors.txt
