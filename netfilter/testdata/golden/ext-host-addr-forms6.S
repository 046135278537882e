# table mangle
-P PREROUTING ACCEPT
-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-P POSTROUTING ACCEPT
-A PREROUTING -p tcp -j TPROXY --on-port 1 --on-ip ::ffff:1.2.3.4 --tproxy-mark 0x0/0x0
-A PREROUTING -j TEE --gateway ::ffff:1.2.3.4
