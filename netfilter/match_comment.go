package netfilter

// maxCommentLen is the longest comment the kernel stores
// (XT_MAX_COMMENT_LEN less the terminating NUL); iptables silently cuts
// longer ones.
const maxCommentLen = 255

// CommentMatch is "-m comment --comment TEXT": it always matches and only
// annotates the rule.
type CommentMatch struct {
	Comment string
}

func init() {
	registerMatch(&module{name: "comment",
		opts:       []option{{name: "comment", args: 1}},
		newBuilder: func(*ruleCtx) builder { return &commentBuilder{} }})
}

type commentBuilder struct {
	m     CommentMatch
	given bool
}

func (b *commentBuilder) set(_ *ruleCtx, _ string, _ bool, args []string) error {
	s := args[0]
	if len(s) > maxCommentLen {
		s = s[:maxCommentLen]
	}
	b.m.Comment, b.given = s, true
	return nil
}

func (b *commentBuilder) done(*ruleCtx) (any, error) {
	if !b.given {
		return nil, mustSpecify("comment", "--comment")
	}
	m := b.m
	return &m, nil
}

// Module implements Match.
func (m *CommentMatch) Module() string { return "comment" }

func (m *CommentMatch) appendSave(b []byte) []byte {
	b = append(b, " --comment "...)
	return appendQuoted(b, m.Comment)
}

func (m *CommentMatch) appendList(b []byte, _ bool) []byte {
	b = append(b, " /* "...)
	b = append(b, m.Comment...)
	return append(b, " */"...)
}

func (m *CommentMatch) match(*evalCtx) bool { return true }
