package netfilter

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// ifaceOpts are the interface options of a rule in iptables-save form.
var ifaceOpts = regexp.MustCompile(`( !)? -[io] \S+`)

// What the real iptables -L prints of a ruleset reads back into the
// ruleset the real iptables-save prints, for every flag combination.
func TestKernelListingReadBack(t *testing.T) {
	kerneltest.Require(t)
	for _, name := range []string{"kubeproxy-current", "kubeproxy-legacy", "docker", "flannel", "ip-masq-agent", "azure-cni", "basic"} {
		t.Run(name, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join(goldenDir, name+".save"))
			require.NoError(t, err)
			ns := kerneltest.NewNS(t, "pw-lst-")
			require.NoError(t, ns.Restore(string(data)))
			want, err := ns.Save()
			require.NoError(t, err)
			var tables []string
			for _, l := range strings.Split(want, "\n") {
				if strings.HasPrefix(l, "*") {
					tables = append(tables, l[1:])
				}
			}
			for _, flags := range [][]string{{"-L"}, {"-nL"}, {"-nvL"}, {"-nvxL", "--line-numbers"}, {"-vL"}, {"-nL", "--line-numbers"}, {"-vL", "--line-numbers"}} {
				var listing strings.Builder
				for _, tb := range tables {
					out, err := ns.IPTables(append([]string{"-t", tb}, flags...)...)
					require.NoError(t, err)
					listing.WriteString("$ iptables -t " + tb + " " + strings.Join(flags, " ") + "\n" + out)
				}
				var rep FragmentReport
				rs := NewRuleset(IPv4)
				err := rs.Restore([]byte(listing.String()), RestoreOptions{Listing: true, Fragment: &FragmentOptions{Report: &rep}})
				require.NoError(t, err, "%v:\n%s", flags, listing.String())
				exp := want
				if !strings.Contains(flags[0], "v") {
					// Without -v the listing shows no interfaces, and says so.
					exp = ifaceOpts.ReplaceAllString(want, "")
					require.NotEmpty(t, rep.Notes)
					assert.Contains(t, rep.Notes[0], "without -v shows no interfaces")
				} else {
					assert.Empty(t, rep.Notes)
				}
				assert.Equal(t, exp, rs.String(), "%s %v", name, flags)
			}
		})
	}
}
