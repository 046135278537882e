package netfilter

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestNFQUEUEParse(t *testing.T) {
	for _, tc := range []struct {
		spec, save string
		err        error
	}{
		{"", "--queue-num 0", nil},
		{"--queue-num 65535 --queue-bypass", "--queue-num 65535 --queue-bypass", nil},
		{"--queue-cpu-fanout --queue-bypass --queue-balance 0:3", "--queue-balance 0:3 --queue-bypass --queue-cpu-fanout", nil},
		{"--queue-num 65536", "", ErrBadValue},
		{"--queue-balance 5:2", "", ErrBadValue},
		{"--queue-balance 3:3", "", ErrBadValue},
		{"--queue-balance 4", "", ErrBadValue},
		{"--queue-num 1 --queue-balance 2:5", "", ErrIncompatibleOpts},
		{"--queue-cpu-fanout", "", ErrMissingArgument},
		{"--fail-open", "", ErrUnknownOption},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			rs := NewRuleset(IPv4)
			err := rs.Exec("-A INPUT -j NFQUEUE " + tc.spec)
			if tc.err != nil {
				assert.ErrorIs(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			assert.Contains(t, string(rs.AppendSave(nil, SaveOptions{})), "-A INPUT -j NFQUEUE "+tc.save+"\n")
		})
	}
}

func TestNFQUEUEHandler(t *testing.T) {
	h := NewHost(HostConfig{})
	require.NoError(t, h.AddInterface("eth0", netip.MustParsePrefix("10.0.0.1/24")))
	require.NoError(t, h.Restore(IPv4, []byte("*filter\n-A INPUT -p udp -j NFQUEUE --queue-balance 4:7\n-A INPUT -j DROP\nCOMMIT\n"), RestoreOptions{}))
	pkt := UDP(netip.MustParseAddrPort("10.0.0.2:1000"), netip.MustParseAddrPort("10.0.0.1:53"))

	res := h.Receive("eth0", pkt)
	assert.Equal(t, Dropped, res.Disposition, "no program on the queue")

	var seen []uint16
	h.SetQueueHandler(func(q *NFQUEUETarget, p *Packet) QueueVerdict {
		seen = append(seen, q.Num, q.Last)
		p.Mark = 0x42
		if p.DstPort == 53 {
			return QueueAccept
		}
		return QueueDrop
	})
	res = h.Receive("eth0", pkt)
	assert.Equal(t, Delivered, res.Disposition, "accepted: the filter table ends, DROP is not reached")
	assert.Equal(t, uint32(0x42), res.Packet.Mark)
	assert.Equal(t, []uint16{4, 7}, seen)
	pkt.DstPort = 54
	assert.Equal(t, Dropped, h.Receive("eth0", pkt).Disposition)
}
