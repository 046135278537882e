#!/bin/sh
# capture-node.sh NS DIR: capture a node snapshot for `packetwalk --node DIR`
# from network namespace NS, with the one-line commands packetwalk's
# documentation gives for a real node (run there without `ip netns exec`).
# Files whose tool is missing or has nothing to say are left out.
set -eu
if [ $# -ne 2 ]; then
	echo "usage: $0 NS DIR" >&2
	exit 2
fi
ns=$1 dir=$2
mkdir -p "$dir"
in_ns() { ip netns exec "$ns" "$@"; }
in_ns iptables-save -c >"$dir/iptables-save"
in_ns ip6tables-save -c >"$dir/ip6tables-save"
[ -s "$dir/ip6tables-save" ] || rm -f "$dir/ip6tables-save"
if command -v ipset >/dev/null; then
	in_ns ipset save >"$dir/ipset-save"
	[ -s "$dir/ipset-save" ] || rm -f "$dir/ipset-save"
fi
in_ns ip -j addr >"$dir/ip-addr.json"
in_ns ip -j route show table all >"$dir/ip-route.json"
in_ns ip -j rule >"$dir/ip-rule.json"
in_ns ip -6 -j rule >"$dir/ip6-rule.json"
# conntrack -L prints its "N flow entries" summary on stderr.
in_ns conntrack -L >"$dir/conntrack" 2>/dev/null
# nfacct list: the extended accounting objects -m nfacct rules name.
if command -v nfacct >/dev/null; then
	in_ns nfacct list >"$dir/nfacct-list"
	[ -s "$dir/nfacct-list" ] || rm -f "$dir/nfacct-list"
fi
