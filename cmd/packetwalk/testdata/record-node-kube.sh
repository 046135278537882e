#!/bin/sh
# record-node-kube.sh: records testdata/node-kube, a node snapshot whose
# rules are kube-proxy's (netfilter/testdata/golden/kubeproxy-current-nfacct.rules,
# which use -m nfacct), from a scratch network namespace: kube-proxy's
# nfacct objects are created first, as kube-proxy does, then the rules are
# loaded and capture-node.sh records the snapshot. Needs root, iptables
# 1.8.9 and nfacct (Debian package nfacct).
set -eu
cd "$(dirname "$0")"
ns=pw-rec-node-kube-$$
ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
ip netns exec "$ns" ip link set lo up
for o in ct_state_invalid_dropped_pkts localhost_nps_accepted_pkts; do
	ip netns exec "$ns" nfacct add "$o"
done
ip netns exec "$ns" iptables-restore <../../../netfilter/testdata/golden/kubeproxy-current-nfacct.rules
rm -rf node-kube
sh ./capture-node.sh "$ns" node-kube
