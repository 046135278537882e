package ipset

import (
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
	elemSize int  // rough per-entry bytes for the Size in memory estimate
}

// setTypes holds the revisions ipset 7.17 prints on kernel 6.18.
var setTypes = map[string]*typeInfo{
	"hash:ip":         {name: "hash:ip", revision: 6, dims: []dimKind{dimIP}, inet6: true, netmask: true, elemSize: 40},
	"hash:net":        {name: "hash:net", revision: 7, dims: []dimKind{dimNet}, nomatch: true, inet6: true, elemSize: 48},
	"hash:ip,port":    {name: "hash:ip,port", revision: 7, dims: []dimKind{dimIP, dimPort}, inet6: true, elemSize: 48},
	"hash:net,port":   {name: "hash:net,port", revision: 8, dims: []dimKind{dimNet, dimPort}, nomatch: true, inet6: true, elemSize: 56},
	"hash:ip,port,ip": {name: "hash:ip,port,ip", revision: 6, dims: []dimKind{dimIP, dimPort, dimHost}, inet6: true, elemSize: 56},
	"hash:ip,port,net": {name: "hash:ip,port,net", revision: 8, dims: []dimKind{dimIP, dimPort, dimNet},
		nomatch: true, inet6: true, elemSize: 64},
	"hash:net,iface": {name: "hash:net,iface", revision: 8, dims: []dimKind{dimNet, dimIface}, nomatch: true, inet6: true, elemSize: 64},
	"bitmap:ip":      {name: "bitmap:ip", revision: 3, kind: kindBitmap, dims: []dimKind{dimIP}, netmask: true, elemSize: 8},
	"bitmap:port":    {name: "bitmap:port", revision: 3, kind: kindBitmap, dims: []dimKind{dimBPort}, elemSize: 8},
	"list:set":       {name: "list:set", revision: 3, kind: kindList, dims: []dimKind{dimName}, elemSize: 32},
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
	proto    uint8
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
	Addr    netip.Addr // first dimension (src or dst as the match chose)
	Addr2   netip.Addr // third dimension of hash:ip,port,ip / hash:ip,port,net
	Proto   uint8
	Port    uint16
	Iface   string
	Physdev bool
}

// ICMPPort packs an ICMP type and code the way Key.Port carries them.
func ICMPPort(typ, code uint8) uint16 { return uint16(typ)<<8 | uint16(code) }

func hasPorts(proto uint8) bool {
	switch proto {
	case protoTCP, protoUDP, protoSCTP, protoUDPLite, protoICMP, protoICMPv6:
		return true
	}
	return false
}
