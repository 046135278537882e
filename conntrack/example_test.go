package conntrack_test

import (
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
)

type fixedClock struct{ t time.Time }

func (c *fixedClock) Now() time.Time { return c.t }

// A DNAT+MASQUERADE connection as netfilter drives it: Track at
// PREROUTING, SetupNAT from the nat targets of the first packet,
// Translate at each NAT hook, Confirm at the last hook.
func Example() {
	clk := &fixedClock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ct := conntrack.NewTable(conntrack.Config{Clock: clk, Seed: 1})

	syn := conntrack.Facts{
		Tuple:    conntrack.TupleFrom(inet.TCP, netip.MustParseAddrPort("192.168.10.2:46652"), netip.MustParseAddrPort("10.96.0.10:80")),
		TCPFlags: inet.SYN,
	}
	info, _ := ct.Track(&syn) // PREROUTING, conntrack priority
	fmt.Println(info.State)
	e := info.Entry
	// nat PREROUTING: -j DNAT --to-destination 10.244.1.6:8080
	_ = ct.SetupNAT(e, conntrack.DNAT, conntrack.NATRange{MinAddr: netip.MustParseAddr("10.244.1.6"), MinPort: 8080})
	pkt, _ := e.Translate(conntrack.DNAT, info.Dir, syn.Tuple)
	// nat POSTROUTING: -j MASQUERADE (address of the outgoing interface)
	_ = ct.SetupNAT(e, conntrack.SNAT, conntrack.NATRange{MinAddr: netip.MustParseAddr("10.244.1.1")})
	pkt, _ = e.Translate(conntrack.SNAT, info.Dir, pkt)
	fmt.Println(pkt)
	_ = ct.Confirm(e) // last hook

	_, _ = ct.WriteTo(os.Stdout)
	// Output:
	// NEW
	// tcp src=10.244.1.1 dst=10.244.1.6 sport=46652 dport=8080
	// tcp      6 120 SYN_SENT src=192.168.10.2 dst=10.96.0.10 sport=46652 dport=80 [UNREPLIED] src=10.244.1.6 dst=10.244.1.1 sport=8080 dport=46652 mark=0 use=1
}

// Reading a `conntrack -L` snapshot and deleting entries like
// `conntrack -D -p udp --orig-dst 10.96.0.53` (kube-proxy's stale UDP cleanup).
func ExampleTable_Delete() {
	clk := &fixedClock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ct := conntrack.NewTable(conntrack.Config{Clock: clk})
	err := ct.Restore(strings.NewReader(`udp      17 29 src=192.168.10.2 dst=10.96.0.53 sport=40001 dport=53 src=10.244.1.5 dst=1.2.3.4 sport=5353 dport=40001 mark=26 use=1
tcp      6 431999 ESTABLISHED src=192.168.10.2 dst=10.96.0.10 sport=37738 dport=80 src=10.244.1.7 dst=10.244.1.1 sport=8080 dport=32988 [ASSURED] mark=27 use=1
`))
	if err != nil {
		fmt.Println(err)
		return
	}
	n := ct.Delete(conntrack.Filter{Proto: inet.UDP, OrigDst: netip.MustParseAddr("10.96.0.53")})
	fmt.Println(n, "deleted")
	_ = ct.Dump(os.Stdout, conntrack.Format{Extended: true})
	// Output:
	// 1 deleted
	// ipv4     2 tcp      6 431999 ESTABLISHED src=192.168.10.2 dst=10.96.0.10 sport=37738 dport=80 src=10.244.1.7 dst=10.244.1.1 sport=8080 dport=32988 [ASSURED] mark=27 use=1
}

func ExampleParseEntry() {
	line := "tcp      6 119 SYN_SENT src=192.168.10.2 dst=10.96.0.55 sport=51122 dport=80 [UNREPLIED] src=10.244.1.99 dst=1.2.3.4 sport=80 dport=51122 mark=26 use=2"
	e, _, err := conntrack.ParseEntry(line, time.Time{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(e.TCPState, e.Status, e.Reply().Src)
	_, _, err = conntrack.ParseEntry("tcp      6 119 SYN_SENT src=192.168.10.2 dst=10.96.0.55 sport=51122 dport=http", time.Time{})
	fmt.Println(err)
	// Output:
	// SYN_SENT CONFIRMED|SRC_NAT|DST_NAT|SRC_NAT_DONE|DST_NAT_DONE 10.244.1.99
	// conntrack: line 1: token "dport=http": syntax error: dport must be a number below 2^16 in "tcp      6 119 SYN_SENT src=192.168.10.2 dst=10.96.0.55 sport=51122 dport=http"
}
