package conntrack

import (
	"bytes"
	"errors"
	"net/netip"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Lines recorded from the real conntrack -L (docs/kernel-notes.md,
// "conntrack: entries through DNAT and MASQUERADE")
// (kube-proxy style DNAT + MASQUERADE --random-fully, CONNMARK marks).
func TestGroundTruthLinesRoundTrip(t *testing.T) {
	data, err := os.ReadFile("testdata/groundtruth.txt")
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	require.GreaterOrEqual(t, len(lines), 10)
	for _, line := range lines {
		e, f, err := ParseEntry(line, epoch)
		require.NoError(t, err, line)
		assert.Equal(t, line, string(e.AppendText(nil, epoch, f)))
	}
	e, _, err := ParseEntry(lines[len(lines)-1], epoch)
	require.NoError(t, err)
	assert.Equal(t, TCPSynSent, e.TCPState)
	assert.Equal(t, uint32(2), e.Use())
	assert.Zero(t, e.Status&StatusSeenReply)
	assert.Equal(t, StatusSrcNAT|StatusDstNAT, e.Status&StatusNATMask)
	assert.Equal(t, 119*time.Second, e.Timeout(epoch))
}

func TestParsePrintVariants(t *testing.T) {
	tests := []string{
		"tcp      6 431999 ESTABLISHED src=192.168.10.2 dst=10.96.0.10 sport=37738 dport=80 packets=3 bytes=180 src=10.244.1.7 dst=10.244.1.1 sport=8080 dport=32988 packets=2 bytes=120 [ASSURED] mark=27 use=1",
		"ipv6     10 udp      17 29 src=fd00::1 dst=fd00::2 sport=1 dport=2 [UNREPLIED] src=fd00::2 dst=fd00::1 sport=2 dport=1 mark=0 zone=3 use=1 id=7",
		"icmpv6   58 29 src=fd00::1 dst=fd00::2 type=128 code=0 id=5 src=fd00::2 dst=fd00::1 type=129 code=0 id=5 mark=0 use=1",
		"unknown  112 599 src=10.0.0.1 dst=224.0.0.18 [UNREPLIED] src=224.0.0.18 dst=10.0.0.1 mark=0 use=1",
		"tcp      6 0 CLOSE src=1.1.1.1 dst=2.2.2.2 sport=1 dport=2 src=2.2.2.2 dst=1.1.1.1 sport=2 dport=1 [OFFLOAD] mark=4294967295 use=1",
	}
	for _, line := range tests {
		e, f, err := ParseEntry(line, epoch)
		require.NoError(t, err, line)
		assert.Equal(t, line, string(e.AppendText(nil, epoch, f)))
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		line, token, msg string
		sentinel         error
	}{
		{"", "", "expected a protocol name", ErrSyntax},
		{"tcp 7 1 ESTABLISHED", "tcp", `protocol 7 is printed as "unknown"`, ErrSyntax},
		{"tcp 6 x", "x", "expected timeout", ErrSyntax},
		{"tcp 6 1 OPEN", "OPEN", "expected a TCP state", ErrSyntax},
		{"udp 17 1 src=1.1.1.1 dst=2.2.2.2 sport=70000 dport=2", "sport=70000", "sport must be a number", ErrSyntax},
		{"udp 17 1 src=1.1.1.1 dst=2.2.2.2 sport=1 dport=2 src=2.2.2.2 dst=fd00::1", "dst=fd00::1", "address family", ErrSyntax},
		{"udp 17 1 src=1.1.1.1 dst=2.2.2.2 sport=1 dport=2 src=2.2.2.2 dst=1.1.1.1 sport=2 dport=1 mark=0 foo=1", "foo=1", "expected mark=", ErrSyntax},
		{"udp 17 1 src=1.1.1.1 dst=2.2.2.2 sport=1 dport=2 src=2.2.2.2 dst=1.1.1.1 sport=2 dport=1 secmark=0", "secmark=0", "field secmark", ErrNotModelled},
		{"sctp     132 1 CLOSED src=1.1.1.1", "sctp", "protocol sctp", ErrNotModelled},
		{"ipv4     10 udp", "10", "ipv4 is protocol 2", ErrSyntax},
		{"udp 17 1 src=1.1.1.1 dst=2.2.2.2 sport=1", "", "expected dport=", ErrSyntax},
		{"udp 17 1 src=1.1.1.1 dst=2.2.2.2 sport=1 dport=2 packets=1 bytes=2 src=2.2.2.2 dst=1.1.1.1 sport=2 dport=1 mark=0", "mark=0", "counters must follow both", ErrSyntax},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			_, _, err := ParseEntry(tc.line, epoch)
			require.Error(t, err)
			var pe *ParseError
			require.True(t, errors.As(err, &pe), "%T", err)
			assert.Equal(t, 1, pe.Line)
			assert.Equal(t, tc.token, pe.Token)
			assert.ErrorIs(t, err, tc.sentinel)
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	_, err := Parse(strings.NewReader("conntrack v1.4.7 (conntrack-tools): 0 flow entries have been shown.\n\nudp 17 x\n"), epoch)
	var pe *ParseError
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, 3, pe.Line)
	assert.Equal(t, `conntrack: line 3: token "x": syntax error: expected timeout in seconds in "udp 17 x"`, err.Error())
}

func TestTableDumpRestore(t *testing.T) {
	data, err := os.ReadFile("testdata/list.txt")
	require.NoError(t, err)
	tb, clk := newTestTable(t, Config{})
	require.NoError(t, tb.Restore(bytes.NewReader(data)))
	assert.Equal(t, 8, tb.Len())

	var buf bytes.Buffer
	_, err = tb.WriteTo(&buf)
	require.NoError(t, err)
	got := strings.Split(strings.TrimSpace(buf.String()), "\n")
	assert.ElementsMatch(t, recordedLines(t, "testdata/list.txt"), got)
	assert.True(t, strings.HasPrefix(got[0], "icmp "), "sorted by protocol number: %s", got[0])

	// A restored ESTABLISHED entry keeps steering its flow.
	info := track(t, tb, tcpFacts("192.168.10.2:41002", "10.96.0.10:80", inet.ACK))
	assert.Equal(t, StateEstablished, info.State)
	assert.Equal(t, ip("10.244.1.5"), info.Entry.Reply().Src)
	require.ErrorIs(t, tb.Restore(bytes.NewReader(data)), ErrClash)

	// Time passes: only the refreshed long-lived entry remains.
	clk.Advance(300 * time.Second)
	buf.Reset()
	require.NoError(t, tb.Dump(&buf, Format{Extended: true}))
	assert.Equal(t, "ipv4     2 tcp      6 431700 ESTABLISHED src=192.168.10.2 dst=10.96.0.10 sport=41002 dport=80 src=10.244.1.5 dst=10.244.1.1 sport=8080 dport=41002 [ASSURED] mark=0 use=1\n", buf.String())
}

func FuzzParse(f *testing.F) {
	for _, name := range []string{"testdata/list.txt", "testdata/list-extended.txt", "testdata/list-id.txt", "testdata/list-acct.txt", "testdata/groundtruth.txt"} {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		for _, l := range strings.Split(string(data), "\n") {
			f.Add(l)
		}
	}
	f.Add("icmpv6   58 29 src=fd00::1 dst=fd00::2 type=128 code=0 id=5 src=fd00::2 dst=fd00::1 type=129 code=0 id=5 mark=0 use=1")
	f.Add("unknown  112 599 src=10.0.0.1 dst=224.0.0.18 [UNREPLIED] src=224.0.0.18 dst=10.0.0.1 mark=0 zone=2 use=1")
	f.Fuzz(func(t *testing.T, line string) {
		e, format, err := ParseEntry(line, epoch)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %T is not a *ParseError: %v", err, err)
			}
			return
		}
		text := e.AppendText(nil, epoch, format)
		e2, format2, err := ParseEntry(string(text), epoch)
		if err != nil {
			t.Fatalf("reparse of %q: %v", text, err)
		}
		if format != format2 || !sameEntry(e, e2) {
			t.Fatalf("round trip changed the entry:\n%q\n%q\n%+v\n%+v", line, text, e, e2)
		}
	})
}

func sameEntry(a, b *Entry) bool {
	return a.Original() == b.Original() && a.Reply() == b.Reply() && a.Status == b.Status &&
		a.TCPState == b.TCPState && a.Mark == b.Mark && a.Counters == b.Counters &&
		a.Expires().Equal(b.Expires()) && a.ID == b.ID && a.Use() == b.Use()
}

// Dump in table order prints the same lines as the sorted listing, in
// pieces, without reaping anything it has not printed.
func TestDumpTableOrderStreams(t *testing.T) {
	tb, clk := newTestTable(t, Config{})
	for i := range 2000 {
		tp := TupleFrom(inet.UDP, netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), 1000), ap("10.2.0.1:53"))
		e := NewEntry(tp, tp.Reverse())
		e.SetExpires(clk.Now().Add(time.Duration(1+i%3) * time.Minute))
		require.NoError(t, tb.Insert(e))
	}
	clk.Advance(time.Minute) // a third expire
	var sorted, table chunkWriter
	require.NoError(t, tb.Dump(&table, Format{TableOrder: true}))
	require.NoError(t, tb.Dump(&sorted, Format{}))
	want := strings.Split(strings.TrimSuffix(sorted.String(), "\n"), "\n")
	got := strings.Split(strings.TrimSuffix(table.String(), "\n"), "\n")
	require.Len(t, want, 1333)
	assert.NotEqual(t, want, got, "table order is hash order")
	slices.Sort(got)
	slices.Sort(want)
	assert.Equal(t, want, got)
	assert.Greater(t, table.writes, 1)
	for _, n := range table.sizes {
		assert.Less(t, n, 70<<10)
	}
}

type chunkWriter struct {
	strings.Builder
	writes int
	sizes  []int
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	c.writes++
	c.sizes = append(c.sizes, len(p))
	return c.Builder.Write(p)
}
