package ipset

import (
	"bytes"
	"errors"
	"net/netip"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/inet"
)

func restoreText(t *testing.T, text string) (*Registry, *fakeClock) {
	t.Helper()
	r, c := newTestRegistry()
	require.NoError(t, r.Restore([]byte(text), RestoreOptions{}))
	return r, c
}

// The `ipset test` probes of docs/kernel-notes.md, "ipset: lookups".
func TestGroundTruthProbes(t *testing.T) {
	r, _ := restoreText(t, `create NETS hash:net family inet hashsize 1024 maxelem 65536
add NETS 10.0.0.0/8
add NETS 10.1.0.0/16 nomatch
add NETS 10.1.2.0/24
add NETS 10.1.2.3 nomatch
add NETS 192.168.0.0/16
add NETS 192.168.5.5/32
create IPS hash:ip
add IPS 10.244.1.5
add IPS 10.244.1.6
add IPS 192.168.1.0/30
create IPPORT hash:ip,port
add IPPORT 10.96.0.10,tcp:80
add IPPORT 10.96.0.10,udp:53
add IPPORT 10.96.0.11,80
add IPPORT 10.96.0.12,sctp:9
add IPPORT 10.96.0.13,icmp:echo-request
add IPPORT 10.96.0.14,tcp:8080-8082
create NETPORT hash:net,port
add NETPORT 10.0.0.0/8,tcp:443
add NETPORT 10.1.0.0/16,tcp:443 nomatch
add NETPORT 10.1.1.0/24,udp:53
create BMP bitmap:port range 0-1024
add BMP 80
add BMP 443
`)
	tests := []struct {
		set, elem string
		in        bool
	}{
		{"NETS", "10.9.9.9", true}, {"NETS", "10.1.5.5", false}, {"NETS", "10.1.2.9", true},
		{"NETS", "10.1.2.3", false}, {"NETS", "10.1.2.0/24", true}, {"NETS", "10.1.0.0/16", false},
		{"NETS", "10.1.0.0/17", false}, {"NETS", "10.0.0.0/8", true}, {"NETS", "10.0.0.0/9", false},
		{"NETS", "192.168.5.5", true}, {"NETS", "192.168.5.6", true}, {"NETS", "11.0.0.1", false},
		{"IPPORT", "10.96.0.10,tcp:80", true}, {"IPPORT", "10.96.0.10,80", true},
		{"IPPORT", "10.96.0.10,udp:80", false}, {"IPPORT", "10.96.0.10,udp:53", true},
		{"IPPORT", "10.96.0.14,tcp:8081", true}, {"IPPORT", "10.96.0.13,icmp:8/0", true},
		{"NETPORT", "10.2.3.4,tcp:443", true}, {"NETPORT", "10.1.3.4,tcp:443", false},
		{"NETPORT", "10.1.1.1,tcp:443", false}, {"NETPORT", "10.1.1.1,udp:53", true},
		{"NETPORT", "10.1.9.9,udp:53", false},
		{"IPS", "192.168.1.2", true}, {"IPS", "192.168.1.4", false},
		{"BMP", "80", true}, {"BMP", "81", false},
	}
	for _, tc := range tests {
		t.Run(tc.set+" "+tc.elem, func(t *testing.T) {
			in, err := r.Test(tc.set, tc.elem)
			require.NoError(t, err)
			assert.Equal(t, tc.in, in)
		})
	}
	assert.Equal(t, 6, r.Get("IPS").Len())
	assert.Equal(t, 8, r.Get("IPPORT").Len())
}

func TestErrors(t *testing.T) {
	base := "create N hash:net\ncreate I hash:ip\ncreate I6 hash:ip family inet6\ncreate P hash:ip,port\n" +
		"create F hash:ip maxelem 2\ncreate B bitmap:port range 10-20\ncreate L list:set\n"
	tests := []struct {
		line string
		want error
		text string
	}{
		{"add N 0.0.0.0/0", ErrCIDR, "The value of the CIDR parameter of the IP address is invalid"},
		{"add N 10.0.0.0/33", ErrSyntax, "Syntax error: '33' is out of range 0-32"},
		{"add I foo", ErrSyntax, "Syntax error: cannot parse foo: resolving to IPv4 address failed"},
		{"add I6 1.2.3.4", ErrSyntax, "Syntax error: cannot parse 1.2.3.4: resolving to IPv6 address failed"},
		// ipset 7.17 refuses an IPv4-mapped address in an inet set.
		{"add I ::ffff:10.9.9.9", ErrSyntax, "Syntax error: cannot parse ::ffff:10.9.9.9: resolving to IPv4 address failed"},
		{"add I6 2001:db8::/126", ErrSyntax, "Syntax error: plain IP address must be supplied: 2001:db8::/126"},
		{"add I 1.2.3.4 nomatch", ErrSyntax, "Unknown argument: `nomatch'"},
		{"add I 1.2.3.4 timeout 3", ErrNoTimeout, "Timeout cannot be used: set was created without timeout support"},
		{"add P 1.2.3.4,gre:5", ErrSyntax, "Syntax error: Protocol gre can be used with pseudo port value 0 only."},
		{"add P 1.2.3.4,99999", ErrSyntax, "Syntax error: '99999' is out of range 0-65535"},
		{"add P 1.2.3.4,icmp:bogus", ErrSyntax, "Cannot parse bogus as an ICMP type/code."},
		{"add P 1.2.3.4,ipv6-icmp:1/2", ErrSyntax, "Syntax error: Protocol ICMPv6 can be used with family inet6 only"},
		{"add P 1.2.3.4", ErrSyntax, "Syntax error: Second element is missing from 1.2.3.4."},
		{"add F 1.1.1.1-1.1.1.3", ErrFull, "Hash is full, cannot add more elements"},
		{"add B 30", ErrOutOfRange, "Element is out of the range of the set"},
		{"add X 1.1.1.1", ErrNotFound, "The set with the given name does not exist"},
		{"create N hash:ip", ErrSetExists, "Set cannot be created: set with the same name already exists"},
		{"create M hash:ip,mark", ErrNotModelled, "Kernel error received: set type not supported"},
		{"add L NOPE", ErrMemberMissing, "Set to be added/deleted/tested as element does not exist."},
		{"add L L", ErrListInList, "Sets with list:set type cannot be added to the set."},
		{"del I 9.9.9.9", ErrNotAdded, "Element cannot be deleted from the set: it's not added"},
		{"swap I N", ErrTypeMismatch, "The sets cannot be swapped: their type does not match"},
		{"swap I I6", ErrTypeMismatch, "The sets cannot be swapped: their type does not match"},
		{"bogus I", ErrSyntax, "No command specified: unknown argument bogus"},
	}
	for _, tc := range tests {
		t.Run(tc.line, func(t *testing.T) {
			r, _ := restoreText(t, base)
			err := r.Restore([]byte("\n"+tc.line+"\n"), RestoreOptions{})
			require.Error(t, err)
			assert.ErrorIs(t, err, tc.want)
			var pe *ParseError
			require.True(t, errors.As(err, &pe))
			assert.Equal(t, 2, pe.Line)
			assert.Equal(t, "Error in line 2: "+tc.text, err.Error())
		})
	}
}

func TestAddNormalisesAndExist(t *testing.T) {
	r, _ := restoreText(t, "create N hash:net\nadd N 10.0.0.5/8\nadd N 10.1.2.3 nomatch\n")
	assert.ErrorIs(t, r.Add("N", "10.0.0.0/8", false), ErrExists)
	// -exist flips nomatch in place, both ways.
	require.NoError(t, r.Add("N", "10.1.2.3", true))
	require.NoError(t, r.Add("N", "10.0.0.0/8", true, "nomatch"))
	b, err := r.AppendSave(nil, "N")
	require.NoError(t, err)
	assert.Contains(t, string(b), "add N 10.0.0.0/8 nomatch\nadd N 10.1.2.3\n")
	require.NoError(t, r.Del("N", "10.1.2.3", false))
	require.NoError(t, r.Del("N", "10.1.2.3", true))
	assert.ErrorIs(t, r.Del("N", "10.1.2.3", false), ErrNotAdded)
}

func TestRangeToPrefixes(t *testing.T) {
	r, _ := restoreText(t, "create Z hash:net\nadd Z 10.0.0.0-10.0.0.5\n")
	b, _ := r.AppendSave(nil)
	assert.Contains(t, string(b), "add Z 10.0.0.0/30\nadd Z 10.0.0.4/31\n")
}

func TestTimeouts(t *testing.T) {
	r, c := restoreText(t, "create T hash:ip timeout 300 comment counters initval 0xc4f5a586\n"+
		"add T 1.2.3.4 timeout 100 comment \"hello world\"\nadd T 1.2.3.5\nadd T 1.2.3.6 timeout 0\n")
	c.t = c.t.Add(500 * time.Millisecond)
	var out bytes.Buffer
	require.NoError(t, r.List(&out, "T"))
	// Verified with the real ipset (same initval): bucket order, exact size.
	assert.Equal(t, "Name: T\nType: hash:ip\nRevision: 6\n"+
		"Header: family inet hashsize 1024 maxelem 65536 timeout 300 counters comment bucketsize 12 initval 0xc4f5a586\n"+
		"Size in memory: 580\nReferences: 0\nNumber of entries: 3\nMembers:\n"+
		"1.2.3.6 timeout 0 packets 0 bytes 0\n1.2.3.4 timeout 99 packets 0 bytes 0 comment \"hello world\"\n"+
		"1.2.3.5 timeout 299 packets 0 bytes 0\n", out.String())
	c.t = c.t.Add(100 * time.Second)
	in, err := r.Test("T", "1.2.3.4")
	require.NoError(t, err)
	assert.False(t, in, "expired")
	c.t = c.t.Add(time.Hour)
	assert.Equal(t, 1, r.Get("T").Len(), "timeout 0 is permanent")
	// An expired entry can be added again without -exist.
	require.NoError(t, r.Add("T", "1.2.3.4", false))
}

func TestLookup(t *testing.T) {
	r, c := restoreText(t, "create B hash:net counters\nadd B 198.51.100.0/24\nadd B 198.51.100.7 nomatch\n"+
		"create P hash:ip,port\nadd P 10.0.0.1,icmp:echo-request\nadd P 10.0.0.1,gre:0\nadd P 10.0.0.1,udp:53\n"+
		"create IF hash:net,iface\nadd IF 10.0.0.0/8,eth+\nadd IF 10.1.0.0/16,eth0 nomatch\n"+
		"create L list:set\nadd L P\nadd L B\n")
	now := c.Now()
	s := r.Get("B")
	m, nm := s.Lookup(Key{Addr: netip.MustParseAddr("198.51.100.5")}, now)
	assert.True(t, m)
	assert.False(t, nm)
	m, nm = s.Lookup(Key{Addr: netip.MustParseAddr("198.51.100.7")}, now)
	assert.False(t, m)
	assert.True(t, nm, "return-nomatch sees the nomatch entry")
	m, _ = s.Lookup(Key{Addr: netip.MustParseAddr("2001:db8::1")}, now)
	assert.False(t, m, "family mismatch")

	s.LookupCount(Key{Addr: netip.MustParseAddr("198.51.100.5")}, now, 60)
	b, _ := r.AppendSave(nil, "B")
	assert.Contains(t, string(b), "add B 198.51.100.0/24 packets 1 bytes 60\n")

	p := r.Get("P")
	a := netip.MustParseAddr("10.0.0.1")
	for _, tc := range []struct {
		k  Key
		in bool
	}{
		{Key{Addr: a, Proto: inet.ICMP, Port: ICMPPort(8, 0)}, true},
		{Key{Addr: a, Proto: inet.ICMP, Port: ICMPPort(0, 0)}, false},
		{Key{Addr: a, Proto: 47, Port: 1234}, true},
		{Key{Addr: a, Proto: inet.UDP, Port: 53}, true},
		{Key{Addr: a, Proto: inet.TCP, Port: 53}, false},
	} {
		m, _ := p.Lookup(tc.k, now)
		assert.Equal(t, tc.in, m, "%+v", tc.k)
	}

	ifs := r.Get("IF")
	// On kernel 6.18 a plain interface name does not find "eth+"
	// (checked with ipset test and packets).
	m, _ = ifs.Lookup(Key{Addr: netip.MustParseAddr("10.2.0.1"), Iface: "eth3"}, now)
	assert.False(t, m, "wildcard eth+")
	m, nm = ifs.Lookup(Key{Addr: netip.MustParseAddr("10.1.0.1"), Iface: "eth0"}, now)
	assert.False(t, m)
	assert.True(t, nm)
	m, _ = ifs.Lookup(Key{Addr: netip.MustParseAddr("10.1.0.1"), Iface: "eth1"}, now)
	assert.False(t, m, "a /16 entry (for eth0) stops the walk before /8")

	l := r.Get("L")
	m, _ = l.Lookup(Key{Addr: netip.MustParseAddr("198.51.100.9")}, now)
	assert.True(t, m)
	m, nm = l.Lookup(Key{Addr: netip.MustParseAddr("198.51.100.7")}, now)
	assert.False(t, m)
	assert.True(t, nm)
}

func TestSetTarget(t *testing.T) {
	r, c := restoreText(t, "create S hash:ip,port timeout 60\n")
	s := r.Get("S")
	k := Key{Addr: netip.MustParseAddr("10.0.0.1"), Proto: inet.TCP, Port: 80}
	require.NoError(t, s.AddKey(k, 10, false))
	assert.ErrorIs(t, s.AddKey(k, 10, false), ErrExists)
	require.NoError(t, s.AddKey(k, 20, true), "-exist refreshes the timeout")
	b, _ := r.AppendSave(nil)
	assert.Contains(t, string(b), "add S 10.0.0.1,tcp:80 timeout 20\n")
	c.t = c.t.Add(21 * time.Second)
	m, _ := s.Lookup(k, c.Now())
	assert.False(t, m)
	require.NoError(t, s.AddKey(k, -1, false))
	require.NoError(t, s.DelKey(k))
	assert.ErrorIs(t, s.DelKey(k), ErrNotAdded)
}

func TestReferencesDestroyRenameSwap(t *testing.T) {
	r, c := restoreText(t, "create A hash:ip\nadd A 1.1.1.1\ncreate B hash:ip\nadd B 2.2.2.2\ncreate L list:set\nadd L A\n")
	assert.Equal(t, 1, r.Get("A").References())
	assert.ErrorIs(t, r.Destroy("A"), ErrInUse)
	assert.ErrorIs(t, r.Destroy(""), ErrInUse)
	assert.ErrorIs(t, r.Rename("A", "Z"), ErrRenameInUse)
	assert.ErrorIs(t, r.Rename("B", "A"), ErrRenameExists)

	h, err := r.Ref("B")
	require.NoError(t, err)
	require.NoError(t, r.Swap("A", "B"))
	// The handle follows the name, the content moved.
	m, _ := h.Lookup(Key{Addr: netip.MustParseAddr("1.1.1.1")}, c.Now())
	assert.True(t, m)
	assert.Equal(t, 1, r.Get("A").References())
	require.NoError(t, r.Unref("B"))
	require.NoError(t, r.Del("L", "A", false))
	require.NoError(t, r.Destroy("A"))
	assert.Equal(t, []string{"B", "L"}, r.Names())
	// A new set reuses the first free slot, as the kernel's index does.
	require.NoError(t, r.Create("C", "hash:ip", false))
	var out bytes.Buffer
	require.NoError(t, r.Save(&out))
	assert.Equal(t, "create C hash:ip", out.String()[:16])
}

func TestCreateExist(t *testing.T) {
	r, _ := restoreText(t, "create R hash:ip\n")
	require.NoError(t, r.Restore([]byte("create R hash:ip hashsize 64\n"), RestoreOptions{Exist: true}))
	err := r.Restore([]byte("create R hash:net\n"), RestoreOptions{Exist: true})
	assert.ErrorIs(t, err, ErrSetExists)
	require.NoError(t, r.Restore([]byte("add R 1.1.1.1\nadd R 1.1.1.1\n"), RestoreOptions{Exist: true}))
}

func TestTestFirstElementOnly(t *testing.T) {
	r, _ := restoreText(t, "create I hash:ip\nadd I 192.168.1.0/30\n")
	in, err := r.Test("I", "192.168.1.0/29")
	require.NoError(t, err)
	assert.True(t, in, "the kernel tests only the first address of a CIDR")
}
