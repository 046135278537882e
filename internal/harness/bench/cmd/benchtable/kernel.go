package main

import (
	"fmt"
	"regexp"
	"time"

	"github.com/packetwalk/packetwalk/internal/harness/bench"
	"github.com/packetwalk/packetwalk/internal/harness/kerneltest"
)

// kernelRow is the kernel's side of one row.
type kernelRow struct {
	restoreSec      float64
	firstNs, lastNs float64 // end-to-end cost of one new connection
}

var nfacctName = regexp.MustCompile(`--nfacct-name (\S+)`)

// addNFAcct creates the nfacct objects the document names, as kube-proxy
// does before it writes its rules.
func addNFAcct(ns *kerneltest.NS, doc []byte) error {
	seen := map[string]bool{}
	for _, m := range nfacctName.FindAllSubmatch(doc, -1) {
		name := string(m[1])
		if seen[name] {
			continue
		}
		seen[name] = true
		if _, _, err := ns.Exec("", "nfacct", "add", name); err != nil {
			return err
		}
	}
	return nil
}

// measureKernel times iptables-restore of s's rules in a fresh namespace,
// then sends bounded bursts of new connections to the first and the last
// service through the kerneltest lab with the rules loaded in its node.
func measureKernel(s *bench.Setup, burst int) (kernelRow, error) {
	var k kernelRow
	ns, err := kerneltest.CreateNS("pw-bench")
	if err != nil {
		return k, err
	}
	defer ns.Close()
	if err := addNFAcct(ns, s.Doc); err != nil {
		return k, err
	}
	start := time.Now()
	if err := ns.Restore(string(s.Doc)); err != nil {
		return k, err
	}
	k.restoreSec = time.Since(start).Seconds()

	lab, err := kerneltest.CreateLab(kerneltest.LabConfig{Prefix: "pw-benchlab"})
	if err != nil {
		return k, err
	}
	defer lab.Close()
	if err := addNFAcct(lab.Node(), s.Doc); err != nil {
		return k, err
	}
	if err := lab.Reset(string(s.Doc)); err != nil {
		return k, err
	}
	if _, _, err := lab.Node().Exec("", "ip", "route", "add", bench.PodsCIDR.String(), "via", bench.Gateway.String(), "dev", "eth1"); err != nil {
		return k, err
	}
	if k.firstNs, err = kernelBurst(lab, 0, burst); err != nil {
		return k, err
	}
	if k.lastNs, err = kernelBurst(lab, s.Services-1, burst); err != nil {
		return k, err
	}
	return k, nil
}

// kernelBurst injects burst SYNs from distinct source ports to service
// svc, waits until the node has processed them all, and returns the
// elapsed time per packet. It checks that they were forwarded to
// endpoints.
func kernelBurst(lab *kerneltest.Lab, svc, burst int) (float64, error) {
	if err := lab.FlushConntrack(); err != nil {
		return 0, err
	}
	frames := make([][]byte, burst)
	for i := range frames {
		f, err := lab.Frame(kerneltest.FrameSpec{Proto: "tcp", Src: bench.Client, Dst: bench.ServiceIP(svc),
			SrcPort: uint16(10000 + i), DstPort: 80, TCPFlags: "SYN"})
		if err != nil {
			return 0, err
		}
		frames[i] = f
	}
	if _, err := lab.Settle(); err != nil { // discard what came before
		return 0, err
	}
	start := time.Now()
	for _, f := range frames {
		if err := lab.Inject(f); err != nil {
			return 0, err
		}
	}
	obs, err := lab.Settle()
	elapsed := time.Since(start)
	if err != nil {
		return 0, err
	}
	if len(obs.Server) < burst {
		return 0, fmt.Errorf("service %d: %d of %d SYNs reached the server side", svc, len(obs.Server), burst)
	}
	return float64(elapsed.Nanoseconds()) / float64(burst), nil
}
