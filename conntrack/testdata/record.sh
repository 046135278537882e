#!/usr/bin/env bash
# record.sh — record real `conntrack -L` output for the golden tests.
#
# Run as root: bash conntrack/testdata/record.sh
# Builds three namespaces connected only to each other:
#
#   pw-ct-cli  c0 192.168.10.2/24 ── eth0 192.168.10.1/24  pw-ct-node  eth1 10.244.1.1/24 ── s0 10.244.1.5/24  pw-ct-srv
#
# loads a DNAT + MASQUERADE ruleset in the node with iptables-restore, runs a
# bounded set of flows with python3 and writes:
#   list.txt           conntrack -L
#   list-extended.txt  conntrack -L -o extended
#   list-id.txt        conntrack -L -o extended,id
#   times.txt          when each phase-1 flow ended and when list.txt was taken
#   list-acct.txt      conntrack -L with nf_conntrack_acct=1 (counters), after a flush
# into this directory, or into $OUT when set.
# Nothing is done in the root namespace; namespaces and the helper
# processes started here are removed on every exit path.
set -euo pipefail

here=${OUT:-$(cd "$(dirname "$0")" && pwd)}
CLI=pw-ct-cli NODE=pw-ct-node SRV=pw-ct-srv
pids=()

cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for ns in $CLI $NODE $SRV; do ip netns del "$ns" 2>/dev/null || true; done
}
trap cleanup EXIT INT TERM

for tool in ip iptables-restore conntrack python3; do
	command -v "$tool" >/dev/null || { echo "record.sh: $tool not installed" >&2; exit 1; }
done

for ns in $CLI $NODE $SRV; do ip netns add "$ns"; ip -n "$ns" link set lo up; done
ip -n $CLI link add c0 type veth peer name eth0 netns $NODE
ip -n $NODE link add eth1 type veth peer name s0 netns $SRV
ip -n $CLI addr add 192.168.10.2/24 dev c0
ip -n $NODE addr add 192.168.10.1/24 dev eth0
ip -n $NODE addr add 10.244.1.1/24 dev eth1
ip -n $SRV addr add 10.244.1.5/24 dev s0
ip -n $CLI link set c0 up
ip -n $NODE link set eth0 up
ip -n $NODE link set eth1 up
ip -n $SRV link set s0 up
ip -n $CLI route add default via 192.168.10.1
ip -n $SRV route add default via 10.244.1.1
ip netns exec $NODE sysctl -qw net.ipv4.ip_forward=1

ip netns exec $NODE iptables-restore <<'RULES'
*nat
:PREROUTING ACCEPT [0:0]
:INPUT ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
:POSTROUTING ACCEPT [0:0]
-A PREROUTING -d 10.96.0.10/32 -p tcp -m tcp --dport 80 -j DNAT --to-destination 10.244.1.5:8080
-A PREROUTING -d 10.96.0.10/32 -p tcp -m tcp --dport 81 -j DNAT --to-destination 10.244.1.5:9999
-A PREROUTING -d 10.96.0.10/32 -p tcp -m tcp --dport 82 -j DNAT --to-destination 10.244.1.99:80
-A PREROUTING -d 10.96.0.53/32 -p udp -m udp --dport 53 -j DNAT --to-destination 10.244.1.5:5353
-A PREROUTING -d 10.96.0.54/32 -p udp -m udp --dport 53 -j DNAT --to-destination 10.244.1.5:5999
-A PREROUTING -d 10.96.0.20/32 -p icmp -j DNAT --to-destination 10.244.1.5
-A POSTROUTING -o eth1 -j MASQUERADE
COMMIT
RULES

# Server: TCP 8080 (answer "ok", close after the client does) and UDP echo on
# 5353. It creates $up once both sockets are bound.
up=$(mktemp -u /tmp/pw-ct-up.XXXXXX)
UP=$up ip netns exec $SRV python3 - <<'PY' &
import os, socket, threading
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("10.244.1.5", 8080)); s.listen(8)
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("10.244.1.5", 5353))
open(os.environ["UP"], "w").close()
def serve(c):
    with c:
        if c.recv(100):
            c.sendall(b"ok")
            while c.recv(100):
                pass
def udp():
    for _ in range(16):
        d, a = u.recvfrom(100); u.sendto(d, a)
threading.Thread(target=udp, daemon=True).start()
for _ in range(4):
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
threading.Event().wait(30)
PY
pids+=($!)
for _ in $(seq 100); do [ -e "$up" ] && break; sleep 0.1; done
[ -e "$up" ] || { echo "record.sh: server did not start" >&2; exit 1; }
rm -f "$up"

# Client flows, in the background so that flow 7 stays open while recording.
# Source ports are fixed so the tests can tell the lines apart.
ready=$(mktemp -u /tmp/pw-ct-ready.XXXXXX)
: >"$here/times.txt"
READY=$ready TIMES="$here/times.txt" ip netns exec $CLI python3 - <<'PY' &
import os, socket, struct, time

def mark(name, when=None):
    # When each flow sent its last packet, so the tests can replay the
    # flows on the model's clock with the same spacing.
    with open(os.environ["TIMES"], "a") as f:
        f.write("%s %.3f\n" % (name, when or time.time()))

def udp(port, dst, n, gap=0.0):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("", port)); u.settimeout(1)
    for i in range(n):
        if i: time.sleep(gap)
        u.sendto(b"q", (dst, 53))
        sent = time.time()
        try: u.recv(100)
        except OSError: pass
    u.close()
    return sent

def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff

# 1. UDP stream: two exchanges 3 s apart -> ASSURED, 120 s.
udp(40002, "10.96.0.53", 1)
mark("stream1")
time.sleep(3)
udp(40002, "10.96.0.53", 1)
mark("stream2")
# 2. UDP, one exchange -> neither UNREPLIED nor ASSURED, 30 s.
udp(40001, "10.96.0.53", 1)
mark("udp")
# 3. UDP to a port nobody listens on -> ICMP port unreachable, UNREPLIED.
mark("unreplied", udp(40003, "10.96.0.54", 1))
# 4. TCP handshake, data, client closes first -> TIME_WAIT.
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("", 41001)); s.connect(("10.96.0.10", 80)); s.sendall(b"hi"); s.recv(100); s.close()
time.sleep(0.1)
mark("timewait")
# 5. SYN answered by RST (DNAT to a closed port) -> entry destroyed at once.
r = socket.socket(); r.bind(("", 41003))
try: r.connect(("10.96.0.10", 81))
except OSError: pass
r.close()
# 6. ICMP echo, id 4242 -> icmp entry, 30 s.
p = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); p.settimeout(1)
hdr = struct.pack("!BBHHH", 8, 0, 0, 4242, 1) + b"ping"
p.sendto(hdr[:2] + struct.pack("!H", csum(hdr)) + hdr[4:], ("10.96.0.20", 0))
try: p.recv(100)
except OSError: pass
mark("ping")
# 8. A bare ACK (no connection) picked up mid-stream, DNATed to an address
#    nobody answers -> ESTABLISHED, UNREPLIED, capped at 300 s.
src, dst = "192.168.10.2", "10.96.0.20"
t = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_TCP)
seg = struct.pack("!HHIIBBHHH", 41004, 82, 1000, 2000, 5 << 4, 0x10, 64240, 0, 0)
pseudo = socket.inet_aton("192.168.10.2") + socket.inet_aton("10.96.0.10") + struct.pack("!BBH", 0, 6, len(seg))
seg = seg[:16] + struct.pack("!H", csum(pseudo + seg)) + seg[18:]
t.sendto(seg, ("10.96.0.10", 0))
mark("pickup")
# 9. A SYN nobody answers (DNAT to a silent address) -> SYN_SENT, UNREPLIED;
#    the retransmissions do not extend its timeout.
n = socket.socket(); n.bind(("", 41005)); n.setblocking(False)
n.connect_ex(("10.96.0.10", 82))
mark("synsent")
# 7. TCP held open while the table is recorded -> ESTABLISHED.
e = socket.socket(); e.bind(("", 41002)); e.connect(("10.96.0.10", 80)); e.sendall(b"hi"); e.recv(100)
mark("established")
time.sleep(0.3)
open(os.environ["READY"], "w").close()
time.sleep(2)
e.close()
PY
client=$!
pids+=($client)
for _ in $(seq 100); do [ -e "$ready" ] && break; sleep 0.1; done
[ -e "$ready" ] || { echo "record.sh: client flows did not finish" >&2; exit 1; }
rm -f "$ready"

echo "list $(date +%s.%N | cut -c1-14)" >>"$here/times.txt"
ip netns exec $NODE conntrack -L >"$here/list.txt"
ip netns exec $NODE conntrack -L -o extended >"$here/list-extended.txt"
ip netns exec $NODE conntrack -L -o extended,id >"$here/list-id.txt"
wait "$client"

# Phase 2: accounting on; UDP exchanges, an unanswered UDP datagram and a
# ping, whose packet and byte counts are fixed, and a MASQUERADE port clash.
sleep 0.5
ip netns exec $NODE conntrack -F 2>/dev/null
ip netns exec $NODE sysctl -qw net.netfilter.nf_conntrack_acct=1
ip netns exec $CLI python3 - <<'PY'
import socket, struct
def udp(port, dst):
    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("", port)); u.settimeout(1)
    u.sendto(b"q", (dst, 53))
    try: u.recv(100)
    except OSError: pass
    u.close()
def csum(b):
    s = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    s = (s >> 16) + (s & 0xffff); s += s >> 16
    return ~s & 0xffff
udp(40011, "10.96.0.53")
udp(40013, "10.96.0.54")
# Same source port via the service and then directly: after MASQUERADE both
# would leave as 10.244.1.1:40021 -> 10.244.1.5:5353, so the second one's
# source port is remapped.
udp(40021, "10.96.0.53")
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("", 40021)); u.settimeout(1)
u.sendto(b"q", ("10.244.1.5", 5353))
try: u.recv(100)
except OSError: pass
u.close()
p = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); p.settimeout(1)
hdr = struct.pack("!BBHHH", 8, 0, 0, 4343, 1) + b"ping"
p.sendto(hdr[:2] + struct.pack("!H", csum(hdr)) + hdr[4:], ("10.96.0.20", 0))
try: p.recv(100)
except OSError: pass
PY
ip netns exec $NODE conntrack -L >"$here/list-acct.txt"
echo "record.sh: wrote $(wc -l <"$here/list.txt") entries to $here" >&2
