package main

import (
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

func testHost(t *testing.T) *netfilter.Host {
	t.Helper()
	h := netfilter.NewHost(netfilter.HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.168.10.1/24")))
	require.NoError(t, h.AddInterface("eth1", netip.MustParsePrefix("fd00::1/64")))
	return h
}

func TestResolveDefaults(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		spec string
		n    int
		want netfilter.Packet
		in   string
	}{
		{"in=eth0 src=192.168.10.2 dst=192.168.10.1", 3, netfilter.Packet{Family: netfilter.IPv4, Proto: 6,
			Src: a("192.168.10.2"), Dst: a("192.168.10.1"), SrcPort: 40003, DstPort: 80, TCPFlags: inet.SYN, TTL: 64, Length: 40, Seq: 1000, Window: 64240}, "eth0"},
		{"proto=udp dst=8.8.8.8 dport=53 len=32 mark=0x10 ttl=5", 1, netfilter.Packet{Family: netfilter.IPv4, Proto: 17,
			Dst: a("8.8.8.8"), SrcPort: 40001, DstPort: 53, TTL: 5, Length: 20 + 8 + 32, Mark: 0x10}, ""},
		{"proto=icmp in=local dst=192.168.10.7", 2, netfilter.Packet{Family: netfilter.IPv4, Proto: 1,
			Dst: a("192.168.10.7"), ICMPType: 8, ICMPID: 2, TTL: 64, Length: 28}, ""},
		{"proto=icmpv6 type=echo-reply id=9 code=0 src=fd00::2 dst=fd00::1 in=eth1", 1, netfilter.Packet{Family: netfilter.IPv6, Proto: 58,
			Src: a("fd00::2"), Dst: a("fd00::1"), ICMPType: 129, ICMPID: 9, TTL: 64, Length: 48}, "eth1"},
		{"dst=fd00::9 sport=1 dport=2 flags=FA", 1, netfilter.Packet{Family: netfilter.IPv6, Proto: 6,
			Dst: a("fd00::9"), SrcPort: 1, DstPort: 2, TCPFlags: inet.FIN | inet.ACK, TTL: 64, Length: 60, Seq: 1000, Window: 64240}, ""},
		{"proto=sctp dst=10.0.0.1 flags=none", 1, netfilter.Packet{}, ""}, // refused below: flags on sctp
		{"proto=47 dst=10.0.0.1", 1, netfilter.Packet{Family: netfilter.IPv4, Proto: 47, Dst: a("10.0.0.1"), TTL: 64, Length: 20}, ""},
	} {
		s, err := parseSpec(tc.spec)
		if tc.want.Proto == 0 {
			assert.Error(t, err, tc.spec)
			continue
		}
		require.NoError(t, err, tc.spec)
		prior := make([]outcome, tc.n-1)
		p, in, err := s.resolve(tc.n, prior, testHost(t))
		require.NoError(t, err, tc.spec)
		assert.Equal(t, tc.want, p, tc.spec)
		assert.Equal(t, tc.in, in, tc.spec)
	}
}

func TestParseSpecErrors(t *testing.T) {
	for _, tc := range []struct{ spec, token, msg string }{
		{"", "", "empty packet"},
		{"dst=10.0.0.1 dst=10.0.0.2", "dst=10.0.0.2", "given twice"},
		{"dst=10.0.0.1 color=red", "color=red", `unknown key "color"`},
		{"dst=10.0.0.1 sport", "sport", "expected key=value"},
		{"dst=10.0.0.1 dport=", "dport=", "empty value"},
		{"dst=10.0.0.1 dport=65536", "dport=65536", "port 0-65535"},
		{"dst=10.0.0.300", "dst=10.0.0.300", "bad address"},
		{"dst=fe80::1%eth0", "dst=fe80::1%eth0", "bad address"},
		{"src=10.0.0.1", "src=10.0.0.1", "missing dst="},
		{"src=fd00::1 dst=10.0.0.1", "src=fd00::1 dst=10.0.0.1", "different families"},
		{"proto=gre dst=10.0.0.1", "proto=gre", "bad protocol"},
		{"proto=icmp dst=10.0.0.1 dport=80", "dport=80", "needs proto tcp"},
		{"dst=10.0.0.1 type=8", "type=8", "needs proto icmp"},
		{"proto=udp dst=10.0.0.1 flags=S", "flags=S", "needs proto tcp"},
		{"proto=icmp dst=fd00::1", "proto=icmp", "use proto=icmpv6"},
		{"proto=icmpv6 dst=10.0.0.1", "proto=icmpv6", "use proto=icmp"},
		{"dst=10.0.0.1 flags=SYN", "flags=SYN", `bad TCP flag "Y"`},
		{"dst=10.0.0.1 mark=0x1ffffffff", "mark=0x1ffffffff", "bad mark"},
		{"dst=10.0.0.1 ttl=256", "ttl=256", "TTL 0-255"},
		{"dst=10.0.0.1 after=-1", "after=-1", "bad delay"},
		{"dst=10.0.0.1 after=NaN", "after=NaN", "bad delay"},
		{"reply=0", "reply=0", "packet number"},
		{"dst=10.0.0.1 in=a/b", "in=a/b", "bad interface name"},
		{"proto=icmp dst=10.0.0.1 type=ping", "type=ping", "ICMP type"},
	} {
		_, err := parseSpec(tc.spec)
		var se *specError
		require.True(t, errors.As(err, &se), "%q: %v", tc.spec, err)
		if tc.token != "" {
			assert.Equal(t, tc.token, se.token, tc.spec)
		}
		assert.Contains(t, se.msg, tc.msg, tc.spec)
	}
}

func TestResolveReply(t *testing.T) {
	h := testHost(t)
	a := netip.MustParseAddr
	first := netfilter.Packet{Family: netfilter.IPv4, Proto: 6, Src: a("192.168.10.2"), Dst: a("10.0.0.5"),
		SrcPort: 40001, DstPort: 80, TCPFlags: inet.SYN, TTL: 63, Out: "eth1", Mark: 0x4000}
	ping := netfilter.Packet{Family: netfilter.IPv4, Proto: 1, Src: a("192.168.10.1"), Dst: a("192.168.10.2"),
		ICMPType: 8, ICMPID: 2, TTL: 64, Out: "eth0"}
	prior := []outcome{
		{res: netfilter.Result{Disposition: netfilter.Forwarded, Packet: first}},
		{res: netfilter.Result{Disposition: netfilter.Sent, Packet: ping}},
		{res: netfilter.Result{Disposition: netfilter.Dropped, Packet: first}},
		{res: netfilter.Result{Disposition: netfilter.Delivered, Packet: netfilter.Packet{Proto: 17, Src: a("192.168.10.2"), Dst: a("192.168.10.1"), SrcPort: 5, DstPort: 53}}},
	}
	for _, tc := range []struct {
		spec string
		want netfilter.Packet
		in   string
		err  string
	}{
		{"reply=1", netfilter.Packet{Family: netfilter.IPv4, Proto: 6, Src: a("10.0.0.5"), Dst: a("192.168.10.2"),
			SrcPort: 80, DstPort: 40001, TCPFlags: inet.SYN | inet.ACK, TTL: 64, Length: 40, Seq: 5000, Ack: 1, Window: 64240}, "eth1", ""},
		{"reply=1 flags=A len=10 in=eth0", netfilter.Packet{Family: netfilter.IPv4, Proto: 6, Src: a("10.0.0.5"), Dst: a("192.168.10.2"),
			SrcPort: 80, DstPort: 40001, TCPFlags: inet.ACK, TTL: 64, Length: 50, Seq: 5000, Ack: 1, Window: 64240}, "eth0", ""},
		{"reply=2", netfilter.Packet{Family: netfilter.IPv4, Proto: 1, Src: a("192.168.10.2"), Dst: a("192.168.10.1"),
			ICMPType: 0, ICMPID: 2, TTL: 64, Length: 28}, "eth0", ""},
		{"reply=4", netfilter.Packet{Family: netfilter.IPv4, Proto: 17, Src: a("192.168.10.1"), Dst: a("192.168.10.2"),
			SrcPort: 53, DstPort: 5, TTL: 64, Length: 28}, "", ""},
		{"reply=3", netfilter.Packet{}, "", "packet 3 was dropped"},
		{"reply=5", netfilter.Packet{}, "", "does not come earlier"},
		{"reply=2 dport=5", netfilter.Packet{}, "", "dport= needs proto tcp"},
	} {
		s, err := parseSpec(tc.spec)
		require.NoError(t, err, tc.spec)
		p, in, err := s.resolve(5, prior, h)
		if tc.err != "" {
			require.Error(t, err, tc.spec)
			assert.Contains(t, err.Error(), tc.err, tc.spec)
			continue
		}
		require.NoError(t, err, tc.spec)
		assert.Equal(t, tc.want, p, tc.spec)
		assert.Equal(t, tc.in, in, tc.spec)
	}
}

func TestParseSpecAfter(t *testing.T) {
	s, err := parseSpec("dst=10.0.0.1 after=1.5")
	require.NoError(t, err)
	assert.Equal(t, 1500*time.Millisecond, s.after)
}

func TestParsePacketsFile(t *testing.T) {
	specs, err := parsePacketsFile([]byte("# c\n\n  dst=10.0.0.1  \nreply=1\n"))
	require.NoError(t, err)
	require.Len(t, specs, 2)
	assert.Equal(t, 3, specs[0].sourceLine)
	assert.Equal(t, 4, specs[1].sourceLine)

	_, err = parsePacketsFile([]byte("dst=10.0.0.1\n\ndst=1.2.3.4 flags=Q\n"))
	var le *lineError
	require.True(t, errors.As(err, &le))
	assert.Equal(t, 3, le.line)
	assert.EqualError(t, err, `line 3: bad TCP flag "Q": expected letters S A F R P U E C, or none at "flags=Q"`)
}

func TestFlagString(t *testing.T) {
	for in, want := range map[string]string{"S": "S", "AS": "SA", "AF": "FA", "RA": "RA", "PA": "PA", "none": "none", "UEC": "UEC"} {
		f, err := parseTCPFlags("flags="+in, in)
		require.NoError(t, err)
		assert.Equal(t, want, flagString(f), in)
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{
		"in=eth0 src=192.168.10.2 dst=10.96.0.10 dport=80",
		"proto=icmp type=echo-request code=0 id=7 dst=10.0.0.1",
		"proto=icmpv6 dst=fd00::1 src=fd00::2 in=eth1 ttl=1",
		"reply=1 flags=A after=0.25 mark=0xffffffff len=1400",
		"proto=17 dst=::ffff:10.0.0.1 sport=0 dport=65535",
		"dst=10.0.0.1 flags=SAFRPUEC",
	} {
		f.Add(s)
	}
	h := netfilter.NewHost(netfilter.HostConfig{})
	_ = h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24"))
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := parseSpec(s)
		if err != nil {
			var se *specError
			if !errors.As(err, &se) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		prior := []outcome{{res: netfilter.Result{Disposition: netfilter.Sent, Packet: netfilter.Packet{
			Proto: 6, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"), Out: "eth0"}}}}
		p, _, err := spec.resolve(2, prior, h)
		if err == nil && (p.Length < 20 || p.Length > 65535+40) {
			t.Fatalf("length %d out of range for %q", p.Length, s)
		}
	})
}

// TestResolveTCPNumbers runs a handshake written as specs through a
// node and checks the numbers the kernel lab's frames carry (SYN seq
// 1000; SYN-ACK seq 5000 ack 1001; ACK seq 1001 ack 5001), then a data
// segment and explicit keys.
func TestResolveTCPNumbers(t *testing.T) {
	h := testHost(t)
	var prior []outcome
	run := func(spec string) netfilter.Packet {
		t.Helper()
		s, err := parseSpec(spec)
		require.NoError(t, err, spec)
		p, in, err := s.resolve(len(prior)+1, prior, h)
		require.NoError(t, err, spec)
		var res netfilter.Result
		if in == "" {
			res = h.Send(p)
		} else {
			res = h.Receive(in, p)
		}
		prior = append(prior, outcome{n: len(prior) + 1, spec: s, in: in, input: p, res: res})
		return p
	}
	type nums struct {
		Seq, Ack uint32
		Win      uint16
	}
	of := func(p netfilter.Packet) nums { return nums{p.Seq, p.Ack, p.Window} }
	assert.Equal(t, nums{1000, 0, 64240}, of(run("in=eth0 src=192.168.10.2 dst=192.168.10.1 sport=40001 dport=22 flags=S")))
	assert.Equal(t, nums{5000, 1001, 64240}, of(run("reply=1")))
	assert.Equal(t, nums{1001, 5001, 64240}, of(run("in=eth0 src=192.168.10.2 dst=192.168.10.1 sport=40001 dport=22 flags=A")))
	assert.Equal(t, nums{1001, 5001, 64240}, of(run("in=eth0 src=192.168.10.2 dst=192.168.10.1 sport=40001 dport=22 flags=PA len=100")))
	assert.Equal(t, nums{5001, 1101, 502}, of(run("reply=4 flags=A win=502")))
	assert.Equal(t, nums{7, 8, 64240}, of(run("in=eth0 src=192.168.10.2 dst=192.168.10.1 sport=40001 dport=22 flags=A seq=7 ack=8")))
	assert.Equal(t, nums{1000, 0, 64240}, of(run("in=eth0 src=192.168.10.2 dst=192.168.10.1 sport=40002 dport=22 flags=S")), "another flow")
}

func TestParseSpecTCPNumbersErrors(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"dst=10.0.0.1 seq=4294967296", `bad value: expected TCP sequence number 0-4294967295 at "seq=4294967296"`},
		{"dst=10.0.0.1 ack=-1", `bad value: expected TCP sequence number 0-4294967295 at "ack=-1"`},
		{"dst=10.0.0.1 win=65536", `bad value: expected TCP window 0-65535 at "win=65536"`},
		{"proto=udp dst=10.0.0.1 seq=1", `seq= needs proto tcp, not udp at "seq=1"`},
	} {
		_, err := parseSpec(tc.spec)
		require.Error(t, err, tc.spec)
		assert.Equal(t, tc.want, err.Error(), tc.spec)
	}
}

// Ports may be service names, looked up among the entries of the packet's
// protocol as getservbyname(name, proto) does, wherever proto= appears.
func TestParseSpecPortNames(t *testing.T) {
	for _, tc := range []struct {
		spec         string
		sport, dport uint16
	}{
		{"dst=10.0.0.1 dport=https", 0, 443},
		{"dport=ssh dst=10.0.0.1 sport=http", 80, 22},
		{"dst=10.0.0.1 dport=www", 0, 80}, // alias of http
		{"dport=domain proto=udp dst=10.0.0.1 sport=mdns", 5353, 53},
		{"proto=udp dst=10.0.0.1 dport=syslog", 0, 514},
		{"dst=10.0.0.1 dport=syslog", 0, 514}, // tcp: an alias of shell
		{"proto=sctp dst=10.0.0.1 dport=amqp", 0, 5672},
		{"dst=10.0.0.1 dport=0", 0, 0},
	} {
		s, err := parseSpec(tc.spec)
		require.NoError(t, err, tc.spec)
		assert.Equal(t, tc.sport, s.sport, tc.spec)
		assert.Equal(t, tc.dport, s.dport, tc.spec)
	}
	for _, tc := range []struct{ spec, token, msg string }{
		{"dst=10.0.0.1 dport=mdns", "dport=mdns", `unknown tcp service "mdns"`},        // udp only
		{"proto=udp dst=10.0.0.1 sport=ssh", "sport=ssh", `unknown udp service "ssh"`}, // tcp only
		{"proto=sctp dst=10.0.0.1 dport=http", "dport=http", `unknown sctp service "http"`},
		{"proto=udplite dst=10.0.0.1 dport=domain", "dport=domain", `unknown udplite service`},
		{"dst=10.0.0.1 dport=HTTP", "dport=HTTP", `unknown tcp service "HTTP"`},
		{"dst=10.0.0.1 dport=80x", "dport=80x", "port 0-65535"},
		{"reply=1 dport=http", "dport=http", "needs proto="},
		{"proto=icmp dst=10.0.0.1 dport=http", "dport=http", "needs proto tcp"},
	} {
		_, err := parseSpec(tc.spec)
		var se *specError
		require.True(t, errors.As(err, &se), "%q: %v", tc.spec, err)
		assert.Equal(t, tc.token, se.token, tc.spec)
		assert.Contains(t, se.msg, tc.msg, tc.spec)
	}
}
