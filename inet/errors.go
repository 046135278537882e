package inet

import "errors"

// ErrNotModelled is what every packetwalk package's refusal of something it
// does not model means: errors.Is(err, inet.ErrNotModelled) holds for
// netfilter.ErrNotModelled, conntrack.ErrNotModelled, ipset.ErrNotModelled
// and kubeproxy.ErrNotModelled, whatever each one's text.
var ErrNotModelled = errors.New("not modelled by packetwalk")

// NotModelled returns a sentinel error with its own text (a package keeps
// the wording its output needs, such as a tool's message) that errors.Is
// matches with ErrNotModelled.
func NotModelled(text string) error { return &notModelled{text} }

type notModelled struct{ text string }

func (e *notModelled) Error() string        { return e.text }
func (e *notModelled) Is(target error) bool { return target == ErrNotModelled }
