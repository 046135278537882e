package netfilter

import (
	"bufio"
	"fmt"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// extKernelCase is a FORWARD ruleset and the frames sent through it from
// the lab's client to its server; the rules' packet counters are compared
// between the kernel and the model.
type extKernelCase struct {
	name   string
	rules  []string
	frames []kerneltest.FrameSpec
}

func extKernelCases(now time.Time) []extKernelCase {
	client, server := netip.MustParseAddr("192.168.10.2"), netip.MustParseAddr("10.244.1.5")
	synTo := func(sport, dport uint16) kerneltest.FrameSpec {
		return kerneltest.FrameSpec{Proto: "tcp", Src: client, Dst: server, SrcPort: sport, DstPort: dport, TCPFlags: "SYN", Seq: 1000}
	}
	withPayload := func(sport uint16, payload string) kerneltest.FrameSpec {
		f := synTo(sport, 80)
		f.TCPFlags, f.Payload = "PSH,ACK", []byte(payload)
		return f
	}
	udp := func(sport uint16, n int) kerneltest.FrameSpec {
		return kerneltest.FrameSpec{Proto: "udp", Src: client, Dst: server, SrcPort: sport, DstPort: 53, PayloadLen: n}
	}
	hm := func(d time.Duration) string { return now.Add(d).Format("15:04") }
	wd := now.Weekday()
	if wd == time.Sunday {
		wd = 7
	}
	other := wd%7 + 1
	return []extKernelCase{
		{"hashlimit-packets", []string{
			"-p tcp -m hashlimit --hashlimit-upto 1/min --hashlimit-burst 3 --hashlimit-mode srcip --hashlimit-name pwk1 -j ACCEPT",
			"-p tcp -m hashlimit --hashlimit-above 1/hour --hashlimit-burst 2 --hashlimit-mode dstport --hashlimit-name pwk2",
		}, []kerneltest.FrameSpec{synTo(1, 80), synTo(2, 81), synTo(3, 80), synTo(4, 80), synTo(5, 81), synTo(6, 80)}},
		{"hashlimit-bytes", []string{
			"-m hashlimit --hashlimit-upto 2kb/s --hashlimit-name pwk3 -j ACCEPT",
		}, []kerneltest.FrameSpec{udp(1, 1000), udp(2, 1000), udp(3, 100), udp(4, 1000)}},
		{"hashlimit-shared", []string{
			"-p udp -m hashlimit --hashlimit-upto 1/min --hashlimit-burst 2 --hashlimit-name pwk4 -j ACCEPT",
			"-p tcp -m hashlimit --hashlimit-upto 50/sec --hashlimit-burst 50 --hashlimit-name pwk4 -j ACCEPT",
		}, []kerneltest.FrameSpec{udp(1, 10), synTo(1, 80), synTo(2, 80), synTo(3, 80)}},
		{"quota", []string{
			"-m quota --quota 200 -j ACCEPT",
			"-m quota ! --quota 100",
		}, []kerneltest.FrameSpec{udp(1, 50), udp(2, 50), udp(3, 100), udp(4, 10), udp(5, 10)}},
		{"connlimit", []string{
			"-p tcp --syn -m connlimit --connlimit-above 2 -j DROP",
			"-p tcp --syn -m connlimit --connlimit-upto 1 --connlimit-mask 16 --connlimit-daddr",
		}, []kerneltest.FrameSpec{synTo(1, 80), synTo(2, 80), synTo(3, 80), synTo(4, 80)}},
		{"string", []string{
			`-m string --string "GET /" --algo bm`,
			`-m string --string "get /" --algo kmp --icase --from 52`,
			`-m string --string "GET /" --algo bm --to 44`,
			`-m string --hex-string "|c0a8 0a02|" --algo bm --to 16`,
			`-m string ! --string "HTTP" --algo kmp`,
		}, []kerneltest.FrameSpec{withPayload(1, "GET / HTTP/1.1\r\n"), withPayload(2, "POST /x"), udp(3, 20)}},
		{"u32-bpf", []string{
			`-m u32 --u32 "6&0xFF=6"`,
			`-m u32 --u32 "0>>22&0x3C@12>>26&0x3C@0=0x47455420"`,
			`-m u32 --u32 "0>>22&0x3C@12>>26&0x3C@8=0"`,
			`-m u32 ! --u32 "0&0xFFFF=40:60"`,
			`-m bpf --bytecode "4,48 0 0 9,21 0 1 17,6 0 0 1,6 0 0 0"`,
		}, []kerneltest.FrameSpec{withPayload(1, "GET /"), withPayload(2, "GET /index.html"), synTo(3, 80), udp(4, 100)}},
		{"time", []string{
			fmt.Sprintf("-m time --timestart %s --timestop %s", hm(-20*time.Minute), hm(20*time.Minute)),
			fmt.Sprintf("-m time --timestart %s --timestop %s", hm(time.Hour), hm(2*time.Hour)),
			fmt.Sprintf("-m time --weekdays %d", wd),
			fmt.Sprintf("-m time --weekdays %d", other),
			fmt.Sprintf("-m time --monthdays %d --kerneltz", now.Day()),
			fmt.Sprintf("-m time --datestop %s", now.Add(-time.Hour).Format("2006-01-02T15:04:05")),
			fmt.Sprintf("-m time --datestart %s", now.Add(-time.Hour).Format("2006-01-02T15:04:05")),
		}, []kerneltest.FrameSpec{udp(1, 10)}},
		{"policy-ipvs-free", []string{
			"-m policy --dir in --pol none",
			"-m policy --dir in --pol ipsec",
			"-m policy --dir out --pol none",
			"-m policy --dir out --pol ipsec --strict --proto esp",
		}, []kerneltest.FrameSpec{udp(1, 10)}},
	}
}

// TestKernelExtMatches runs the issue-19 matches in the lab and in the
// model and compares every rule's packet count.
func TestKernelStatefulMatches(t *testing.T) {
	kerneltest.Require(t)
	now := time.Now().UTC()
	runExtKernelCases(t, IPv4, extKernelCases(now), now)
}

// TestKernelStatefulMatches6 does the same for IPv6 masks and headers.
func TestKernelStatefulMatches6(t *testing.T) {
	kerneltest.Require(t)
	c1, c2 := netip.MustParseAddr("fd00:10::2"), netip.MustParseAddr("fd00:10:0:0:1::2")
	server := netip.MustParseAddr("fd00:244::5")
	udp := func(src netip.Addr, sport uint16, n int) kerneltest.FrameSpec {
		return kerneltest.FrameSpec{Proto: "udp", Src: src, Dst: server, SrcPort: sport, DstPort: 53, PayloadLen: n}
	}
	syn := func(src netip.Addr, sport uint16) kerneltest.FrameSpec {
		return kerneltest.FrameSpec{Proto: "tcp", Src: src, Dst: server, SrcPort: sport, DstPort: 80, TCPFlags: "SYN", Seq: 1}
	}
	now := time.Now().UTC()
	runExtKernelCases(t, IPv6, []extKernelCase{
		{"hashlimit-srcmask", []string{
			"-m hashlimit --hashlimit-upto 1/min --hashlimit-burst 2 --hashlimit-mode srcip --hashlimit-srcmask 64 --hashlimit-name pwk6a -j ACCEPT",
			"-m hashlimit --hashlimit-upto 1/min --hashlimit-burst 1 --hashlimit-mode srcip --hashlimit-name pwk6b",
		}, []kerneltest.FrameSpec{udp(c1, 1, 10), udp(c2, 2, 10), udp(c1, 3, 10), udp(c1, 4, 10), udp(c2, 5, 10)}},
		{"connlimit-mask", []string{
			"-p tcp --syn -m connlimit --connlimit-above 1 --connlimit-mask 64 -j DROP",
		}, []kerneltest.FrameSpec{syn(c1, 1), syn(c2, 2), syn(c1, 3)}},
		{"u32-string", []string{
			`-m u32 --u32 "4&0xFF00=0x1100"`,
			`-m string --hex-string "|fd00 0010 0000 0000 0001|" --algo bm --to 24`,
			`-m quota --quota 100`,
		}, []kerneltest.FrameSpec{udp(c1, 1, 10), udp(c2, 2, 10), syn(c1, 3)}},
	}, now)
}

func runExtKernelCases(t *testing.T, f Family, cases []extKernelCase, now time.Time) {
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-exts"})
	cfg := lab.Config()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rules := "*filter\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
			for _, r := range tc.rules {
				rules += "-A FORWARD " + r + "\n"
			}
			rules += "COMMIT\n"
			rs := kerneltest.Ruleset{IPv4: rules}
			if f == IPv6 {
				rs = kerneltest.Ruleset{IPv6: rules}
			}
			require.NoError(t, lab.ResetRuleset(rs))
			require.NoError(t, lab.FlushConntrack())
			h := labHost(t, cfg, HostConfig{Clock: NewManualClock(now)}, f, rules)
			fh := NewFrameHost(h)
			for _, spec := range tc.frames {
				frame, err := lab.Frame(spec)
				require.NoError(t, err)
				_, err = lab.Exchange(frame)
				require.NoError(t, err)
				_, err = fh.ReceiveFrame("eth0", frame)
				require.NoError(t, err)
			}
			cnt, err := lab.Counters()
			if f == IPv6 {
				cnt, err = lab.Counters6()
			}
			require.NoError(t, err)
			model := h.Ruleset(f).Table(Filter).Chain("FORWARD").Rules
			var diffs []string
			for i, r := range tc.rules {
				k, ok := cnt.Rule("filter", "FORWARD", i+1)
				require.True(t, ok)
				if k.Packets != model[i].Counters.Packets || k.Bytes != model[i].Counters.Bytes {
					diffs = append(diffs, fmt.Sprintf("rule %d %q: kernel %d/%d, model %d/%d", i+1, r, k.Packets, k.Bytes, model[i].Counters.Packets, model[i].Counters.Bytes))
				}
			}
			var got []string
			for i := range tc.rules {
				got = append(got, fmt.Sprint(model[i].Counters.Packets))
			}
			t.Logf("packets per rule: %s", strings.Join(got, " "))
			assert.Empty(t, diffs, strings.Join(diffs, "\n"))
		})
	}
}

// TestKernelRPFilter compares -m rpfilter's verdicts on sources that are
// routed back through the receiving interface, through the other one,
// nowhere, or to the node itself.
func TestKernelRPFilter(t *testing.T) {
	kerneltest.Require(t)
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-exts-rp"})
	cfg := lab.Config()
	rules := []string{"-m rpfilter", "-m rpfilter --loose", "-m rpfilter --accept-local", "-m rpfilter --invert", "-m rpfilter --loose --accept-local --validmark"}
	in := "*raw\n:PREROUTING ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
	for _, r := range rules {
		in += "-A PREROUTING -i eth0 -p udp " + r + "\n"
	}
	in += "-A PREROUTING -i eth0 -p udp -j DROP\nCOMMIT\n"
	for _, src := range []string{"192.168.10.2", "10.244.1.9", "172.16.0.1", "192.168.10.1", "10.244.1.1"} {
		t.Run(src, func(t *testing.T) {
			require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv4: in}))
			h := NewHost(HostConfig{})
			require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0))
			require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1))
			require.NoError(t, h.Restore(IPv4, []byte(in), RestoreOptions{}))
			frame, err := lab.Frame(kerneltest.FrameSpec{Proto: "udp", Src: netip.MustParseAddr(src), Dst: netip.MustParseAddr("10.244.1.5"), SrcPort: 1, DstPort: 9})
			require.NoError(t, err)
			_, err = lab.Exchange(frame)
			require.NoError(t, err)
			_, err = NewFrameHost(h).ReceiveFrame("eth0", frame)
			require.NoError(t, err)
			cnt, err := lab.Counters()
			require.NoError(t, err)
			assertSameRuleCounters(t, h, IPv4, cnt, false)
		})
	}
}

// socketListenerScript listens, in the namespace it runs in, on the
// sockets TestKernelSocket models, prints "ready" and waits for stdin to
// close.
const socketListenerScript = `
import socket, sys
IP_TRANSPARENT = 19
def listen(addr, port, transparent=False, mark=0):
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if transparent:
        s.setsockopt(socket.SOL_IP, IP_TRANSPARENT, 1)
    if mark:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_MARK, mark)
    s.bind((addr, port))
    s.listen()
    return s
keep = [listen("0.0.0.0", 80), listen("192.168.10.1", 81), listen("0.0.0.0", 82, True, 7), listen("192.168.10.1", 83, True, 9)]
print("ready", flush=True)
sys.stdin.read()
`

// TestKernelSocket compares -m socket with listeners in the node: wildcard
// and specific binds, transparent or not, and --restore-skmark.
func TestKernelSocket(t *testing.T) {
	kerneltest.Require(t)
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is needed to open the listening sockets in the namespace")
	}
	lab := kerneltest.NewLab(t, kerneltest.LabConfig{Prefix: "pw-exts-sk"})
	cfg := lab.Config()
	cmd := exec.Command("ip", "netns", "exec", lab.Node().Name(), "python3", "-c", socketListenerScript)
	stdin, err := cmd.StdinPipe()
	require.NoError(t, err)
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = stdin.Close(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err)
	require.Equal(t, "ready\n", line)

	rules := []string{"-m socket", "-m socket --nowildcard", "-m socket --transparent", "-m socket --transparent --nowildcard",
		"-m socket --nowildcard --restore-skmark", "-m mark --mark 7", "-m mark --mark 9"}
	in := "*mangle\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n"
	for _, r := range rules {
		in += "-A PREROUTING -i eth0 -p tcp " + r + "\n"
	}
	in += "-A PREROUTING -i eth0 -p tcp -j DROP\nCOMMIT\n"
	for _, port := range []uint16{80, 81, 82, 83, 84} {
		t.Run(fmt.Sprint(port), func(t *testing.T) {
			require.NoError(t, lab.ResetRuleset(kerneltest.Ruleset{IPv4: in}))
			h := NewHost(HostConfig{})
			require.NoError(t, h.AddInterface("eth0", cfg.NodeEth0))
			require.NoError(t, h.AddInterface("eth1", cfg.NodeEth1))
			node := netip.MustParseAddr("192.168.10.1")
			for _, s := range []Socket{
				{Proto: inet.TCP, Addr: netip.IPv4Unspecified(), Port: 80},
				{Proto: inet.TCP, Addr: node, Port: 81},
				{Proto: inet.TCP, Addr: netip.IPv4Unspecified(), Port: 82, Transparent: true, Mark: 7},
				{Proto: inet.TCP, Addr: node, Port: 83, Transparent: true, Mark: 9},
			} {
				require.NoError(t, h.AddSocket(s))
			}
			require.NoError(t, h.Restore(IPv4, []byte(in), RestoreOptions{}))
			frame, err := lab.Frame(kerneltest.FrameSpec{Proto: "tcp", Src: netip.MustParseAddr("192.168.10.2"), Dst: node, SrcPort: 5000, DstPort: port, TCPFlags: "SYN", Seq: 1})
			require.NoError(t, err)
			_, err = lab.Exchange(frame)
			require.NoError(t, err)
			_, err = NewFrameHost(h).ReceiveFrame("eth0", frame)
			require.NoError(t, err)
			cnt, err := lab.Counters()
			require.NoError(t, err)
			assertSameRuleCounters(t, h, IPv4, cnt, false)
		})
	}
}
