package netfilter

import (
	"net/netip"
	"testing"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHandBuiltMatches pins that a match built in Go means what its fields
// say: it equals the parsed match, prints the same rule (-S and -L text) and
// matches the same packets.
func TestHandBuiltMatches(t *testing.T) {
	mask := uint32(0x4000)
	cases := []struct {
		spec  string
		proto inet.Proto
		built Match
	}{
		{"-p tcp -m tcp --dport 443", inet.TCP, &TCPMatch{DstPorts: Port(443)}},
		{"-p tcp -m tcp --sport 1024:65535 ! --dport 22", inet.TCP, &TCPMatch{SrcPorts: Ports(1024, 65535), DstPorts: Port(22), InvDstPorts: true}},
		{"-p tcp -m tcp --tcp-flags SYN,ACK SYN", inet.TCP, &TCPMatch{FlagsMask: inet.SYN | inet.ACK, FlagsCmp: inet.SYN}},
		{"-p udp -m udp --dport 53", inet.UDP, &UDPMatch{DstPorts: Port(53)}},
		{"-p udp -m udp ! --sport 53 ! --dport 54", inet.UDP, &UDPMatch{SrcPorts: Port(53), InvSrcPorts: true, DstPorts: Port(54), InvDstPorts: true}},
		{"-p sctp -m sctp --dport 3868", inet.SCTP, &SCTPMatch{DstPorts: Port(3868)}},
		{"-p sctp -m sctp ! --sport 1:100", inet.SCTP, &SCTPMatch{SrcPorts: Ports(1, 100), InvSrcPorts: true}},
		{"-m mark --mark 0x4000", 0, &MarkMatch{Value: 0x4000}},
		{"-m mark ! --mark 0x4000/0x4000", 0, &MarkMatch{Value: 0x4000, Mask: &mask, Invert: true}},
		{"-m state --state RELATED,ESTABLISHED", 0, &StateMatch{State: CTStatesOf(conntrack.StateEstablished, conntrack.StateRelated)}},
		{"-m state ! --state INVALID", 0, &StateMatch{State: CTStatesOf(conntrack.StateInvalid), Invert: true}},
	}
	for _, backend := range []Backend{NFTables, Legacy} {
		h := NewHost(HostConfig{Backend: backend})
		for _, tc := range cases {
			parsed := lastRule(t, IPv4, "filter", "INPUT", tc.spec+" -j DROP")
			require.Len(t, parsed.Matches, 1, tc.spec)
			built := &Rule{IP: parsed.IP, Matches: []Match{tc.built}, Target: parsed.Target}
			assert.Equal(t, parsed.Matches[0], tc.built, tc.spec)
			assert.Equal(t, parsed.String(), built.String(), tc.spec)
			for _, numeric := range []bool{false, true} {
				assert.Equal(t, string(parsed.Matches[0].appendList(nil, numeric)), string(tc.built.appendList(nil, numeric)), tc.spec)
			}
			for _, sp := range []uint16{0, 1, 22, 53, 100, 443, 2000} {
				for _, dp := range []uint16{0, 22, 53, 54, 443, 3868, 5000} {
					for _, mark := range []uint32{0, 0x4000, 0x4001, 0x1} {
						p := Packet{Family: IPv4, Proto: tc.proto, Src: netip.MustParseAddr("10.0.0.1"), Dst: netip.MustParseAddr("10.0.0.2"),
							Mark: mark, TCPFlags: inet.SYN}
						if tc.proto.HasPorts() {
							p.SrcPort, p.DstPort = sp, dp
						}
						if tc.proto != inet.TCP {
							p.TCPFlags = 0
						}
						assert.Equal(t, evalOn(h, parsed.Matches[0], p), evalOn(h, tc.built, p), "%s: %v sport %d dport %d mark %#x", tc.spec, backend, sp, dp, mark)
					}
				}
			}
		}
	}
	// The conntrack match's state set is built from conntrack's states.
	assert.Equal(t, "INVALID,NEW,RELATED,ESTABLISHED,UNTRACKED,SNAT,DNAT",
		(CTStatesOf(conntrack.StateUntracked, conntrack.StateEstablished, conntrack.StateRelated, conntrack.StateNew, conntrack.StateInvalid) |
			NATStates(conntrack.DNAT, conntrack.SNAT)).String())
	assert.Equal(t, conntrack.DNAT, NATRedirect.Manip())
	assert.Equal(t, conntrack.SNAT, NATMasquerade.Manip())

	// The zero value of a port match tests nothing: every packet of the
	// protocol matches, and nothing is printed after the module.
	h := NewHost(HostConfig{})
	zero := &TCPMatch{InvDstPorts: true}
	assert.True(t, evalOn(h, zero, Packet{Family: IPv4, Proto: inet.TCP, SrcPort: 7, DstPort: 0}))
	assert.Equal(t, "", string(zero.appendSave(nil)))
}
