package netfilter

import (
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// extHost is a host with eth0 10.0.0.1/24 and eth1 10.1.0.1/24 whose
// filter INPUT policy is DROP, with rules appended to INPUT.
func extHost(t *testing.T, clock *ManualClock, rules ...string) *Host {
	t.Helper()
	h := NewHost(HostConfig{Clock: clock})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.1.0.1/24")))
	in := "*filter\n:INPUT DROP [0:0]\n:FORWARD ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n"
	for _, r := range rules {
		in += "-A INPUT " + r + "\n"
	}
	require.NoError(t, h.Restore(IPv4, []byte(in+"COMMIT\n"), RestoreOptions{}))
	return h
}

func syn(src string, sport uint16, dport uint16) Packet {
	return TCP(netip.AddrPortFrom(netip.MustParseAddr(src), sport), netip.AddrPortFrom(netip.MustParseAddr("10.0.0.1"), dport), inet.SYN)
}

func verdicts(h *Host, iface string, ps ...Packet) string {
	var b strings.Builder
	for _, p := range ps {
		if h.Receive(iface, p).Verdict == VerdictAccept {
			b.WriteByte('A')
		} else {
			b.WriteByte('D')
		}
	}
	return b.String()
}

func TestHashlimitSemantics(t *testing.T) {
	clk := NewManualClock(time.Unix(1700000000, 0))
	h := extHost(t, clk, "-p tcp -m hashlimit --hashlimit-upto 2/sec --hashlimit-burst 3 --hashlimit-mode srcip --hashlimit-name t -j ACCEPT")
	a, b := syn("10.0.0.5", 1, 22), syn("10.0.0.6", 1, 22)
	// A bucket per source: three at once, then one every half second.
	assert.Equal(t, "AAAD", verdicts(h, "eth0", a, a, a, a))
	assert.Equal(t, "AAAD", verdicts(h, "eth0", b, b, b, b))
	clk.Advance(499 * time.Millisecond)
	assert.Equal(t, "D", verdicts(h, "eth0", a))
	clk.Advance(time.Millisecond)
	assert.Equal(t, "AD", verdicts(h, "eth0", a, a))
	// An idle entry expires (1 s for a per-second rate) and starts full.
	clk.Advance(2 * time.Second)
	assert.Equal(t, "AAAD", verdicts(h, "eth0", a, a, a, a))
}

func TestHashlimitAboveAndBytes(t *testing.T) {
	clk := NewManualClock(time.Unix(1700000000, 0))
	h := extHost(t, clk, "-m hashlimit --hashlimit-above 1/sec --hashlimit-burst 1 --hashlimit-name ab -j DROP", "-j ACCEPT")
	p := syn("10.0.0.5", 1, 22)
	assert.Equal(t, "ADD", verdicts(h, "eth0", p, p, p))
	// 1kb/s: a 1000-byte packet costs 63 chunks of 16 bytes; the bucket
	// holds one second's worth (1024 bytes = 64 chunks).
	h = extHost(t, clk, "-m hashlimit --hashlimit-upto 1kb/s --hashlimit-name by -j ACCEPT")
	p.Length = 1000
	assert.Equal(t, "AD", verdicts(h, "eth0", p, p))
}

func TestHashlimitSharedTable(t *testing.T) {
	// Two rules naming the same table share its buckets and its first
	// rule's options, as the kernel's htable_find_get does.
	clk := NewManualClock(time.Unix(1700000000, 0))
	h := extHost(t, clk,
		"-p tcp --dport 22 -m hashlimit --hashlimit-upto 1/min --hashlimit-burst 2 --hashlimit-name s -j ACCEPT",
		"-p tcp --dport 23 -m hashlimit --hashlimit-upto 100/sec --hashlimit-burst 100 --hashlimit-name s -j ACCEPT")
	assert.Equal(t, "AAD", verdicts(h, "eth0", syn("10.0.0.5", 1, 22), syn("10.0.0.5", 2, 23), syn("10.0.0.5", 3, 23)))
	// A reload keeps the table (and its buckets) while a rule names it.
	require.NoError(t, h.Restore(IPv4, []byte("*filter\n-A INPUT -p tcp --dport 24 -m hashlimit --hashlimit-upto 5/sec --hashlimit-name s -j ACCEPT\nCOMMIT\n"), RestoreOptions{NoFlush: true}))
	assert.Equal(t, "D", verdicts(h, "eth0", syn("10.0.0.5", 4, 24)))
}

func TestHashlimitParseErrors(t *testing.T) {
	for spec, want := range map[string]error{
		"-m hashlimit --hashlimit-name x":                                                    ErrMissingArgument,
		"-m hashlimit --hashlimit-upto 5/sec":                                                ErrMissingArgument,
		"-m hashlimit --hashlimit-upto 5/fortnight --hashlimit-name x":                       ErrBadValue,
		"-m hashlimit --hashlimit-upto 5 --hashlimit-burst 1000001 --hashlimit-name x":       ErrBadValue,
		"-m hashlimit --hashlimit-upto 7kb/s --hashlimit-name x --hashlimit-htable-expire 0": ErrBadValue,
		"-m hashlimit --hashlimit-upto 5/sec --hashlimit-name x --hashlimit-mode none":       ErrBadValue,
		"-m hashlimit --hashlimit-upto 1kb/s --hashlimit-burst 10 --hashlimit-name x":        ErrBadValue,
		"-m hashlimit --hashlimit-upto 5/sec --hashlimit-above 3/sec --hashlimit-name x":     ErrIncompatibleOpts,
		"-m hashlimit --hashlimit-upto 5/sec --hashlimit-name x --hashlimit-srcmask 33":      ErrBadValue,
		"-m connlimit --connlimit-mask 16":                                                   ErrMissingArgument,
		"-m connlimit --connlimit-upto 3 --connlimit-above 4":                                ErrIncompatibleOpts,
		"-m time --contiguous":                                               ErrIncompatibleOpts,
		"-m time --datestart 1969-01-01":                                     ErrBadValue,
		"-m time --weekdays mon":                                             ErrBadValue,
		"-m time --monthdays 32":                                             ErrBadValue,
		"-m time --timestart 24:00":                                          ErrBadValue,
		"-m string --string abc":                                             ErrMissingArgument,
		"-m string --string abc --algo xx":                                   ErrBadValue,
		"-m string --algo kmp --string x --from 10 --to 5":                   ErrBadValue,
		"-m string --algo bm --string \"\"":                                  ErrBadValue,
		"-m u32 --u32 0":                                                     ErrBadValue,
		"-m u32 --u32 0=1&&0=1&&0=1&&0=1&&0=1&&0=1&&0=1&&0=1&&0=1&&0=1&&0=1": ErrBadValue,
		"-m bpf --bytecode \"2,6 0 0 0\"":                                    ErrBadValue,
		"-m bpf --bytecode \"1,0 0 0 0\"":                                    ErrBadValue,
		"-m bpf --object-pinned /sys/fs/bpf/x":                               ErrNotModelled,
		"-m policy --pol ipsec":                                              ErrMissingArgument,
		"-m policy --dir in --pol ipsec --next":                              ErrMissingArgument,
		"-m policy --dir in --pol ipsec --tunnel-src 1.2.3.4":                ErrIncompatibleOpts,
		"-m osf --genre Linux":                                               ErrNotAllowed,
		"-m ipvs":                                                            ErrMissingArgument,
		"-m ipvs ! --ipvs --vport 80":                                        ErrIncompatibleOpts,
	} {
		rs := NewRuleset(IPv4)
		err := rs.Exec("-A INPUT " + spec)
		assert.ErrorIs(t, err, want, spec)
	}
}

func TestConnlimitSemantics(t *testing.T) {
	clk := NewManualClock(time.Unix(1700000000, 0))
	h := extHost(t, clk, "-p tcp --syn -m connlimit --connlimit-above 2 --connlimit-mask 24 -j DROP", "-j ACCEPT")
	// Two connections from 10.0.0.0/24 are confirmed; the third SYN counts
	// 3 > 2 and is dropped; a source in another /24 has its own count.
	assert.Equal(t, "AAD", verdicts(h, "eth0", syn("10.0.0.5", 1, 80), syn("10.0.0.6", 2, 80), syn("10.0.0.7", 3, 80)))
	assert.Equal(t, "A", verdicts(h, "eth1", syn("10.1.0.5", 1, 80)))
	// The dropped connection never reached conntrack: once the jiffy it
	// was added in is over, it leaves the list, but the two live ones
	// still count.
	clk.Advance(10 * time.Millisecond)
	assert.Equal(t, "D", verdicts(h, "eth0", syn("10.0.0.8", 4, 80)))
	// A connection conntrack forgot no longer counts.
	h.Conntrack().Flush()
	clk.Advance(10 * time.Millisecond)
	assert.Equal(t, "AA", verdicts(h, "eth0", syn("10.0.0.5", 5, 80), syn("10.0.0.5", 6, 80)))
}

func TestQuotaSemantics(t *testing.T) {
	h := extHost(t, nil, "-m quota --quota 100 -j ACCEPT")
	p := syn("10.0.0.5", 1, 22) // 40 bytes
	assert.Equal(t, "AADD", verdicts(h, "eth0", p, p, p, p))
	p.Length = 20 // fits in the 20 bytes that were left, but the overrun emptied the quota
	assert.Equal(t, "D", verdicts(h, "eth0", p))
	h = extHost(t, nil, "-m quota ! --quota 50 -j ACCEPT")
	p.Length = 40
	assert.Equal(t, "DAA", verdicts(h, "eth0", p, p, p))
}

func TestTimeSemantics(t *testing.T) {
	// 2024-01-01 is a Monday.
	at := func(s string) *ManualClock {
		tm, err := time.Parse("2006-01-02 15:04", s)
		require.NoError(t, err)
		return NewManualClock(tm)
	}
	h := NewHost(HostConfig{})
	m := parseMatch(t, IPv4, "T", "-m time --timestart 09:00 --timestop 17:00 --weekdays Mon")
	for when, want := range map[string]bool{"2024-01-01 10:00": true, "2024-01-01 17:00": true, "2024-01-01 17:01": false, "2024-01-02 10:00": false} {
		h.clock = at(when)
		assert.Equal(t, want, evalOn(h, m, Packet{}), when)
	}
	// --kerneltz reads the host's kernel timezone: UTC+2 is 120 minutes east.
	m = parseMatch(t, IPv4, "T", "-m time --timestart 09:00 --timestop 17:00 --kerneltz")
	h = NewHost(HostConfig{KernelTZMinutesWest: -120, Clock: at("2024-01-01 08:00")})
	assert.True(t, evalOn(h, m, Packet{}))
	h = NewHost(HostConfig{Clock: at("2024-01-01 08:00")})
	assert.False(t, evalOn(h, m, Packet{}), "UTC by default")
	// A window across midnight: with --contiguous, Tuesday 01:00 belongs
	// to Monday's window.
	cont := parseMatch(t, IPv4, "T", "-m time --timestart 22:00 --timestop 02:00 --weekdays Mon --contiguous")
	plain := parseMatch(t, IPv4, "T", "-m time --timestart 22:00 --timestop 02:00 --weekdays Mon")
	h.clock = at("2024-01-02 01:00")
	assert.True(t, evalOn(h, cont, Packet{}))
	assert.False(t, evalOn(h, plain, Packet{}))
	h.clock = at("2024-01-01 01:00")
	assert.False(t, evalOn(h, cont, Packet{}))
	assert.True(t, evalOn(h, plain, Packet{}))
	dates := parseMatch(t, IPv4, "T", "-m time --datestart 2024-01-01T12:00 --datestop 2024-01-31 --monthdays 1,15")
	for when, want := range map[string]bool{"2024-01-01 11:59": false, "2024-01-01 12:00": true, "2024-01-15 00:00": true, "2024-01-16 00:00": false} {
		h.clock = at(when)
		assert.Equal(t, want, evalOn(h, dates, Packet{}), when)
	}
}

// rawTCP returns a TCP packet whose Raw bytes carry payload.
func rawTCP(dport uint16, payload string) Packet {
	p := syn("10.0.0.5", 1000, dport)
	p.TCPFlags = inet.PSH | inet.ACK
	p.Length += len(payload)
	p.Raw = string(buildHeaders(nil, &p)) + payload
	return p
}

func TestStringSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	get := rawTCP(80, "GET /index.html HTTP/1.1\r\n")
	cases := []struct {
		spec string
		p    Packet
		want bool
	}{
		{`-m string --string "GET /" --algo bm`, get, true},
		{`-m string --string "get /" --algo bm`, get, false},
		{`-m string --string "get /" --algo kmp --icase`, get, true},
		{`-m string --string "GET /" --algo bm --from 40`, get, true},
		{`-m string --string "GET /" --algo bm --from 41`, get, false},
		{`-m string --string "GET /" --algo bm --to 45`, get, true}, // the pattern ends at byte 45
		{`-m string --string "GET /" --algo bm --to 44`, get, false},
		{`-m string ! --string "POST" --algo bm`, get, true},
		{`-m string --hex-string "|0a000001|" --algo bm`, syn("10.0.0.5", 1, 22), true}, // the destination in the built header
	}
	for _, tc := range cases {
		m := parseMatch(t, IPv4, "T", tc.spec)
		assert.Equal(t, tc.want, evalOn(h, m, tc.p), tc.spec)
	}
}

func TestU32AndBPFSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	get := rawTCP(80, "GET /")
	udp := UDP(netip.MustParseAddrPort("10.0.0.5:53"), netip.MustParseAddrPort("10.0.0.1:53"))
	cases := []struct {
		spec string
		p    Packet
		want bool
	}{
		{`-m u32 --u32 "6&0xFF=6"`, get, true},
		{`-m u32 --u32 "6&0xFF=6"`, udp, false},
		{`-m u32 --u32 "0>>22&0x3C@12>>26&0x3C@0=0x47455420"`, get, true}, // "GET " at the TCP payload
		{`-m u32 --u32 "0>>22&0x3C@12>>26&0x3C@0=0x47455420"`, rawTCP(80, "POST"), false},
		{`-m u32 --u32 "0>>22&0x3C@12>>26&0x3C@4=0"`, rawTCP(80, "GET "), false}, // reads past the end
		{`-m u32 ! --u32 "0>>22&0x3C@12>>26&0x3C@4=0"`, rawTCP(80, "GET "), true},
		{`-m u32 --u32 "0>>22&0x3C@0>>16=80"`, get, false}, // the source port
		{`-m u32 --u32 "0>>22&0x3C@0&0xFFFF=80"`, get, true},
		{`-m u32 --u32 "0&0xFFFF=0x2d"`, get, true}, // IP total length 45
		{`-m bpf --bytecode "4,48 0 0 9,21 0 1 6,6 0 0 1,6 0 0 0"`, get, true},
		{`-m bpf --bytecode "4,48 0 0 9,21 0 1 6,6 0 0 1,6 0 0 0"`, udp, false},
		{`-m bpf --bytecode "2,32 0 0 100,6 0 0 1"`, udp, false}, // load past the end returns 0
	}
	for _, tc := range cases {
		m := parseMatch(t, IPv4, "T", tc.spec)
		assert.Equal(t, tc.want, evalOn(h, m, tc.p), tc.spec)
	}
}

func TestPolicyIPVSSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	for spec, want := range map[string]bool{
		"-m policy --dir in --pol none":                true,
		"-m policy --dir in --pol ipsec":               false,
		"-m policy --dir in --pol ipsec ! --proto esp": false,
		"-m ipvs --ipvs":                               false,
		"-m ipvs ! --ipvs":                             true,
		"-m ipvs --vport 80":                           false,
		"-m ipvs ! --vport 80":                         false,
		"-m ipvs --vaddr 10.0.0.0/8 --vdir ORIGINAL":   false,
	} {
		m := parseMatch(t, IPv4, "T", spec)
		assert.Equal(t, want, evalOn(h, m, syn("10.0.0.5", 1, 80)), spec)
	}
	// An output policy cannot be tested in INPUT (EINVAL).
	_, err := ParseRestore(IPv4, []byte("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m policy --dir out --pol none\nCOMMIT\n"))
	assert.ErrorIs(t, err, ErrNotAllowed)
	r := lastRule(t, IPv4, "filter", "T", "-m ipvs --vproto tcp --vaddr 10.0.0.0/8 --vport 80 --vdir REPLY --vmethod masq ! --vportctl 21")
	assert.Equal(t, " -m ipvs --proto 6 --vaddr 10.0.0.0/8 --vport 80 --vdir REPLY --vmethod MASQ ! --vportctl 21", r.String())
}

func TestRPFilterSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("10.1.0.1/24")))
	pkt := func(in, src, dst string) Packet {
		p := syn(src, 1, 80)
		p.Dst, p.In = netip.MustParseAddr(dst), in
		return p
	}
	cases := []struct {
		opts string
		p    Packet
		want bool
	}{
		{"", pkt("eth0", "10.0.0.5", "10.0.0.1"), true},
		{"", pkt("eth1", "10.0.0.5", "10.0.0.1"), false},
		{"--loose", pkt("eth1", "10.0.0.5", "10.0.0.1"), true},
		{"--loose", pkt("eth0", "192.168.9.9", "10.0.0.1"), false}, // no route back
		{"", pkt("eth0", "10.0.0.1", "10.0.0.1"), false},
		{"--accept-local", pkt("eth0", "10.0.0.1", "10.0.0.1"), true},
		{"--accept-local", pkt("eth1", "10.0.0.1", "10.0.0.1"), false},
		{"--invert", pkt("eth1", "10.0.0.5", "10.0.0.1"), true},
		{"", pkt("lo", "10.9.9.9", "10.0.0.1"), true},
		{"", pkt("eth0", "0.0.0.0", "255.255.255.255"), true},
	}
	for _, tc := range cases {
		m := lastRule(t, IPv4, "raw", "PREROUTING", "-m rpfilter "+tc.opts).Matches[0]
		assert.Equal(t, tc.want, evalOn(h, m, tc.p), "%s %s from %s", tc.opts, tc.p.In, tc.p.Src)
	}
	require.NoError(t, h.AddRoute(Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth1", Gateway: netip.MustParseAddr("10.1.0.254")}))
	m := lastRule(t, IPv4, "raw", "PREROUTING", "-m rpfilter").Matches[0]
	assert.True(t, evalOn(h, m, pkt("eth1", "192.168.9.9", "10.0.0.1")), "the default route leads back through eth1")
	_, err := ParseRestore(IPv4, []byte("*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -m rpfilter\nCOMMIT\n"))
	assert.ErrorIs(t, err, ErrNotAllowed)
}

func TestSocketSemantics(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddSocket(Socket{Proto: inet.TCP, Addr: netip.IPv4Unspecified(), Port: 80}))
	require.NoError(t, h.AddSocket(Socket{Proto: inet.TCP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 3128, Transparent: true, Mark: 7}))
	require.NoError(t, h.AddSocket(Socket{Proto: inet.UDP, Addr: netip.MustParseAddr("10.0.0.1"), Port: 53}))
	assert.ErrorIs(t, h.AddSocket(Socket{Proto: inet.ICMP, Addr: netip.IPv4Unspecified()}), ErrBadValue)
	cases := []struct {
		opts string
		p    Packet
		want bool
		mark uint32
	}{
		{"", syn("10.0.0.5", 1, 80), false, 0}, // a wildcard listener does not count
		{"--nowildcard", syn("10.0.0.5", 1, 80), true, 0},
		{"--nowildcard --transparent", syn("10.0.0.5", 1, 80), false, 0},
		{"--transparent --restore-skmark", syn("10.0.0.5", 1, 3128), true, 7},
		{"", syn("10.0.0.5", 1, 81), false, 0},
		{"", UDP(netip.MustParseAddrPort("10.0.0.5:1"), netip.MustParseAddrPort("10.0.0.1:53")), true, 0},
		{"--transparent", UDP(netip.MustParseAddrPort("10.0.0.5:1"), netip.MustParseAddrPort("10.0.0.1:53")), false, 0},
	}
	for _, tc := range cases {
		m := lastRule(t, IPv4, "mangle", "PREROUTING", "-m socket "+tc.opts).Matches[0]
		p := tc.p
		c := &evalCtx{pkt: &p, host: h, walk: &walk{}}
		assert.Equal(t, tc.want, m.match(c), "%s to %v", tc.opts, p.DstPort)
		assert.Equal(t, tc.mark, p.Mark, "%s mark", tc.opts)
	}
}

func TestRefusedAtLoad(t *testing.T) {
	// osf parses and prints, but a host refuses to load it by name.
	in := "*filter\n:INPUT ACCEPT [0:0]\n-A INPUT -p tcp -m osf --genre Linux\nCOMMIT\n"
	rs, err := ParseRestore(IPv4, []byte(in))
	require.NoError(t, err)
	assert.Contains(t, rs.String(), "-A INPUT -p tcp -m osf --genre Linux\n")
	h := NewHost(HostConfig{})
	err = h.Restore(IPv4, []byte(in), RestoreOptions{})
	assert.ErrorIs(t, err, ErrNotModelled)
	assert.Contains(t, err.Error(), "osf")
}

func TestFrameHostFillsRaw(t *testing.T) {
	h := extHost(t, nil, `-p tcp -m string --string "GET /" --algo bm -j ACCEPT`)
	fh := NewFrameHost(h)
	fh.Raw = true
	get := rawTCP(80, "GET / HTTP/1.0\r\n\r\n")
	get.Dst = netip.MustParseAddr("10.0.0.1")
	frame := []byte(get.Raw)
	// A valid IPv4 header checksum for the decoder.
	var sum uint32
	for i := 0; i < 20; i += 2 {
		sum += uint32(frame[i])<<8 | uint32(frame[i+1])
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	ck := ^uint16(sum)
	frame[10], frame[11] = byte(ck>>8), byte(ck)
	res, err := fh.ReceiveFrame("eth0", frame)
	require.NoError(t, err)
	assert.Equal(t, VerdictAccept, res.Verdict)
	post := []byte(strings.Replace(string(frame), "GET", "PUT", 1))
	res, err = fh.ReceiveFrame("eth0", post)
	require.NoError(t, err)
	assert.Equal(t, VerdictDrop, res.Verdict)
}

// The stateless issue-19 matches, and the stateful ones once their state
// exists, cost no allocation per packet.
func TestStatefulMatchesDoNotAllocate(t *testing.T) {
	clk := NewManualClock(time.Unix(1700000000, 0))
	h := extHost(t, clk,
		`-m string --string "GET /" --algo bm`,
		`-m u32 --u32 "0>>22&0x3C@12>>26&0x3C@0=0x47455420"`,
		`-m bpf --bytecode "4,48 0 0 9,21 0 1 6,6 0 0 1,6 0 0 0"`,
		"-m time --timestart 09:00 --timestop 17:00 --weekdays Mon,Tue --kerneltz",
		"-m quota --quota 1000000000",
		"-m policy --dir in --pol none",
		"-m hashlimit --hashlimit-upto 1000000/sec --hashlimit-burst 1000000 --hashlimit-mode srcip --hashlimit-name al",
	)
	p := syn("10.0.0.5", 1, 80) // no Raw: headers are built into the host's scratch buffer
	h.Receive("eth0", p)
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.Receive("eth0", p) }))
	p.Raw = string(buildHeaders(nil, &p))
	assert.Zero(t, testing.AllocsPerRun(100, func() { h.Receive("eth0", p) }))
	// connlimit needs conntrack, whose tracking of this repeated SYN costs
	// what it costs without connlimit.
	allocs := func(rule string) float64 {
		h := extHost(t, clk, rule)
		h.Receive("eth0", p)
		return testing.AllocsPerRun(100, func() { h.Receive("eth0", p) })
	}
	assert.Equal(t, allocs("-m conntrack --ctstate NEW"), allocs("-m connlimit --connlimit-above 100"))
}

// Every prefix of every rule of the issue-19 corpora, and each with one
// argument replaced by a bad value, is parsed without a panic, leniently
// or not; an error always wraps a sentinel.
func TestExtTruncatedRulesDoNotPanic(t *testing.T) {
	for _, name := range []string{"ext-stateful.rules", "ext-payload.rules", "ext-host.rules", "ext-stateful6.rules6", "ext-host6.rules6"} {
		data, err := os.ReadFile(filepath.Join(goldenDir, name))
		require.NoError(t, err)
		f := IPv4
		if strings.HasSuffix(name, "6") {
			f = IPv6
		}
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.HasPrefix(line, "-A ") {
				continue
			}
			args, err := appendArgs(nil, line)
			require.NoError(t, err)
			for n := 2; n <= len(args); n++ {
				for _, bad := range []string{"", "x", "!", "-1", "99999999999999999999", "0x", ":", ",", "|", "@"} {
					variant := append(append([]string(nil), args[:n]...), bad)
					for _, l := range []Lenient{LenientOff, LenientAlwaysMatch} {
						p := &ruleParser{lenient: l}
						_, _, err := parseRuleSpecWith(p, ruleCtx{family: f, table: Filter, chain: "INPUT"}, variant[2:])
						if err != nil {
							assert.True(t, wrapsSentinel(err), "%q: %v", variant, err)
						}
					}
				}
			}
		}
	}
}

// Explain reads hashlimit buckets, quotas and connlimit lists without
// spending from them.
func TestExtExplainChangesNothing(t *testing.T) {
	clk := NewManualClock(time.Unix(1700000000, 0))
	h := extHost(t, clk,
		"-p tcp --dport 22 -m hashlimit --hashlimit-upto 1/min --hashlimit-burst 1 --hashlimit-name ex -j ACCEPT",
		"-p tcp --dport 23 -m quota --quota 40 -j ACCEPT",
		"-p tcp --dport 24 -m connlimit --connlimit-upto 1 -j ACCEPT")
	for _, port := range []uint16{22, 23, 24} {
		p := syn("10.0.0.5", port, port)
		for i := 0; i < 3; i++ {
			out, err := h.Explain("eth0", p)
			require.NoError(t, err)
			require.Len(t, out, 1)
			assert.Equal(t, VerdictAccept, out[0].Result.Verdict, "explain %d", port)
		}
		assert.Equal(t, "A", verdicts(h, "eth0", p), "first packet to %d", port)
		p.SrcPort++
		assert.Equal(t, "D", verdicts(h, "eth0", p), "second packet to %d", port)
	}
}
