package netfilter

import "fmt"

// DevGroupMatch is "-m devgroup [!] --src-group G[/MASK]
// [!] --dst-group G[/MASK]": the device group (Interface.Group) of the
// input interface, masked, must equal SrcGroup, and that of the output
// interface DstGroup. As the kernel checks, --src-group is allowed only
// where there is an input interface (PREROUTING, INPUT, FORWARD) and
// --dst-group only where there is an output one (FORWARD, OUTPUT,
// POSTROUTING).
type DevGroupMatch struct {
	SrcGroup, SrcMask uint32
	DstGroup, DstMask uint32
	HasSrc, HasDst    bool
	InvSrc, InvDst    bool
}

func init() {
	registerMatch(&module{name: "devgroup",
		opts: []option{
			{name: "src-group", args: 1, invert: true},
			{name: "dst-group", args: 1, invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &DevGroupMatch{} }})
}

func (m *DevGroupMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	v, mask, err := parseValMask("devgroup", "--"+opt, args[0], deviceGroupNames)
	if err != nil {
		return err
	}
	if opt == "src-group" {
		m.SrcGroup, m.SrcMask, m.HasSrc, m.InvSrc = v, mask, true, inv
	} else {
		m.DstGroup, m.DstMask, m.HasDst, m.InvDst = v, mask, true, inv
	}
	return nil
}

func (m *DevGroupMatch) done(*ruleCtx) (any, error) {
	if !m.HasSrc && !m.HasDst {
		return nil, fmt.Errorf("%w: devgroup match: specify --src-group or --dst-group", ErrMissingArgument)
	}
	return m, nil
}

func (m *DevGroupMatch) checkHooks(mask uint8) error {
	in := uint8(1<<Prerouting | 1<<Input | 1<<Forward)
	out := uint8(1<<Forward | 1<<Output | 1<<Postrouting)
	if m.HasSrc && mask&^in != 0 {
		return fmt.Errorf("%w: devgroup --src-group can only be used in PREROUTING, INPUT and FORWARD", ErrNotAllowed)
	}
	if m.HasDst && mask&^out != 0 {
		return fmt.Errorf("%w: devgroup --dst-group can only be used in FORWARD, OUTPUT and POSTROUTING", ErrNotAllowed)
	}
	return nil
}

// Module implements Match.
func (m *DevGroupMatch) Module() string { return "devgroup" }

func (m *DevGroupMatch) appendSave(b []byte) []byte {
	if m.HasSrc {
		b = appendNot(b, m.InvSrc)
		b = append(b, " --src-group "...)
		b = appendValMask(b, m.SrcGroup, m.SrcMask, deviceGroupNames, false)
	}
	if m.HasDst {
		b = appendNot(b, m.InvDst)
		b = append(b, " --dst-group "...)
		b = appendValMask(b, m.DstGroup, m.DstMask, deviceGroupNames, false)
	}
	return b
}

func (m *DevGroupMatch) appendList(b []byte, numeric bool) []byte {
	if m.HasSrc {
		b = appendNot(b, m.InvSrc)
		b = append(b, " src-group "...)
		b = appendValMask(b, m.SrcGroup, m.SrcMask, deviceGroupNames, numeric)
	}
	if m.HasDst {
		b = appendNot(b, m.InvDst)
		b = append(b, " dst-group "...)
		b = appendValMask(b, m.DstGroup, m.DstMask, deviceGroupNames, numeric)
	}
	return b
}

// group is the device group of interface name; lo and unknown names are
// in the default group 0.
func (c *evalCtx) group(name string) uint32 {
	if i := c.host.Interface(name); i != nil {
		return i.Group
	}
	return 0
}

func (m *DevGroupMatch) match(c *evalCtx) bool {
	if m.HasSrc && (c.group(c.pkt.In)&m.SrcMask == m.SrcGroup) == m.InvSrc {
		return false
	}
	if m.HasDst && (c.group(c.pkt.Out)&m.DstMask == m.DstGroup) == m.InvDst {
		return false
	}
	return true
}
