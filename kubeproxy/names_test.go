package kubeproxy

import (
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	corev1 "k8s.io/api/core/v1"
)

func TestPortName(t *testing.T) {
	assert.Equal(t, "ns1/svc1:p80", PortName("ns1", "svc1", "p80"))
	assert.Equal(t, "default/whereami", PortName("default", "whereami", ""))
	assert.Equal(t, "default/whereami:", LegacyPortName("default", "whereami", ""))
	assert.Equal(t, "infra/statsd:dogstatsd", LegacyPortName("infra", "statsd", "dogstatsd"))
}

// Vectors of docs/kube-proxy-notes.md, "Chain names" (checked against
// upstream tests and real dumps).
func TestServiceChainVectors(t *testing.T) {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	cases := []struct {
		portName string
		proto    corev1.Protocol
		hash     string
	}{
		{"ns1/svc1:p80", tcp, "XPGD46QRK7WJZT7O"},
		{"ns2/svc2:p80", tcp, "GNZBNJ2PO5MGZ6GT"},
		{"ns3/svc3:p80", tcp, "X27LE4BHSL4DOUIK"},
		{"ns4/svc4:p80", tcp, "4SW47YFZTEDKD3PK"},
		{"ns5/svc5:p80", tcp, "NUKIZ6OKUXPJNT4C"},
		{"ns2/svc2:p8080", tcp, "2VJB64SDSIJUP5T6"},
		{"ns4/svc4:p8082", tcp, "EBDQOQU5SJFXRIL3"},
		{"default/kubernetes:https", tcp, "NPX46M4PTMTKRN6Y"},
		{"kube-system/kube-dns:dns", udp, "TCOU7JCQXEZGVUNU"},
		{"kube-system/kube-dns:dns-tcp", tcp, "ERIFXISQEP7F7OF4"},
		{"kube-system/kube-dns:metrics", tcp, "JD5MR3NA4I4DYORP"},
		{LegacyPortName("default", "whereami", ""), tcp, "7G2JV7LNOR6DDNIY"},
		{PortName("default", "whereami", ""), tcp, "AYIUZSRKUWY4XTSW"},
		{LegacyPortName("default", "nginx", ""), tcp, "4N57TFCL4MD7ZTDA"},
		{PortName("default", "nginx", ""), tcp, "2CMXP7HKUVJN7L6M"},
		{LegacyPortName("default", "hostnames", ""), tcp, "NWV5X2332I4OT4T3"},
		{"infra/statsd:dogstatsd", udp, "5DULF7GDAT3CNN73"},
		{"default/app2:http-web2", tcp, "H77O6A5PM6DG4AKY"},
		{"acs-system/nginx-ingress-lb-cloudbiz:http", tcp, "76HLDRT5IPNSMPF5"},
	}
	for _, c := range cases {
		t.Run(c.portName, func(t *testing.T) {
			assert.Equal(t, "KUBE-SVC-"+c.hash, ServiceChain(c.portName, c.proto))
			assert.Equal(t, "KUBE-SVL-"+c.hash, LocalChain(c.portName, c.proto))
			assert.Equal(t, "KUBE-EXT-"+c.hash, ExternalChain(c.portName, c.proto))
			assert.Equal(t, "KUBE-FW-"+c.hash, FirewallChain(c.portName, c.proto))
			assert.Equal(t, "KUBE-XLB-"+c.hash, XLBChain(c.portName, c.proto))
		})
	}
}

func TestEndpointChainVectors(t *testing.T) {
	cases := []struct {
		portName, ep, chain string
	}{
		{"ns1/svc1:p80", "10.180.0.1:80", "KUBE-SEP-SXIVWICOYRO3J4NJ"},
		{"ns2/svc2:p80", "10.180.0.2:80", "KUBE-SEP-RS4RBKLTHTF2IUXJ"},
		{"ns3/svc3:p80", "10.180.0.3:80", "KUBE-SEP-OYPFS5VJICHGATKP"},
		{"ns4/svc4:p80", "10.180.0.4:80", "KUBE-SEP-UKSFD7AGPMPPLUHC"},
		{"ns4/svc4:p80", "10.180.0.5:80", "KUBE-SEP-C6EBXVWJJZMIWKLZ"},
		{"ns5/svc5:p80", "10.180.0.3:80", "KUBE-SEP-I77PXRDZVX7PMWMN"},
		{"ns1/svc1:p80", "10.0.1.1:80", "KUBE-SEP-SNQ3ZNILQDEJNDQO"},
		{"ns2/svc2:p8080", "10.0.2.1:8080", "KUBE-SEP-UHEGFW77JX3KXTOV"},
		{"ns3/svc3:p80", "10.0.3.1:80", "KUBE-SEP-BSWRHOQ77KEXZLNL"},
		{"ns3/svc3:p80", "10.0.3.2:80", "KUBE-SEP-DKCFIS26GWF2WLWC"},
		{"ns3/svc3:p80", "10.0.3.3:80", "KUBE-SEP-JVVZVJ7BSEPPRNBS"},
		{"ns4/svc4:p80", "10.0.4.1:80", "KUBE-SEP-AYCN5HPXMIRJNJXU"},
		{"ns1/svc1:p80", "10.0.0.0:80", "KUBE-SEP-DKGQUZGBKLTPAR56"},
		{"ns3/svc3:p8081", "203.0.113.4:8081", "KUBE-SEP-RUVVH7YV3PHQBDOS"},
		{"ns4/svc4:p8082", "10.4.0.1:8082", "KUBE-SEP-SU5STNODRYEWJAUF"},
	}
	for _, c := range cases {
		t.Run(c.portName+"/"+c.ep, func(t *testing.T) {
			assert.Equal(t, c.chain, EndpointChain(c.portName, corev1.ProtocolTCP, netip.MustParseAddrPort(c.ep)))
		})
	}
}

func TestEndpointStringIPv6Bracketed(t *testing.T) {
	ep := netip.MustParseAddrPort("[fd00::1]:80")
	assert.Equal(t, "[fd00::1]:80", endpointString(ep))
	// The hash input is the bracketed form.
	assert.Equal(t, endpointChainFromString("ns1/svc1:p80", "tcp", "[fd00::1]:80"),
		EndpointChain("ns1/svc1:p80", corev1.ProtocolTCP, ep))
	assert.Equal(t, "sctp", lowerProtocol(corev1.ProtocolSCTP))
}
