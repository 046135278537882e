#!/bin/sh
# Records the `ip -j addr` / `ip -j route` fixtures of the loaders' tests
# from a throwaway network namespace pair (run as root; touches nothing
# outside the namespaces it creates).
set -eu
out=$(dirname "$0")/iproute
a=pw-rec-ipj-a b=pw-rec-ipj-b
trap 'ip netns del $a 2>/dev/null; ip netns del $b 2>/dev/null' EXIT
ip netns add $a
ip netns add $b
ip netns exec $a sh -eu -c '
ip link set lo up
ip link add eth0 type veth peer name eth9 netns '$b'
ip link set eth0 up
ip addr add 192.168.10.1/24 dev eth0
ip addr add 10.0.0.9/32 dev eth0
ip -6 addr add fd00::1/64 dev eth0 nodad
ip link add cali1 type veth peer name x1
ip link set cali1 up
ip link set x1 up
ip route add default via 192.168.10.254 dev eth0
ip route add 10.244.2.5 dev cali1 scope link
ip route add blackhole 10.244.3.0/24
ip route add unreachable 10.8.0.0/16
'
ip netns exec $a ip -j addr > "$out/ip-addr.json"
ip netns exec $a ip -j route > "$out/ip-route.json"
ip netns exec $a ip -6 -j route > "$out/ip6-route.json"
ip netns exec $a ip route add 10.9.0.0/16 nexthop via 192.168.10.2 nexthop via 192.168.10.3
ip netns exec $a ip -j route > "$out/ip-route-multipath.json"
cp "$out/ip-addr.json" "$out/ip-route.json" "$(dirname "$0")/node1/" # node1 reuses the recording
