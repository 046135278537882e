package conntrack

import (
	"net/netip"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/require"
)

// testT is what both *testing.T and *rapid.T offer.
type testT interface {
	require.TestingT
	Helper()
}

// manualClock is a Clock that moves only when told.
type manualClock struct{ now time.Time }

func (c *manualClock) Now() time.Time          { return c.now }
func (c *manualClock) Advance(d time.Duration) { c.now = c.now.Add(d) }

var epoch = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

func newTestTable(t testing.TB, cfg Config) (*Table, *manualClock) {
	t.Helper()
	clk := &manualClock{now: epoch}
	cfg.Clock = clk
	return NewTable(cfg), clk
}

func ap(s string) netip.AddrPort { return netip.MustParseAddrPort(s) }
func ip(s string) netip.Addr     { return netip.MustParseAddr(s) }

func tcpFacts(src, dst string, flags inet.TCPFlags) Facts {
	// A real window: a zero one would shorten timeouts (tcpTimeout).
	return Facts{Tuple: TupleFrom(inet.TCP, ap(src), ap(dst)), TCPFlags: flags, Len: 60, Window: 64240}
}

func udpFacts(src, dst string) Facts {
	return Facts{Tuple: TupleFrom(inet.UDP, ap(src), ap(dst)), Len: 40}
}

// track runs Track and requires no error.
func track(t testing.TB, tb *Table, f Facts) Info {
	t.Helper()
	info, err := tb.Track(&f)
	require.NoError(t, err)
	return info
}

// node models a router with a DNAT rule function and MASQUERADE on egress:
// the hooks netfilter will run, in order, for a forwarded packet.
type node struct {
	tb     *Table
	dnat   func(Tuple) (NATRange, bool)
	masq   netip.Addr // invalid: no masquerade
	random NATFlags
}

// forward passes a packet through PREROUTING (track, DNAT), POSTROUTING
// (SNAT/MASQUERADE) and confirmation, returning the packet as it leaves
// and the conntrack info. ok is false when the packet would be dropped.
func (n *node) forward(t testT, f Facts) (Facts, Info, bool) {
	t.Helper()
	info, err := n.tb.Track(&f)
	if err != nil || info.State == StateInvalid {
		return f, info, false
	}
	e := info.Entry
	if info.State == StateNew && !e.Confirmed() && !e.NATDone(DNAT) {
		if r, ok := n.dnat(f.Tuple); ok {
			require.NoError(t, n.tb.SetupNAT(e, DNAT, r))
		}
		require.NoError(t, n.tb.SetupNullNAT(e, DNAT))
	}
	if info.State == StateRelated {
		f.Tuple, f.Inner, _ = e.TranslateRelated(DNAT, info.Dir, f.Tuple, f.Inner)
	} else {
		f.Tuple, _ = e.Translate(DNAT, info.Dir, f.Tuple)
	}
	if info.State == StateNew && !e.Confirmed() && !e.NATDone(SNAT) {
		if n.masq.IsValid() {
			require.NoError(t, n.tb.SetupNAT(e, SNAT, NATRange{MinAddr: n.masq, Flags: n.random}))
		}
		require.NoError(t, n.tb.SetupNullNAT(e, SNAT))
	}
	if info.State == StateRelated {
		f.Tuple, f.Inner, _ = e.TranslateRelated(SNAT, info.Dir, f.Tuple, f.Inner)
	} else {
		f.Tuple, _ = e.Translate(SNAT, info.Dir, f.Tuple)
	}
	if err := n.tb.Confirm(e); err != nil {
		return f, info, false
	}
	return f, info, true
}
