package ipset_test

import (
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/packetwalk/packetwalk/ipset"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

// Restore `ipset save` text, test elements like `ipset test`, and save.
func ExampleRegistry_Restore() {
	r := ipset.NewRegistry(fixedClock{time.Unix(0, 0)}, nil)
	err := r.Restore([]byte(`create NETS hash:net family inet hashsize 1024 maxelem 65536 initval 0x1
add NETS 10.0.0.0/8
add NETS 10.1.0.0/16 nomatch
add NETS 10.1.2.0/24
`), ipset.RestoreOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, e := range []string{"10.9.9.9", "10.1.5.5", "10.1.2.9", "10.0.0.0/9"} {
		in, _ := r.Test("NETS", e)
		fmt.Println(e, in)
	}
	_ = r.Save(os.Stdout)
	// Output:
	// 10.9.9.9 true
	// 10.1.5.5 false
	// 10.1.2.9 true
	// 10.0.0.0/9 false
	// create NETS hash:net family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0x00000001
	// add NETS 10.1.0.0/16 nomatch
	// add NETS 10.0.0.0/8
	// add NETS 10.1.2.0/24
}

// Look up a packet's fields the way the iptables set match does.
func ExampleSet_Lookup() {
	clock := fixedClock{time.Unix(0, 0)}
	r := ipset.NewRegistry(clock, nil)
	_ = r.Restore([]byte("create SVC hash:ip,port\nadd SVC 10.96.0.10,udp:53\n"), ipset.RestoreOptions{})
	s, _ := r.Ref("SVC") // a rule holds a reference while it exists
	match, nomatch := s.Lookup(ipset.Key{Addr: netip.MustParseAddr("10.96.0.10"), Proto: 17, Port: 53}, clock.Now())
	fmt.Println(match, nomatch, s.References())
	err := r.Destroy("SVC")
	fmt.Println(err)
	// Output:
	// true false 1
	// Set cannot be destroyed: it is in use by a kernel component
}
