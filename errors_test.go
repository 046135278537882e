package packetwalk

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/packetwalk/packetwalk/conntrack"
	"github.com/packetwalk/packetwalk/inet"
	"github.com/packetwalk/packetwalk/ipset"
	"github.com/packetwalk/packetwalk/kubeproxy"
	"github.com/packetwalk/packetwalk/netfilter"
)

// TestNotModelled pins the one meaning of a refusal: each package's
// ErrNotModelled, and the errors real refusals return, match
// inet.ErrNotModelled.
func TestNotModelled(t *testing.T) {
	for name, err := range map[string]error{
		"netfilter": netfilter.ErrNotModelled, "conntrack": conntrack.ErrNotModelled,
		"ipset": ipset.ErrNotModelled, "kubeproxy": kubeproxy.ErrNotModelled,
	} {
		if !errors.Is(err, inet.ErrNotModelled) {
			t.Errorf("%s.ErrNotModelled is not inet.ErrNotModelled", name)
		}
	}
	rs := netfilter.NewRuleset(netfilter.IPv4)
	err := rs.Exec("-A INPUT ! -p tcp -m tcp --dport 1 -j DROP")
	var pe *netfilter.ParseError
	if !errors.As(err, &pe) || !errors.Is(err, inet.ErrNotModelled) {
		t.Errorf("netfilter refusal: %v", err)
	}
	err = ipset.NewRegistry(netfilter.NewManualClock(time.Unix(0, 0)), nil).Restore([]byte("create M hash:ip,mark\n"), ipset.RestoreOptions{})
	var se *ipset.ParseError
	if !errors.As(err, &se) || !errors.Is(err, inet.ErrNotModelled) || se.Line != 1 || se.Text != "create M hash:ip,mark" {
		t.Errorf("ipset refusal: %v (%+v)", err, se)
	}
	_, err = conntrack.Parse(strings.NewReader("sctp     132 10 CLOSED src=10.0.0.1 dst=10.0.0.2 sport=1 dport=2 [UNREPLIED] src=10.0.0.2 dst=10.0.0.1 sport=2 dport=1 mark=0 use=1\n"), time.Unix(0, 0))
	var ce *conntrack.ParseError
	if !errors.As(err, &ce) || !errors.Is(err, inet.ErrNotModelled) || ce.Line != 1 {
		t.Errorf("conntrack refusal: %v", err)
	}
}
