package inet

import (
	"errors"
	"fmt"
	"net/netip"
	"testing"
)

func TestProtoNames(t *testing.T) {
	for _, tc := range []struct {
		p         Proto
		iptables  string
		conntrack string
		ports     bool
	}{
		{0, "all", "unknown", false},
		{TCP, "tcp", "tcp", true},
		{UDP, "udp", "udp", true},
		{ICMP, "icmp", "icmp", false},
		{ICMPv6, "ipv6-icmp", "icmpv6", false},
		{SCTP, "sctp", "sctp", true},
		{UDPLite, "udplite", "udplite", true},
		{DCCP, "dccp", "dccp", true},
		{GRE, "gre", "gre", false},
		{200, "200", "unknown", false},
	} {
		if got := tc.p.String(); got != tc.iptables {
			t.Errorf("Proto(%d).String() = %q, want %q", tc.p, got, tc.iptables)
		}
		if got := tc.p.ConntrackName(); got != tc.conntrack {
			t.Errorf("Proto(%d).ConntrackName() = %q, want %q", tc.p, got, tc.conntrack)
		}
		if got := tc.p.HasPorts(); got != tc.ports {
			t.Errorf("Proto(%d).HasPorts() = %v, want %v", tc.p, got, tc.ports)
		}
	}
}

func TestParseProto(t *testing.T) {
	for in, want := range map[string]Proto{"tcp": TCP, "6": TCP, "TCP": TCP, "all": 0, "0": 0, "icmpv6": ICMPv6, "ipv6-icmp": ICMPv6, "255": 255, "mh": 135} {
		if got, ok := ParseProto(in); !ok || got != want {
			t.Errorf("ParseProto(%q) = %d, %v; want %d", in, got, ok, want)
		}
	}
	for _, in := range []string{"", "256", "Tcp", "-1", "nope"} {
		if got, ok := ParseProto(in); ok {
			t.Errorf("ParseProto(%q) = %d, want a refusal", in, got)
		}
	}
}

func TestTCPFlags(t *testing.T) {
	if got := (SYN | ACK).String(); got != "SYN,ACK" {
		t.Errorf("got %q", got)
	}
	if got := TCPFlags(0).String(); got != "NONE" {
		t.Errorf("got %q", got)
	}
	for in, want := range map[string]TCPFlags{"syn,ack": SYN | ACK, "ALL": FIN | SYN | RST | PSH | ACK | URG, "NONE": 0, "CWR,ECE": CWR | ECE} {
		if got, ok := ParseTCPFlags(in); !ok || got != want {
			t.Errorf("ParseTCPFlags(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	if _, ok := ParseTCPFlags("SYN,BOGUS"); ok {
		t.Error("ParseTCPFlags accepted BOGUS")
	}
}

func TestNotModelled(t *testing.T) {
	e := NotModelled("set type not supported")
	if e.Error() != "set type not supported" || !errors.Is(e, ErrNotModelled) || !errors.Is(fmt.Errorf("line 2: %w", e), ErrNotModelled) {
		t.Errorf("NotModelled: %v does not read or match as ErrNotModelled", e)
	}
	if errors.Is(errors.New("not modelled by packetwalk"), ErrNotModelled) || errors.Is(e, NotModelled("set type not supported")) {
		t.Error("an unrelated error matches")
	}
}

func TestAppendAddr(t *testing.T) {
	for in, want := range map[string]string{
		"10.1.2.3":         "10.1.2.3",
		"::":               "::",
		"::1":              "::1",
		"::5:0":            "::0.5.0.0",
		"::102:304":        "::1.2.3.4",
		"::ffff:10.1.2.3":  "::ffff:10.1.2.3",
		"fd00::1":          "fd00::1",
		"::ff":             "::ff",
		"2001:db8::10:0:0": "2001:db8::10:0:0",
	} {
		if got := string(AppendAddr(nil, netip.MustParseAddr(in))); got != want {
			t.Errorf("AppendAddr(%s) = %q, want %q", in, got, want)
		}
	}
}
