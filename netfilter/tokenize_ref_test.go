package netfilter

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"pgregory.net/rapid"
)

// refSplitArgs is the character-at-a-time tokenizer appendArgs replaced;
// it stays as the reference for the property test below.
func refSplitArgs(line string) ([]string, bool) {
	var args []string
	var cur strings.Builder
	inArg, quoted, escaped := false, false, false
	for i := 0; i < len(line); i++ {
		ch := line[i]
		if quoted {
			switch {
			case escaped:
				cur.WriteByte(ch)
				escaped = false
			case ch == '\\':
				escaped = true
			case ch == '"':
				quoted = false
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			default:
				cur.WriteByte(ch)
			}
			continue
		}
		switch ch {
		case '"':
			quoted, inArg = true, true
		case ' ', '\t', '\n':
			if inArg {
				args = append(args, cur.String())
				cur.Reset()
				inArg = false
			}
		default:
			cur.WriteByte(ch)
			inArg = true
		}
	}
	if quoted {
		return nil, false
	}
	if inArg {
		args = append(args, cur.String())
	}
	return args, true
}

func TestSplitArgsMatchesReference(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		line := rapid.StringOfN(rapid.SampledFrom([]rune{'a', 'b', ' ', '\t', '"', '\\', '\'', '-'}), 0, 30, -1).Draw(t, "line")
		want, ok := refSplitArgs(line)
		got, err := splitArgs(line)
		if !ok {
			require.ErrorIs(t, err, ErrSyntax, "line %q", line)
			return
		}
		require.NoError(t, err, "line %q", line)
		require.Equal(t, want, got, "line %q", line)
	})
}
