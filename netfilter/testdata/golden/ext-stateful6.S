# table filter
-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-A INPUT -m hashlimit --hashlimit-upto 5/sec --hashlimit-burst 5 --hashlimit-mode srcip --hashlimit-name v6 --hashlimit-srcmask 64
-A INPUT -m hashlimit --hashlimit-upto 5/sec --hashlimit-burst 5 --hashlimit-name v6b
-A INPUT -m connlimit --connlimit-above 2 --connlimit-mask 128 --connlimit-saddr
-A INPUT -m connlimit --connlimit-upto 2 --connlimit-mask 48 --connlimit-daddr
-A INPUT -m quota --quota 77
-A INPUT -m time --timestart 08:00:00 --timestop 08:30:00 --datestop 2038-01-19T03:14:07
