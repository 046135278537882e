package render_test

import (
	"fmt"

	"github.com/packetwalk/packetwalk/netfilter"
	"github.com/packetwalk/packetwalk/render"
)

func ExampleDOT() {
	rs := netfilter.NewRuleset(netfilter.IPv4).MustExec(
		"-t nat -N KUBE-SVC-X",
		"-t nat -N KUBE-SEP-A",
		"-t nat -N KUBE-SEP-B",
		"-t nat -A PREROUTING -d 10.96.0.10/32 -j KUBE-SVC-X",
		"-t nat -A KUBE-SVC-X -m statistic --mode random --probability 0.5 -j KUBE-SEP-A",
		"-t nat -A KUBE-SVC-X -j KUBE-SEP-B",
	)
	dot, err := render.DOT(rs, render.Options{Roots: []string{"PREROUTING"}})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(string(dot))
	// Output:
	// digraph "nat" {
	//   rankdir=LR;
	//   node [shape=box, style=rounded, fontname="Helvetica", fontsize=10];
	//   edge [fontname="Helvetica", fontsize=9];
	//   "PREROUTING" [label="PREROUTING\npolicy ACCEPT 0 packets, 0 bytes", style="rounded,filled", fillcolor="#eeeeee"];
	//   "KUBE-SEP-A" [label="KUBE-SEP-A\n1 references"];
	//   "KUBE-SEP-B" [label="KUBE-SEP-B\n1 references"];
	//   "KUBE-SVC-X" [label="KUBE-SVC-X\n1 references"];
	//   "PREROUTING" -> "KUBE-SVC-X" [label="#1"];
	//   "KUBE-SVC-X" -> "KUBE-SEP-A" [label="#1 p=0.50000000000"];
	//   "KUBE-SVC-X" -> "KUBE-SEP-B" [label="#2"];
	// }
}
