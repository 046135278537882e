package netfilter

import "fmt"

// PhysdevFlags selects the tests of -m physdev; the values are the
// kernel's XT_PHYSDEV_OP_* bits.
type PhysdevFlags uint8

// Physdev tests.
const (
	PhysdevIn        PhysdevFlags = 0x01 // --physdev-in NAME
	PhysdevOut       PhysdevFlags = 0x02 // --physdev-out NAME
	PhysdevIsBridged PhysdevFlags = 0x04 // --physdev-is-bridged
	PhysdevIsIn      PhysdevFlags = 0x08 // --physdev-is-in
	PhysdevIsOut     PhysdevFlags = 0x10 // --physdev-is-out
)

// PhysdevMatch is "-m physdev": it tests the bridge ports of a frame that
// crossed a bridge (Packet.Bridged, PhysIn, PhysOut). Tests holds the
// options given and Invert those given with "!". A name ending in '+'
// matches any port with that prefix.
type PhysdevMatch struct {
	In, Out string
	Tests   PhysdevFlags
	Invert  PhysdevFlags
}

func init() {
	registerMatch(&module{name: "physdev",
		opts: []option{
			{name: "physdev-in", args: 1, invert: true},
			{name: "physdev-out", args: 1, invert: true},
			{name: "physdev-is-in", invert: true},
			{name: "physdev-is-out", invert: true},
			{name: "physdev-is-bridged", invert: true},
		},
		newBuilder: func(*ruleCtx) builder { return &PhysdevMatch{} }})
}

func (m *PhysdevMatch) set(_ *ruleCtx, opt string, inv bool, args []string) error {
	var f PhysdevFlags
	switch opt {
	case "physdev-in", "physdev-out":
		if err := checkIfaceName(args[0]); err != nil {
			return fmt.Errorf("physdev: --%s: %w", opt, err)
		}
		if opt == "physdev-in" {
			f, m.In = PhysdevIn, args[0]
		} else {
			f, m.Out = PhysdevOut, args[0]
		}
	case "physdev-is-in":
		f = PhysdevIsIn
	case "physdev-is-out":
		f = PhysdevIsOut
	case "physdev-is-bridged":
		f = PhysdevIsBridged
	}
	m.Tests |= f
	if inv {
		m.Invert |= f
	}
	return nil
}

func (m *PhysdevMatch) done(*ruleCtx) (any, error) {
	if m.Tests == 0 {
		return nil, fmt.Errorf("%w: physdev: no physdev option specified", ErrMissingArgument)
	}
	return m, nil
}

// checkHooks refuses the output-port tests in OUTPUT unless the rule also
// requires a bridged packet, as the kernel's checkentry does: a locally
// generated packet does not know its bridge port yet.
func (m *PhysdevMatch) checkHooks(mask uint8) error {
	if m.Tests&(PhysdevOut|PhysdevIsOut) != 0 &&
		(m.Tests&PhysdevIsBridged == 0 || m.Invert&PhysdevIsBridged != 0) &&
		mask&(1<<Output) != 0 {
		return fmt.Errorf("%w: physdev: --physdev-out and --physdev-is-out are only supported in FORWARD and POSTROUTING with bridged traffic", ErrNotAllowed)
	}
	return nil
}

// Module implements Match.
func (m *PhysdevMatch) Module() string { return "physdev" }

func (m *PhysdevMatch) appendSave(b []byte) []byte {
	item := func(f PhysdevFlags, text, arg string) {
		if m.Tests&f == 0 {
			return
		}
		b = appendNot(b, m.Invert&f != 0)
		b = append(b, text...)
		if arg != "" {
			b = append(b, ' ')
			b = append(b, arg...)
		}
	}
	item(PhysdevIsIn, " --physdev-is-in", "")
	item(PhysdevIn, " --physdev-in", m.In)
	item(PhysdevIsOut, " --physdev-is-out", "")
	item(PhysdevOut, " --physdev-out", m.Out)
	item(PhysdevIsBridged, " --physdev-is-bridged", "")
	return b
}

func (m *PhysdevMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " PHYSDEV match"...)
	return m.appendSave(b)
}

// match follows xt_physdev's physdev_mt.
func (m *PhysdevMatch) match(c *evalCtx) bool {
	p := c.pkt
	inv := func(f PhysdevFlags) bool { return m.Invert&f != 0 }
	if !p.Bridged {
		// Not bridged: only tests that are all inverted pass.
		return m.Tests&^m.Invert == 0
	}
	if m.Tests&PhysdevIsBridged != 0 && (p.PhysOut != "") == inv(PhysdevIsBridged) {
		return false
	}
	if m.Tests&PhysdevIsIn != 0 && (p.PhysIn != "") == inv(PhysdevIsIn) {
		return false
	}
	if m.Tests&PhysdevIsOut != 0 && (p.PhysOut != "") == inv(PhysdevIsOut) {
		return false
	}
	if m.Tests&PhysdevIn != 0 && p.PhysIn != "" && ifaceMatch(m.In, p.PhysIn) == inv(PhysdevIn) {
		return false
	}
	if m.Tests&PhysdevOut == 0 {
		return true
	}
	if p.PhysOut == "" {
		return false
	}
	return ifaceMatch(m.Out, p.PhysOut) != inv(PhysdevOut)
}
