package netfilter

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// The restore input a fragment is completed into loads in the real
// iptables-restore, and iptables-save then prints what packetwalk prints.
func TestKernelFragmentCompleted(t *testing.T) {
	kerneltest.Require(t)
	cluster, err := os.ReadFile("../kubeproxy/testdata/whereami_aks_cluster.save")
	require.NoError(t, err)
	local, err := os.ReadFile("../kubeproxy/testdata/whereami_aks_local.save")
	require.NoError(t, err)
	for name, in := range map[string]string{
		"whereami cluster": string(cluster),
		"whereami local":   string(local),
		"mixed tables": "-A POSTROUTING -j MYNAT\n-A MYNAT -d 10.0.0.0/8 -j RETURN\n-A MYNAT -j MASQUERADE\n" +
			"-A INPUT -p tcp --dport 23 -j REJECT\n-A PREROUTING -p udp --dport 53 -j CT --notrack\n" +
			"iptables -t mangle -A PREROUTING -j MARK --set-mark 1\nsudo iptables -A FORWARD -j DOCKER-USER\n" +
			"[5:300] -A KUBE-SERVICES -d 10.0.0.11/32 -p tcp -m tcp --dport 80 -j REJECT --reject-with icmp-port-unreachable\n",
	} {
		ns := kerneltest.NewNS(t, "pw-frag-")
		text, _, _, err := completeFragment(IPv4, []byte(in), FragmentOptions{}, LenientOff)
		require.NoError(t, err, name)
		require.NoError(t, ns.Restore(string(text), "-c"), "%s:\n%s", name, text)
		got, err := ns.Save("-c")
		require.NoError(t, err)
		rs := NewRuleset(IPv4)
		require.NoError(t, rs.Restore([]byte(in), RestoreOptions{Counters: true, Fragment: &FragmentOptions{}}), name)
		assert.Equal(t, got, string(rs.AppendSave(nil, SaveOptions{Counters: true})), name)
	}
}
