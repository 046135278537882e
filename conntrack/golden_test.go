package conntrack

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordedLines returns the entry lines of a listing recorded by
// testdata/record.sh (the stderr summary is skipped).
func recordedLines(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); l != "" && !strings.HasPrefix(l, "conntrack v") {
			out = append(out, l)
		}
	}
	require.NoError(t, sc.Err())
	require.NotEmpty(t, out, path)
	return out
}

// recordNode is the model of record.sh's node: its DNAT rules and
// MASQUERADE on eth1.
func recordNode(tb *Table) *node {
	return &node{tb: tb, masq: ip("10.244.1.1"), dnat: func(tp Tuple) (NATRange, bool) {
		switch {
		case tp.Dst == ip("10.96.0.10") && tp.Proto == inet.TCP && tp.DstPort == 80:
			return NATRange{MinAddr: ip("10.244.1.5"), MinPort: 8080}, true
		case tp.Dst == ip("10.96.0.10") && tp.Proto == inet.TCP && tp.DstPort == 82:
			return NATRange{MinAddr: ip("10.244.1.99"), MinPort: 80}, true
		case tp.Dst == ip("10.96.0.10") && tp.Proto == inet.TCP && tp.DstPort == 81:
			return NATRange{MinAddr: ip("10.244.1.5"), MinPort: 9999}, true
		case tp.Dst == ip("10.96.0.53") && tp.Proto == inet.UDP && tp.DstPort == 53:
			return NATRange{MinAddr: ip("10.244.1.5"), MinPort: 5353}, true
		case tp.Dst == ip("10.96.0.54") && tp.Proto == inet.UDP && tp.DstPort == 53:
			return NATRange{MinAddr: ip("10.244.1.5"), MinPort: 5999}, true
		case tp.Dst == ip("10.96.0.20") && tp.Proto == inet.ICMP:
			return NATRange{MinAddr: ip("10.244.1.5")}, true
		}
		return NATRange{}, false
	}}
}

// readTimes reads times.txt: when each flow of record.sh ended, as
// offsets from the first flow.
func readTimes(t *testing.T, dir string) map[string]time.Duration {
	data, err := os.ReadFile(filepath.Join(dir, "times.txt"))
	require.NoError(t, err)
	out := map[string]time.Duration{}
	var first float64
	for i, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		name, v, ok := strings.Cut(l, " ")
		require.True(t, ok, l)
		sec, err := strconv.ParseFloat(v, 64)
		require.NoError(t, err, l)
		if i == 0 {
			first = sec
		}
		out[name] = time.Duration((sec - first) * float64(time.Second))
	}
	return out
}

// simulateRecordedFlows runs record.sh's flows through the model on the
// recorded timeline and leaves the clock at the time of the listing. A
// reply is the server's packet, addressed to what the server saw.
func simulateRecordedFlows(t *testing.T, times map[string]time.Duration) (*Table, *manualClock) {
	tb, clk := newTestTable(t, Config{})
	at := func(name string) {
		d, ok := times[name]
		require.True(t, ok, "times.txt lacks %s", name)
		clk.now = epoch.Add(d)
	}
	n := recordNode(tb)
	exchange := func(f Facts, flags ...inet.TCPFlags) {
		// flags alternate: even index original, odd index reply.
		var toServer Tuple
		for i, fl := range flags {
			g := f
			g.TCPFlags = fl
			if i%2 == 1 {
				g.Tuple = toServer.Reverse()
			}
			out, _, ok := n.forward(t, g)
			require.True(t, ok)
			if i%2 == 0 {
				toServer = out.Tuple
			}
		}
	}
	// 1. UDP stream, two exchanges 3 s apart.
	stream := udpFacts("192.168.10.2:40002", "10.96.0.53:53")
	at("stream1")
	exchange(stream, 0, 0)
	at("stream2")
	exchange(stream, 0, 0)
	// 2. One UDP exchange.
	at("udp")
	exchange(udpFacts("192.168.10.2:40001", "10.96.0.53:53"), 0, 0)
	// 3. UDP to a closed port: port unreachable back.
	at("unreplied")
	sent, _, ok := n.forward(t, udpFacts("192.168.10.2:40003", "10.96.0.54:53"))
	require.True(t, ok)
	_, info, ok := n.forward(t, Facts{Tuple: ICMPTuple(ip("10.244.1.5"), ip("10.244.1.1"), 3, 3, 0), Inner: sent.Tuple})
	require.True(t, ok)
	require.Equal(t, StateRelated, info.State)
	// 4. TCP with data, client closes first.
	at("timewait")
	exchange(tcpFacts("192.168.10.2:41001", "10.96.0.10:80", 0),
		inet.SYN, inet.SYN|inet.ACK, inet.ACK, inet.ACK, inet.ACK|inet.PSH, inet.ACK|inet.PSH, inet.FIN|inet.ACK, inet.ACK, inet.ACK, inet.FIN|inet.ACK, inet.ACK)
	// 5. SYN refused by RST.
	exchange(tcpFacts("192.168.10.2:41003", "10.96.0.10:81", 0), inet.SYN, inet.RST|inet.ACK)
	// 6. ICMP echo.
	at("ping")
	exchange(Facts{Tuple: ICMPTuple(ip("192.168.10.2"), ip("10.96.0.20"), 8, 0, 4242)}, 0, 0)
	// 8. Mid-stream pickup of a bare ACK that is never answered.
	at("pickup")
	exchange(tcpFacts("192.168.10.2:41004", "10.96.0.10:82", 0), inet.ACK)
	// 9. A SYN never answered.
	at("synsent")
	exchange(tcpFacts("192.168.10.2:41005", "10.96.0.10:82", 0), inet.SYN)
	// 7. TCP held open.
	at("established")
	exchange(tcpFacts("192.168.10.2:41002", "10.96.0.10:80", 0),
		inet.SYN, inet.SYN|inet.ACK, inet.ACK, inet.ACK, inet.ACK|inet.PSH, inet.ACK|inet.PSH, inet.ACK)
	at("list")
	return tb, clk
}

// checkRecording checks a directory written by record.sh: every line
// parses and prints back byte for byte, and the model, fed the same flows,
// predicts the same entries (timeouts within 2 s).
func checkRecording(t *testing.T, dir string) {
	now := epoch
	for _, name := range []string{"list.txt", "list-extended.txt", "list-id.txt", "list-acct.txt"} {
		t.Run(name, func(t *testing.T) {
			for _, line := range recordedLines(t, filepath.Join(dir, name)) {
				e, f, err := ParseEntry(line, now)
				require.NoError(t, err, line)
				assert.Equal(t, line, string(e.AppendText(nil, now, f)))
				assert.Equal(t, name == "list-extended.txt" || name == "list-id.txt", f.Extended, line)
				assert.Equal(t, name == "list-id.txt", f.ID, line)
				assert.Equal(t, name == "list-acct.txt", f.Counters, line)
			}
		})
	}
	t.Run("model", func(t *testing.T) {
		real, err := Parse(strings.NewReader(strings.Join(recordedLines(t, filepath.Join(dir, "list.txt")), "\n")), epoch)
		require.NoError(t, err)
		tb, clk := simulateRecordedFlows(t, readTimes(t, dir))
		model := tb.Entries()
		require.Len(t, model, len(real))
		byOrig := map[Tuple]*Entry{}
		for _, e := range model {
			byOrig[e.Original()] = e
		}
		for _, r := range real {
			m, ok := byOrig[r.Original()]
			if !assert.True(t, ok, "model lacks %v", r.Original()) {
				continue
			}
			assert.Equal(t, r.Reply(), m.Reply(), "reply of %v", r.Original())
			mask := StatusSeenReply | StatusAssured | StatusNATMask
			assert.Equal(t, r.Status&mask, m.Status&mask, "status of %v", r.Original())
			assert.Equal(t, r.TCPState, m.TCPState, "tcp state of %v", r.Original())
			rs, ms := r.Timeout(epoch)/time.Second, m.Timeout(clk.Now())/time.Second
			assert.InDelta(t, float64(rs), float64(ms), 1, "timeout of %v: kernel %d, model %d", r.Original(), rs, ms)
			assert.Equal(t, r.Mark, m.Mark)
		}
		for _, e := range model {
			assert.NotEqual(t, uint16(41003), e.Original().SrcPort, "a refused SYN leaves no entry")
		}
	})
}

// checkAccounting compares the counters of record.sh's phase 2 with the
// model's: a request and its answer are counted once each (IP total
// length), and an ICMP error RELATED to a flow is not counted.
func checkAccounting(t *testing.T, dir string) {
	real, err := Parse(strings.NewReader(strings.Join(recordedLines(t, filepath.Join(dir, "list-acct.txt")), "\n")), epoch)
	require.NoError(t, err)
	tb, _ := newTestTable(t, Config{})
	n := recordNode(tb)
	fwd := func(f Facts) Facts {
		out, _, ok := n.forward(t, f)
		require.True(t, ok)
		return out
	}
	q := udpFacts("192.168.10.2:40011", "10.96.0.53:53")
	q.Len = 29
	r := fwd(q)
	fwd(Facts{Tuple: r.Tuple.Reverse(), Len: 29})
	q = udpFacts("192.168.10.2:40013", "10.96.0.54:53")
	q.Len = 29
	r = fwd(q)
	fwd(Facts{Tuple: ICMPTuple(ip("10.244.1.5"), ip("10.244.1.1"), 3, 3, 0), Inner: r.Tuple, Len: 57})
	r = fwd(Facts{Tuple: ICMPTuple(ip("192.168.10.2"), ip("10.96.0.20"), 8, 0, 4343), Len: 32})
	fwd(Facts{Tuple: r.Tuple.Reverse(), Len: 32})
	for _, dst := range []string{"10.96.0.53:53", "10.244.1.5:5353"} {
		q = udpFacts("192.168.10.2:40021", dst)
		q.Len = 29
		r = fwd(q)
		fwd(Facts{Tuple: r.Tuple.Reverse(), Len: 29})
	}

	model := map[Tuple]*Entry{}
	for _, e := range tb.Entries() {
		model[e.Original()] = e
	}
	require.Len(t, real, len(model))
	remapped := 0
	for _, e := range real {
		m, ok := model[e.Original()]
		if assert.True(t, ok, "model lacks %v", e.Original()) {
			assert.Equal(t, e.Counters, m.Counters, "counters of %v", e.Original())
			if e.Original().Proto.HasPorts() && e.Reply().DstPort != e.Original().SrcPort {
				// The clashing flow: both moved the source port to a
				// random one of the 1024-65535 class.
				assert.GreaterOrEqual(t, e.Reply().DstPort, uint16(1024))
				assert.NotEqual(t, m.Reply().DstPort, e.Original().SrcPort, "model did not remap %v", e.Original())
				assert.GreaterOrEqual(t, m.Reply().DstPort, uint16(1024))
				er, mr := e.Reply(), m.Reply()
				er.DstPort, mr.DstPort = 0, 0
				assert.Equal(t, er, mr)
				remapped++
				continue
			}
			assert.Equal(t, e.Reply(), m.Reply())
		}
	}
	assert.Equal(t, 1, remapped, "exactly the clashing flow is remapped")
}

func TestGoldenRecorded(t *testing.T) {
	checkAccounting(t, "testdata")
	checkRecording(t, "testdata")
}

// TestKernelRecord re-records the listings from the real kernel and tools
// in throwaway namespaces and checks them like the golden files.
func TestKernelRecord(t *testing.T) {
	if os.Getenv("PACKETWALK_KERNEL") != "1" {
		t.Skip("set PACKETWALK_KERNEL=1 (root, conntrack-tools, iptables, python3) to record from the kernel")
	}
	dir := t.TempDir()
	cmd := exec.Command("bash", "testdata/record.sh")
	cmd.Env = append(os.Environ(), "OUT="+dir)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "record.sh: %s", out)
	checkRecording(t, dir)
	checkAccounting(t, dir)
}
