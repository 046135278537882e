package main

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/netfilter"
)

func TestParseSocketArg(t *testing.T) {
	s, err := parseSocketArg("tcp 10.0.0.5:8080 transparent mark 0x5 peer 10.0.0.9:40000 half-open")
	require.NoError(t, err)
	assert.Equal(t, netfilter.Socket{Proto: inet.TCP, Addr: netip.MustParseAddr("10.0.0.5"), Port: 8080, Transparent: true, Mark: 5,
		Remote: netip.MustParseAddrPort("10.0.0.9:40000"), HalfOpen: true}, s)
	assert.Equal(t, "tcp 10.0.0.5:8080 transparent mark 0x5 peer 10.0.0.9:40000 half-open", socketText(&s))
	s, err = parseSocketArg("udp [::]:53")
	require.NoError(t, err)
	assert.Equal(t, netfilter.Socket{Proto: inet.UDP, Addr: netip.IPv6Unspecified(), Port: 53}, s)
	for _, bad := range []string{"", "tcp", "sctp 1.2.3.4:5", "tcp 1.2.3.4", "tcp 1.2.3.4:5 mark", "tcp 1.2.3.4:5 mark x", "tcp 1.2.3.4:5 peer 1.2.3.4", "tcp 1.2.3.4:5 bound"} {
		_, err := parseSocketArg(bad)
		assert.Error(t, err, bad)
	}
}

// TestTraceSocket: istio's TPROXY rules with Envoy's transparent listener
// given by --socket: the SYN to 8080 is delivered to it, as the text and
// JSON say; a bad --socket is refused naming it.
func TestTraceSocket(t *testing.T) {
	args := []string{"trace", "--addr", "eth0=10.244.1.5/24", "--ip-rule", "fwmark 1337 lookup 133", "--ip-route", "local 0.0.0.0/0 dev lo table 133",
		"--socket", "tcp 0.0.0.0:15006 transparent", "--socket", "tcp 0.0.0.0:8080", "--rules", "../../netfilter/testdata/golden/real-istio-tproxy.rules"}
	pkt := "in=eth0 proto=tcp src=10.244.2.7 dst=10.244.1.5 sport=40000 dport=8080 flags=S"
	code, out, errs := runCmd(append(args, pkt), "")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, "  to socket: tcp 0.0.0.0:15006 transparent\n")
	assert.Contains(t, out, "mark is now 0x539")
	code, out, errs = runCmd(append(args, "--format", "json", pkt), "")
	require.Equal(t, 0, code, errs)
	assert.Contains(t, out, `"socket":"tcp 0.0.0.0:15006 transparent"`)
	code, _, errs = runCmd([]string{"trace", "--socket", "tcp 0.0.0.0:80 peer 1.2.3.4:5", pkt}, "")
	assert.Equal(t, 1, code)
	assert.Contains(t, errs, `--socket "tcp 0.0.0.0:80 peer 1.2.3.4:5"`)
}
