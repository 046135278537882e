// Package cluster composes netfilter hosts into a network and follows
// packets across it: from a pod through its node's bridge and iptables,
// a cloud route table, another node and its bridge to a pod; from a
// client through a cloud load balancer to a node and back; out through an
// Internet gateway; through an IP-in-IP or VXLAN overlay. It answers the
// questions that span machines: which address a packet has at every hop,
// where the source is translated, which node drops it under
// externalTrafficPolicy Local, and with what probability each of these
// happens.
//
// # The network
//
// A [Network] holds named devices and the links between their ports
// ([Port]: a device and one of its interfaces or ports):
//
//   - hosts ([Network.AddHost], [Network.AddPod]): a [netfilter.Host]
//     each, with its interfaces, routes, rules and conntrack. A pod is a
//     host with one interface, its address and a default route;
//   - links ([Network.Link]): a veth pair or a cable between two ports;
//   - bridges ([Network.AddBridge]): a Linux bridge of a host with
//     br_netfilter, as kubenet's cbr0 or Azure CNI's azure0. A frame from
//     one port to another crosses the host's iptables as bridged traffic
//     (-m physdev sees its ports); a frame to the bridge's own address
//     goes up to the host ([netfilter.Host.ReceiveBridged]);
//   - routers ([Network.AddRouter], [Router]): a cloud VNet or VPC with
//     its route table (AKS kubenet's routes from each pod CIDR to its
//     node), the Internet. A router that is a Linux machine is a host
//     with two interfaces linked to its neighbours: it decrements the
//     TTL, answers an expired one with an ICMP time exceeded and runs
//     its own iptables;
//   - load balancers ([Network.AddLoadBalancer], [LoadBalancer]): rules
//     from a frontend IP:port to backend nodes, with or without floating
//     IP, and health probes ([Prober], answered by kube-proxy's
//     kubeproxy.HealthCheck) that decide which nodes receive traffic;
//   - gateways ([Network.AddGateway], [Gateway]): source NAT to the
//     Internet;
//   - tunnels ([Network.AddTunnel], [Tunnel]): IP-in-IP or VXLAN
//     interfaces of hosts. The outer packet is sent by the node (it
//     crosses OUTPUT and POSTROUTING with the nodes' addresses) and
//     decapsulated on the receiving node after its INPUT.
//
// # Walks
//
// [Network.Send] lets a process of a host send a packet and follows it
// from device to device until it is delivered, dropped or leaves the
// model; the [Walk] lists the [Hop]s, each with its device, the
// interfaces or ports it came in and left through, the packet as it
// arrived and the device's [netfilter.Result] (for a host, the rules it
// crossed). A host forwards to the neighbour its own routing decision
// chose ([netfilter.Result].Via), its ip rules included: a node of the
// AWS VPC CNI sends a pod's traffic out the ENI the pod's address belongs
// to. The packets hosts generate on the way (a REJECT's reset or ICMP
// error, an ICMP time exceeded, the ICMP error of an unreachable route)
// are followed too, as walks of their own in [Walk].Emitted: each host's
// conntrack relates an ICMP error to the connection it quotes and NAT
// translates the quoted header, and load balancers and gateways
// translate it back as they do replies. [Network.Reply] sends the answer
// back from the receiver through every device's connection state: each
// host's conntrack, the load balancer's flows, the gateway's
// translations. [Network.Receive] starts a walk at a port, for a packet
// from outside the model.
//
// [Network.Explain] returns every possible walk with its exact
// probability ([Outcome]): the load balancer's spread over its healthy
// backends, times each host's statistic rules (kube-proxy's choice of
// endpoint), times what each host does, drops included; the
// probabilities are rationals that sum to exactly 1.
//
// Walks are deterministic: a load balancer's choice comes from the
// network's random source, seeded by [Config].Seed. A walk longer than
// Config.MaxHops is a loop ([ErrLoop]); a description that leads nowhere
// is an [ErrTopology] error naming the device and port.
//
// What the model leaves out: Ethernet addresses (a bridge knows its
// neighbours by their IP addresses, see [netfilter.BridgeIn]), ARP,
// MTU and fragmentation across hops, IPv6 tunnels, the cloud's own
// filters (network security groups), ICMP errors of cloud routers, load
// balancers and gateways themselves (they never send one), and in
// [Network.Explain] the packets hosts emit: its outcomes leave
// Walk.Emitted nil (the hops' Result.Emitted still hold them), as
// following them needs the connection state Explain does not make.
package cluster
