package agents

import (
	"fmt"
	"net/netip"
	"strings"
)

// DockerBridgeConfig describes dockerd's default bridge network (iptables
// backend, Docker Engine 24–26).
type DockerBridgeConfig struct {
	// Bridge is the bridge interface (docker0).
	Bridge string
	// Subnet is the bridge network (172.17.0.0/16).
	Subnet netip.Prefix
	// ICC allows container-to-container traffic on the bridge
	// (com.docker.network.bridge.enable_icc, --icc); false drops it.
	ICC bool
	// IPMasq masquerades the subnet's traffic leaving through other
	// interfaces (--ip-masq).
	IPMasq bool
	// UserlandProxy is --userland-proxy (default true). When false dockerd
	// runs in hairpin mode: DNAT also applies to traffic from the bridge
	// and from 127.0.0.0/8, and host-to-bridge traffic is masqueraded.
	UserlandProxy bool
}

// DefaultDockerBridgeConfig is dockerd's default: docker0, 172.17.0.0/16,
// ICC, IP masquerading and the userland proxy on.
func DefaultDockerBridgeConfig() DockerBridgeConfig {
	return DockerBridgeConfig{Bridge: "docker0", Subnet: netip.MustParsePrefix("172.17.0.0/16"), ICC: true, IPMasq: true, UserlandProxy: true}
}

// DockerPort is a published container port (`docker run -p
// [HostIP:]HostPort:ContainerPort/Proto`).
type DockerPort struct {
	// Proto is "tcp" (default when ""), "udp" or "sctp".
	Proto string
	// HostIP restricts the DNAT to one local address; the zero value
	// publishes on all addresses.
	HostIP        netip.Addr
	HostPort      uint16
	ContainerIP   netip.Addr
	ContainerPort uint16
}

// DockerBridge accumulates the rules dockerd writes for a bridge network
// and its published ports.
type DockerBridge struct {
	cfg   DockerBridgeConfig
	ports []DockerPort
}

// NewDockerBridge checks cfg and returns a bridge without published ports.
func NewDockerBridge(cfg DockerBridgeConfig) (*DockerBridge, error) {
	if cfg.Bridge == "" || len(cfg.Bridge) > 15 || strings.ContainsAny(cfg.Bridge, " /\t\n\"") {
		return nil, &ConfigError{Agent: "docker", Key: "Bridge", Value: cfg.Bridge, Want: "an interface name of 1–15 characters", Err: ErrBadValue}
	}
	if !cfg.Subnet.IsValid() || cfg.Subnet.Masked() != cfg.Subnet {
		return nil, &ConfigError{Agent: "docker", Key: "Subnet", Value: cfg.Subnet.String(), Want: "a CIDR aligned to its block", Err: ErrBadCIDR}
	}
	if !cfg.Subnet.Addr().Is4() {
		return nil, &ConfigError{Agent: "docker", Key: "Subnet", Value: cfg.Subnet.String(), Want: "an IPv4 subnet (IPv6 bridges are not modelled)", Err: ErrNotModelled}
	}
	return &DockerBridge{cfg: cfg}, nil
}

// PublishPort adds the rules of one published port: the DNAT in nat
// DOCKER, the ACCEPT in filter DOCKER and the hairpin MASQUERADE in nat
// POSTROUTING, each appended after the earlier ports' rules as dockerd
// does.
func (d *DockerBridge) PublishPort(p DockerPort) error {
	switch p.Proto {
	case "":
		p.Proto = "tcp"
	case "tcp", "udp", "sctp":
	default:
		return &ConfigError{Agent: "docker", Key: "Proto", Value: p.Proto, Want: "tcp, udp or sctp", Err: ErrBadValue}
	}
	if !d.cfg.Subnet.Contains(p.ContainerIP) {
		return &ConfigError{Agent: "docker", Key: "ContainerIP", Value: p.ContainerIP.String(), Want: "an address in " + d.cfg.Subnet.String(), Err: ErrBadValue}
	}
	if p.HostPort == 0 || p.ContainerPort == 0 {
		return &ConfigError{Agent: "docker", Key: "HostPort/ContainerPort", Value: fmt.Sprintf("%d:%d", p.HostPort, p.ContainerPort), Want: "ports 1–65535", Err: ErrBadValue}
	}
	if p.HostIP.IsValid() && !p.HostIP.Is4() {
		return &ConfigError{Agent: "docker", Key: "HostIP", Value: p.HostIP.String(), Want: "an IPv4 address", Err: ErrFamily}
	}
	d.ports = append(d.ports, p)
	return nil
}

// Rules returns the nat and filter tables as iptables-save prints them on
// a host where only dockerd wrote rules (user chains sorted by name, each
// chain's rules in dockerd's order), for a plain iptables-restore.
func (d *DockerBridge) Rules() []byte {
	c, br, sub := d.cfg, d.cfg.Bridge, d.cfg.Subnet
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }

	w("*nat")
	w(":PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n:DOCKER - [0:0]")
	w("-A PREROUTING -m addrtype --dst-type LOCAL -j DOCKER")
	if c.UserlandProxy {
		w("-A OUTPUT ! -d 127.0.0.0/8 -m addrtype --dst-type LOCAL -j DOCKER")
	} else {
		w("-A OUTPUT -m addrtype --dst-type LOCAL -j DOCKER")
	}
	if c.IPMasq {
		w("-A POSTROUTING -s %s ! -o %s -j MASQUERADE", sub, br)
	}
	if !c.UserlandProxy {
		w("-A POSTROUTING -o %s -m addrtype --src-type LOCAL -j MASQUERADE", br)
	}
	for _, p := range d.ports {
		w("-A POSTROUTING -s %s/32 -d %s/32 -p %s -m %s --dport %d -j MASQUERADE", p.ContainerIP, p.ContainerIP, p.Proto, p.Proto, p.ContainerPort)
	}
	notBridge := "! -i " + br + " "
	if c.UserlandProxy {
		// Without hairpin mode traffic from the bridge never takes the DNAT.
		w("-A DOCKER -i %s -j RETURN", br)
	} else {
		notBridge = ""
	}
	for _, p := range d.ports {
		dst := ""
		if p.HostIP.IsValid() {
			dst = "-d " + p.HostIP.String() + "/32 "
		}
		w("-A DOCKER %s%s-p %s -m %s --dport %d -j DNAT --to-destination %s", dst, notBridge, p.Proto, p.Proto, p.HostPort, netip.AddrPortFrom(p.ContainerIP, p.ContainerPort))
	}
	w("COMMIT")

	w("*filter")
	w(":INPUT ACCEPT [0:0]\n:FORWARD DROP [0:0]\n:OUTPUT ACCEPT [0:0]\n:DOCKER - [0:0]\n:DOCKER-ISOLATION-STAGE-1 - [0:0]\n:DOCKER-ISOLATION-STAGE-2 - [0:0]\n:DOCKER-USER - [0:0]")
	w("-A FORWARD -j DOCKER-USER")
	w("-A FORWARD -j DOCKER-ISOLATION-STAGE-1")
	w("-A FORWARD -o %s -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT", br)
	w("-A FORWARD -o %s -j DOCKER", br)
	w("-A FORWARD -i %s ! -o %s -j ACCEPT", br, br)
	if c.ICC {
		w("-A FORWARD -i %s -o %s -j ACCEPT", br, br)
	} else {
		w("-A FORWARD -i %s -o %s -j DROP", br, br)
	}
	for _, p := range d.ports {
		w("-A DOCKER -d %s/32 ! -i %s -o %s -p %s -m %s --dport %d -j ACCEPT", p.ContainerIP, br, br, p.Proto, p.Proto, p.ContainerPort)
	}
	w("-A DOCKER-ISOLATION-STAGE-1 -i %s ! -o %s -j DOCKER-ISOLATION-STAGE-2", br, br)
	w("-A DOCKER-ISOLATION-STAGE-1 -j RETURN")
	w("-A DOCKER-ISOLATION-STAGE-2 -o %s -j DROP", br)
	w("-A DOCKER-ISOLATION-STAGE-2 -j RETURN")
	w("-A DOCKER-USER -j RETURN")
	w("COMMIT")
	return []byte(b.String())
}
