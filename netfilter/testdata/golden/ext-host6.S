# table raw
-P PREROUTING ACCEPT
-P OUTPUT ACCEPT
-A PREROUTING -m rpfilter --loose
# table filter
-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-A INPUT -m policy --dir in --pol ipsec --strict --mode tunnel --tunnel-dst 2001:db8::1 --tunnel-src 2001:db8::/32
-A INPUT -m socket --transparent
-A INPUT -m string --string "x" --algo bm
-A INPUT -m u32 --u32 "0x6>>0x18=0x3a"
