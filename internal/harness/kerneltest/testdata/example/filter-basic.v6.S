# table filter
-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-A INPUT -s fd00:10::/64 -p tcp -m tcp --dport 22 -j ACCEPT
-A FORWARD -p ipv6-icmp -m icmp6 --icmpv6-type 128 -j ACCEPT
-A FORWARD -p udp -j REJECT --reject-with icmp6-port-unreachable
