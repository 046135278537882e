#!/bin/sh
# record-policy.sh: record the `ip -j rule` and `ip -j route show table all`
# output of a node with policy routing (wg-quick, Tailscale, TPROXY and
# per-pod-table rules, every rule selector and route type) from a throwaway
# network namespace, into testdata/policy/. Run as root from
# cmd/packetwalk: sh testdata/record-policy.sh
set -eu
ns=pw-i20-record
out=testdata/policy
mkdir -p "$out"
ip netns add "$ns"
trap 'ip netns del "$ns"' EXIT
n() { ip netns exec "$ns" "$@"; }
n ip link set lo up
n ip link add eth0 type veth peer name eth1
n ip link add wg0 type veth peer name tailscale0
for d in eth0 eth1 wg0 tailscale0; do n ip link set "$d" up; done
n sysctl -qw net.ipv6.conf.all.accept_dad=0 net.ipv6.conf.default.accept_dad=0
n ip addr add 192.168.10.1/24 dev eth0
n ip addr add 192.168.10.9/24 dev eth0
n ip addr add fd00:10::1/64 dev eth0 nodad
n ip addr add 10.244.1.1/24 dev eth1
n ip addr add 10.99.0.1/24 dev wg0
n ip addr add 100.64.0.5/32 dev tailscale0
n ip route add default via 192.168.10.254 dev eth0
n ip -6 route add default via fd00:10::fe dev eth0
# wg-quick
n ip route add default dev wg0 table 51820
n ip rule add not fwmark 0xca6c table 51820
n ip rule add table main suppress_prefixlength 0
n ip -6 route add default dev eth0 table 51820
n ip -6 rule add not fwmark 0xca6c table 51820
n ip -6 rule add table main suppress_prefixlength 0
# Tailscale
n ip route add 100.100.0.0/16 dev tailscale0 table 52
n ip route add throw 100.64.0.0/10 table 52
n ip rule add fwmark 0x80000/0xff0000 table main priority 5210
n ip rule add fwmark 0x80000/0xff0000 table default priority 5230
n ip rule add fwmark 0x80000/0xff0000 type unreachable priority 5250
n ip rule add table 52 priority 5270
# TPROXY
n ip route add local 0.0.0.0/0 dev lo table 133
n ip rule add fwmark 1337 lookup 133 priority 133
# AWS VPC CNI per-pod tables
n ip route add default via 192.168.10.254 dev eth0 table 2 src 192.168.10.9 metric 10
n ip rule add to 10.244.1.7 lookup main priority 512
n ip rule add from 10.244.1.7 lookup 2 priority 1536
# every selector and action
n ip rule add priority 100 not from 10.0.0.0/8 to 10.1.0.0/16 tos 0x10 fwmark 0x5/0xf iif eth1 uidrange 100-200 ipproto udp sport 1000-2000 dport 53 goto 133
n ip rule add priority 101 oif eth0 blackhole
n ip rule add priority 102 dport 80 prohibit
n ip rule add priority 103 nop
n ip route add blackhole 10.5.0.0/16
n ip route add unreachable 10.6.0.0/16 metric 5
n ip route add prohibit 10.7.0.0/16 table 200
n ip -j rule >"$out/ip-rule.json"
n ip -6 -j rule >"$out/ip6-rule.json"
n ip -j route show table all >"$out/ip-route.json"
n ip -6 -j route show table all >"$out/ip6-route.json"
n ip -j addr >"$out/ip-addr.json"
