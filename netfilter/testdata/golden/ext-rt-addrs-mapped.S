# table filter
-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-A INPUT -m rt --rt-type 0 --rt-0-addrs fc2d::1,::ffff:192.168.10.2
