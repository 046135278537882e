package cluster_test

import (
	"fmt"
	"math/big"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"

	"github.com/packetwalk/packetwalk/cluster"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/internal/probability"
)

// randomServices is the "web" ClusterIP Service and the "lb" LoadBalancer
// Service with the given endpoints and traffic policy.
func randomServices(eps []endpoint, local bool) string {
	var b strings.Builder
	policy := "Cluster"
	if local {
		policy = "Local"
	}
	fmt.Fprintf(&b, `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: ClusterIP
  clusterIP: %s
  ports:
  - {protocol: TCP, port: 80, targetPort: 8080}
---
apiVersion: v1
kind: Service
metadata: {name: lb, namespace: default}
spec:
  type: LoadBalancer
  clusterIP: 10.0.0.20
  externalTrafficPolicy: %s
`, clusterIP, policy)
	if local {
		fmt.Fprintf(&b, "  healthCheckNodePort: %d\n", hcPort)
	}
	fmt.Fprintf(&b, `  ports:
  - {protocol: TCP, port: 80, targetPort: 8080, nodePort: %d}
status:
  loadBalancer:
    ingress:
    - ip: %s
`, nodePort, vip)
	for _, svc := range []string{"web", "lb"} {
		fmt.Fprintf(&b, `---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: %[1]s-1
  namespace: default
  labels: {kubernetes.io/service-name: %[1]s}
addressType: IPv4
ports:
- {name: "", protocol: TCP, port: 8080}
endpoints:
`, svc)
		if len(eps) == 0 {
			b.WriteString("  []\n")
		}
		for _, e := range eps {
			fmt.Fprintf(&b, "- addresses: [%s]\n  nodeName: %s\n  conditions: {ready: true}\n", e.addr, e.node)
		}
	}
	return b.String()
}

// Whatever the endpoints, the traffic policy and the probes, the outcomes
// of a connection through the load balancer and of one to the ClusterIP
// have positive probabilities summing to exactly 1, and a walk ends as one
// of them.
func TestExplainSumsToOne(t *testing.T) {
	rapid.Check(t, func(rt *rapid.T) {
		n1 := rapid.IntRange(0, 3).Draw(rt, "node1 endpoints")
		n2 := rapid.IntRange(0, 3).Draw(rt, "node2 endpoints")
		var eps []endpoint
		for i := range n1 {
			eps = append(eps, endpoint{fmt.Sprintf("10.244.0.%d", 20+i), "node1"})
		}
		for i := range n2 {
			eps = append(eps, endpoint{fmt.Sprintf("10.244.1.%d", 20+i), "node2"})
		}
		local := rapid.Bool().Draw(rt, "local")
		probes := local && rapid.Bool().Draw(rt, "probes")
		f := kubenetWith(rt, randomServices(eps, local), probes, eps)
		world := cluster.Port{Device: "internet", Iface: "world"}
		syn := tcp(client+":50000", vip+":80", inet.SYN)
		for _, c := range []struct {
			name    string
			explain func() ([]cluster.Outcome, error)
			walk    func() (cluster.Walk, error)
		}{
			{"lb", func() ([]cluster.Outcome, error) { return f.n.ExplainReceive(world, syn) }, func() (cluster.Walk, error) { return f.n.Receive(world, syn) }},
			{"clusterIP", func() ([]cluster.Outcome, error) {
				return f.n.Explain("pod-a", tcp(podA+":40000", clusterIP+":80", inet.SYN))
			}, func() (cluster.Walk, error) { return f.n.Send("pod-a", tcp(podA+":40000", clusterIP+":80", inet.SYN)) }},
		} {
			outs, err := c.explain()
			require.NoError(rt, err, c.name)
			s := new(big.Rat)
			ends := map[string]bool{}
			for _, o := range outs {
				require.Positive(rt, o.Probability.Sign(), c.name)
				s.Add(s, o.Probability)
				ends[fmt.Sprint(o.Walk.Last().Device, o.Walk.Fate, o.Walk.Reason)] = true
			}
			assert.Equal(rt, "1", s.RatString(), "%s: %s", c.name, summary(outs))
			w, err := c.walk()
			require.NoError(rt, err, c.name)
			assert.True(rt, ends[fmt.Sprint(w.Last().Device, w.Fate, w.Reason)], "%s: walk ended %s on %s, not among\n%s", c.name, w.Fate, w.Last().Device, summary(outs))
			if n1+n2 > 0 && !local {
				// The endpoints get kube-proxy's exact probabilities
				// (1/n each up to the kernel's 2^-31 rounding), whichever
				// node the load balancer chose.
				var got, want []string
				per := map[string]*big.Rat{}
				for _, o := range outs {
					require.Equal(rt, cluster.Delivered, o.Walk.Fate, "%s: %s", c.name, summary(outs))
					d := o.Walk.Last().Device
					if per[d] == nil {
						per[d] = new(big.Rat)
					}
					per[d].Add(per[d], o.Probability)
				}
				for _, p := range per {
					got = append(got, p.RatString())
				}
				for _, p := range probability.EndpointProbabilities(n1+n2, probability.FormatCurrent) {
					want = append(want, p.RatString())
				}
				slices.Sort(got)
				slices.Sort(want)
				assert.Equal(rt, want, got, "%s: %s", c.name, summary(outs))
			}
		}
	})
}
