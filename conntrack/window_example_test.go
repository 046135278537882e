package conntrack_test

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
)

// Sequence-window tracking: once a handshake is seen, a segment far beyond
// the receiver's window is INVALID, unless the table is liberal
// (net.netfilter.nf_conntrack_tcp_be_liberal=1).
func ExampleConfig_tcpBeLiberal() {
	cli := netip.MustParseAddrPort("192.168.10.2:40000")
	srv := netip.MustParseAddrPort("10.244.1.5:80")
	seg := func(from, to netip.AddrPort, flags inet.TCPFlags, seq, ack uint32) conntrack.Facts {
		return conntrack.Facts{Tuple: conntrack.TupleFrom(inet.TCP, from, to),
			TCPFlags: flags, Seq: seq, Ack: ack, Window: 64240, Len: 40}
	}
	for _, liberal := range []bool{false, true} {
		clk := &fixedClock{time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
		ct := conntrack.NewTable(conntrack.Config{Clock: clk, TCPBeLiberal: liberal})
		for _, f := range []conntrack.Facts{
			seg(cli, srv, inet.SYN, 1000, 0),
			seg(srv, cli, inet.SYN|inet.ACK, 5000, 1001),
			seg(cli, srv, inet.ACK, 1001, 5001),
		} {
			info, _ := ct.Track(&f)
			_ = ct.Confirm(info.Entry)
		}
		far := seg(cli, srv, inet.ACK, 1001+1<<20, 5001)
		info, _ := ct.Track(&far)
		fmt.Printf("be_liberal=%v: %v\n", liberal, info.State)
	}
	// Output:
	// be_liberal=false: INVALID
	// be_liberal=true: ESTABLISHED
}
