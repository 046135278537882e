// Package agents writes the iptables and ipset state of the node agents
// that share a Kubernetes node's nat and filter tables with kube-proxy
// (package kubeproxy), each from its own configuration:
//
//   - ip-masq-agent (ipmasq.go): [ParseIPMasqAgentConfig] reads the
//     agent's ConfigMap; [IPMasqAgentPayload] is the text the agent feeds to
//     `iptables-restore --noflush` on every resync (the IP-MASQ-AGENT
//     chain), [IPMasqAgentJump] the POSTROUTING rule it ensures,
//     [IPMasqAgentRules] both for a fresh node and [InstallIPMasqAgent] one
//     resync on a [netfilter.Host]. Two layouts: [IPMasqAgentAKS2020]
//     (from "Aks Networking Iptables in AKS") and [IPMasqAgentLegacy]
//     (from "A Day in the Life of a Packet in AKS (part 5): Virtual Node").
//   - Calico natOutgoing (calico.go): [CalicoIPSets] gives Felix's
//     cali40masq-ipam-pools / cali40all-ipam-pools sets, [CalicoNATRules]
//     the POSTROUTING → cali-POSTROUTING → cali-nat-outgoing path (from
//     "AKS Azure CNI Calico IP Masquerade"). The "cali:" rule comments are
//     copied from that post as data.
//
// The posts' titles, authors and addresses are in docs/blog-posts.md.
//   - Docker's bridge network (docker.go): [NewDockerBridge] and
//     [DockerBridge.PublishPort] build the nat and filter rules dockerd
//     24–26 writes; [DockerBridge.Rules] prints them as iptables-save does.
//
// All output is iptables-restore (or ipset restore) text that the real
// tools accept; the kernel-backed test (PACKETWALK_KERNEL=1) loads each
// generator's output into a namespace and compares iptables-save with
// [netfilter.Ruleset.AppendSave].
package agents
