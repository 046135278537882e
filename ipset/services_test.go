package ipset

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Port names in elements resolve as ipset 7.17 resolves them (recorded in
// a namespace): getservbyname for the element's protocol (tcp when none is
// given), numbers in C notation, a range split at the first '-'. Save
// prints numbers.
func TestPortNames(t *testing.T) {
	for _, tc := range []struct{ elem, save string }{
		{"P 10.0.0.1,http", "add P 10.0.0.1,tcp:80"},
		{"P 10.0.0.1,tcp:www", "add P 10.0.0.1,tcp:80"},
		{"P 10.0.0.1,udp:mdns", "add P 10.0.0.1,udp:5353"},
		{"P 10.0.0.1,udp:syslog", "add P 10.0.0.1,udp:514"},
		{"P 10.0.0.1,tcp:syslog", "add P 10.0.0.1,tcp:514"},
		{"P 10.0.0.1,sctp:amqp", "add P 10.0.0.1,sctp:5672"},
		{"P 10.0.0.1,tcp:0x50", "add P 10.0.0.1,tcp:80"},
		{"P 10.0.0.1,tcp:010", "add P 10.0.0.1,tcp:8"},
		{"P 10.0.0.1,tcp:20-ftp-data", "add P 10.0.0.1,tcp:20"},
		{"B http", "add B 80"},
		{"B udp:mdns", "add B 5353"},
		{"B 0x10", "add B 16"},
		{"B 010", "add B 8"},
	} {
		r, _ := restoreText(t, "create P hash:ip,port\ncreate B bitmap:port range 0-10000\nadd "+tc.elem+"\n")
		name, _, _ := strings.Cut(tc.elem, " ")
		b, err := r.AppendSave(nil, name)
		require.NoError(t, err, tc.elem)
		assert.Contains(t, string(b), "\n"+tc.save+"\n", tc.elem)
	}
	// A range of names: ssh-http is 22 to 80.
	r, _ := restoreText(t, "create P hash:ip,port\nadd P 10.0.0.9,tcp:ssh-http\n")
	b, err := r.AppendSave(nil, "P")
	require.NoError(t, err)
	assert.Equal(t, 80-22+1, strings.Count(string(b), "add P 10.0.0.9,tcp:"))
}

func TestPortNamesRefused(t *testing.T) {
	for _, tc := range []struct{ line, text string }{
		{"add P 10.0.0.1,udp:ssh", "Syntax error: 'ssh' is invalid as number"},
		{"add P 10.0.0.1,tcp:mdns", "Syntax error: 'mdns' is invalid as number"},
		{"add P 10.0.0.1,mdns", "Syntax error: 'mdns' is invalid as number"},
		{"add P 10.0.0.1,sctp:ssh", "Syntax error: 'ssh' is invalid as number"},
		{"add P 10.0.0.1,udplite:domain", "Syntax error: 'domain' is invalid as number"},
		{"add P 10.0.0.1,tcp:HTTP", "Syntax error: 'HTTP' is invalid as number"},
		{"add P 10.0.0.1,tcp:ftp-data", "Syntax error: 'data' is invalid as number"},
		{"add B ftp-data", "Syntax error: 'data' is invalid as number"},
		{"add B mdns", "Syntax error: 'mdns' is invalid as number"},
		{"add B udp:ssh", "Syntax error: 'ssh' is invalid as number"},
		{"add B sctp:amqp", "Syntax error: Only protocols TCP and UDP are valid"},
	} {
		r, _ := restoreText(t, "create P hash:ip,port\ncreate B bitmap:port range 0-10000\n")
		err := r.Restore([]byte("\n"+tc.line+"\n"), RestoreOptions{})
		require.Error(t, err, tc.line)
		var pe *ParseError
		require.True(t, errors.As(err, &pe), tc.line)
		assert.Equal(t, "Error in line 2: "+tc.text, err.Error(), tc.line)
	}
}

// bitmap:port ranges take tcp service names and C numbers (ipset 7.17).
func TestBitmapPortRangeNames(t *testing.T) {
	for rng, want := range map[string]string{"ssh-http": "range 22-80", "0x10-0x20": "range 16-32"} {
		r, _ := restoreText(t, "create B bitmap:port range "+rng+"\n")
		b, err := r.AppendSave(nil, "B")
		require.NoError(t, err)
		assert.Contains(t, string(b), "create B bitmap:port "+want+"\n", rng)
	}
	for rng, msg := range map[string]string{
		"mdns-6000":   "Syntax error: 'mdns' is invalid as number",
		"ftp-data-30": "Syntax error: 'data-30' is invalid as number",
	} {
		r, _ := newTestRegistry()
		err := r.Restore([]byte("create B bitmap:port range "+rng+"\n"), RestoreOptions{})
		require.Error(t, err, rng)
		assert.Equal(t, "Error in line 1: "+msg, err.Error(), rng)
	}
}
