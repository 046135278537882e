// Package kubeproxy writes the iptables-restore text that kube-proxy in
// iptables mode writes for a cluster's Services and EndpointSlices, byte for
// byte, so that the simulator (or the real iptables-restore) can load the
// exact ruleset of a node.
//
// Entry points:
//
//   - [PortName], [ServiceChain], [LocalChain], [ExternalChain],
//     [FirewallChain], [XLBChain], [EndpointChain]: kube-proxy's chain names
//     (base32 of sha256, 16 characters).
//   - [Decode] reads `kubectl get svc,endpointslices,nodes -A -o yaml` (or
//     -o json) output; [Generate] and [GenerateFromYAML] turn the objects
//     into a document for one node described by a [Config].
//   - [HealthChecks] gives the health-check node port answers of
//     externalTrafficPolicy Local services.
//
// # Who writes what on a node, and where it is generated here
//
// A node's tables are written by three agents; this package reproduces each
// in its own file:
//
//   - kube-proxy's iptables-restore payload (*filter and *nat, applied with
//     --noflush): current.go for the v1.28+ layout ([LayoutCurrent]: KUBE-SVC,
//     KUBE-SVL, KUBE-EXT, KUBE-FW, KUBE-SEP, filter KUBE-PROXY-FIREWALL),
//     legacy.go for the ≤ v1.20 layout ([LayoutLegacy]: masquerade rules in
//     KUBE-SERVICES, KUBE-XLB, KUBE-FW ending in KUBE-MARK-DROP). The shared
//     per-port endpoint selection (ready, then serving+terminating; local
//     subsets) is in model.go, input validation in input.go.
//   - kube-proxy's jump rules into the built-in chains, which it inserts
//     with `iptables -I` outside the payload, and its KUBE-PROXY-CANARY
//     chains: document.go.
//   - kubelet's chains (KUBE-FIREWALL, KUBE-KUBELET-CANARY,
//     KUBE-IPTABLES-HINT, and in legacy clusters KUBE-MARK-DROP and the
//     "dropping marked packets" rule): document.go and legacy.go.
//
// Unless [Config.PayloadOnly] is set, [Generate] returns a complete document
// (built-in chains, jumps in the order they stand on a node where kubelet
// started first, canaries) which a plain iptables-restore loads into an
// empty namespace to reproduce the node's mangle, filter and nat tables.
//
// # Differences from a live kube-proxy
//
// kube-proxy iterates services in Go map order; this package sorts service
// ports by name so its output is reproducible (the real order of
// KUBE-SERVICES and KUBE-NODEPORTS rules between services varies between
// syncs anyway). Partial syncs, stale-chain deletion (`-X`) and topology
// hints are not modelled: every generation is a full sync of a fresh node,
// and endpoints are used regardless of zone hints.
package kubeproxy
