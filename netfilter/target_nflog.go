package netfilter

import (
	"fmt"
	"strconv"
)

// maxNFLOGPrefix is the longest NFLOG prefix iptables-nft keeps (the nft
// log expression's 128-byte buffer); longer ones are cut.
const maxNFLOGPrefix = 127

// NFLOGTarget is "-j NFLOG": the packet is copied to a netlink log group
// and continues with the next rule. packetwalk delivers nothing; the
// target only counts.
type NFLOGTarget struct {
	Group  uint16
	Prefix string
	// Size is the number of bytes copied (--nflog-size) when HasSize.
	Size      uint32
	HasSize   bool
	Threshold uint16
}

func init() {
	registerTarget(&module{name: "NFLOG", opts: []option{
		{name: "nflog-group", args: 1}, {name: "nflog-prefix", args: 1},
		{name: "nflog-range", args: 1}, {name: "nflog-size", args: 1}, {name: "nflog-threshold", args: 1},
	}, newBuilder: func(*ruleCtx) builder { return &nflogBuilder{} }})
}

type nflogBuilder struct {
	t        NFLOGTarget
	hasRange bool
}

func (b *nflogBuilder) set(_ *ruleCtx, opt string, _ bool, args []string) error {
	num := func(max uint64) (uint64, error) {
		n, err := strconv.ParseUint(args[0], 10, 64)
		if err != nil || n > max {
			return 0, badValue("NFLOG", "--"+opt, args[0], fmt.Sprintf("a number 0-%d", max))
		}
		return n, nil
	}
	switch opt {
	case "nflog-group":
		n, err := num(0xffff)
		if err != nil {
			return err
		}
		b.t.Group = uint16(n)
	case "nflog-prefix":
		if args[0] == "" {
			return badValue("NFLOG", "--nflog-prefix", args[0], "a prefix of at least 1 character")
		}
		p := args[0]
		if len(p) > maxNFLOGPrefix {
			p = p[:maxNFLOGPrefix]
		}
		b.t.Prefix = p
	case "nflog-range", "nflog-size":
		if b.hasRange || b.t.HasSize {
			return fmt.Errorf("%w: NFLOG: option \"--nflog-range\" cannot be used together with \"--nflog-size\"", ErrIncompatibleOpts)
		}
		n, err := num(0xffffffff)
		if err != nil {
			return err
		}
		// --nflog-range never worked; iptables warns and drops it.
		if opt == "nflog-range" {
			b.hasRange = true
			return nil
		}
		b.t.Size, b.t.HasSize = uint32(n), true
	case "nflog-threshold":
		n, err := num(0xffff)
		if err != nil {
			return err
		}
		b.t.Threshold = uint16(n)
	}
	return nil
}

func (b *nflogBuilder) done(*ruleCtx) (any, error) {
	t := b.t
	return &t, nil
}

// Name implements Target.
func (t *NFLOGTarget) Name() string { return "NFLOG" }

func (t *NFLOGTarget) appendOpts(b []byte, prefix string) []byte {
	if t.Prefix != "" {
		b = append(b, prefix...)
		b = append(b, "nflog-prefix "...)
		b = appendQuoted(b, t.Prefix)
	}
	if t.Group != 0 {
		b = append(b, prefix...)
		b = append(b, "nflog-group "...)
		b = strconv.AppendUint(b, uint64(t.Group), 10)
	}
	if t.HasSize {
		b = append(b, prefix...)
		b = append(b, "nflog-size "...)
		b = strconv.AppendUint(b, uint64(t.Size), 10)
	}
	if t.Threshold != 0 {
		b = append(b, prefix...)
		b = append(b, "nflog-threshold "...)
		b = strconv.AppendUint(b, uint64(t.Threshold), 10)
	}
	return b
}

func (t *NFLOGTarget) appendSave(b []byte) []byte         { return t.appendOpts(b, " --") }
func (t *NFLOGTarget) appendList(b []byte, _ bool) []byte { return t.appendOpts(b, " ") }

func (t *NFLOGTarget) apply(*evalCtx) verdict { return vContinue }
