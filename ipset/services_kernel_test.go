package ipset

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/internal/services"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestKernelPortNames adds every service name and alias of the embedded
// database to a hash:ip,port set (without a protocol, and with tcp:, udp:
// and sctp:) and to a bitmap:port set (without a protocol, tcp:, udp:), in
// packetwalk and in the real ipset: the elements packetwalk accepts must
// be accepted and saved the same, each one it refuses refused too.
func TestKernelPortNames(t *testing.T) {
	kerneltest.Require(t)
	var names []string
	seen := map[string]bool{}
	for _, e := range services.Entries() {
		for _, n := range append([]string{e.Name}, e.Aliases...) {
			if !seen[n] {
				seen[n] = true
				names = append(names, n)
			}
		}
	}
	const create = "create H hash:ip,port family inet hashsize 1024 maxelem 1000000\ncreate B bitmap:port range 0-65535\n"
	var adds []string
	for i, n := range names {
		ip := fmt.Sprintf("10.%d.%d.1", i/256, i%256)
		for _, p := range []string{"", "tcp:", "udp:", "sctp:"} {
			adds = append(adds, "add H "+ip+","+p+n)
			if p != "sctp:" {
				adds = append(adds, "add B "+p+n)
			}
		}
	}
	var ok, bad []string
	for _, a := range adds {
		r, _ := newTestRegistry()
		require.NoError(t, r.Restore([]byte(create), RestoreOptions{}))
		if err := r.Restore([]byte(a+"\n"), RestoreOptions{}); err != nil {
			bad = append(bad, a)
		} else {
			ok = append(ok, a)
		}
	}
	t.Logf("%d elements accepted, %d refused", len(ok), len(bad))
	require.NotEmpty(t, ok)
	require.NotEmpty(t, bad)

	ns := kerneltest.NewNS(t, "pw-svc-ipset")
	doc := create + strings.Join(ok, "\n") + "\n"
	_, _, err := ns.Exec(doc, "ipset", "-exist", "restore")
	require.NoError(t, err)
	r, _ := newTestRegistry()
	require.NoError(t, r.Restore([]byte(doc), RestoreOptions{Exist: true}))
	for _, set := range []string{"H", "B"} {
		kernel, err := ns.IPSet("save", set)
		require.NoError(t, err)
		model, err := r.AppendSave(nil, set)
		require.NoError(t, err)
		assert.Equal(t, adds0(kernel), adds0(string(model)), "ipset save %s", set)
	}
	for _, a := range bad {
		_, _, err := ns.Exec("", append([]string{"ipset", "-exist"}, strings.Fields(a)...)...)
		assert.Error(t, err, "ipset accepts %q, which packetwalk refuses", a)
	}
}

// adds0 returns the sorted add lines of ipset save output: the kernel's
// hash order is not packetwalk's concern here.
func adds0(save string) []string {
	var out []string
	for _, l := range strings.Split(save, "\n") {
		if strings.HasPrefix(l, "add ") {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}
