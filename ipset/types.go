package ipset

import (
	"github.com/packetwalk/packetwalk/inet"
	"net/netip"
	"time"
)

type dimKind uint8

const (
	dimIP    dimKind = iota + 1 // host address; v4 CIDRs and ranges expand
	dimHost                     // plain host address, no expansion
	dimNet                      // prefix; v4 ranges become prefixes
	dimPort                     // [proto:]port[-port]
	dimIface                    // [physdev:]name[+]
	dimBPort                    // bitmap:port element
	dimName                     // list:set member
)

type setKind uint8

const (
	kindHash setKind = iota
	kindBitmap
	kindList
)

type typeInfo struct {
	name     string
	revision int
	kind     setKind
	dims     []dimKind
	nomatch  bool // nomatch entries allowed
	inet6    bool // family inet6 allowed
	netmask  bool // create option netmask allowed
}

// setTypes holds the revisions ipset 7.17 prints on kernel 6.18.
var setTypes = map[string]*typeInfo{
	"hash:ip":         {name: "hash:ip", revision: 6, dims: []dimKind{dimIP}, inet6: true, netmask: true},
	"hash:net":        {name: "hash:net", revision: 7, dims: []dimKind{dimNet}, nomatch: true, inet6: true},
	"hash:ip,port":    {name: "hash:ip,port", revision: 7, dims: []dimKind{dimIP, dimPort}, inet6: true},
	"hash:net,port":   {name: "hash:net,port", revision: 8, dims: []dimKind{dimNet, dimPort}, nomatch: true, inet6: true},
	"hash:ip,port,ip": {name: "hash:ip,port,ip", revision: 6, dims: []dimKind{dimIP, dimPort, dimHost}, inet6: true},
	"hash:ip,port,net": {name: "hash:ip,port,net", revision: 8, dims: []dimKind{dimIP, dimPort, dimNet},
		nomatch: true, inet6: true},
	"hash:net,iface": {name: "hash:net,iface", revision: 8, dims: []dimKind{dimNet, dimIface}, nomatch: true, inet6: true},
	"bitmap:ip":      {name: "bitmap:ip", revision: 3, kind: kindBitmap, dims: []dimKind{dimIP}, netmask: true},
	"bitmap:port":    {name: "bitmap:port", revision: 3, kind: kindBitmap, dims: []dimKind{dimBPort}},
	"list:set":       {name: "list:set", revision: 3, kind: kindList, dims: []dimKind{dimName}},
}

// refusedTypes exist in ipset 7.17 but the modelled kernel lacks them, or
// they are not modelled here.
var refusedTypes = map[string]bool{
	"hash:ip,mark": true, "hash:mac": true, "hash:ip,mac": true, "hash:net,net": true,
	"hash:net,port,net": true, "bitmap:ip,mac": true,
}

// ekey is one stored element. Unused fields stay zero so it is comparable.
type ekey struct {
	a1       netip.Addr
	c1       uint8 // prefix length for net dimensions, 0 otherwise
	proto    inet.Proto
	port     uint16 // ICMP: type<<8 | code
	a2       netip.Addr
	c2       uint8
	iface    string // without the trailing '+'
	physdev  bool
	wildcard bool
	name     string // list:set member
}

type entry struct {
	k        ekey
	nomatch  bool
	expires  time.Time // zero: permanent
	packets  uint64
	bytes    uint64
	comment  string
	skbmark  uint32
	skbmask  uint32
	skbprio  uint32
	skbqueue uint16
	dead     bool
}

// Key is what the packet path looks up. Fields a set type does not use are
// ignored. For ICMP and ICMPv6, Port carries type<<8 | code; for protocols
// without ports it is treated as 0.
type Key struct {
	Addr  netip.Addr // first dimension (src or dst as the match chose)
	Addr2 netip.Addr // third dimension of hash:ip,port,ip / hash:ip,port,net
	Proto inet.Proto
	Port  uint16 // second dimension's port (src or dst as the match chose)
	// PortFirst is the port read along the first flag: bitmap:port's only
	// dimension. A list:set hands one key to members of every type, so the
	// first flag's port and the second flag's port both travel in it.
	PortFirst uint16
	Iface     string
	Physdev   bool
	// Dims is how many src/dst flags the rule gave, 0 for no limit. A set
	// (or a list:set member) of a higher dimension is neither added to
	// nor deleted from (kernel ip_set_add/ip_set_del: type mismatch).
	Dims int
}

// ICMPPort packs an ICMP type and code the way Key.Port carries them.
func ICMPPort(typ, code uint8) uint16 { return uint16(typ)<<8 | uint16(code) }

// keyHasPort reports whether a packet of protocol proto gives a set a port
// (for ICMP and ICMPv6 the type and code stand in for it); other protocols
// are looked up with port 0.
func keyHasPort(proto inet.Proto) bool {
	switch proto {
	case inet.TCP, inet.UDP, inet.SCTP, inet.UDPLite, inet.ICMP, inet.ICMPv6:
		return true
	}
	return false
}
