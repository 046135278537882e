package kubeproxy

import (
	"crypto/sha256"
	"encoding/base32"
	"net/netip"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Chain-name prefixes kube-proxy gives its per-service and per-endpoint chains.
const (
	servicePrefix  = "KUBE-SVC-"
	localPrefix    = "KUBE-SVL-"
	externalPrefix = "KUBE-EXT-"
	firewallPrefix = "KUBE-FW-"
	xlbPrefix      = "KUBE-XLB-"
	endpointPrefix = "KUBE-SEP-"
)

// PortName returns the service port name string kube-proxy (v1.19 and later)
// hashes and writes into comments: "ns/name:port", or "ns/name" when the
// service port is unnamed.
func PortName(namespace, name, port string) string {
	if port == "" {
		return namespace + "/" + name
	}
	return namespace + "/" + name + ":" + port
}

// LegacyPortName returns the service port name string of kube-proxy before
// v1.19, which always appended ":" and the port name, so an unnamed port gives
// "ns/name:" and hashes to a different chain than with [PortName].
func LegacyPortName(namespace, name, port string) string {
	return namespace + "/" + name + ":" + port
}

// ServiceChain returns the KUBE-SVC- chain (Cluster traffic policy) of a
// service port, e.g. ServiceChain("ns1/svc1:p80", "TCP") = "KUBE-SVC-XPGD46QRK7WJZT7O".
func ServiceChain(portName string, protocol corev1.Protocol) string {
	return servicePrefix + portProtoHash(portName, protocol)
}

// LocalChain returns the KUBE-SVL- chain (Local traffic policy) of a service
// port; it shares the hash of [ServiceChain].
func LocalChain(portName string, protocol corev1.Protocol) string {
	return localPrefix + portProtoHash(portName, protocol)
}

// ExternalChain returns the KUBE-EXT- chain (external destinations: NodePort,
// load-balancer and external IPs) of a service port.
func ExternalChain(portName string, protocol corev1.Protocol) string {
	return externalPrefix + portProtoHash(portName, protocol)
}

// FirewallChain returns the KUBE-FW- chain (loadBalancerSourceRanges) of a
// service port.
func FirewallChain(portName string, protocol corev1.Protocol) string {
	return firewallPrefix + portProtoHash(portName, protocol)
}

// XLBChain returns the KUBE-XLB- chain that kube-proxy up to v1.23 used for
// externalTrafficPolicy Local.
func XLBChain(portName string, protocol corev1.Protocol) string {
	return xlbPrefix + portProtoHash(portName, protocol)
}

// EndpointChain returns the KUBE-SEP- chain of one endpoint of a service port.
// The hash covers the port name, the lower-case protocol and the endpoint as
// "ip:port" ("[ip6]:port" for IPv6), e.g. EndpointChain("ns1/svc1:p80", "TCP",
// 10.180.0.1:80) = "KUBE-SEP-SXIVWICOYRO3J4NJ".
func EndpointChain(portName string, protocol corev1.Protocol, endpoint netip.AddrPort) string {
	return endpointChainFromString(portName, lowerProtocol(protocol), endpointString(endpoint))
}

// endpointString formats an endpoint as kube-proxy's net.JoinHostPort does.
func endpointString(ep netip.AddrPort) string {
	ip := ep.Addr().Unmap()
	port := strconv.Itoa(int(ep.Port()))
	if ip.Is4() {
		return ip.String() + ":" + port
	}
	return "[" + ip.String() + "]:" + port
}

// joinHostPort is net.JoinHostPort for an address already formatted.
func joinHostPort(ip string, v6 bool, port string) string {
	if v6 {
		return "[" + ip + "]:" + port
	}
	return ip + ":" + port
}

func endpointChainFromString(portName, proto, endpoint string) string {
	return endpointPrefix + hash16(portName, proto, endpoint)
}

func portProtoHash(portName string, protocol corev1.Protocol) string {
	return hash16(portName, lowerProtocol(protocol), "")
}

// hash16 is the first 16 characters of the standard base32 encoding of
// sha256(a+b+c): 16 base32 characters cover exactly 10 bytes of the digest.
func hash16(a, b, c string) string {
	var buf [192]byte
	in := append(append(append(buf[:0], a...), b...), c...)
	sum := sha256.Sum256(in)
	var out [16]byte
	base32.StdEncoding.Encode(out[:], sum[:10])
	return string(out[:])
}

func lowerProtocol(p corev1.Protocol) string {
	switch p {
	case corev1.ProtocolTCP:
		return "tcp"
	case corev1.ProtocolUDP:
		return "udp"
	case corev1.ProtocolSCTP:
		return "sctp"
	}
	return strings.ToLower(string(p))
}
