package services

import (
	"bytes"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestByName(t *testing.T) {
	for _, tc := range []struct {
		name, proto string
		port        uint16
		ok          bool
	}{
		{"http", "tcp", 80, true},
		{"www", "tcp", 80, true}, // alias
		{"http", "udp", 0, false},
		{"domain", "udp", 53, true},
		{"domain", "tcp", 53, true},
		{"mdns", "udp", 5353, true},
		{"mdns", "tcp", 0, false},
		{"syslog", "udp", 514, true},
		{"syslog", "tcp", 514, true}, // alias of shell
		{"kerberos-sec", "udp", 88, true},
		{"amqp", "sctp", 5672, true}, // the one sctp entry
		{"ssh", "sctp", 0, false},
		{"echo", "ddp", 4, true},
		{"HTTP", "tcp", 0, false}, // case sensitive
		{"imap", "tcp", 143, true},
		{"", "tcp", 0, false},
		{"domain", "udplite", 0, false},
	} {
		p, ok := ByName(tc.name, tc.proto)
		assert.Equal(t, tc.ok, ok, "%s/%s", tc.name, tc.proto)
		assert.Equal(t, tc.port, p, "%s/%s", tc.name, tc.proto)
	}
}

func TestByNameAnyProto(t *testing.T) {
	for name, port := range map[string]uint16{"ssh": 22, "mdns": 5353, "amqp": 5672, "echo": 7, "www": 80} {
		p, ok := ByNameAnyProto(name)
		assert.True(t, ok, name)
		assert.Equal(t, port, p, name)
	}
	for _, name := range []string{"rtmp", "nosuch", "Http"} { // rtmp is ddp only
		_, ok := ByNameAnyProto(name)
		assert.False(t, ok, name)
	}
}

func TestByPort(t *testing.T) {
	for _, tc := range []struct {
		port  uint16
		proto string
		name  string
	}{
		{80, "tcp", "http"},
		{143, "tcp", "imap2"},
		{514, "tcp", "shell"},
		{514, "udp", "syslog"},
		{5353, "udp", "mdns"},
		{5353, "tcp", ""},
		{22, "udp", ""},
		{5672, "sctp", "amqp"},
		{1812, "udp", "radius"},
		{0, "tcp", ""},
	} {
		n, ok := ByPort(tc.port, tc.proto)
		assert.Equal(t, tc.name != "", ok, "%d/%s", tc.port, tc.proto)
		assert.Equal(t, tc.name, n, "%d/%s", tc.port, tc.proto)
	}
}

func TestEntries(t *testing.T) {
	es := Entries()
	require.NotEmpty(t, es)
	assert.Equal(t, Entry{Name: "tcpmux", Port: 1, Proto: "tcp"}, es[0])
	// Every name and alias resolves to its first entry, every port to the
	// official name of its first entry.
	firstName := map[[2]string]uint16{}
	firstPort := map[string]string{}
	for _, e := range es {
		for _, n := range append([]string{e.Name}, e.Aliases...) {
			k := [2]string{n, e.Proto}
			if _, seen := firstName[k]; !seen {
				firstName[k] = e.Port
			}
			p, ok := ByName(n, e.Proto)
			assert.True(t, ok, n)
			assert.Equal(t, firstName[k], p, n)
		}
		k := e.Proto + "/" + strconv.Itoa(int(e.Port))
		if _, seen := firstPort[k]; !seen {
			firstPort[k] = e.Name
		}
		n, _ := ByPort(e.Port, e.Proto)
		assert.Equal(t, firstPort[k], n)
	}
	// The copy is the caller's.
	es[0].Aliases = append(es[0].Aliases, "x")
	es[0].Name = "changed"
	assert.Equal(t, "tcpmux", Entries()[0].Name)
	assert.Empty(t, Entries()[0].Aliases)
}

// Lookups run on every -L line and rule parse: no allocation.
func TestLookupsDoNotAllocate(t *testing.T) {
	load()
	n := testing.AllocsPerRun(100, func() {
		ByName("https", "tcp")
		ByNameAnyProto("mdns")
		ByPort(443, "tcp")
		ByPort(9, "udp")
	})
	assert.Zero(t, n)
}

// The embedded copy is the machine's /etc/services of the recorded netbase
// version (update.sh refreshes both).
func TestEmbeddedMatchesSystem(t *testing.T) {
	want, err := os.ReadFile("etc-services.version")
	require.NoError(t, err)
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Package} ${Version}\n", "netbase").Output()
	if err != nil || !bytes.Equal(out, want) {
		t.Skipf("netbase here is %q, the embedded copy is from %q", strings.TrimSpace(string(out)), strings.TrimSpace(string(want)))
	}
	sys, err := os.ReadFile("/etc/services")
	require.NoError(t, err)
	assert.Equal(t, string(sys), raw)
}
