package netfilter

import (
	"errors"
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const lenientInput = `*raw
:PREROUTING ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A PREROUTING -p udp -j CT --helper tftp
COMMIT
*filter
:INPUT ACCEPT [0:0]
:FORWARD ACCEPT [0:0]
:OUTPUT ACCEPT [0:0]
-A INPUT -p tcp -m frobnicate --level 3 ! --mode "a b" --dport 22 -j ACCEPT
-A INPUT -s 10.0.0.0/8 -p tcp -j SYNPROXY --mss 1460
-A INPUT -p tcp -m tcp --dport 80 -j DROP
COMMIT
`

func TestLenientOffRefuses(t *testing.T) {
	rs := NewRuleset(IPv4)
	err := rs.Restore([]byte(lenientInput), RestoreOptions{})
	require.Error(t, err)
	var pe *ParseError
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, 4, pe.Line)
	assert.ErrorIs(t, err, ErrNotModelled)
	_, err = ParseRestore(IPv4, []byte(lenientInput[strings.Index(lenientInput, "*filter"):]))
	require.True(t, errors.As(err, &pe))
	assert.Equal(t, 5, pe.Line)
	assert.ErrorIs(t, err, ErrUnknownMatch)
}

func TestLenientSaveListAndReport(t *testing.T) {
	rs := NewRuleset(IPv4)
	require.NoError(t, rs.Restore([]byte(lenientInput), RestoreOptions{Lenient: LenientNeverMatch}))
	save := string(rs.AppendSave(nil, SaveOptions{}))
	// The unknown parts print as given; the known parts as iptables-save
	// prints them (the implicit -m tcp of --dport appears).
	assert.Contains(t, save, "-A INPUT -p tcp -m frobnicate --level 3 ! --mode \"a b\" -m tcp --dport 22 -j ACCEPT\n")
	assert.Contains(t, save, "-A INPUT -s 10.0.0.0/8 -p tcp -j SYNPROXY --mss 1460\n")
	assert.Contains(t, save, "-A PREROUTING -p udp -j CT --helper tftp\n")
	assert.Contains(t, save, "-A INPUT -p tcp -m tcp --dport 80 -j DROP\n")
	s, err := rs.AppendRules(nil, Filter, "INPUT", 0, false)
	require.NoError(t, err)
	assert.Contains(t, string(s), "-A INPUT -s 10.0.0.0/8 -p tcp -j SYNPROXY --mss 1460\n")
	l, err := rs.AppendList(nil, Filter, "INPUT", ListOptions{Numeric: true})
	require.NoError(t, err)
	assert.Contains(t, string(l), "SYNPROXY   6    --  10.0.0.0/8           0.0.0.0/0            [unmodelled: -j SYNPROXY --mss 1460]\n")
	assert.Contains(t, string(l), "[unmodelled: -m frobnicate --level 3 ! --mode \"a b\"] tcp dpt:22")
	assert.Equal(t, []Placeholder{
		{Table: Raw, Chain: "PREROUTING", Rule: 1, Line: 4, Module: "CT", Target: true},
		{Table: Filter, Chain: "INPUT", Rule: 1, Line: 10, Module: "frobnicate"},
		{Table: Filter, Chain: "INPUT", Rule: 2, Line: 11, Module: "SYNPROXY", Target: true},
	}, rs.Placeholders())
	// The saved text restores leniently to the same ruleset.
	again := NewRuleset(IPv4)
	require.NoError(t, again.Restore([]byte(save), RestoreOptions{Lenient: LenientNeverMatch}))
	assert.Equal(t, save, string(again.AppendSave(nil, SaveOptions{})))
}

func lenientHost(t *testing.T, mode Lenient) *Host {
	t.Helper()
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("192.0.2.1/24")))
	require.NoError(t, h.Restore(IPv4, []byte(lenientInput), RestoreOptions{Lenient: mode}))
	h.Tracing = true
	return h
}

func TestLenientNeverMatch(t *testing.T) {
	h := lenientHost(t, LenientNeverMatch)
	// SSH from 10/8: the frobnicate rule never matches, SYNPROXY never
	// matches, nothing else does: the policy accepts.
	res := h.Receive("eth0", TCP(netip.MustParseAddrPort("10.1.1.1:1000"), netip.MustParseAddrPort("192.0.2.1:22"), inet.SYN))
	assert.Equal(t, Action{Kind: ActionPolicyAccept}, res.Where.Action)
	r := h.Ruleset(IPv4).Table(Filter).Chain("INPUT").Rules
	assert.Zero(t, r[0].Counters.Packets)
	assert.Zero(t, r[1].Counters.Packets)
	// Port 80 still meets the DROP after the placeholders.
	res = h.Receive("eth0", TCP(netip.MustParseAddrPort("10.1.1.1:1000"), netip.MustParseAddrPort("192.0.2.1:80"), inet.SYN))
	assert.Equal(t, VerdictDrop, res.Verdict)
	assert.Equal(t, 3, res.Where.Rule)
	assert.False(t, res.Where.Placeholder)
}

func TestLenientAlwaysMatch(t *testing.T) {
	h := lenientHost(t, LenientAlwaysMatch)
	res := h.Receive("eth0", TCP(netip.MustParseAddrPort("10.1.1.1:1000"), netip.MustParseAddrPort("192.0.2.1:22"), inet.SYN))
	assert.Equal(t, VerdictAccept, res.Verdict)
	assert.Equal(t, 1, res.Where.Rule)
	assert.True(t, res.Where.Placeholder, "the deciding rule is a placeholder")
	// Port 80: rule 1's --dport 22 fails; SYNPROXY matches and does
	// nothing (counted, marked in the trace); the DROP decides.
	res = h.Receive("eth0", TCP(netip.MustParseAddrPort("10.1.1.1:1000"), netip.MustParseAddrPort("192.0.2.1:80"), inet.SYN))
	assert.Equal(t, VerdictDrop, res.Verdict)
	marked := 0
	for _, s := range res.Trace {
		if s.Placeholder {
			marked++
			assert.Contains(t, s.Text, "SYNPROXY")
		}
	}
	assert.Equal(t, 1, marked)
	assert.Equal(t, uint64(1), h.Ruleset(IPv4).Table(Filter).Chain("INPUT").Rules[1].Counters.Packets)
}

func TestParseLenient(t *testing.T) {
	for _, l := range []Lenient{LenientOff, LenientNeverMatch, LenientAlwaysMatch} {
		got, err := ParseLenient(l.String())
		require.NoError(t, err)
		assert.Equal(t, l, got)
	}
	_, err := ParseLenient("sometimes")
	assert.ErrorIs(t, err, ErrBadValue)
}

func TestLenientKeepsRealErrors(t *testing.T) {
	// A bad value of a known module and a jump to a missing chain stay
	// errors in lenient mode.
	for _, line := range []string{"-A INPUT -p tcp --dport 99999", "-A INPUT -j NOSUCHCHAIN"} {
		rs := NewRuleset(IPv4)
		err := rs.Restore([]byte("*filter\n"+line+"\nCOMMIT\n"), RestoreOptions{Lenient: LenientAlwaysMatch})
		assert.Error(t, err, line)
		assert.False(t, strings.Contains(string(rs.AppendSave(nil, SaveOptions{})), "unmodelled"))
	}
}

func TestLenientUnmodelledModules(t *testing.T) {
	// osf parses but cannot run, rateest is refused by name, bpf refuses
	// pinned programs: a lenient host loads all three as placeholders.
	in := "*filter\n:INPUT ACCEPT [0:0]\n" +
		"-A INPUT -p tcp -m osf --genre Linux -j DROP\n" +
		"-A INPUT -m rateest --rateest1 ee --rateest-bps1 1mbit --rateest-gt -j DROP\n" +
		"-A INPUT -m bpf --object-pinned /sys/fs/bpf/prog -j DROP\nCOMMIT\n"
	h := NewHost(HostConfig{})
	require.Error(t, h.Restore(IPv4, []byte(in), RestoreOptions{}))
	require.NoError(t, h.Restore(IPv4, []byte(in), RestoreOptions{Lenient: LenientNeverMatch}))
	var names []string
	for _, p := range h.Placeholders(IPv4) {
		names = append(names, p.Module)
	}
	assert.Equal(t, []string{"osf", "rateest", "bpf"}, names)
	assert.Contains(t, h.Ruleset(IPv4).String(), "-A INPUT -m rateest --rateest1 ee --rateest-bps1 1mbit --rateest-gt -j DROP\n")
	assert.Contains(t, h.Ruleset(IPv4).String(), "-A INPUT -p tcp -m osf --genre Linux -j DROP\n")
}
