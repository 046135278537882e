package agents

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
	"github.com/packetwalk/packetwalk/netfilter"
)

// TestKernelAcceptsAgents loads each generator's output into a namespace
// with the real ipset/iptables-restore and checks that iptables-save prints
// what netfilter's Ruleset prints for the same text.
func TestKernelAcceptsAgents(t *testing.T) {
	kerneltest.Require(t)

	masq000, err := ParseIPMasqAgentConfig([]byte(seed000ConfigMap), IPMasqAgentOptions{})
	require.NoError(t, err)
	masq003, err := ParseIPMasqAgentConfig([]byte(seed003Data), IPMasqAgentOptions{})
	require.NoError(t, err)
	masqDefault := DefaultIPMasqAgentConfig()
	docker, err := NewDockerBridge(DefaultDockerBridgeConfig())
	require.NoError(t, err)
	require.NoError(t, docker.PublishPort(DockerPort{HostPort: 8080, ContainerIP: netip.MustParseAddr("172.17.0.2"), ContainerPort: 80}))
	hairpinCfg := DefaultDockerBridgeConfig()
	hairpinCfg.ICC, hairpinCfg.UserlandProxy = false, false
	hairpin, err := NewDockerBridge(hairpinCfg)
	require.NoError(t, err)
	require.NoError(t, hairpin.PublishPort(DockerPort{Proto: "udp", HostIP: netip.MustParseAddr("192.0.2.10"), HostPort: 5353, ContainerIP: netip.MustParseAddr("172.17.0.3"), ContainerPort: 53}))

	must := func(b []byte, err error) []byte { require.NoError(t, err); return b }
	tests := []struct {
		name    string
		sets    []byte
		rules   []byte
		noflush bool
	}{
		{"ip-masq-agent AKS 2020", nil, must(IPMasqAgentRules(masq000, IPMasqAgentOptions{}, netfilter.IPv4)), true},
		{"ip-masq-agent legacy", nil, must(IPMasqAgentRules(masq003, IPMasqAgentOptions{Layout: IPMasqAgentLegacy}, netfilter.IPv4)), true},
		{"ip-masq-agent defaults", nil, must(IPMasqAgentRules(masqDefault, IPMasqAgentOptions{}, netfilter.IPv4)), true},
		{"calico natOutgoing", must(CalicoIPSets(seed001After, netfilter.IPv4)), must(CalicoNATRules(seed001After, netfilter.IPv4)), true},
		{"docker", nil, docker.Rules(), false},
		{"docker hairpin", nil, hairpin.Rules(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := kerneltest.NewNS(t, "pw-ag")
			if tt.sets != nil {
				require.NoError(t, ns.IPSetRestore(string(tt.sets)))
			}
			var args []string
			if tt.noflush {
				args = append(args, "--noflush")
			}
			require.NoError(t, ns.Restore(string(tt.rules), args...))
			got, err := ns.Save()
			require.NoError(t, err)
			rs, err := netfilter.ParseRestore(netfilter.IPv4, tt.rules)
			require.NoError(t, err)
			assert.Equal(t, string(rs.AppendSave(nil, netfilter.SaveOptions{})), got)
		})
	}
}
