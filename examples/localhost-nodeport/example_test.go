package main

import (
	"fmt"
	"github.com/packetwalk/packetwalk/netfilter"
	"io"
)

// connect returns what happens to the SYN of `curl http://127.0.0.1:30080`
// in case c, in one line.
func connect(c Case) string {
	res, err := Walk(io.Discard, c)
	if err != nil {
		return err.Error()
	}
	out := fmt.Sprintf("%s %s:%d -> %s:%d", res.Disposition, res.Packet.Src, res.Packet.SrcPort, res.Packet.Dst, res.Packet.DstPort)
	if res.Reason != netfilter.NoReason {
		out += " (" + res.Reason.String() + " at " + res.Where.Hook.String() + ")"
	}
	return out
}

func Example() {
	fmt.Println("route_localnet=1:", connect(Cases[0]))
	fmt.Println("route_localnet=0:", connect(Cases[1]))
	fmt.Println("--iptables-localhost-nodeports=false:", connect(Cases[2]))
	// Output:
	// route_localnet=1: sent 10.244.1.1:40000 -> 10.244.1.5:8080
	// route_localnet=0: dropped 127.0.0.1:40000 -> 10.244.1.5:8080 (invalid source at OUTPUT)
	// --iptables-localhost-nodeports=false: delivered 127.0.0.1:40000 -> 127.0.0.1:30080
}
