package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/packetwalk/packetwalk/netfilter"
)

// nfacctFile is the snapshot file holding `nfacct list` output.
const nfacctFile = "nfacct-list"

// maxNFAcctName is the longest object name the kernel keeps
// (NFACCT_NAME_MAX less the NUL).
const maxNFAcctName = 31

// nfacctObject is one extended accounting object of a node.
type nfacctObject struct {
	name     string
	counters netfilter.Counters
}

// parseNFAcctList reads the text `nfacct list` prints (nfacct 1.0.2), one
// object a line:
//
//	{ pkts = 00000000000000000000, bytes = 00000000000000000000 } = NAME;
//
// The name is printed as it is, so it runs from after "} = " to the final
// ';' and may hold blanks or ';'. Blank lines are allowed.
func parseNFAcctList(file string, data []byte) ([]nfacctObject, error) {
	var out []nfacctObject
	seen := map[string]int{}
	for i, line := range strings.Split(string(data), "\n") {
		n := i + 1
		if strings.TrimSpace(line) == "" {
			continue
		}
		bad := func(format string, a ...any) error {
			return &inputError{file: file, line: n, err: fmt.Errorf(format+" in %q", append(a, line)...)}
		}
		rest, ok := strings.CutPrefix(line, "{ pkts = ")
		if !ok {
			return nil, bad("expected `nfacct list` output: { pkts = N, bytes = N } = NAME;")
		}
		pkts, rest, ok := strings.Cut(rest, ", bytes = ")
		if !ok {
			return nil, bad("expected \", bytes = N\" after the packet count")
		}
		bytes, name, ok := strings.Cut(rest, " } = ")
		if !ok {
			return nil, bad("expected \" } = NAME;\" after the byte count")
		}
		name, ok = strings.CutSuffix(name, ";")
		if !ok {
			return nil, bad("expected ';' after the object name")
		}
		p, err1 := strconv.ParseUint(pkts, 10, 64)
		b, err2 := strconv.ParseUint(bytes, 10, 64)
		if err1 != nil || err2 != nil {
			return nil, bad("bad counter: expected decimal packet and byte counts")
		}
		if name == "" || len(name) > maxNFAcctName {
			return nil, bad("bad object name %q: expected 1 to %d characters", name, maxNFAcctName)
		}
		if prev, dup := seen[name]; dup {
			return nil, bad("object %q listed twice (first on line %d)", name, prev)
		}
		seen[name] = n
		out = append(out, nfacctObject{name: name, counters: netfilter.Counters{Packets: p, Bytes: b}})
	}
	return out, nil
}

// nfacctList is the repeatable --nfacct NAME flag.
type nfacctList []string

func (l *nfacctList) String() string { return "" }

func (l *nfacctList) Set(s string) error {
	if s == "" || len(s) > maxNFAcctName {
		return fmt.Errorf("bad nfacct object name %q: expected 1 to %d characters", s, maxNFAcctName)
	}
	*l = append(*l, s)
	return nil
}

// missingNFAcct explains a restore error for a rule naming an accounting
// object the node does not have: the kernel refuses the rule
// (RULE_APPEND failed (No such file or directory)), and kube-proxy creates
// its objects before it writes rules. It keeps the line the error names
// and says how to declare the object; nil if err is another error.
func missingNFAcct(file string, err error) error {
	var pe *netfilter.ParseError
	if !errors.Is(err, netfilter.ErrNoSuchNFAcct) || !errors.As(err, &pe) {
		return nil
	}
	name := pe.Token
	return &inputError{file: file, line: pe.Line, err: fmt.Errorf(
		"%w %q: the kernel refuses the rule (RULE_APPEND failed (No such file or directory)); "+
			"declare it with --nfacct %s, or in the file %s of the --node DIR (the node's 'nfacct list' output; or --nfacct-list FILE)",
		netfilter.ErrNoSuchNFAcct, name, name, nfacctFile)}
}
