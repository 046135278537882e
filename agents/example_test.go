package agents_test

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/packetwalk/packetwalk/agents"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/ipset"
	"github.com/packetwalk/packetwalk/netfilter"
)

func ExampleIPMasqAgentPayload() {
	cfg, err := agents.ParseIPMasqAgentConfig([]byte("nonMasqueradeCIDRs:\n  - 10.13.0.0/16\nmasqLinkLocal: true\n"), agents.IPMasqAgentOptions{})
	if err != nil {
		panic(err)
	}
	out, _ := agents.IPMasqAgentPayload(cfg, agents.IPMasqAgentOptions{}, netfilter.IPv4)
	fmt.Print(string(out))
	// Output:
	// *nat
	// :IP-MASQ-AGENT - [0:0]
	// -A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: local traffic is not subject to MASQUERADE" -d 10.13.0.0/16 -j RETURN
	// -A IP-MASQ-AGENT -m comment --comment "ip-masq-agent: outbound traffic is subject to MASQUERADE (must be last in chain)" -j MASQUERADE
	// COMMIT
}

func ExampleInstallIPMasqAgent() {
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1})
	_ = h.AddInterface("eth0", netip.MustParsePrefix("10.13.76.4/24"))
	_ = h.AddRoute(netfilter.Route{Dst: netip.MustParsePrefix("0.0.0.0/0"), Iface: "eth0", Gateway: netip.MustParseAddr("10.13.76.1")})
	cfg := agents.DefaultIPMasqAgentConfig() // RFC 1918 stays unmasqueraded
	if err := agents.InstallIPMasqAgent(h, cfg, agents.IPMasqAgentOptions{}, netfilter.IPv4); err != nil {
		panic(err)
	}
	for _, dst := range []string{"10.20.0.5", "1.1.1.1"} {
		syn := netfilter.TCP(netip.MustParseAddrPort("10.13.76.17:40000"),
			netip.AddrPortFrom(netip.MustParseAddr(dst), 443), inet.SYN)
		r := h.Receive("eth0", syn)
		fmt.Println(dst, "sees", r.Packet.Src)
	}
	// Output:
	// 10.20.0.5 sees 10.13.76.17
	// 1.1.1.1 sees 10.13.76.4
}

func ExampleCalicoNATRules() {
	cfg := agents.CalicoNATConfig{Pools: []agents.CalicoPool{{CIDR: netip.MustParsePrefix("10.240.0.0/16"), NATOutgoing: true}}}
	sets, _ := agents.CalicoIPSets(cfg, netfilter.IPv4)
	rules, _ := agents.CalicoNATRules(cfg, netfilter.IPv4)
	h := netfilter.NewHost(netfilter.HostConfig{Seed: 1})
	if err := h.Sets().Restore(sets, ipset.RestoreOptions{}); err != nil {
		panic(err)
	}
	if err := h.Restore(netfilter.IPv4, rules, netfilter.RestoreOptions{NoFlush: true}); err != nil {
		panic(err)
	}
	fmt.Print(string(rules))
	// Output:
	// *nat
	// :cali-POSTROUTING - [0:0]
	// :cali-fip-snat - [0:0]
	// :cali-nat-outgoing - [0:0]
	// -I POSTROUTING 1 -m comment --comment "cali:O3lYWMrLQYEMJtB5" -j cali-POSTROUTING
	// -A cali-POSTROUTING -m comment --comment "cali:Z-c7XtVd2Bq7s_hA" -j cali-fip-snat
	// -A cali-POSTROUTING -m comment --comment "cali:nYKhEzDlr11Jccal" -j cali-nat-outgoing
	// -A cali-nat-outgoing -m comment --comment "cali:flqWnvo8yq4ULQLa" -m set --match-set cali40masq-ipam-pools src -m set ! --match-set cali40all-ipam-pools dst -j MASQUERADE
	// COMMIT
}

func ExampleDockerBridge_PublishPort() {
	d, _ := agents.NewDockerBridge(agents.DefaultDockerBridgeConfig())
	_ = d.PublishPort(agents.DockerPort{HostPort: 8080, ContainerIP: netip.MustParseAddr("172.17.0.2"), ContainerPort: 80})
	rs, _ := netfilter.ParseRestore(netfilter.IPv4, d.Rules())
	out, _ := rs.AppendList(nil, netfilter.NAT, "DOCKER", netfilter.ListOptions{Numeric: true})
	// iptables pads the header and empty columns; Example output
	// cannot hold trailing spaces.
	for _, l := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		fmt.Println(strings.TrimRight(l, " "))
	}
	// Output:
	// Chain DOCKER (2 references)
	// target     prot opt source               destination
	// RETURN     0    --  0.0.0.0/0            0.0.0.0/0
	// DNAT       6    --  0.0.0.0/0            0.0.0.0/0            tcp dpt:8080 to:172.17.0.2:80
}
