package netfilter

// HLTarget is "-j HL", the IPv6 form of TTL acting on the hop limit:
// --hl-set, --hl-dec, --hl-inc.
type HLTarget struct {
	Mode  TTLMode
	Value uint8
}

// Name implements Target.
func (t *HLTarget) Name() string { return "HL" }

func (t *HLTarget) appendSave(b []byte) []byte { return appendTTLSave(b, "hl", t.Mode, t.Value) }

func (t *HLTarget) appendList(b []byte, _ bool) []byte {
	return appendTTLList(b, "HL", t.Mode, t.Value)
}

func (t *HLTarget) apply(c *evalCtx) verdict {
	c.pkt.TTL = newTTL(t.Mode, t.Value, c.pkt.TTL)
	return vContinue
}
