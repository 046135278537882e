package conntrack

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestNATOffset: PORT-PORT/BASE maps the port by its 16-bit offset from
// the base, then upwards while the tuple is taken, as the kernel does
// (verified by internal/harness/difftest TestKernelNATPortOffset).
func TestNATOffset(t *testing.T) {
	for _, tc := range []struct {
		name  string
		kind  NATKind
		r     NATRange
		flows []Facts
		want  []uint16
	}{
		{"dnat", DNAT, NATRange{MinAddr: ip("10.244.1.5"), MinPort: 8000, MaxPort: 8010, Base: 80, Flags: NATOffset},
			[]Facts{
				tcpFacts("192.168.10.2:41234", "10.96.0.10:85", syn),
				tcpFacts("192.168.10.3:41234", "10.96.0.10:85", syn), // another client: no clash
				tcpFacts("192.168.10.3:41234", "10.96.0.10:70", syn), // 70-80 = 65526, mod 11 = 10
			}, []uint16{8005, 8005, 8010}},
		{"snat base 0", SNAT, NATRange{MinAddr: ip("10.244.1.1"), MinPort: 1000, MaxPort: 1998, Flags: NATOffset},
			[]Facts{
				tcpFacts("192.168.10.2:41234", "10.244.1.5:85", syn), // 1000 + 41234 mod 999
				tcpFacts("192.168.10.3:41234", "10.244.1.5:85", syn), // taken: the next one
			}, []uint16{1275, 1276}},
		{"in range still shifted", DNAT, NATRange{MinAddr: ip("10.244.1.5"), MinPort: 80, MaxPort: 90, Base: 70, Flags: NATOffset},
			[]Facts{tcpFacts("192.168.10.2:41234", "10.96.0.10:85", syn)}, []uint16{84}}, // 80 + 15 mod 11
	} {
		t.Run(tc.name, func(t *testing.T) {
			tb, _ := newTestTable(t, Config{})
			for i, f := range tc.flows {
				info := track(t, tb, f)
				require.NoError(t, tb.SetupNAT(info.Entry, tc.kind, tc.r))
				got := info.Entry.Reply().SrcPort // the DNAT target, seen from the reply
				if tc.kind == SNAT {
					got = info.Entry.Reply().DstPort
				}
				assert.Equal(t, tc.want[i], got, "flow %d", i+1)
				require.NoError(t, tb.Confirm(info.Entry))
			}
		})
	}
}

// TestTimeoutsWithDefaults: zero fields take the kernel defaults, set ones
// stay, so that a host can change one sysctl.
func TestTimeoutsWithDefaults(t *testing.T) {
	got := Timeouts{UDP: 3 * time.Second, TCPTimeWait: time.Second}.WithDefaults()
	want := DefaultTimeouts()
	want.UDP, want.TCPTimeWait = 3*time.Second, time.Second
	assert.Equal(t, want, got)
	assert.Equal(t, DefaultTimeouts(), Timeouts{}.WithDefaults())
}
