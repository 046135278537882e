package netfilter

import "strconv"

// CPUMatch is "-m cpu [!] --cpu N": the packet is processed on CPU N.
// The model has no CPUs: the caller says which in Packet.CPU (0 unless
// set).
type CPUMatch struct {
	CPU    uint32
	Invert bool
}

type cpuBuilder struct {
	m     CPUMatch
	given bool
}

func init() {
	registerMatch(&module{name: "cpu",
		opts:       []option{{name: "cpu", args: 1, invert: true}},
		newBuilder: func(*ruleCtx) builder { return &cpuBuilder{} }})
}

func (b *cpuBuilder) set(_ *ruleCtx, _ string, inv bool, args []string) error {
	n, ok := parseCUint(args[0], 0xffffffff)
	if !ok {
		return badValue("cpu", "--cpu", args[0], "a CPU number 0-4294967295")
	}
	b.m, b.given = CPUMatch{CPU: uint32(n), Invert: inv}, true
	return nil
}

func (b *cpuBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("cpu", "--cpu")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *CPUMatch) Module() string { return "cpu" }

func (m *CPUMatch) appendSave(b []byte) []byte {
	b = appendNot(b, m.Invert)
	b = append(b, " --cpu "...)
	return strconv.AppendUint(b, uint64(m.CPU), 10)
}

func (m *CPUMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " cpu "...)
	if m.Invert {
		b = append(b, "! "...)
	}
	return strconv.AppendUint(b, uint64(m.CPU), 10)
}

func (m *CPUMatch) match(c *evalCtx) bool {
	return (uint32(c.pkt.CPU) == m.CPU) != m.Invert
}
