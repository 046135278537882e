# table filter
-P INPUT ACCEPT
-P FORWARD ACCEPT
-P OUTPUT ACCEPT
-A INPUT -p tcp -m osf --genre ggggggggggggggggggggggggggggggg --log 1
