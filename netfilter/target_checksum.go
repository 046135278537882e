package netfilter

// ChecksumTarget is "-j CHECKSUM --checksum-fill" (mangle table): the
// kernel completes a partial checksum. It continues.
type ChecksumTarget struct{}

func init() {
	registerTarget(&module{name: "CHECKSUM", tables: mangle,
		opts: []option{{name: "checksum-fill"}},
		newBuilder: func(*ruleCtx) builder {
			return &flagTargetBuilder{mod: "CHECKSUM", opt: "--checksum-fill", t: &ChecksumTarget{}}
		}})
}

// flagTargetBuilder builds a target whose one option is required and takes
// no argument.
type flagTargetBuilder struct {
	mod, opt string
	t        Target
	given    bool
}

func (b *flagTargetBuilder) set(*ruleCtx, string, bool, []string) error {
	b.given = true
	return nil
}

func (b *flagTargetBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify(b.mod, b.opt)
	}
	return b.t, nil
}

// Name implements Target.
func (t *ChecksumTarget) Name() string { return "CHECKSUM" }

func (t *ChecksumTarget) appendSave(b []byte) []byte { return append(b, " --checksum-fill"...) }

func (t *ChecksumTarget) appendList(b []byte, _ bool) []byte { return append(b, " CHECKSUM fill"...) }

func (t *ChecksumTarget) apply(*evalCtx) verdict { return vContinue }
