package kubeproxy

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// Pairs observed with iptables v1.8.9 (nf_tables) in a namespace.
func TestPredictSave(t *testing.T) {
	cases := []struct{ in, want string }{
		{`-A KUBE-SVC-X -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp -p tcp -d 172.30.0.41 --dport 80 ! -s 10.0.0.0/8 -j KUBE-MARK-MASQ`,
			`-A KUBE-SVC-X ! -s 10.0.0.0/8 -d 172.30.0.41/32 -p tcp -m comment --comment "ns1/svc1:p80 cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`},
		{`-A KUBE-SEP-I -m comment --comment ns5/svc5:p80 -m recent --name KUBE-SEP-I --set -m tcp -p tcp -j DNAT --to-destination 10.180.0.3:80`,
			`-A KUBE-SEP-I -p tcp -m comment --comment "ns5/svc5:p80" -m recent --set --name KUBE-SEP-I --mask 255.255.255.255 --rsource -m tcp -j DNAT --to-destination 10.180.0.3:80`},
		{`-A KUBE-SVC-N -m comment --comment "a -> b" -m recent --name KUBE-SEP-I --rcheck --seconds 10800 --reap -j KUBE-SEP-I`,
			`-A KUBE-SVC-N -m comment --comment "a -> b" -m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-I --mask 255.255.255.255 --rsource -j KUBE-SEP-I`},
		{`-A KUBE-POSTROUTING -j MARK --xor-mark 0x00004000`, `-A KUBE-POSTROUTING -j MARK --set-xmark 0x4000/0x0`},
		{`-A KUBE-POSTROUTING -m mark ! --mark 0x00004000/0x00004000 -j RETURN`, `-A KUBE-POSTROUTING -m mark ! --mark 0x4000/0x4000 -j RETURN`},
		{`-A KUBE-FIREWALL -m comment --comment "block incoming localnet connections" -d 127.0.0.0/8 ! -s 127.0.0.0/8 -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
			`-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`},
		{`-A S -m comment --comment "x" -m statistic --mode random --probability 0.3333333333 -j Y`,
			`-A S -m comment --comment x -m statistic --mode random --probability 0.33333333349 -j Y`},
	}
	for _, c := range cases {
		assert.Equal(t, c.want, predictSave(c.in, false))
	}
	assert.Equal(t, "0.33332999982", savedProbability("0.33333"))
	// The table of docs/kube-proxy-notes.md, "Probabilities".
	for n, want := range map[int]string{2: "0.50000000000", 3: "0.33333333349", 4: "0.25000000000", 5: "0.20000000019",
		6: "0.16666666651", 7: "0.14285714272", 8: "0.12500000000", 9: "0.11111111101", 10: "0.10000000009", 100: "0.00999999978"} {
		var g Generator
		assert.Equal(t, want, savedProbability(g.probability(n)), "n=%d", n)
	}
}
